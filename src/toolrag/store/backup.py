"""A registry as one JSON file: every tool, every version, the index's vectors and what operators decided (MCP
pins, catalog text reviews and their setting, switched-off upstreams, verdicts on relations, learned and proposed
relations, the audit log), restorable exactly.

Vectors are little-endian float32, base64-encoded, so a restored registry needs no embedding at all. Version 1
files (before operators' records were kept) still load, with none.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import ConfigDict, TypeAdapter, ValidationError

from toolrag.errors import CatalogError, InvalidToolError
from toolrag.model import (
    ACCESS_FIELDS,
    ACTIVATION,
    REVIEWED_FIELDS,
    Tool,
    fitted_to_tenants,
    group_description_problem,
    reviewed_text_hash,
)
from toolrag.store.base import AuditEntry, IndexModel, Pin, RegistryDump, TextReview
from toolrag.store.groups import GroupReview
from toolrag.store.relations import LearnedRelation, ProposedRelation, RelationVerdict
from toolrag.store.switches import DisabledServer

FORMAT = "toolrag-backup"
# 3: catalog text reviews and their setting; 4: group descriptions waiting for review, and rejected, and whether a
# proposer may approve (an older toolrag refuses a newer file rather than drop them)
VERSION = 4
# The records of what operators decided, as a backup holds them: fields of the right type, no others.
STRICT_FIELDS = ConfigDict(extra="forbid")
Record = TypeVar("Record")
READABLE = (1, 2, 3, 4)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")  # a requirement's parameter (model.Requirement)


def write_backup(dump: RegistryDump, path: str | Path) -> None:
    """Write atomically: a crash leaves the previous file (or none), never half a backup."""
    target = Path(path)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "model": None if dump.model is None else {"id": dump.model.model_id, "dimension": dump.model.dimension},
        "tools": [json.loads(t.model_dump_json()) for t in dump.tools],
        "versions": [json.loads(t.model_dump_json()) for t in dump.versions],
        "groups": dump.groups,
        "pins": [_pin_document(pin) for pin in dump.pins],
        "text_reviews": [
            _plain(review) | {"findings": list(review.findings), "contributors": list(review.contributors)}
            for review in dump.text_reviews
        ],
        "text_review": dump.text_review,
        "two_person_review": dump.two_person_review,
        "group_reviews": [_plain(review) for review in dump.group_reviews],
        "switches": [_plain(switch) for switch in dump.switches],
        "verdicts": [_plain(verdict) for verdict in dump.verdicts],
        "learned": [_plain(relation) for relation in dump.learned],
        "proposals": [_plain(proposal) for proposal in dump.proposals],
        "audit": [_plain(entry) for entry in dump.audit],
        "vectors": {
            key: base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            for key, vector in dump.vectors.items()
        },
    }
    # A new file of its own (never one planted at a known name, nor a link), readable by its owner alone: a backup
    # holds every tenant's tools and the audit log. It replaces the target only once whole; nothing is left on failure.
    descriptor, staging = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(document, ensure_ascii=False))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise


def is_backup(path: str | Path) -> bool:
    """Whether a file is a toolrag backup (rather than a catalog), judged from its first bytes."""
    try:
        with open(path, encoding="utf-8") as handle:
            head = handle.read(200)
    except (OSError, UnicodeDecodeError):
        return False
    return head.lstrip().startswith("{") and f'"format": "{FORMAT}"' in head


def read_backup(path: str | Path) -> RegistryDump:
    source = Path(path)
    try:
        document: Any = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"cannot read backup {source}: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CatalogError(f"{source} is not a toolrag backup")
    if document.get("version") not in READABLE:
        raise CatalogError(f"{source} is a backup of format version {document.get('version')}, expected {VERSION}")
    try:
        model = document["model"]
        index_model = None if model is None else IndexModel(str(model["id"]), int(model["dimension"]))
        tools = [Tool.parse(t) for t in document["tools"]]  # a backup file is checked like any input
        return RegistryDump(
            model=index_model,
            tools=tools,
            versions=[Tool.parse(t) for t in document["versions"]],
            groups={str(name): str(text) for name, text in document.get("groups", {}).items()},
            vectors={key: _vector(key, value, index_model) for key, value in document["vectors"].items()},
            pins=[_checked_pin(pin) for pin in _records(Pin, document.get("pins", []))],
            text_reviews=_checked_reviews(tools, _records(TextReview, document.get("text_reviews", []))),
            text_review=_flag("text_review", document.get("text_review", False)),
            two_person_review=_flag("two_person_review", document.get("two_person_review", False)),
            group_reviews=[_checked_group_review(r) for r in _records(GroupReview, document.get("group_reviews", []))],
            switches=_records(DisabledServer, document.get("switches", [])),
            verdicts=_records(RelationVerdict, document.get("verdicts", [])),
            learned=_records(LearnedRelation, document.get("learned", [])),
            proposals=[_checked_proposal(p) for p in _records(ProposedRelation, document.get("proposals", []))],
            audit=_records(AuditEntry, document.get("audit", [])),
        )
    except (KeyError, TypeError, ValueError, InvalidToolError, ValidationError) as exc:
        raise CatalogError(f"backup {source} is damaged: {_first_line(exc)}") from None


def _vector(key: str, encoded: str, model: IndexModel | None) -> np.ndarray[Any, np.dtype[np.float32]]:
    """A stored vector of the file's own model, at unit length as every model's vectors are (embed/base.py): one
    with NaN or infinity is refused, and one of another dimension; one of another length (3e38 in every value
    overflowed every search it met) is scaled."""
    vector = np.frombuffer(base64.b64decode(encoded), dtype="<f4").astype(np.float64)
    if not np.isfinite(vector).all():
        raise ValueError(f"the vector of {key!r} holds NaN or infinity")
    if model is not None and vector.shape != (model.dimension,):
        raise ValueError(f"the vector of {key!r} has {vector.size} values, its model {model.dimension}")
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm > 0 else vector).astype(np.float32)


def as_restored(dump: RegistryDump, source: str | Path, by: str | None, at: datetime | None = None) -> RegistryDump:
    """`dump` as a restore from a file writes it: nothing in a file proves who decided what, so every audit row it
    holds says it was restored from `source` at `at`, and one more row says what the file put back (approved MCP
    pins and catalog texts, verdicts) and who restored it. Its records are otherwise kept as the file states them."""
    at = at or datetime.now(UTC)
    mark = f"[restored from {Path(source).name} at {at:%Y-%m-%d %H:%M} UTC, as the file states it]"
    approved = sum(pin.approved_hash is not None for pin in dump.pins)
    detail = (
        f"registry restored from {Path(source).name}: {len(dump.tools)} tools, {approved} approved MCP pins,"
        f" {len(dump.text_reviews)} text reviews, {len(dump.groups)} group descriptions and"
        f" {len(dump.group_reviews)} waiting or rejected, {len(dump.verdicts)} relation verdicts and"
        f" {len(dump.audit)} audit rows as the file states them (not verified)"
    )
    audit = [replace(entry, detail=f"{entry.detail} {mark}") for entry in dump.audit]
    return replace(dump, audit=[*audit, AuditEntry("restored", detail, None, None, by, at)])


def _plain(record: Any) -> dict[str, Any]:
    """A record's fields as JSON values (times in ISO 8601)."""
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in asdict(record).items()}


def _pin_document(pin: Pin) -> dict[str, Any]:
    pending = None if pin.pending is None else json.loads(pin.pending.model_dump_json())
    return _plain(replace(pin, pending=None)) | {"pending": pending, "findings": list(pin.findings)}


def _records(kind: type[Record], items: Any) -> list[Record]:
    """Every record of a list in the file, each checked field by field against its type (a string where a number
    belongs, an unknown field, a relation of no known kind: ValidationError, nothing restored)."""
    return TypeAdapter(list[kind], config=STRICT_FIELDS).validate_python(items)  # type: ignore[valid-type]


def _checked_proposal(proposal: ProposedRelation) -> ProposedRelation:
    """A proposal as a run would have recorded it: a parameter that is an identifier, a reason of one line within
    its length (a backup file is an input like any other)."""
    if proposal.parameter is not None and not _IDENTIFIER.match(proposal.parameter):
        raise ValueError(f"proposal {proposal.tool} -> {proposal.other}: parameter is not an identifier")
    return replace(proposal, reason=" ".join(proposal.reason.split())[:200])


def _checked_reviews(tools: Sequence[Tool], reviews: Sequence[TextReview]) -> list[TextReview]:
    """The held changes, each as `_checked_review` has it, and approvable: with its tool, it makes a tool (the list
    of what waits reads every change's tool with it)."""
    by_name = {tool.name: tool.model_dump(mode="json") for tool in tools}
    checked = [_checked_review(review) for review in reviews]
    for review in checked:
        if review.pending is None:
            continue
        if review.tool not in by_name:  # it would wait for a tool added later, as the file's author wrote it
            raise ValueError(f"the text change of {review.tool!r} waits for a tool the backup does not hold")
        live = by_name[review.tool]
        Tool.parse({**live, **fitted_to_tenants(live, review.pending)})
    return checked


def _checked_review(review: TextReview) -> TextReview:
    """A held change as approving it would apply it: only reviewed fields (and whom the tool reaches, and a held
    activation), known by the hash of exactly them."""
    if review.pending is None:
        return review
    foreign = sorted(set(review.pending) - REVIEWED_FIELDS - {*ACCESS_FIELDS, ACTIVATION})
    if foreign:
        raise ValueError(f"the text change of {review.tool!r} holds other fields than text: {', '.join(foreign)}")
    if reviewed_text_hash(review.pending) != review.pending_hash:
        raise ValueError(f"the text change of {review.tool!r} does not match its hash")
    return review


def _checked_pin(pin: Pin) -> Pin:
    """A pin as a sync writes it: of a tool named `SERVER.TOOL`, filed under that server (a sync reads its server's
    pins: one filed under another would be a pin it never sees, yet the one its writes are compared with)."""
    if not pin.tool.startswith(f"{pin.server}.") or "." in pin.server:
        raise ValueError(f"the pin of {pin.tool!r} is filed under server {pin.server!r}, not the one its name names")
    return pin


def _checked_group_review(review: GroupReview) -> GroupReview:
    """A waiting group description as a write would have held it (a name and a text of bounded length, not blank),
    and its rejection a SHA-256."""
    if problem := group_description_problem(review.name, review.pending):
        raise ValueError(problem)
    if review.rejected_hash is not None and not _SHA256.match(review.rejected_hash):
        raise ValueError(f"the group review {review.name!r} names a rejection that is not a SHA-256")
    return review


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be true or false, not {value!r}")
    return value


def _first_line(error: Exception) -> str:
    return " ".join(str(error).split("\n")[:3])
