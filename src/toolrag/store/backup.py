"""A registry as one JSON file: every tool, every version, and the index's vectors, restorable exactly.

Vectors are little-endian float32, base64-encoded, so a restored registry needs no embedding at all.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.errors import CatalogError, InvalidToolError
from toolrag.model import Tool
from toolrag.store.base import IndexModel, RegistryDump

FORMAT = "toolrag-backup"
VERSION = 1


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
    if document.get("version") != VERSION:
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
        )
    except (KeyError, TypeError, ValueError, InvalidToolError) as exc:
        raise CatalogError(f"backup {source} is damaged: {exc}") from None
