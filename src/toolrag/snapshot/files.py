"""A snapshot on disk: what `SearchIndex` holds, as arrays a new process maps instead of rebuilding them.

One folder per (registry, model, generation, generation token), in the cache folder (`$TOOLRAG_CACHE_DIR`, else
`~/.cache/toolrag`) under `snapshots/`. Arrays are `.npy` files opened as read-only memory maps (nothing is read
until a search touches it, and processes on one machine share the pages); the tools' definitions are one file of
JSON texts parsed one at a time when a tool is first read. Folders are written to a temporary name and renamed
into place, so a reader never sees half a snapshot; anything unexpected in one (another format, a missing or
truncated file) makes the registry build its snapshot from the store instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import shutil
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.embed.cache_folder import cache_root, private_folder, trusted, trusted_entry
from toolrag.errors import ToolragError
from toolrag.model import Tool
from toolrag.search.examples import ExampleViews
from toolrag.search.index import Neighbours, Restriction, SearchIndex, ToolGroups, ToolTable, VectorRows
from toolrag.search.lexical import LexicalIndex, Postings
from toolrag.search.text import TOKENIZATION

log = logging.getLogger("toolrag.snapshot")

FORMAT = 4
KEPT_PER_REGISTRY = 2  # snapshots kept per registry and model: the newest, and the one a reader may still map


class SnapshotFileError(ToolragError):
    """A snapshot folder that cannot be used (written by another format, damaged)."""


@dataclass(frozen=True)
class SnapshotKey:
    """Which registry state a snapshot holds: the registry (its store's location), the model, the generation and
    the token the store drew for that generation."""

    registry: str
    model_id: str
    generation: int
    token: str

    def models_folder(self, root: Path) -> Path:
        return root / _digest(self.registry) / _digest(self.model_id)

    def folder(self, root: Path) -> Path:
        return self.models_folder(root) / f"{self.generation}-{self.token}"


def snapshots_root() -> Path:
    return cache_root() / "snapshots"


def candidates(root: Path, registry: str, model_id: str, newest: int) -> list[tuple[int, str, Path]]:
    """(generation, token, folder) of the complete snapshots of a registry and model at most `newest`, newest
    first."""
    found = []
    folder = SnapshotKey(registry, model_id, 0, "").models_folder(root)
    try:
        trusted(folder)  # before it is listed: a folder of another user's is neither listed nor read
    except FileNotFoundError:
        return []
    for entry in folder.iterdir() if folder.is_dir() else ():
        generation, _, token = entry.name.partition("-")
        if generation.isdigit() and int(generation) <= newest and _trusted(entry) and (entry / "complete").exists():
            found.append((int(generation), token, entry))
    return sorted(found, reverse=True)


def _trusted(folder: Path) -> bool:
    """Whether only this user could have written the snapshot in `folder` (embed/cache_folder.py `trusted_entry`)."""
    try:
        trusted_entry(folder)
    except OSError as error:
        log.warning("snapshot not used, building from the store instead: %s", error)
        return False
    return True


def save(root: Path, key: SnapshotKey, index: SearchIndex) -> Path:
    """Write `index` (which must have no tombstones or appended segments: a compacted one) as snapshot `key`, then
    remove older snapshots of the registry and model beyond KEPT_PER_REGISTRY."""
    if index.live is not None or len(index.lexical.segments) != 1 or len(index.vectors.blocks) != 1:
        raise ValueError("only a compacted snapshot is saved")
    final = key.folder(root)
    staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=private_folder(final.parent)))
    try:
        _write(staging, key, index)
        (staging / "complete").touch()
        os.replace(staging, final)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not (final / "complete").exists():
            raise
    for _, _, older in candidates(root, key.registry, key.model_id, key.generation)[KEPT_PER_REGISTRY:]:
        shutil.rmtree(older, ignore_errors=True)
    return final


def _write(folder: Path, key: SnapshotKey, index: SearchIndex) -> None:
    postings = index.lexical.segments[0]
    terms = [""] * len(postings.vocabulary)
    for term, term_id in postings.vocabulary.items():
        terms[term_id] = term
    arrays: dict[str, Any] = {
        "matrix": index.vectors.blocks[0],
        "row_tool": index.vectors.row_tool,
        "starts": postings.starts,
        "docs": postings.docs,
        "tfs": postings.tfs,
        "doc_lengths": index.lexical.doc_lengths,
        "restricted": index.restricted,
    }
    if index.groups is not None:
        arrays["group_of_tool"] = index.groups.of_tool
    if index.neighbours is not None:
        arrays |= {
            "neighbour_positions": index.neighbours.positions,
            "neighbour_cosines": index.neighbours.cosines,
            "neighbour_floor": index.neighbours.floor,
        }
    if index.examples is not None and index.examples.count:
        arrays |= {
            "example_vectors": index.examples.vectors,
            "example_positions": index.examples.positions,
            "example_own": index.examples.own,
        }
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
    offsets = [0]
    with (folder / "tools.jsonl").open("wb") as out:
        for tool in index.tools:
            text = tool.model_dump_json().encode("utf-8") + b"\n"
            out.write(text)
            offsets.append(offsets[-1] + len(text))
    np.save(folder / "tool_offsets.npy", np.array(offsets, dtype=np.int64), allow_pickle=False)
    facts = {
        "format": FORMAT,
        "tokenization": TOKENIZATION,
        "registry": key.registry,
        "model_id": key.model_id,
        "generation": key.generation,
        "token": key.token,
        "dimension": index.dimension,
        "tools": index.size,
        "names": index.names,
        "categories": index.categories,
        "terms": terms,
        "restrictions": [[list(r.scopes), list(r.tenants)] for r in index.restrictions],
        "words": dict(index.words),
        "groups": index.groups.names if index.groups is not None else None,
        "by_name": index.by_name,
        "example_tenants": list(index.examples.tenants) if index.examples is not None else [],
    }
    (folder / "snapshot.json").write_text(json.dumps(facts, ensure_ascii=False), encoding="utf-8")


def load(folder: Path, key: SnapshotKey, embedder: Embedder) -> SearchIndex:
    """The snapshot in `folder`, its arrays mapped read-only; SnapshotFileError when it is not snapshot `key` of
    this format or is damaged."""
    try:
        facts = json.loads((folder / "snapshot.json").read_text(encoding="utf-8"))
        expected = (FORMAT, TOKENIZATION, key.registry, key.model_id, key.generation, key.token)
        found = tuple(
            facts.get(fact) for fact in ("format", "tokenization", "registry", "model_id", "generation", "token")
        )
        if found != expected:
            raise SnapshotFileError(f"{folder} holds {found}, not {expected}")
        return _read(folder, facts, embedder)
    except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError, AttributeError) as error:
        # Damage of any shape (an empty file left by a crash, facts of another shape): built from the store instead.
        raise SnapshotFileError(f"{folder}: {error}") from error


def _read(folder: Path, facts: dict[str, Any], embedder: Embedder) -> SearchIndex:
    def array(name: str) -> Any:
        return np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)

    size, dimension = int(facts["tools"]), int(facts["dimension"])
    names, categories = list(facts["names"]), list(facts["categories"])
    matrix, row_tool = array("matrix"), array("row_tool")
    starts, docs, tfs, lengths = array("starts"), array("docs"), array("tfs"), array("doc_lengths")
    terms = list(facts["terms"])
    restricted = np.asarray(array("restricted"), dtype=np.int64)
    restrictions = [Restriction(tuple(scopes), tuple(tenants)) for scopes, tenants in facts["restrictions"]]
    if not (
        len(names) == len(categories) == len(lengths) == size
        and matrix.shape == (len(row_tool), dimension)
        and len(starts) == len(terms) + 1
        and len(docs) == len(tfs) == (int(starts[-1]) if len(starts) else 0)
        and len(restricted) == len(restrictions)
    ):
        raise SnapshotFileError(f"{folder}: its arrays do not fit together")
    groups = None
    if facts["groups"] is not None:
        of_tool = np.asarray(array("group_of_tool"), dtype=np.int64)
        groups = ToolGroups.with_descriptions(list(facts["groups"]), of_tool, {}, dimension)
    neighbours = None
    if (folder / "neighbour_positions.npy").exists():
        neighbours = Neighbours(
            np.asarray(array("neighbour_positions")),
            np.asarray(array("neighbour_cosines")),
            np.asarray(array("neighbour_floor")),
        )
    examples = ExampleViews.empty(dimension)
    if (folder / "example_positions.npy").exists():
        examples = ExampleViews(
            np.asarray(array("example_vectors")),
            np.asarray(array("example_positions"), dtype=np.int64),
            tuple(facts["example_tenants"]),
            np.asarray(array("example_own"), dtype=np.bool_),
        )
        counts = {len(examples.tenants), len(examples.own)}
        if examples.vectors.shape != (examples.count, dimension) or counts != {examples.count}:
            raise SnapshotFileError(f"{folder}: its example requests do not fit together")
    return SearchIndex(
        generation=int(facts["generation"]),
        tools=ToolTable(size, StoredTools(folder / "tools.jsonl", np.asarray(array("tool_offsets")))),
        names=names,
        categories=categories,
        lexical=LexicalIndex((Postings({t: i for i, t in enumerate(terms)}, starts, docs, tfs),), lengths),
        vectors=VectorRows((matrix,), row_tool),
        restricted=restricted,
        restrictions=restrictions,
        words=Counter({str(word): int(count) for word, count in facts["words"].items()}),
        by_name={str(key): int(position) for key, position in facts["by_name"].items()},
        embedder=embedder,
        groups=groups,
        neighbours=neighbours,
        examples=examples,
        dimension=dimension,
        base_size=size,
    )


class StoredTools:
    """The tools of a snapshot file, parsed when first read and then kept."""

    def __init__(self, path: Path, offsets: Any) -> None:
        with path.open("rb") as file:
            self._data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if path.stat().st_size else b""
        self._offsets = offsets
        self._parsed: dict[int, Tool] = {}
        self._lock = threading.Lock()
        if len(offsets) and int(offsets[-1]) != len(self._data):
            raise SnapshotFileError(f"{path} is {len(self._data)} bytes, its offsets say {int(offsets[-1])}")

    def __call__(self, position: int) -> Tool:
        tool = self._parsed.get(position)
        if tool is None:
            start, end = int(self._offsets[position]), int(self._offsets[position + 1])
            tool = Tool.from_store(bytes(self._data[start:end]).decode("utf-8"))
            with self._lock:
                self._parsed[position] = tool
        return tool


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
