"""A per-machine cache of work a model does the same way in every process: the parsed tokenizer, the weights
unpacked into a file that can be mapped instead of read, the vectors of fixed texts. It makes a new process's (and
a new registry's) first search fast.

The folder is `$TOOLRAG_CACHE_DIR`, else `$XDG_CACHE_HOME/toolrag`, else `~/.cache/toolrag`; an entry is keyed by
what it was built from (so a changed model package never meets an old entry), written to a temporary folder and
renamed into place (so a reader never sees half an entry). When the folder cannot be written, models load the
slow way; nothing fails.

What the cache holds decides what search serves and what runs, so it is read only as far as this user alone could
have written it: embed/cache_folder.py has those rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from toolrag.embed.cache_folder import (
    UntrustedCacheError,
    cache_root,
    distrusted,
    private_folder,
    trusted,
    trusted_entry,
)

log = logging.getLogger("toolrag.embed")
FIXED_TEXTS = "fixed-texts"  # the folder of `cached_vectors`
DOCUMENT_VECTORS = "document-vectors"  # the folder of embed/vector_cache.py


def cache_problem() -> str | None:
    """Why the cache is not used (another user could change what it holds, or there is no folder for it), None when
    it is or is not there yet."""
    try:
        root = cache_root()
    except OSError as error:
        return str(error)
    for path in (root, root / FIXED_TEXTS, root / DOCUMENT_VECTORS, root / "snapshots"):
        problem = distrusted(path)
        if problem:
            return problem
    return None


def cached_folder(key: str, build: Callable[[Path], None]) -> Path | None:
    """The folder of entry `key`, built by `build(folder)` the first time; None when it cannot be kept."""
    try:
        folder = cache_root() / key
    except OSError as exc:
        log.info("model cache not kept: %s", exc)
        return None
    try:
        if _complete(folder):
            return folder
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=private_folder(folder.parent)))
        try:
            build(staging)
            (staging / "complete").touch()
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if not _complete(folder):  # what is read is what was checked, as for an entry found built
            raise UntrustedCacheError(f"{folder} is not the entry just built")
    except OSError as exc:  # another process won the race, a read-only home, a full disk: load the slow way
        with contextlib.suppress(OSError):
            if _complete(folder):
                return folder
        log.info("model cache %s not kept: %s", folder, exc)
        return None
    return folder


def _complete(folder: Path) -> bool:
    """Whether entry `folder` was built and only this user could have written it (UntrustedCacheError if not)."""
    try:
        return (trusted_entry(folder) / "complete").exists()
    except FileNotFoundError:
        return False


def cached_vectors(model_id: str, dimension: int, kind: str, texts: Sequence[str], compute: Callable[[], Any]) -> Any:
    """Vectors of fixed texts (the small-talk bank, the poisoning detector's references) for one model: computed
    once per machine by `compute()` and kept under a hash of the model, the kind and the texts, so a changed text
    or model never meets old vectors and every new registry or process reuses them."""
    import numpy as np

    digest = hashlib.sha256("\n".join([model_id, kind, *texts]).encode("utf-8", "surrogatepass")).hexdigest()
    name = f"{digest[:40]}.npy"
    try:
        path = cache_root() / FIXED_TEXTS / name
        vectors = np.load(trusted(path), allow_pickle=False)
        if vectors.shape == (len(texts), dimension):
            os.utime(path)  # used: `toolrag cache prune` keeps it
            return vectors
    except (OSError, ValueError, EOFError):  # EOFError: an empty file, left by a crash before its data was synced
        pass
    vectors = np.asarray(compute(), dtype=np.float32)
    try:
        folder = private_folder(cache_root() / FIXED_TEXTS)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".npy", delete=False) as staging:
            np.save(staging, vectors)
        os.replace(staging.name, folder / name)
    except OSError as exc:
        log.info("fixed-text vectors not kept: %s", exc)
    return vectors


STALE_DAYS = 30  # fixed-text vectors and snapshots unused this long are pruned


@dataclass(frozen=True)
class CacheEntry:
    """One entry of the cache folder: a model's prepared files, a set of fixed-text vectors, a registry's snapshots,
    or a build that never finished."""

    name: str
    kind: str  # model, fixed-texts, document-vectors, snapshots, unfinished
    bytes: int
    last_used: datetime
    kept: bool  # whether `prune` keeps it: a current model, or used within STALE_DAYS

    @property
    def path(self) -> Path:
        return cache_root() / self.name


def cache_entries(current_models: set[str], now: datetime | None = None) -> list[CacheEntry]:
    """Every entry of the cache folder; `current_models`: the model entries this installation uses. Only what this
    user alone could have written is listed (so `prune` never follows another user's link out of the folder)."""
    now = now or datetime.now(UTC)
    fresh = now - timedelta(days=STALE_DAYS)
    entries: list[CacheEntry] = []
    folders = (FIXED_TEXTS, DOCUMENT_VECTORS, "snapshots")
    try:
        root = cache_root()
    except OSError:
        return []
    if not root.is_dir() or distrusted(root):
        return []
    candidates = [p for p in root.iterdir() if p.name not in folders and not distrusted(p)]
    for path in candidates:
        size, used = _measured(path)
        if path.name.startswith("."):
            entries.append(CacheEntry(path.name, "unfinished", size, used, False))
        else:
            entries.append(CacheEntry(path.name, "model", size, used, path.name in current_models))
    for kind in folders:
        folder = root / kind
        if not folder.is_dir() or distrusted(folder):
            continue
        for path in (p for p in folder.iterdir() if not distrusted(p)):
            size, used = _measured(path)
            entries.append(CacheEntry(f"{folder.name}/{path.name}", kind, size, used, used >= fresh))
    return sorted(entries, key=lambda entry: (entry.kind, entry.name))


def prune(entries: list[CacheEntry], everything: bool = False) -> list[CacheEntry]:
    """Delete the entries `prune` does not keep (all of them with `everything`); returns those deleted."""
    removed = []
    for entry in entries:
        if everything or not entry.kept:
            try:
                trusted(entry.path)  # as listed, and still: never delete through a link planted since
            except OSError:
                continue
            if entry.path.is_dir():
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                entry.path.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def _measured(path: Path) -> tuple[int, datetime]:
    """Bytes under `path`, and when it was last written or read (as far as the files' times tell)."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    size = latest = 0.0
    for file in files:
        with contextlib.suppress(OSError):
            status = file.stat()
            size += status.st_size
            latest = max(latest, status.st_mtime, status.st_atime)
    return int(size), datetime.fromtimestamp(latest or path.stat().st_mtime, UTC)
