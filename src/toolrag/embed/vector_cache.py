"""Document vectors kept per machine, by model and text: a text embedded once is never embedded again, whichever
registry or process asks (the quick start's 220 tools cost about 40 s of CPU to embed, at every new registry).

One SQLite file per model under the cache folder (`document-vectors/`), keyed by a hash of the text, so a changed
model never meets old vectors. It is a cache: when it cannot be read or written (a read-only home, a full disk,
another process holding the lock past a second), the model embeds the texts as if it were not there; nothing
fails. Its size is bounded: past `MAX_ENTRIES` vectors the oldest tenth goes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from toolrag.embed.base import Vectors
from toolrag.embed.cache import DOCUMENT_VECTORS
from toolrag.embed.cache_folder import cache_root, private_folder, trusted_entry

log = logging.getLogger("toolrag.embed")
MAX_ENTRIES = 100_000  # vectors per model: about 500 MB at the default model's 1,280 dimensions
_READ_BATCH = 500  # keys per query (SQLite's parameter limit is higher; this keeps each statement small)
SQLITE_BESIDE = ("-journal", "-wal", "-shm")  # what SQLite reads beside a database, and plays back into it
_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)"


def cached_documents(
    model_id: str, dimension: int, texts: Sequence[str], compute: Callable[[list[str]], Vectors]
) -> Vectors:
    """The vectors of `texts`: those kept for `model_id` read back, the others computed by `compute(missing)`
    (each distinct text once) and kept."""
    if not texts:
        return np.zeros((0, dimension), dtype=np.float32)
    keys = [_key(text) for text in texts]
    try:
        path: Path | None = _path(model_id)
    except OSError as exc:  # no cache folder to use: every text is embedded
        log.info("document vectors not kept: %s", exc)
        path = None
    known = _read(path, dimension, set(keys)) if path is not None else {}
    missing = list(dict.fromkeys(text for text, key in zip(texts, keys, strict=True) if key not in known))
    if missing:
        computed = np.asarray(compute(missing), dtype=np.float32).reshape(len(missing), dimension)
        fresh = {_key(text): vector for text, vector in zip(missing, computed, strict=True)}
        if path is not None:
            _write(path, fresh)
        known.update(fresh)
    return np.vstack([known[key] for key in keys]).astype(np.float32, copy=False)


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _path(model_id: str) -> Path:
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:32]
    return cache_root() / DOCUMENT_VECTORS / f"{digest}.sqlite"


@contextlib.contextmanager
def _connected(path: Path, create: bool) -> Iterator[sqlite3.Connection]:
    if create:
        private_folder(path.parent)
    elif not path.exists():
        raise FileNotFoundError(path)
    trusted_entry(path, beside=SQLITE_BESIDE)
    connection = sqlite3.connect(path, timeout=1.0, isolation_level=None)
    try:
        connection.execute(_SCHEMA)
        yield connection
    finally:
        connection.close()


def _read(path: Path, dimension: int, keys: set[bytes]) -> dict[bytes, Vectors]:
    found: dict[bytes, Vectors] = {}
    ordered = list(keys)
    try:
        with _connected(path, create=False) as connection:
            for first in range(0, len(ordered), _READ_BATCH):
                batch = ordered[first : first + _READ_BATCH]
                marks = ",".join("?" * len(batch))
                rows = connection.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", batch)
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (dimension,):
                        found[key] = vector
        if found:
            os.utime(path)  # used: `toolrag cache prune` keeps it
    except (OSError, sqlite3.Error) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.info("document vectors not read from %s: %s", path, exc)
    return found


def _write(path: Path, vectors: dict[bytes, Vectors]) -> None:
    rows = [(key, np.ascontiguousarray(vector, dtype=np.float32).tobytes()) for key, vector in vectors.items()]
    try:
        with _connected(path, create=True) as connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
            (count,) = connection.execute("SELECT count(*) FROM vectors").fetchone()
            if count > MAX_ENTRIES:
                excess = count - MAX_ENTRIES + MAX_ENTRIES // 10
                connection.execute(
                    "DELETE FROM vectors WHERE rowid IN (SELECT rowid FROM vectors ORDER BY rowid LIMIT ?)", (excess,)
                )
            connection.execute("COMMIT")
    except (OSError, sqlite3.Error) as exc:
        log.info("document vectors not kept in %s: %s", path, exc)
