"""The per-machine cache is read only as far as this user alone could have written it.

What the cache holds decides what search serves and what runs: a snapshot's vectors rank the tools, a document
vector moves one tool anywhere, a model entry's `complete` skips the weights' hash check and hands onnxruntime the
model file, and the USE tokenizer is read with `marshal`. Another user who can write the cache folder (a shared
`TOOLRAG_CACHE_DIR`, a folder left writable by all) must not decide any of it: an entry owned by someone else is
never read, and a cache folder of this user's that others can write is closed to them first.

Tests that plant another user's entry need to hand files to another user (root; CI runs as root)."""

from __future__ import annotations

import json
import logging
import os
import pwd
import stat
import struct
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import cache
from toolrag.embed import cache_folder as rules
from toolrag.embed.vector_cache import cached_documents
from toolrag.search.index import SearchIndex
from toolrag.snapshot import files as snapshot_files

from .test_doctor import doctor
from .test_snapshot import WordEmbedder, _catalog
from .test_vector_cache import Model

SOMEONE_ELSE = 65534  # nobody
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="hands files to another user")


@pytest.fixture(autouse=True)
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _hand_over(path: Path) -> None:
    """Give `path` and everything under it to another user."""
    for item in [path, *path.rglob("*")]:
        os.lchown(item, SOMEONE_ELSE, SOMEONE_ELSE)


@as_root
def test_document_vectors_another_user_wrote_are_never_read(cache_folder: Path) -> None:
    cached_documents("m1", 3, ["a tool"], Model())
    (kept,) = (cache_folder / cache.DOCUMENT_VECTORS).iterdir()
    _hand_over(kept)
    model = Model()
    vectors = cached_documents("m1", 3, ["a tool"], model)
    assert model.asked == ["a tool"]  # embedded again, not read from another user's file
    np.testing.assert_array_equal(vectors, Model()(["a tool"]))


@as_root
def test_fixed_text_vectors_another_user_wrote_are_never_read(cache_folder: Path) -> None:
    cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: [[1.0, 0.0]])
    (kept,) = (cache_folder / cache.FIXED_TEXTS).iterdir()
    np.save(kept, np.array([[0.0, 1.0]], dtype=np.float32))  # what the other user wants every search to read
    _hand_over(kept)
    vectors = cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: [[1.0, 0.0]])
    np.testing.assert_array_equal(vectors, [[1.0, 0.0]])


@as_root
def test_a_model_entry_another_user_wrote_is_never_used(cache_folder: Path) -> None:
    """A planted entry would skip the e5 weights' hash check (its `complete` says "checked") and hand onnxruntime
    or `marshal` a file of the other user's choosing."""
    planted = cache_folder / "e5-0.3.0-abc"
    planted.mkdir(parents=True)
    (planted / "model.onnx").write_bytes(b"the other user's model")
    (planted / "complete").touch()
    _hand_over(planted)
    built: list[Path] = []
    assert cache.cached_folder("e5-0.3.0-abc", built.append) is None
    assert (planted / "model.onnx").read_bytes() == b"the other user's model"  # left as it is, and unused


@as_root
def test_a_snapshot_another_user_wrote_is_never_mapped(tmp_path: Path, cache_folder: Path) -> None:
    def registry() -> ToolRegistry:
        return ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(cache_entries=0, save_snapshots_from=1))

    first = registry()
    first.register_many(_catalog(20))
    first.search("warm up")  # opens the index, and saves it
    (saved,) = {p.parent for p in cache_folder.rglob("complete")}
    _hand_over(saved)
    with mock.patch.object(SearchIndex, "build", wraps=SearchIndex.build) as built:
        reopened = registry()
        assert reopened.search("refund the invoice payment", Principal(user="a", scopes=frozenset({"billing:write"})))
    assert built.called  # built from the store, not mapped from the other user's folder


@as_root
def test_a_cache_folder_owned_by_another_user_is_neither_read_nor_written(cache_folder: Path) -> None:
    cache_folder.mkdir()
    _hand_over(cache_folder)
    computed: list[int] = []

    def compute() -> list[list[float]]:
        computed.append(1)
        return [[1.0, 0.0]]

    for _ in range(2):
        cache.cached_vectors("m1", 2, "bank", ["hello"], compute)
    assert computed == [1, 1] and list(cache_folder.iterdir()) == []


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o2775])
def test_a_cache_folder_others_can_write_is_neither_read_written_nor_changed(mode: int, cache_folder: Path) -> None:
    """The first fix closed such a folder to others (`chmod go-w`) and read it: a `/tmp`-like folder named by
    `TOOLRAG_CACHE_DIR`, or a team's, lost its write bits, and what others had planted in it was then read."""
    cache_folder.mkdir()
    cache_folder.chmod(mode)
    if mode & 0o020:
        os.chown(cache_folder, -1, SOMEONE_ELSE)  # a team's group, not the user's own
    model = Model()
    for _ in range(2):
        cached_documents("m1", 3, ["a tool"], model)
    assert model.asked == ["a tool", "a tool"] and list(cache_folder.iterdir()) == []
    assert stat.S_IMODE(cache_folder.stat().st_mode) == mode


def test_a_folder_writable_by_the_users_own_group_is_used(cache_folder: Path) -> None:
    """Where each user has a group of their own, files are created writable by it (umask 002): that is no one else."""
    cache_folder.mkdir()
    cache_folder.chmod(0o2775)
    model = Model()
    for _ in range(2):
        cached_documents("m1", 3, ["a tool"], model)
    assert model.asked == ["a tool"]


@as_root
def test_a_file_another_user_left_in_an_entry_of_ours_makes_the_entry_unused(cache_folder: Path) -> None:
    """Checking the folders down to an entry left its files unchecked: what another user had put there while a
    folder was open to them (a `complete`, a link to their `model.onnx`) was read once the folder was closed."""
    built: list[Path] = []
    assert cache.cached_folder("e5-0.3.0-abc", built.append) is not None
    entry = cache_folder / "e5-0.3.0-abc"
    (entry / "model.onnx").symlink_to(Path("/etc/hostname"))
    assert cache.cached_folder("e5-0.3.0-abc", built.append) is None
    (entry / "model.onnx").unlink()
    (entry / "model.onnx").write_bytes(b"another user's model")
    _hand_over(entry / "model.onnx")
    assert cache.cached_folder("e5-0.3.0-abc", built.append) is None


@as_root
def test_a_journal_another_user_left_beside_the_document_vectors_is_never_played_back(cache_folder: Path) -> None:
    """SQLite plays a hot journal back into its database: one planted beside the document vectors gave every
    search the other user's vectors."""
    cached_documents("m1", 3, ["a tool"], Model())
    (kept,) = (cache_folder / cache.DOCUMENT_VECTORS).glob("*.sqlite")
    journal = kept.with_name(kept.name + "-journal")
    journal.write_bytes(b"another user's journal")
    _hand_over(journal)
    model = Model()
    cached_documents("m1", 3, ["a tool"], model)
    assert model.asked == ["a tool"] and journal.read_bytes() == b"another user's journal"


@as_root
def test_prune_never_follows_another_users_link_out_of_the_cache(tmp_path: Path, cache_folder: Path) -> None:
    """`toolrag cache prune` deleted what `snapshots` linked to: another user's link, planted in a cache folder
    open to them, pointed it at the victim's own files."""
    victim = tmp_path / "thesis"
    victim.mkdir()
    (victim / "chapter1.tex").write_text("years of work")
    old = time.time() - 90 * 86400
    os.utime(victim / "chapter1.tex", (old, old))
    cache_folder.mkdir(mode=0o700)
    (cache_folder / "snapshots").symlink_to(victim)
    os.lchown(cache_folder / "snapshots", SOMEONE_ELSE, SOMEONE_ELSE)
    entries = cache.cache_entries(set())
    assert cache.prune(entries, everything=True) == []
    assert (victim / "chapter1.tex").read_text() == "years of work"


def test_a_new_cache_folder_is_its_users_alone(cache_folder: Path) -> None:
    cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: [[1.0, 0.0]])
    assert stat.S_IMODE(cache_folder.stat().st_mode) == 0o700


@as_root
def test_doctor_says_a_cache_folder_of_another_user_is_not_used(tmp_path: Path, cache_folder: Path) -> None:
    cache_folder.mkdir()
    _hand_over(cache_folder)
    code, checks = doctor("--store", str(tmp_path / "none.db"))
    found = checks[f"model cache {cache_folder}"]
    assert code == 0 and found["status"] == "warn"
    assert f"not used: {cache_folder} belongs to user id {SOMEONE_ELSE}" in found["detail"]
    assert "TOOLRAG_CACHE_DIR" in found["hint"]


@as_root
def test_a_cache_folder_reached_through_another_users_link_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the link's target was checked: another user who made `TOOLRAG_CACHE_DIR`'s name, in a folder open to
    all (as /tmp), a link to the victim's project had `toolrag cache prune` delete the project's files, and could
    swap the link between a check and a read."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "notes.txt").write_text("precious")
    (shared / "toolrag").symlink_to(project)
    os.lchown(shared / "toolrag", SOMEONE_ELSE, SOMEONE_ELSE)
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(shared / "toolrag"))
    assert cache.prune(cache.cache_entries(set()), everything=True) == []
    assert (project / "notes.txt").read_text() == "precious" and (project / "src").is_dir()
    computed: list[int] = []
    cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: computed.append(1) or [[1.0, 0.0]])
    assert computed == [1] and sorted(p.name for p in project.iterdir()) == ["notes.txt", "src"]
    _, checks = doctor("--store", str(tmp_path / "none.db"))
    assert checks[f"model cache {rules.cache_root()}"]["status"] == "warn"


def test_a_cache_folder_in_a_folder_others_can_write_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder others can write, without the sticky bit, lets them rename the cache folder away and put theirs."""
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(open_to_all / "cache"))
    computed: list[int] = []
    for _ in range(2):
        cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: computed.append(1) or [[1.0, 0.0]])
    assert computed == [1, 1] and list(open_to_all.iterdir()) == []


def test_the_users_own_link_to_its_cache_is_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user who keeps the cache on another disk behind a link of their own keeps using it."""
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "cache-link").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache-link"))
    computed: list[int] = []
    for _ in range(2):
        cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: computed.append(1) or [[1.0, 0.0]])
    assert computed == [1] and list((tmp_path / "elsewhere").iterdir())


@as_root
def test_a_primary_group_other_users_share_is_not_the_users_own(cache_folder: Path) -> None:
    """A group that is another user's primary group too (`users` on some systems) lists no members, and was taken
    for the user's own: its members could put their vectors in a folder of the user's that umask 002 made."""
    shared_gid = next(user.pw_gid for user in pwd.getpwall() if user.pw_uid != 0 and user.pw_gid != 0)
    cache_folder.mkdir()
    cache_folder.chmod(0o2775)
    os.chown(cache_folder, -1, shared_gid)
    with mock.patch.object(os, "getegid", return_value=shared_gid):
        rules._own_group.cache_clear()
        try:
            assert rules.distrusted(cache_folder) is not None
        finally:
            rules._own_group.cache_clear()


@as_root
def test_what_appears_where_the_cache_folder_was_missing_is_never_read(cache_folder: Path) -> None:
    """The fourth round: with a folder on the way not there yet, `trusted` let the caller open the path, and another
    user could rename a tree of theirs into place in between (in /tmp: 928 of 20,000 loads read their vectors). A
    folder missing on the way is now a miss; the caller computes, and writes only through `private_folder`."""
    real = cache.trusted

    def then_planted(path: Path) -> Path:
        checked = real(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, np.array([[0.0, 1.0]], dtype=np.float32))  # renamed into place by the other user
        _hand_over(cache_folder)
        return checked

    with mock.patch.object(cache, "trusted", then_planted):
        vectors = cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: [[1.0, 0.0]])
    np.testing.assert_array_equal(vectors, [[1.0, 0.0]])


def test_a_way_that_changes_while_it_is_read_is_a_miss_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fourth round: a link gone between two looks raised FileNotFoundError out of `cache_root`, and a path made
    before the way changed (a relative TOOLRAG_CACHE_DIR and a change of folder) raised ValueError, into search."""
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "cache-link").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache-link"))
    with mock.patch.object(os, "readlink", side_effect=FileNotFoundError("gone")):
        assert cache.cache_problem() is not None
        computed: list[int] = []
        cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: computed.append(1) or [[1.0, 0.0]])
        assert computed == [1]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", "relative-cache")
    made_before = rules.cache_root() / "e5-0.3.0-abc"
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    with pytest.raises(OSError, match="no longer in the cache folder"):
        rules.trusted(made_before)
    assert cache.cached_folder("e5-0.3.0-abc", lambda folder: None) is not None  # made anew, where it is now


def _acl(permissions: int) -> bytes:
    """A POSIX access ACL, as `setfacl -m u:nobody:rwX` writes it: owner, the named user, group, mask, others."""
    undefined = 0xFFFFFFFF
    entries = [(1, 7, undefined), (2, permissions, SOMEONE_ELSE), (4, 0, undefined), (0x10, permissions, undefined)]
    entries.append((0x20, 0, undefined))
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, who) for tag, perm, who in entries)


def test_a_cache_another_user_may_write_through_an_acl_is_never_read(cache_folder: Path) -> None:
    """The fifth round: with an access control list, the group bits are its mask; a folder of the user's own group
    with `user:nobody:rwx` passed as "umask 002", and nobody's vectors were read."""
    cached_documents("m1", 3, ["a tool"], Model())
    try:
        for folder, _, files in os.walk(cache_folder):
            os.setxattr(folder, "system.posix_acl_access", _acl(7))
            for name in files:
                os.setxattr(Path(folder) / name, "system.posix_acl_access", _acl(6))
    except OSError as error:
        pytest.skip(f"this file system keeps no access control lists: {error}")
    model = Model()
    cached_documents("m1", 3, ["a tool"], model)
    assert model.asked == ["a tool"] and cache.cache_problem() is not None


def test_no_home_folder_means_no_cache_not_a_failed_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fifth round: without HOME and with a user id the system does not name (a container's), `Path.home()`
    raised RuntimeError out of every search; an empty `.npy` (a crash before its data was synced) raised
    EOFError; a snapshots folder this user cannot list raised PermissionError."""
    for name in ("TOOLRAG_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    with mock.patch.object(Path, "home", side_effect=RuntimeError("Could not determine home directory.")):
        registry = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(cache_entries=0, save_snapshots_from=1))
        registry.register_many(_catalog(12))
        assert registry.search("refund the invoice payment", Principal(scopes=frozenset({"billing:write"})))
        assert cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: [[1.0, 0.0]]).shape == (1, 2)
        assert cache.cache_problem() == "no home folder to keep the cache in: set TOOLRAG_CACHE_DIR"
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: [[1.0, 0.0]])
    (kept,) = (tmp_path / "cache" / cache.FIXED_TEXTS).iterdir()
    kept.write_bytes(b"")
    assert cache.cached_vectors("m1", 2, "bank", ["hello"], lambda: [[1.0, 0.0]]).shape == (1, 2)
    with mock.patch.object(snapshot_files, "candidates", side_effect=PermissionError("snapshots: denied")):
        reopened = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(cache_entries=0, save_snapshots_from=1))
        assert reopened.search("refund the invoice payment", Principal(scopes=frozenset({"billing:write"})))


@pytest.mark.parametrize("damage", ["empty matrix", "facts a list", "words a list"])
def test_a_damaged_snapshot_is_built_again_whatever_the_damage(
    damage: str, tmp_path: Path, cache_folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The sixth round: an empty `.npy` (a crash after the rename, nothing synced) raised EOFError out of every
    search, and facts of another shape AttributeError; the folder stayed, so every later process failed alike."""

    def registry() -> ToolRegistry:
        return ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(cache_entries=0, save_snapshots_from=1))

    first = registry()
    first.register_many(_catalog(20))
    first.search("warm up")
    (saved,) = {p.parent for p in cache_folder.rglob("complete")}
    facts = json.loads((saved / "snapshot.json").read_text(encoding="utf-8"))
    if damage == "empty matrix":
        (saved / "matrix.npy").write_bytes(b"")
    elif damage == "facts a list":
        (saved / "snapshot.json").write_text("[]", encoding="utf-8")
    else:
        (saved / "snapshot.json").write_text(json.dumps({**facts, "words": []}), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="toolrag.snapshot"):
        assert registry().search("refund the invoice payment", Principal(scopes=frozenset({"billing:write"})))
    assert "snapshot not used" in caplog.text


@as_root
def test_a_folder_made_above_the_cache_folder_is_checked_before_an_entry_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sixth round: on a first run, `private_folder` made the missing folders above the cache folder without
    checking them, and `cached_folder` returned the entry without a look after building it: another user who made
    the top one first (in /tmp) could swap the entry in before its model was loaded."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(shared / "x" / "deep" / "cache"))
    real_mkdir = Path.mkdir

    def first_made_by_another(self: Path, *args: Any, **kwargs: Any) -> None:
        if self == shared / "x" / "deep" / "cache" and not (shared / "x").exists():
            real_mkdir(shared / "x", mode=0o777)
            os.chown(shared / "x", SOMEONE_ELSE, SOMEONE_ELSE)
        real_mkdir(self, *args, **kwargs)

    with mock.patch.object(Path, "mkdir", first_made_by_another):
        assert cache.cached_folder("e5-0.3.0-abc", lambda folder: None) is None
