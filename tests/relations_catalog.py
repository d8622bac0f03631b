"""A synthetic catalog whose tools declare what they require, and requests whose whole set is known: for each of
40 kinds of record, five tools (find, get, update, share by e-mail, export), the last three needing others to
fill their parameters, and one e-mail check that every share needs."""

from __future__ import annotations

from dataclasses import dataclass

from toolrag import Tool

RECORDS = [
    ("invoice", "invoices"),
    ("purchase order", "purchase orders"),
    ("contract", "contracts"),
    ("support ticket", "support tickets"),
    ("incident", "incidents"),
    ("employee profile", "employee profiles"),
    ("payslip", "payslips"),
    ("calendar event", "calendar events"),
    ("wiki page", "wiki pages"),
    ("shipment", "shipments"),
    ("warehouse", "warehouses"),
    ("supplier", "suppliers"),
    ("product listing", "product listings"),
    ("customer review", "customer reviews"),
    ("refund", "refunds"),
    ("subscription", "subscriptions"),
    ("coupon", "coupons"),
    ("build", "builds"),
    ("deployment", "deployments"),
    ("code repository", "code repositories"),
    ("bug report", "bug reports"),
    ("sales lead", "sales leads"),
    ("marketing campaign", "marketing campaigns"),
    ("survey", "surveys"),
    ("job posting", "job postings"),
    ("job applicant", "job applicants"),
    ("training course", "training courses"),
    ("expense report", "expense reports"),
    ("budget", "budgets"),
    ("tax return", "tax returns"),
    ("insurance claim", "insurance claims"),
    ("patient record", "patient records"),
    ("prescription", "prescriptions"),
    ("hotel booking", "hotel bookings"),
    ("flight reservation", "flight reservations"),
    ("rental car", "rental cars"),
    ("restaurant table", "restaurant tables"),
    ("music playlist", "music playlists"),
    ("photo album", "photo albums"),
    ("podcast episode", "podcast episodes"),
]


@dataclass(frozen=True)
class SetRequest:
    text: str
    target: str
    closure: frozenset[str]  # the target and everything it requires, transitively


def _key(singular: str) -> str:
    return singular.replace(" ", "_")


def tools() -> list[Tool]:
    made = [
        Tool(
            name="validate_email",
            description="Check that an e-mail address is well formed and its domain accepts mail.",
            input_schema={"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]},
        )
    ]
    for singular, plural in RECORDS:
        key = _key(singular)
        by_id = {"type": "object", "properties": {f"{key}_id": {"type": "string"}}, "required": [f"{key}_id"]}
        made += [
            Tool(
                name=f"find_{key}s",
                description=f"Search {plural} by words of their title; returns the matching {key}_id values.",
                input_schema={"type": "object", "properties": {"words": {"type": "string"}}, "required": ["words"]},
            ),
            Tool(
                name=f"get_{key}",
                description=f"Read one {singular} in full by its {key}_id.",
                input_schema=by_id,
                requires=[{"tool": f"find_{key}s", "parameter": f"{key}_id"}],
            ),
            Tool(
                name=f"update_{key}",
                description=f"Change fields of a {singular} identified by its {key}_id.",
                input_schema=by_id,
                requires=[{"tool": f"find_{key}s", "parameter": f"{key}_id"}],
            ),
            Tool(
                name=f"share_{key}_by_email",
                description=f"Send a {singular} to someone by e-mail.",
                input_schema={
                    "type": "object",
                    "properties": {"record": {"type": "object"}, "to": {"type": "string"}},
                    "required": ["record", "to"],
                },
                requires=[{"tool": f"get_{key}", "parameter": "record"}, {"tool": "validate_email", "parameter": "to"}],
            ),
            Tool(
                name=f"export_{key}_pdf",
                description=f"Export a {singular} as a PDF document.",
                input_schema={"type": "object", "properties": {"record": {"type": "object"}}, "required": ["record"]},
                requires=[{"tool": f"get_{key}", "parameter": "record"}],
            ),
        ]
    return made


def requests() -> list[SetRequest]:
    made = []
    for singular, _ in RECORDS:
        key = _key(singular)
        find, get = f"find_{key}s", f"get_{key}"
        made += [
            SetRequest(
                f"send the {singular} about the spring offsite to dana@example.com",
                f"share_{key}_by_email",
                frozenset({f"share_{key}_by_email", get, find, "validate_email"}),
            ),
            SetRequest(
                f"export the {singular} named Q3 review as a PDF",
                f"export_{key}_pdf",
                frozenset({f"export_{key}_pdf", get, find}),
            ),
            SetRequest(
                f"change the owner of the {singular} called Atlas to Priya",
                f"update_{key}",
                frozenset({f"update_{key}", find}),
            ),
        ]
    return made
