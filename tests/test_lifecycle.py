"""Registry lifecycle on both stores: versions, rollback, backups, validation, model migration under load."""

from __future__ import annotations

import getpass
import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolrag import Principal, Tool, ToolNotFoundError, ToolRegistry, open_store
from toolrag.catalog.edits import retry_on_conflict
from toolrag.cli.app import app
from toolrag.embed import UniversalSentenceEncoder
from toolrag.embed.base import Vectors
from toolrag.errors import EditConflictError
from toolrag.monitor.validate import validate
from toolrag.store.base import IndexModel

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder, make_tool

runner = CliRunner()
ADMIN = Principal(tenant="acme", scopes=frozenset({"*"}))


def test_update_reembeds_only_that_tool_and_keeps_history(registry: ToolRegistry, embedder: CountingEmbedder) -> None:
    registry.register_many(SAMPLE_TOOLS)
    before = len(embedder.embedded)
    updated = registry.update("email.send", description="Send an e-mail message with attachments to recipients.")
    assert updated.version == 2 and len(embedder.embedded) == before + 1
    registry.update("email.send", not_for="chat messages: use chat.post")
    registry.set_active("email.send", False)
    assert "email.send" not in [r.name for r in registry.search("send an email with an attachment", ADMIN)]
    registry.set_active("email.send", True)
    assert registry.search("send an email with an attachment", ADMIN)[0].name == "email.send"
    versions = registry.history("email.send")
    assert [t.version for t in versions] == [1, 2, 3, 4, 5] and [t.active for t in versions][-2:] == [False, True]
    assert versions[0].description == "Send an email to one or more recipients."
    rolled = registry.rollback("email.send", 1)
    assert rolled.version == 6 and rolled.description == versions[0].description and rolled.not_for is None
    assert len(registry.history("email.send")) == 6  # a rollback adds a version, it never rewrites history


def test_lifecycle_errors_name_the_problem(registry: ToolRegistry) -> None:
    registry.register_many(SAMPLE_TOOLS)
    with pytest.raises(ToolNotFoundError, match="no tool named 'nope'"):
        registry.update("nope", description="x")
    with pytest.raises(ToolNotFoundError, match=r"has no version 9 \(versions: 1\)"):
        registry.rollback("email.send", 9)
    with pytest.raises(ValueError, match="cannot update colour"):
        registry.update("email.send", colour="red")
    with pytest.raises(ValueError, match="input_schema"):
        registry.update("email.send", input_schema={"type": 5})
    assert registry.get("email.send").version == 1


def test_cli_edits_and_history(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.db")
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps([{"name": "a.tool", "description": "Look up the weather for a city."}]))
    assert runner.invoke(app, ["import", str(catalog), "--store", store]).exit_code == 0
    edited = runner.invoke(app, ["tools", "update", "a.tool", "--store", store, "--aliases", "forecast,rain", "--json"])
    shown = {"name": "a.tool", "version": 2, "active": True, "held": False, "rejected": False}
    assert json.loads(edited.stdout) == shown
    assert runner.invoke(app, ["tools", "deactivate", "a.tool", "--store", store]).exit_code == 0
    assert runner.invoke(app, ["tools", "reactivate", "a.tool", "--store", store]).exit_code == 0
    rolled = runner.invoke(app, ["tools", "rollback", "a.tool", "--to", "1", "--store", store])
    assert "now version 5" in rolled.stdout
    history = json.loads(runner.invoke(app, ["tools", "history", "a.tool", "--store", store, "--json"]).stdout)
    assert [(h["version"], h["aliases"], h["active"]) for h in history] == [
        (1, [], True),
        (2, ["forecast", "rain"], True),
        (3, ["forecast", "rain"], False),
        (4, ["forecast", "rain"], True),
        (5, [], True),
    ]
    nothing = runner.invoke(app, ["tools", "update", "a.tool", "--store", store])
    assert nothing.exit_code == 1 and "nothing to change" in nothing.stderr


def test_export_and_import_restore_a_registry_exactly(
    store_url: str, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    source = ToolRegistry(store_url, embedder)
    source.register_many(SAMPLE_TOOLS)
    source.update("email.send", description="Send an e-mail with attachments.")
    source.set_active("hr.update_salary", False)
    source.reviews.require(False, by="boss")  # an audit row whose "who" a file could forge
    backup = tmp_path / "backup.json"
    exported = runner.invoke(app, ["export", str(backup), "--store", store_url, "--json"])
    assert exported.exit_code == 0, exported.output
    target = str(tmp_path / "restored.db")
    restored = runner.invoke(app, ["import", str(backup), "--store", target, "--json"])
    assert json.loads(restored.stdout)["restored"] is True
    copy = ToolRegistry(target, embedder)
    expected = [r.name for r in source.search("mail a report", ADMIN)]  # the small-talk bank is embedded by now
    before = len(embedder.embedded)
    assert copy.tools(include_inactive=True) == source.tools(include_inactive=True)
    for tool in SAMPLE_TOOLS:
        assert copy.history(tool.name) == source.history(tool.name)
    assert [r.name for r in copy.search("mail a report", ADMIN)] == expected
    assert len(embedder.embedded) == before  # vectors came with the backup
    # Issue 48 R4-7: nothing in a file proves who decided what: its audit rows say they were restored from it.
    *kept, restore = copy.store.audit_log(1000)[::-1]
    assert [(e.action, e.principal) for e in kept] == [
        (e.action, e.principal) for e in source.store.audit_log(1000)[::-1]
    ]
    assert kept and all(e.detail.endswith("as the file states it]") and "from backup.json at" in e.detail for e in kept)
    assert restore.action == "restored" and restore.detail.startswith("registry restored from backup.json: 8 tools")
    again = runner.invoke(app, ["import", str(backup), "--store", target])
    assert again.exit_code == 1 and "already holds tools" in again.stderr
    backup.write_text(backup.read_text()[:500])
    damaged = runner.invoke(app, ["import", str(backup), "--store", str(tmp_path / "other.db")])
    assert damaged.exit_code == 1 and "cannot read backup" in damaged.stderr


def test_validate_finds_and_repairs(store_url: str, embedder: CountingEmbedder, tmp_path: Path) -> None:
    registry = ToolRegistry(store_url, embedder)

    def import_me() -> None:
        """Imported from this test module: this function exists."""

    registry.register(import_me)
    registry.register_many(
        [
            make_tool("gone", "A function that was deleted from the code base.", source="python:no_such_module:f"),
            make_tool("srv.tool", "A tool of an MCP server that was removed from the config.", source="mcp:srv"),
            make_tool("tiny", "Does it."),
            make_tool("long", "word " * 300),
            make_tool("pay.refund", "Refund a customer's card payment in full.", category="pay"),
            make_tool("pay.refund_card", "Refund a customer's card payment in full or in part.", category="pay"),
        ]
    )
    model = IndexModel(embedder.model_id, embedder.dimension)
    registry.store.upsert([make_tool("unembedded", "A tool written straight to the store without vectors.")], {}, model)
    findings = validate(registry, mcp_servers={"other"})
    kinds = {(f.kind, f.tools) for f in findings}
    assert ("orphan", ("gone",)) in kinds and ("orphan", ("srv.tool",)) in kinds
    assert not any(f.kind == "orphan" and "import_me" in f.tools for f in findings)
    assert ("missing_embedding", ("unembedded",)) in kinds
    assert ("too_short", ("tiny",)) in kinds and ("too_long", ("long",)) in kinds
    fixed = validate(registry, fix=True)
    assert [f.fixed for f in fixed if f.kind == "missing_embedding"] == [True]
    assert ("near_duplicate", ("pay.refund", "pay.refund_card")) in {(f.kind, f.tools) for f in fixed}
    assert ("no_not_for", ("pay.refund", "pay.refund_card")) in {(f.kind, f.tools) for f in fixed}
    lacking = next(f for f in fixed if f.kind == "no_not_for")
    assert lacking.detail == "pay.refund, pay.refund_card have no 'not for' line"  # issue 50: "have", not "has"
    assert validate(registry) and not any(f.kind == "missing_embedding" for f in validate(registry))
    assert registry.search("A tool written straight to the store without vectors")[0].name == "unembedded"


def test_validate_cli_exits_non_zero_on_breaking_problems(tmp_path: Path) -> None:
    store = str(tmp_path / "v.db")
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps([{"name": "x", "description": "Gone.", "source": "python:no_such_module:f"}]))
    runner.invoke(app, ["import", str(catalog), "--store", store])
    result = runner.invoke(app, ["validate", "--store", store, "--json"])
    assert result.exit_code == 2
    assert {f["kind"] for f in json.loads(result.stdout)} == {"orphan", "too_short"}


def test_migration_to_another_dimension_never_fails_a_concurrent_search(
    store_url: str, embedder: CountingEmbedder
) -> None:
    ToolRegistry(store_url, embedder).register_many(SAMPLE_TOOLS)
    reader = ToolRegistry(store_url, "auto")  # follows the registry's model
    assert reader.embedder.dimension == 1280
    errors: list[BaseException] = []
    found: list[str] = []
    stop = threading.Event()

    def search_forever() -> None:
        while not stop.is_set():
            try:
                found.append(reader.search("will it rain tomorrow in Lviv", ADMIN)[0].name)
            except BaseException as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=search_forever)
    thread.start()
    try:
        migrated = runner.invoke(app, ["index", "migrate", "--model", "use", "--store", store_url, "--json"])
    finally:
        stop.set()
        thread.join()
    assert migrated.exit_code == 0, migrated.output
    assert json.loads(migrated.stdout)["dimension"] == 512
    assert errors == [] and found and set(found) == {"weather.forecast"}
    # On PostgreSQL another registry's switch reaches this one by notification: on a busy machine, not at once.
    deadline = time.monotonic() + 20
    while reader.embedder.model_id != UniversalSentenceEncoder.model_id and time.monotonic() < deadline:
        assert reader.search("will it rain tomorrow in Lviv", ADMIN)[0].name == "weather.forecast"
        time.sleep(0.05)
    assert reader.search("will it rain tomorrow in Lviv", ADMIN)[0].name == "weather.forecast"
    assert reader.embedder.model_id == UniversalSentenceEncoder.model_id
    assert open_store(store_url).index_model() == IndexModel("use-multilingual-v3", 512)


# -- findings of the security review (issue 14) ----------------------------------------------------------------------


def test_finding13_an_import_during_a_rebuild_lands_with_the_new_model(
    store_url: str, embedder: CountingEmbedder
) -> None:
    ToolRegistry(store_url, embedder).register_many(SAMPLE_TOOLS[:4])
    importer = ToolRegistry(store_url, "auto")  # as `toolrag import` opens it: following the index's model
    rebuilder = ToolRegistry(store_url, "use")
    first = [make_tool("crm.note", "Add a note to a customer record.")]
    # The rebuild switches models while the import is still embedding with the old one.
    assert importer.register_many(first, progress=lambda done: rebuilder.rebuild()).added == ["crm.note"]
    assert importer.embedder.model_id == "use-multilingual-v3"
    second = [make_tool("crm.call", "Log a phone call with a customer.")]
    # An import commits while the rebuild is embedding: the rebuild embeds it too before it switches.
    back = ToolRegistry(store_url, embedder)
    back.rebuild(progress=lambda done: ToolRegistry(store_url, "auto").register_many(second))
    searcher = ToolRegistry(store_url, "auto")
    assert searcher.search("log a phone call with a customer", ADMIN)[0].name == "crm.call"
    assert searcher.tools_without_embeddings() == []


def test_finding12_a_full_disk_is_a_clear_error_and_nothing_is_written(
    tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from toolrag.access import Grant
    from toolrag.server.app import create_app
    from toolrag.server.config import ApiConfig
    from toolrag.store.sqlite import SQLiteStore

    path = tmp_path / "tools.db"
    ToolRegistry(path, embedder).register_many(SAMPLE_TOOLS[:2])
    opened = SQLiteStore.__init__

    def on_a_full_disk(self: SQLiteStore, location: str | Path, create: bool = True) -> None:
        opened(self, location, create)
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        self._db.execute(f"PRAGMA max_page_count = {pages}")  # as if the disk had no byte left

    monkeypatch.setattr(SQLiteStore, "__init__", on_a_full_disk)
    catalog = tmp_path / "catalog.json"
    entries = [{"name": f"bulk.tool_{i}", "description": f"Bulk tool number {i}. " * 3} for i in range(20)]
    catalog.write_text(json.dumps(entries))
    result = runner.invoke(app, ["import", str(catalog), "--store", str(path)])
    assert result.exit_code == 1 and "the disk is full" in result.stderr
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1
    token = "admin-token-0123456789"
    api = create_app(ToolRegistry(path, embedder), ApiConfig(tokens={"ops": Grant(token=token, role="admin")}))
    written = TestClient(api).post("/tools", json=entries[:10], headers={"Authorization": f"Bearer {token}"})
    assert written.status_code == 503 and "the disk is full" in written.json()["detail"]
    monkeypatch.setattr(SQLiteStore, "__init__", opened)
    assert sorted(t.name for t in ToolRegistry(path, embedder).tools()) == sorted(t.name for t in SAMPLE_TOOLS[:2])


class WriterInBetween(CountingEmbedder):
    """While the edit it embeds for is between its read and its write, another instance edits the same tool."""

    def __init__(self, inner: CountingEmbedder, when: str, other_edit: Callable[[], object]) -> None:
        super().__init__(inner.inner, inner.memory)
        self.when, self.other_edit, self.done = when, other_edit, False

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not self.done and any(self.when in text for text in texts):
            self.done = True
            self.other_edit()
        return super().embed_documents(texts)


def test_issue31_an_edit_overtaken_by_another_writer_merges_or_is_refused(
    store_url: str, embedder: CountingEmbedder
) -> None:
    """Two instances on one store. An example added while the other instance edits the description: both stay (the
    addition is made again on the new version). A field edit made from a version that moved on: refused, named."""
    other = ToolRegistry(store_url, embedder, RETRIEVAL)
    other.register_many(SAMPLE_TOOLS)
    described = "Send an e-mail message, with attachments, to recipients."
    interleaved = WriterInBetween(
        embedder, "quarterly invoice", lambda: other.update("email.send", description=described, edited_by="bob")
    )
    with ToolRegistry(store_url, interleaved, RETRIEVAL) as registry:
        registry.examples.add("email.send", "mail the quarterly invoice to the accountant", edited_by="alice")
        final = registry.get("email.send")
        assert interleaved.done and final.description == described
        assert [e.text for e in final.examples] == ["mail the quarterly invoice to the accountant"]
        assert [t.version for t in registry.history("email.send")] == [1, 2, 3]  # the merge adds one version
        # The retry reuses the vector the overtaken attempt embedded: the example's text is embedded once.
        assert interleaved.embedded == ["mail the quarterly invoice to the accountant"]
        read = registry.get("email.send")
        other.update("email.send", aliases=["mail"], edited_by="bob")
        with pytest.raises(EditConflictError, match=r"version 4, not 3 as read: changed by bob at .*; reload"):
            registry.update("email.send", expected_version=read.version, not_for="chat", edited_by="alice")
        assert registry.get("email.send").not_for is None and registry.get("email.send").aliases == ["mail"]
    other.close()


def test_issue31_a_sync_write_overtaken_by_an_operator_is_made_again_on_the_new_version(
    registry: ToolRegistry,
) -> None:
    """`write_merged` (what an MCP sync writes with): an operator's edit landing between its read and its write is
    kept; the sync's change is made again over it."""
    registry.register_many(SAMPLE_TOOLS)
    seen: list[int] = []

    def deactivate(current: Tool | None) -> Tool | None:
        assert current is not None
        seen.append(current.version)
        if len(seen) == 1:  # the operator's edit, after the sync read the tool
            registry.examples.add("email.send", "mail the board the minutes", edited_by="ops")
        return current.model_copy(update={"active": False})

    assert registry.write_merged({"email.send": deactivate}).updated == ["email.send"]
    tool = registry.get("email.send")
    assert seen == [1, 2] and not tool.active and [e.text for e in tool.examples] == ["mail the board the minutes"]


def test_a_write_is_made_again_after_each_conflict_and_the_last_conflict_is_raised() -> None:
    """`retry_on_conflict` (what `edit` and `write_merged` write through): a write another writer overtook is made
    again, as many times as `attempts` allows; the conflict that ends the last attempt reaches the caller."""
    calls: list[str] = []

    def overtaken(times: int) -> Callable[[], str]:
        def write() -> str:
            calls.append("write")
            if len(calls) <= times:
                raise EditConflictError("a.tool", len(calls), len(calls) + 1, "bob", None)
            return "written"

        return write

    assert retry_on_conflict(overtaken(2), attempts=3) == "written" and len(calls) == 3
    calls.clear()
    with pytest.raises(EditConflictError, match="at version 4, not 3 as read"):
        retry_on_conflict(overtaken(3), attempts=3)
    assert len(calls) == 3


def test_issue31_the_cli_refuses_an_edit_made_from_a_version_that_moved_on(tmp_path: Path) -> None:
    store = str(tmp_path / "cli.db")
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps([{"name": "a.tool", "description": "Look up the weather for a city."}]))
    assert runner.invoke(app, ["import", str(catalog), "--store", store]).exit_code == 0
    assert runner.invoke(app, ["tools", "update", "a.tool", "--store", store, "--aliases", "rain"]).exit_code == 0
    stale = runner.invoke(app, ["tools", "update", "a.tool", "--store", store, "--not-for", "x", "--if-version", "1"])
    assert stale.exit_code == 1 and f"at version 2, not 1 as read: changed by {getpass.getuser()} at 20" in stale.stderr
    current = runner.invoke(app, ["tools", "update", "a.tool", "--store", store, "--not-for", "x", "--if-version", "2"])
    assert current.exit_code == 0 and "now version 3" in current.stdout


def test_the_cli_returns_a_replaced_description_to_the_servers(tmp_path: Path) -> None:
    """`tools update --description` over an MCP server's text is an override every sync keeps; `tools
    drop-override` gives the field back to the server, a new version in the audit log."""
    store = str(tmp_path / "cli.db")
    server_text = "Look up an order by its number: status, items and delivery date."
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps([{"name": "shop.lookup_order", "description": server_text, "source": "mcp:shop"}]))
    refused = runner.invoke(app, ["import", str(catalog), "--store", store])
    assert refused.exit_code == 1 and "'mcp:shop': written by MCP syncs only" in refused.stderr  # issue 48
    with ToolRegistry(store) as registry:  # as a sync writes it
        registry.register(make_tool("shop.lookup_order", server_text, source="mcp:shop"))
    edit = ["tools", "update", "shop.lookup_order", "--store", store, "--description", "Find a customer's order."]
    assert runner.invoke(app, edit).exit_code == 0
    dropped = runner.invoke(app, ["tools", "drop-override", "shop.lookup_order", "description", "--store", store])
    assert dropped.exit_code == 0 and "description back to the server's, now version 3" in dropped.stdout
    shown = json.loads(runner.invoke(app, ["show", "shop.lookup_order", "--store", store, "--json"]).stdout)
    assert shown["description"] == server_text and shown["overrides"] == []
    again = runner.invoke(app, ["tools", "drop-override", "shop.lookup_order", "description", "--store", store])
    assert again.exit_code == 1 and "not an operator's override" in again.stderr
