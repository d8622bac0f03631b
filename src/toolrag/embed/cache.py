"""A per-machine cache of work a model does the same way in every process: the parsed tokenizer, the weights
unpacked into a file that can be mapped instead of read. It makes a new process's first search fast.

The folder is `$TOOLRAG_CACHE_DIR`, else `$XDG_CACHE_HOME/toolrag`, else `~/.cache/toolrag`; an entry is keyed by
what it was built from (so a changed model package never meets an old entry), written to a temporary folder and
renamed into place (so a reader never sees half an entry). When the folder cannot be written, models load the
slow way; nothing fails.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("toolrag.embed")


def cache_root() -> Path:
    configured = os.environ.get("TOOLRAG_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolrag"


def cached_folder(key: str, build: Callable[[Path], None]) -> Path | None:
    """The folder of entry `key`, built by `build(folder)` the first time; None when it cannot be kept."""
    folder = cache_root() / key
    if (folder / "complete").exists():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
        try:
            build(staging)
            (staging / "complete").touch()
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:  # another process won the race, a read-only home, a full disk: load the slow way
        if not (folder / "complete").exists():
            log.info("model cache %s not kept: %s", folder, exc)
            return None
    return folder
