"""A synthetic catalog of any size up to 100,000 distinct tools, for scale benchmarks (not for quality)."""

from __future__ import annotations

import itertools
import random

from toolrag import Tool

DOMAINS = [
    "billing",
    "crm",
    "inventory",
    "shipping",
    "hr",
    "payroll",
    "calendar",
    "email",
    "chat",
    "docs",
    "wiki",
    "tickets",
    "incidents",
    "metrics",
    "logs",
    "deploys",
    "builds",
    "repos",
    "issues",
    "contracts",
    "invoices",
    "orders",
    "returns",
    "refunds",
    "subscriptions",
    "coupons",
    "products",
    "reviews",
    "warehouses",
    "suppliers",
    "fleet",
    "maps",
    "weather",
    "news",
    "travel",
    "hotels",
    "flights",
    "events",
    "music",
    "video",
    "photos",
    "notes",
    "tasks",
    "surveys",
    "ads",
    "analytics",
    "security",
    "identity",
    "secrets",
    "backups",
    "databases",
    "queues",
    "caches",
    "clusters",
]
ENTITIES = [
    "customer",
    "account",
    "invoice",
    "payment",
    "order",
    "shipment",
    "parcel",
    "employee",
    "contract",
    "ticket",
    "incident",
    "alert",
    "dashboard",
    "report",
    "record",
    "file",
    "folder",
    "document",
    "message",
    "channel",
    "meeting",
    "event",
    "task",
    "project",
    "milestone",
    "budget",
    "forecast",
    "quota",
    "license",
    "device",
    "user",
    "group",
    "role",
    "policy",
    "key",
    "token",
    "certificate",
    "webhook",
    "schedule",
    "template",
    "note",
    "comment",
    "invitation",
]
ACTIONS = [
    "create",
    "read",
    "update",
    "delete",
    "list",
    "search",
    "export",
    "import",
    "archive",
    "restore",
    "approve",
    "reject",
    "assign",
    "escalate",
    "close",
    "reopen",
    "merge",
    "split",
    "tag",
    "untag",
    "share",
    "unshare",
    "lock",
    "unlock",
    "sync",
    "validate",
    "preview",
    "publish",
    "unpublish",
    "schedule",
    "cancel",
    "retry",
    "pause",
    "resume",
    "rename",
    "copy",
    "move",
    "summarize",
    "translate",
    "compare",
    "rank",
    "audit",
    "notify",
    "remind",
    "estimate",
    "reconcile",
]
PURPOSES = [
    "for the current user",
    "with filters by date, owner and status",
    "and return its identifier",
    "and notify the people involved",
    "in bulk, up to one hundred at a time",
    "with an audit trail entry",
]


def synthetic_tools(count: int, seed: int = 7) -> list[Tool]:
    combos = list(itertools.product(DOMAINS, ENTITIES, ACTIONS))
    if count > len(combos):
        raise ValueError(f"at most {len(combos)} synthetic tools")
    random.Random(seed).shuffle(combos)
    tools = []
    for number, (domain, entity, action) in enumerate(combos[:count]):
        purpose = PURPOSES[number % len(PURPOSES)]
        tools.append(
            Tool.parse(
                {
                    "name": f"{domain}.{action}_{entity}",
                    "description": f"{action.capitalize()} a {entity} in the {domain} system {purpose}.",
                    "category": domain,
                    "scopes": [f"{domain}:write"] if number % 5 == 0 else [],
                    "input_schema": {
                        "type": "object",
                        "properties": {f"{entity}_id": {"type": "string"}, "note": {"type": "string"}},
                        "required": [f"{entity}_id"],
                    },
                }
            )
        )
    return tools


def synthetic_requests(count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        f"please {rng.choice(ACTIONS)} the {rng.choice(ENTITIES)} of {rng.choice(DOMAINS)} for me" for _ in range(count)
    ]
