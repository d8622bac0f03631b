"""A group's description under the registry's review (listed as not covered by the ninth security review): a model
reads it as what the group's tools are for (deferred loading's namespaces) and search ranks groups by it, so while
the registry asks for review a new description waits for an admin as a tool's text does. Each test of a held
description passed as an attack on the code before it: the description went live at once.

Real SQLite and PostgreSQL stores, real MCP sync code, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import mcp.types
import pytest
from typer.testing import CliRunner

from toolrag import ToolRegistry
from toolrag.cli.app import app
from toolrag.errors import ApprovalConflictError, CatalogError, ToolNotFoundError
from toolrag.inject.deferred import responses_tools
from toolrag.mcp.config import GatewayConfig, ServerConfig
from toolrag.mcp.importer import ToolImporter
from toolrag.store.backup import as_restored, read_backup, write_backup
from toolrag.store.groups import description_hash

from .conftest import RETRIEVAL, CountingEmbedder, make_tool

runner = CliRunner()
BANK = [
    make_tool("bank.transfer", "Transfer money from the user's account to a payee."),
    make_tool("bank.balance", "The balance of one of the user's accounts."),
]
LIVE = "Balances and transfers of the user's bank accounts."
# Not text the poisoning checks refuse (that is refused with review on or off): an ordinary change an admin may not
# want, e.g. one that widens what a model believes the group does.
PROPOSED = "Every money movement: transfers, card payments and payroll for any account of the company."


@pytest.fixture
def reviewed(registry: ToolRegistry) -> ToolRegistry:
    registry.register_many(BANK)
    registry.describe_groups({"bank": LIVE}, by="ops")
    registry.reviews.require(True, by="ops")
    return registry


def namespace_text(registry: ToolRegistry) -> str:
    """What a model reads of the group when its tools are deferred."""
    tools = responses_tools(registry.tools(), registry.group_descriptions())
    return str(next(t["description"] for t in tools if t.get("name") == "bank"))


def test_a_new_description_waits_while_the_live_one_serves(reviewed: ToolRegistry) -> None:
    generation = reviewed.store.generation()
    written = reviewed.describe_groups({"bank": PROPOSED}, by="mallory")
    assert (written.held, written.described) == (["bank"], [])
    assert reviewed.group_descriptions() == {"bank": LIVE} and namespace_text(reviewed) == LIVE
    assert reviewed.store.generation() == generation  # search's snapshot of the groups does not move
    [change] = reviewed.reviews.waiting_groups()
    assert (change.live, change.proposed, change.review.proposed_by) == (LIVE, PROPOSED, "mallory")
    assert change.text_hash == description_hash(PROPOSED)
    assert ("group description held", f"bank: {PROPOSED}", "mallory") in [
        (e.action, e.detail, e.principal) for e in reviewed.store.audit_log(3)
    ]


def test_a_first_description_waits_too_and_a_removal_goes_live(reviewed: ToolRegistry) -> None:
    assert reviewed.describe_groups({"payroll": "Pay the staff."}, by="mallory").held == ["payroll"]
    assert "payroll" not in reviewed.group_descriptions()
    # Without a description the model reads a summary of the group's tools' own (reviewed) texts.
    assert reviewed.describe_groups({"bank": None}, by="ops").removed == ["bank"]
    assert reviewed.group_descriptions() == {} and namespace_text(reviewed) != LIVE


def test_approval_is_compare_and_set_on_the_description_shown(reviewed: ToolRegistry) -> None:
    reviewed.describe_groups({"bank": PROPOSED}, by="mallory")
    shown = reviewed.reviews.waiting_groups()[0].text_hash
    reviewed.describe_groups({"bank": PROPOSED + " And crypto."}, by="mallory")  # moves after the admin read it
    with pytest.raises(ApprovalConflictError, match="changed since it was reviewed"):
        reviewed.reviews.approve_group("bank", shown, approver="ann")
    assert reviewed.group_descriptions() == {"bank": LIVE}
    [change] = reviewed.reviews.waiting_groups()
    reviewed.reviews.approve_group("bank", change.text_hash, approver="ann")
    assert reviewed.group_descriptions() == {"bank": PROPOSED + " And crypto."}
    assert reviewed.reviews.waiting_groups() == []
    trail = [(e.action, e.principal) for e in reviewed.store.audit_log(5)]
    assert ("group description approved", "ann") in trail
    with pytest.raises(ToolNotFoundError, match="no description of group 'bank' waits for review"):
        reviewed.reviews.approve_group("bank")


def test_a_rejected_description_stays_out_until_lifted(reviewed: ToolRegistry) -> None:
    reviewed.describe_groups({"bank": PROPOSED}, by="mallory")
    assert reviewed.reviews.reject_group("bank", rejecter="ann") == description_hash(PROPOSED)
    assert reviewed.reviews.waiting_groups() == [] and reviewed.group_descriptions() == {"bank": LIVE}
    again = reviewed.describe_groups({"bank": PROPOSED}, by="mallory")
    assert (again.held, again.rejected) == ([], ["bank"]) and reviewed.reviews.waiting_groups() == []
    reviewed.reviews.lift_group("bank", lifter="ann")
    assert reviewed.describe_groups({"bank": PROPOSED}, by="mallory").held == ["bank"]
    with pytest.raises(ToolNotFoundError, match="no rejected description of group 'bank'"):
        reviewed.reviews.lift_group("bank")


def test_with_review_off_a_description_goes_live(registry: ToolRegistry) -> None:
    assert registry.describe_groups({"bank": LIVE}, by="ops").described == ["bank"]
    assert registry.group_descriptions() == {"bank": LIVE} and registry.reviews.waiting_groups() == []


def test_a_synced_servers_configured_description_waits(reviewed: ToolRegistry) -> None:
    """The MCP gateway's configuration describes a server's group on every sync: a changed one waits once, and one
    an admin rejected is not proposed again by the next syncs."""
    config = ServerConfig(command="true", description=PROPOSED)
    importer = ToolImporter(reviewed, GatewayConfig(store=":memory:", servers={"shop": config}))
    listed = [mcp.types.Tool(name="pay", description="Pay an invoice.", input_schema={"type": "object"})]
    importer.apply("shop", listed)
    importer.apply("shop", listed)
    assert "shop" not in reviewed.group_descriptions()
    [change] = reviewed.reviews.waiting_groups()
    assert (change.review.name, change.review.origin) == ("shop", "import")
    held = [e for e in reviewed.store.audit_log(50) if e.action == "group description held"]
    assert len(held) == 1
    reviewed.reviews.reject_group("shop", change.text_hash, rejecter="ann")
    importer.apply("shop", listed)
    assert reviewed.reviews.waiting_groups() == [] and "shop" not in reviewed.group_descriptions()


def test_a_backup_carries_what_waits_and_what_was_rejected(
    reviewed: ToolRegistry, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    reviewed.describe_groups({"bank": PROPOSED, "payroll": "Pay the staff."}, by="mallory")
    reviewed.reviews.reject_group("payroll", rejecter="ann")
    backup = tmp_path / "backup.json"
    write_backup(reviewed.store.dump(), backup)
    with ToolRegistry(str(tmp_path / "restored.db"), embedder, RETRIEVAL) as restored:
        restored.store.restore(as_restored(read_backup(backup), backup, "ops"))
        assert restored.group_descriptions() == {"bank": LIVE}
        assert [(c.review.name, c.proposed) for c in restored.reviews.waiting_groups()] == [("bank", PROPOSED)]
        assert restored.describe_groups({"payroll": "Pay the staff."}).rejected == ["payroll"]


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"name": "bank", "pending": "  "}, "blank name or description"),
        ({"name": "bank", "rejected_hash": "not-a-hash"}, "not a SHA-256"),
        ({"name": "bank", "pending": "x", "approved": True}, "approved"),
    ],
)
def test_a_crafted_group_review_in_a_backup_is_refused(
    reviewed: ToolRegistry, tmp_path: Path, row: dict[str, object], problem: str
) -> None:
    backup = tmp_path / "backup.json"
    write_backup(reviewed.store.dump(), backup)
    document = json.loads(backup.read_text())
    document["group_reviews"] = [{"proposed_at": "2026-12-07T00:00:00+00:00", **row}]
    backup.write_text(json.dumps(document))
    with pytest.raises(CatalogError, match=f"is damaged: .*{problem}"):
        read_backup(backup)


def test_the_cli_says_what_waits_and_decides_it(tmp_path: Path, embedder: CountingEmbedder) -> None:
    store = str(tmp_path / "cli.db")
    with ToolRegistry(store, embedder, RETRIEVAL) as registry:
        registry.register_many(BANK)
        registry.reviews.require(True, by="ops")
    described = runner.invoke(app, ["groups", "describe", "bank", PROPOSED, "--store", store])
    assert described.exit_code == 0 and "group bank: the description waits for review" in described.stdout
    listed = json.loads(runner.invoke(app, ["groups", "pending", "--store", store, "--json"]).stdout)
    assert [(row["group"], row["live"], row["proposed"], row["origin"]) for row in listed] == [
        ("bank", None, PROPOSED, "cli")
    ]
    text_hash = listed[0]["text_hash"]
    shown = runner.invoke(app, ["groups", "pending", "--store", store])
    assert f"bank: text {text_hash}" in shown.stdout and f"+ {PROPOSED}" in shown.stdout
    stale = runner.invoke(app, ["groups", "approve", "bank", "--text-hash", "0" * 16, "--store", store])
    assert stale.exit_code == 1 and "changed since it was reviewed" in stale.stderr
    unnamed = runner.invoke(app, ["groups", "approve", "bank", "--store", store])
    assert unnamed.exit_code != 0 and "--text-hash" in unnamed.stderr
    approved = runner.invoke(app, ["groups", "approve", "bank", "--text-hash", text_hash[:16], "--store", store])
    assert approved.exit_code == 0 and "group bank: description approved" in approved.stdout
    live = json.loads(runner.invoke(app, ["groups", "list", "--store", store, "--json"]).stdout)
    assert live["bank"]["description"] == PROPOSED
    runner.invoke(app, ["groups", "describe", "bank", "Anything at all.", "--store", store])
    rejected = runner.invoke(app, ["groups", "reject", "bank", "--store", store])
    assert rejected.exit_code == 0 and "rejected; the live one stays" in rejected.stdout
    again = runner.invoke(app, ["groups", "describe", "bank", "Anything at all.", "--store", store])
    assert "left out as rejected before" in again.stdout
    lifted = runner.invoke(app, ["groups", "reject", "bank", "--lift", "--store", store])
    assert lifted.exit_code == 0 and "rejection lifted" in lifted.stdout
    nothing = runner.invoke(app, ["groups", "reject", "bank", "--store", store])
    assert nothing.exit_code == 1 and "no description of group 'bank' waits for review" in nothing.stderr
