"""Where the model cache folder is, and what in it may be read: only what this user alone could have written.

What the cache holds decides what search serves and what runs (a snapshot's vectors, a model file handed to
onnxruntime, a tokenizer read with `marshal`, an entry that says the weights' hash was checked), so the way to the
folder must be one no other user can change (`_walk`), folders are created for their user alone
(`private_folder`), and anything another user owns, a link, or a folder or file other users can write (a group of
the user's own aside) is neither read nor written, nor changed (`trusted`, `trusted_entry`): models then load the
slow way, as with a folder that cannot be written, and `toolrag doctor` says why (embed/cache.py's
`cache_problem`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Sequence
from pathlib import Path


def cache_root() -> Path:
    """The cache folder, as a path with no link left in it (the links on the way followed once, so a link
    changed later is never followed again); UntrustedCacheError (an OSError) when there is none to use."""
    return _walk(_configured_root())[0]


def _configured_root() -> Path:
    configured = os.environ.get("TOOLRAG_CACHE_DIR")
    if configured:
        return Path(configured)
    try:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except RuntimeError:  # no HOME, and a user id the system does not name (a container's): no cache
        raise UntrustedCacheError("no home folder to keep the cache in: set TOOLRAG_CACHE_DIR") from None
    return Path(base) / "toolrag"


class UntrustedCacheError(OSError):
    """A cache path another user could have written: never read (an OSError, so every reader loads the slow way)."""


def trusted(path: Path) -> Path:
    """`path` under the cache folder, once nothing on the way to it could have been changed by another user: the
    way to the cache folder is steady (`_walk`), and the cache folder and every folder below it down to `path`, and
    `path` itself when it is there, are this user's, not links, and writable by no one else; UntrustedCacheError
    otherwise, FileNotFoundError when a folder on the way is not there (a miss: what another user could put there
    between this check and a read is never read; `private_folder` creates them). Nothing is changed: a folder
    others can write is not read, whoever owns it. On systems without user ids every path is trusted."""
    *folders, last = _steps(path, _steady_root())
    for folder in folders:
        _check(folder)
    with contextlib.suppress(FileNotFoundError):  # in a folder of this user's alone: only this user creates it
        _check(last)
    return path


def trusted_entry(path: Path, beside: Sequence[str] = ()) -> Path:
    """`trusted`, and so is everything in the entry (each file and folder under it, read with their links
    unfollowed) and the files named `path` + each of `beside` that are there (SQLite's journal and WAL beside its
    database): an entry's files are read as they are."""
    trusted(path)
    inside = [Path(folder) / name for folder, folders, files in os.walk(path) for name in (*folders, *files)]
    for item in [*inside, *(path.with_name(path.name + suffix) for suffix in beside)]:
        with contextlib.suppress(FileNotFoundError):
            _check(item)
    return path


def private_folder(path: Path) -> Path:
    """`path` under the cache folder, created (with the folders above it) for this user alone, and `trusted`."""
    for step in _steps(path, _steady_root()):
        step.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check(step)
    _steady_root()  # again: folders made above the cache folder, which another user may have made first
    return path


def _steps(path: Path, root: Path) -> list[Path]:
    """The cache folder `root`, then each folder below it down to `path`."""
    steps = [root]
    try:
        parts = path.relative_to(steps[0]).parts
    except ValueError:  # the way to the cache folder changed since `path` was made: nothing of it is read
        raise UntrustedCacheError(f"{path} is no longer in the cache folder {steps[0]}") from None
    for part in parts:
        steps.append(steps[-1] / part)
    return steps


def distrusted(path: Path) -> str | None:
    """Why the cache would not read `path`, None when it would or `path` is not there."""
    try:
        _steady_root()
        _check(path)
    except FileNotFoundError:
        return None
    except UntrustedCacheError as error:
        return str(error.args[0])
    return None


def _steady_root() -> Path:
    """`cache_root()`, once the way to it is steady (one walk for both); UntrustedCacheError otherwise."""
    root, problem = _walk(_configured_root())
    if problem:
        raise UntrustedCacheError(problem)
    return root


def _walk(path: Path) -> tuple[Path, str | None]:
    """`path` with its links followed, as the system follows them, and why another user could change where it
    leads (None when only this user and root could): a folder on the way that another user owns, or that others
    can write without the sticky bit (/tmp's: there, only what this user or root owns is kept from others), or a
    link another user owns. Where the path is not there yet, the rest is taken as written: this user creates it."""
    folder, pending, links = Path(path.anchor or os.sep), list(path.absolute().parts[1:]), 0
    me = os.geteuid() if hasattr(os, "geteuid") else None
    problem: str | None = None
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            folder = folder.parent
            continue
        step = folder / part
        try:
            if me is not None and problem is None and _others_replace_in(folder, folder.stat(), me):
                problem = f"{folder} is another user's, or writable by others: they could replace {step}"
            status = step.lstat()
        except OSError:  # not there (or not a folder): what is missing, this user creates, or fails to
            return folder.joinpath(part, *pending), problem
        if me is not None and problem is None and status.st_uid not in (0, me):
            problem = f"{step} belongs to user id {status.st_uid}: another user decides what it holds"
        if stat.S_ISLNK(status.st_mode):
            links += 1
            if links > 40:
                return step, f"{path}: too many links"
            try:
                target = Path(os.readlink(step))
            except OSError:  # the link went between two looks: someone changes the way
                return step, f"{step} changed while it was read"
            if target.is_absolute():
                folder, pending = Path(target.anchor), [*target.parts[1:], *pending]
            else:
                pending = [*target.parts, *pending]
            continue
        folder = step
    return folder, problem


def _others_replace_in(folder: Path, status: os.stat_result, me: int) -> bool:
    """Whether another user could rename or replace what this folder holds (in a sticky one, as /tmp, only what
    they own: what this user or root owns there is checked as it is reached)."""
    return status.st_uid not in (0, me) or (_writable_by_others(folder, status) and not status.st_mode & stat.S_ISVTX)


def _check(path: Path) -> None:
    """UntrustedCacheError for a path another user could have written; FileNotFoundError for one not there."""
    if not hasattr(os, "geteuid"):
        return
    status = path.lstat()
    if stat.S_ISLNK(status.st_mode):
        problem = f"{path} is a link"
    elif status.st_uid != os.geteuid():
        problem = f"{path} belongs to user id {status.st_uid}, not this user ({os.geteuid()})"
    elif _writable_by_others(path, status):
        problem = f"{path} is writable by other users (mode {stat.S_IMODE(status.st_mode):o})"
    else:
        return
    raise UntrustedCacheError(problem)


def _writable_by_others(path: Path, status: os.stat_result) -> bool:
    """Whether anyone but this user can write `path`: others, or a group that is not the user's own; with an access
    control list the group bits are its mask, which may let named users write: it is counted as others."""
    if status.st_mode & 0o002:
        return True
    return bool(status.st_mode & 0o020) and (_has_acl(path) or not _own_group(status.st_gid))


def _has_acl(path: Path) -> bool:
    try:
        return "system.posix_acl_access" in os.listxattr(path, follow_symlinks=False)
    except (OSError, AttributeError):  # no extended attributes here (or on this system): no list
        return False


@functools.cache
def _own_group(gid: int) -> bool:
    """Whether group `gid` is this user's alone: its primary group, no other member listed, and no other user's
    primary group (as the group each user gets on most systems, where files are created writable by it)."""
    try:
        import grp
        import pwd

        me = pwd.getpwuid(os.geteuid()).pw_name
        others = any(user.pw_gid == gid and user.pw_uid != os.geteuid() for user in pwd.getpwall())
        return gid == os.getegid() and set(grp.getgrgid(gid).gr_mem) <= {me} and not others
    except (ImportError, KeyError):
        return False
