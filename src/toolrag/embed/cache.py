"""A per-machine cache of work a model does the same way in every process: the parsed tokenizer, the weights
unpacked into a file that can be mapped instead of read, the vectors of fixed texts. It makes a new process's (and
a new registry's) first search fast.

The folder is `$TOOLRAG_CACHE_DIR`, else `$XDG_CACHE_HOME/toolrag`, else `~/.cache/toolrag`; an entry is keyed by
what it was built from (so a changed model package never meets an old entry), written to a temporary folder and
renamed into place (so a reader never sees half an entry). When the folder cannot be written, models load the
slow way; nothing fails.

What the cache holds decides what search serves and what runs (a snapshot's vectors, a model file handed to
onnxruntime, a tokenizer read with `marshal`, an entry that says the weights' hash was checked), so it is read only
as far as this user alone could have written it (`trusted`, `trusted_entry`): folders are created for their user
alone, and anything another user owns, a link, or a folder or file other users can write (a group of the user's
own aside), is neither read nor written, nor changed: models then load the slow way, as with a folder that cannot be
written, and `toolrag doctor` says why.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

log = logging.getLogger("toolrag.embed")
FIXED_TEXTS = "fixed-texts"  # the folder of `cached_vectors`
DOCUMENT_VECTORS = "document-vectors"  # the folder of embed/vector_cache.py


def cache_root() -> Path:
    configured = os.environ.get("TOOLRAG_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolrag"


class UntrustedCacheError(OSError):
    """A cache path another user could have written: never read (an OSError, so every reader loads the slow way)."""


def trusted(path: Path) -> Path:
    """`path` under the cache folder, once the cache folder and every folder below it down to `path`, and `path`
    itself when it is there, is this user's, not a link (the cache folder itself may be one its user made), and
    writable by no one else; UntrustedCacheError otherwise. Nothing is changed: a folder others can write is not
    read, whoever owns it. On systems without user ids every path is trusted."""
    for step in _steps(path):
        try:
            _check(step, follow=step == cache_root())
        except FileNotFoundError:
            break  # not written yet: what comes below it will be this user's
    return path


def trusted_entry(path: Path, beside: Sequence[str] = ()) -> Path:
    """`trusted`, and so is everything in the entry (each file and folder under it, read with their links
    unfollowed) and the files named `path` + each of `beside` that are there (SQLite's journal and WAL beside its
    database): an entry's files are read as they are."""
    trusted(path)
    inside = [Path(folder) / name for folder, folders, files in os.walk(path) for name in (*folders, *files)]
    for item in [*inside, *(path.with_name(path.name + suffix) for suffix in beside)]:
        with contextlib.suppress(FileNotFoundError):
            _check(item, follow=False)
    return path


def private_folder(path: Path) -> Path:
    """`path` under the cache folder, created (with the folders above it) for this user alone, and `trusted`."""
    for step in _steps(path):
        step.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check(step, follow=step == cache_root())
    return path


def _steps(path: Path) -> list[Path]:
    """The cache folder, then each folder below it down to `path`."""
    steps = [cache_root()]
    for part in path.relative_to(steps[0]).parts:
        steps.append(steps[-1] / part)
    return steps


def distrusted(path: Path, follow: bool = True) -> str | None:
    """Why the cache would not read `path`, None when it would or `path` is not there."""
    try:
        _check(path, follow)
    except FileNotFoundError:
        return None
    except UntrustedCacheError as error:
        return str(error.args[0])
    return None


def _check(path: Path, follow: bool) -> None:
    """UntrustedCacheError for a path another user could have written; FileNotFoundError for one not there."""
    if not hasattr(os, "geteuid"):
        return
    status = path.stat() if follow else path.lstat()
    if stat.S_ISLNK(status.st_mode):
        problem = f"{path} is a link"
    elif status.st_uid != os.geteuid():
        problem = f"{path} belongs to user id {status.st_uid}, not this user ({os.geteuid()})"
    elif status.st_mode & 0o002 or (status.st_mode & 0o020 and not _own_group(status.st_gid)):
        problem = f"{path} is writable by other users (mode {stat.S_IMODE(status.st_mode):o})"
    else:
        return
    raise UntrustedCacheError(problem)


@functools.cache
def _own_group(gid: int) -> bool:
    """Whether group `gid` is this user's own: its primary group, listing no other member (as the group each user
    gets on most systems, where files are created writable by it)."""
    try:
        import grp

        return gid == os.getegid() and not grp.getgrgid(gid).gr_mem
    except (ImportError, KeyError):
        return False


def cached_folder(key: str, build: Callable[[Path], None]) -> Path | None:
    """The folder of entry `key`, built by `build(folder)` the first time; None when it cannot be kept."""
    folder = cache_root() / key
    try:
        if (trusted_entry(folder) / "complete").exists():
            return folder
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=private_folder(folder.parent)))
        try:
            build(staging)
            (staging / "complete").touch()
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:  # another process won the race, a read-only home, a full disk: load the slow way
        try:
            if (trusted_entry(folder) / "complete").exists():
                return folder
        except OSError:
            pass
        log.info("model cache %s not kept: %s", folder, exc)
        return None
    return folder


def cached_vectors(model_id: str, dimension: int, kind: str, texts: Sequence[str], compute: Callable[[], Any]) -> Any:
    """Vectors of fixed texts (the small-talk bank, the poisoning detector's references) for one model: computed
    once per machine by `compute()` and kept under a hash of the model, the kind and the texts, so a changed text
    or model never meets old vectors and every new registry or process reuses them."""
    import numpy as np

    digest = hashlib.sha256("\n".join([model_id, kind, *texts]).encode("utf-8", "surrogatepass")).hexdigest()
    path = cache_root() / FIXED_TEXTS / f"{digest[:40]}.npy"
    try:
        vectors = np.load(trusted(path), allow_pickle=False)
        if vectors.shape == (len(texts), dimension):
            os.utime(path)  # used: `toolrag cache prune` keeps it
            return vectors
    except (OSError, ValueError):
        pass
    vectors = np.asarray(compute(), dtype=np.float32)
    try:
        with tempfile.NamedTemporaryFile(dir=private_folder(path.parent), suffix=".npy", delete=False) as staging:
            np.save(staging, vectors)
        os.replace(staging.name, path)
    except OSError as exc:
        log.info("fixed-text vectors not kept in %s: %s", path.parent, exc)
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
    root = cache_root()
    now = now or datetime.now(UTC)
    fresh = now - timedelta(days=STALE_DAYS)
    entries: list[CacheEntry] = []
    folders = (FIXED_TEXTS, DOCUMENT_VECTORS, "snapshots")
    if not root.is_dir() or distrusted(root):
        return []
    candidates = [p for p in root.iterdir() if p.name not in folders and not distrusted(p, follow=False)]
    for path in candidates:
        size, used = _measured(path)
        if path.name.startswith("."):
            entries.append(CacheEntry(path.name, "unfinished", size, used, False))
        else:
            entries.append(CacheEntry(path.name, "model", size, used, path.name in current_models))
    for kind in folders:
        folder = root / kind
        if not folder.is_dir() or distrusted(folder, follow=False):
            continue
        for path in (p for p in folder.iterdir() if not distrusted(p, follow=False)):
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
