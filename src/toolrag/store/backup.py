"""A registry as one JSON file: every tool, every version, the index's vectors and what operators decided (MCP
pins, catalog text reviews and their setting, switched-off upstreams, verdicts on relations, learned relations, the
audit log), restorable exactly.

Vectors are little-endian float32, base64-encoded, so a restored registry needs no embedding at all. Version 1
files (before operators' records were kept) still load, with none.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import asdict, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.errors import CatalogError, InvalidToolError
from toolrag.model import Tool
from toolrag.store.base import AuditEntry, IndexModel, Pin, RegistryDump, TextReview
from toolrag.store.relations import LearnedRelation, RelationVerdict
from toolrag.store.switches import DisabledServer

FORMAT = "toolrag-backup"
VERSION = 3  # 3: catalog text reviews and their setting (an older toolrag refuses it rather than drop them)
READABLE = (1, 2, 3)


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
        "text_reviews": [_plain(review) | {"findings": list(review.findings)} for review in dump.text_reviews],
        "text_review": dump.text_review,
        "switches": [_plain(switch) for switch in dump.switches],
        "verdicts": [_plain(verdict) for verdict in dump.verdicts],
        "learned": [_plain(relation) for relation in dump.learned],
        "audit": [_plain(entry) for entry in dump.audit],
        "vectors": {
            key: base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            for key, vector in dump.vectors.items()
        },
    }
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    os.replace(partial, target)


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
        return RegistryDump(
            model=index_model,
            tools=[Tool.parse(t) for t in document["tools"]],  # a backup file is checked like any input
            versions=[Tool.parse(t) for t in document["versions"]],
            groups={str(name): str(text) for name, text in document.get("groups", {}).items()},
            vectors={
                key: np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
                for key, value in document["vectors"].items()
            },
            pins=[_pin(item) for item in document.get("pins", [])],
            text_reviews=[_text_review(item) for item in document.get("text_reviews", [])],
            text_review=bool(document.get("text_review", False)),
            switches=[DisabledServer(**_timed(item, "disabled_at")) for item in document.get("switches", [])],
            verdicts=[_verdict(item) for item in document.get("verdicts", [])],
            learned=[LearnedRelation(**_timed(item, "learned_at")) for item in document.get("learned", [])],
            audit=[AuditEntry(**_timed(item, "at")) for item in document.get("audit", [])],
        )
    except (KeyError, TypeError, ValueError, InvalidToolError) as exc:
        raise CatalogError(f"backup {source} is damaged: {exc}") from None


def _plain(record: Any) -> dict[str, Any]:
    """A record's fields as JSON values (times in ISO 8601)."""
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in asdict(record).items()}


def _pin_document(pin: Pin) -> dict[str, Any]:
    pending = None if pin.pending is None else json.loads(pin.pending.model_dump_json())
    return _plain(replace(pin, pending=None)) | {"pending": pending, "findings": list(pin.findings)}


def _timed(item: Any, key: str) -> dict[str, Any]:
    """A record's fields from the file, its time parsed: TypeError/ValueError for anything else than an object
    of the record's fields."""
    if not isinstance(item, dict):
        raise TypeError(f"expected an object, got {type(item).__name__}")
    return item | {key: datetime.fromisoformat(str(item[key]))}


def _pin(item: Any) -> Pin:
    fields = _timed(item, "updated_at")
    pending = fields.get("pending")
    findings = fields.get("findings", [])
    if not isinstance(findings, list):
        raise TypeError("a pin's findings must be a list")
    return Pin(**fields | {"pending": None if pending is None else Tool.parse(pending), "findings": tuple(findings)})


def _text_review(item: Any) -> TextReview:
    fields = _timed(item, "proposed_at")
    findings, pending = fields.get("findings", []), fields.get("pending")
    if not isinstance(findings, list) or not (pending is None or isinstance(pending, dict)):
        raise TypeError("a text review's findings must be a list and its pending text an object")
    return TextReview(**fields | {"findings": tuple(findings)})


def _verdict(item: Any) -> RelationVerdict:
    fields = _timed(item, "decided_at")
    if fields.get("kind") not in ("requires", "related") or fields.get("verdict") not in ("confirmed", "rejected"):
        raise ValueError(
            f"a relation verdict of unknown kind or verdict: {fields.get('kind')!r}, {fields.get('verdict')!r}"
        )
    return RelationVerdict(**fields)
