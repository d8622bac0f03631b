"""Two-person review (listed as not covered by the ninth security review: an admin could approve a change they had
proposed themselves, so the gate was no second person's check). With the registry's text review set to
`two-person`, whoever proposed a change (a tool's text, whom it reaches, a group's description) cannot approve it;
anyone may reject it. The names compared are the API's and the console's token names, and in the CLI and Python the
user running it. Real stores (SQLite and PostgreSQL), a real server, the real CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from toolrag import ToolRegistry
from toolrag.access import Grant, NotGranted
from toolrag.cli.app import app
from toolrag.errors import ApprovalConflictError
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig
from toolrag.store.backup import as_restored, read_backup, write_backup

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder
from .test_api import ADMIN, api_config, call, serving

runner = CliRunner()
CHANGED = "Weather forecast for a city: temperature, wind and the chance of rain, day by day."
SECOND_ADMIN = "second-admin-token-0123"


@pytest.fixture
def two_person(registry: ToolRegistry) -> ToolRegistry:
    registry.register_many(SAMPLE_TOOLS)
    registry.reviews.require(True, by="ops", two_person=True)
    return registry


def test_the_proposer_cannot_approve_their_own_change_and_another_admin_can(two_person: ToolRegistry) -> None:
    live = two_person.get("weather.forecast").description
    two_person.update_reviewed("weather.forecast", edited_by="mallory", description=CHANGED)
    with pytest.raises(ApprovalConflictError, match="proposed by mallory: under two-person review another admin"):
        two_person.reviews.approve("weather.forecast", approver="mallory")
    assert two_person.get("weather.forecast").description == live and two_person.reviews.waiting()
    two_person.reviews.approve("weather.forecast", approver="ann")
    assert two_person.get("weather.forecast").description == CHANGED
    trail = [(e.action, e.principal) for e in two_person.store.audit_log(3)]
    assert ("text approved", "ann") in trail


def test_a_later_write_building_on_a_waiting_change_does_not_take_it_over(two_person: ToolRegistry) -> None:
    """The second review: mallory's waiting description, with ann's example request added on top, was recorded as
    ann's alone, and mallory approved her own text."""
    two_person.update_reviewed("weather.forecast", edited_by="mallory", description=CHANGED)
    two_person.examples.add("weather.forecast", "is it going to pour in Lviv", edited_by="ann")
    change = two_person.reviews.change("weather.forecast")
    assert change.review.proposers == ("mallory", "ann") and change.proposed.description == CHANGED
    for proposer in ("mallory", "ann"):
        with pytest.raises(ApprovalConflictError, match="was proposed by mallory, ann: under two-person review"):
            two_person.reviews.approve("weather.forecast", approver=proposer)
    held = [e.detail for e in two_person.store.audit_log(5, "weather.forecast") if e.action == "text held"]
    assert "builds on what mallory proposed" in held[0]
    # Everyone who wrote to it while it waited stays a proposer; a change proposed afresh is its writer's alone.
    two_person.reviews.reject("weather.forecast", rejecter="ann")
    two_person.update_reviewed("weather.forecast", edited_by="ann", description=CHANGED + " Hourly too.")
    assert two_person.reviews.change("weather.forecast").review.proposers == ("ann",)
    two_person.reviews.approve("weather.forecast", approver="mallory")
    trail = [(e.action, e.detail) for e in two_person.store.audit_log(2, "weather.forecast")]
    assert ("text approved", "text change proposed by ann through python approved") in trail


def test_every_write_building_on_what_waits_keeps_its_earlier_proposers(two_person: ToolRegistry) -> None:
    """The third review: a second writer who changed every waiting field (an example request added beside
    mallory's, a past task over it, a narrowing that trimmed her tenant's description) became the only proposer,
    while what they wrote still carried mallory's part."""
    two_person.examples.add("weather.forecast", "is it going to pour in Lviv", edited_by="mallory")
    two_person.examples.add("weather.forecast", "umbrella needed tomorrow?", edited_by="ann")
    assert two_person.reviews.change("weather.forecast").review.proposers == ("mallory", "ann")
    two_person.examples.add_task("storm warning, then forecast", ["weather.forecast", "email.send"], edited_by="bob")
    with pytest.raises(ApprovalConflictError, match="was proposed by mallory, ann, bob"):
        two_person.reviews.approve("weather.forecast", approver="mallory")


def test_a_change_proposed_without_a_name_cannot_be_approved(two_person: ToolRegistry) -> None:
    """The third review: a blank proposer's name was no proposer at all, and anyone approved the change."""
    for attempt, blank in enumerate(["", "  "]):
        two_person.update_reviewed("weather.forecast", edited_by=blank, description=f"{CHANGED} ({attempt})")
        assert two_person.reviews.change("weather.forecast").review.proposers == ()
        with pytest.raises(ApprovalConflictError, match="was proposed without a name"):
            two_person.reviews.approve("weather.forecast", approver="ann")
        two_person.reviews.reject("weather.forecast", rejecter="ann")


def test_the_approvers_name_is_compared_as_it_is_recorded(two_person: ToolRegistry) -> None:
    """The fourth review: "mallory " (or a tab before it) passed as another approver than the "mallory" recorded."""
    two_person.update_reviewed("weather.forecast", edited_by="mallory", description=CHANGED)
    for approver in ("mallory ", "\tmallory"):
        with pytest.raises(ApprovalConflictError, match="another admin approves it"):
            two_person.reviews.approve("weather.forecast", approver=approver)
    two_person.describe_groups({"weather": "Forecasts, rain and storms anywhere."}, by="mallory")
    with pytest.raises(ApprovalConflictError, match="another admin approves it"):
        two_person.reviews.approve_group("weather", approver=" mallory")


def test_whoever_set_a_chat_model_to_write_examples_cannot_approve_them(two_person: ToolRegistry) -> None:
    """The fourth review: a run's examples were proposed by "alice via chat-model:m", never equal to "alice"."""
    two_person.examples.write(
        "weather.forecast", None, ["will I need an umbrella in Kyiv"], "basis", edited_by="alice via chat-model:m"
    )
    with pytest.raises(ApprovalConflictError, match="proposed by alice via chat-model:m"):
        two_person.reviews.approve("weather.forecast", approver="alice")
    two_person.reviews.approve("weather.forecast", approver="bob")


def test_the_proposer_may_reject_their_own_change(two_person: ToolRegistry) -> None:
    two_person.update_reviewed("weather.forecast", edited_by="mallory", description=CHANGED)
    two_person.reviews.reject("weather.forecast", rejecter="mallory")
    assert two_person.reviews.waiting() == []


def test_a_group_description_needs_another_admin_too(two_person: ToolRegistry) -> None:
    two_person.describe_groups({"weather": "Forecasts, rain and storms anywhere."}, by="mallory")
    with pytest.raises(ApprovalConflictError, match="description of group 'weather' was proposed by mallory"):
        two_person.reviews.approve_group("weather", approver="mallory")
    assert two_person.group_descriptions() == {}
    two_person.reviews.approve_group("weather", approver="ann")
    assert two_person.group_descriptions() == {"weather": "Forecasts, rain and storms anywhere."}


def test_one_admin_cannot_switch_it_off_write_live_and_switch_it_back(two_person: ToolRegistry) -> None:
    """The second review: mallory turned review off, edited live and turned two-person review on again, alone."""
    live = two_person.get("weather.forecast").description
    assert not two_person.reviews.require(False, by="mallory")
    assert not two_person.reviews.require(False, by="mallory")  # asking twice is still one admin
    assert two_person.reviews.two_person
    assert two_person.update_reviewed("weather.forecast", edited_by="mallory", description=CHANGED).held
    assert two_person.get("weather.forecast").description == live
    assert not two_person.reviews.require(True, by="ann")  # another admin asking for something else: asked anew
    assert two_person.reviews.require(False, by="mallory") is False and two_person.reviews.two_person
    assert two_person.reviews.require(False, by="ann")
    assert not two_person.reviews.required
    asked = [(e.action, e.principal) for e in two_person.store.audit_log(10) if e.action.startswith("setting")]
    assert asked[:2] == [("setting", "ann"), ("setting asked", "mallory")]


def test_an_approver_without_a_name_is_refused(two_person: ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's arbitrary uid has no login name: the approval cannot be told apart from the proposer's."""
    two_person.update_reviewed("weather.forecast", edited_by="mallory", description=CHANGED)
    monkeypatch.setattr("toolrag.catalog.decisions.login_name", lambda: None)
    with pytest.raises(ApprovalConflictError, match="another admin approves it"):
        two_person.reviews.approve("weather.forecast")


def test_the_setting_is_kept_by_backups_and_plain_review_allows_self_approval(
    two_person: ToolRegistry, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    backup = tmp_path / "backup.json"
    write_backup(two_person.store.dump(), backup)
    with ToolRegistry(str(tmp_path / "restored.db"), embedder, RETRIEVAL) as restored:
        restored.store.restore(as_restored(read_backup(backup), backup, "ops"))
        assert restored.reviews.required and restored.reviews.two_person
    assert not two_person.reviews.require(True, by="ops")  # lowering it takes two admins
    assert two_person.reviews.require(True, by="ann")
    assert two_person.reviews.required and not two_person.reviews.two_person
    two_person.update_reviewed("weather.forecast", edited_by="mallory", description=CHANGED)
    two_person.reviews.approve("weather.forecast", approver="mallory")  # one admin's registry must be able to
    assert two_person.get("weather.forecast").description == CHANGED


@pytest.fixture
def api(two_person: ToolRegistry) -> Iterator[tuple[str, ToolRegistry]]:
    config = api_config()
    config.tokens["auditor"] = Grant(token=SECOND_ADMIN, role="admin", scopes=["*"])
    with serving(create_app(two_person, config)) as url:
        yield url, two_person


def test_over_http_the_token_that_proposed_cannot_approve(api: tuple[str, ToolRegistry]) -> None:
    url, registry = api
    assert call(url, "GET", "/text-review", ADMIN).json() == {"required": True, "two_person": True}
    assert call(url, "PATCH", "/tools/weather.forecast", ADMIN, json={"description": CHANGED}).status_code == 202
    body = {"text_hash": call(url, "GET", "/text-changes/weather.forecast", ADMIN).json()["text_hash"]}
    own = call(url, "POST", "/text-changes/weather.forecast/approve", ADMIN, json=body)
    assert own.status_code == 409 and "proposed by ops: under two-person review" in own.json()["detail"]
    other = call(url, "POST", "/text-changes/weather.forecast/approve", SECOND_ADMIN, json=body)
    assert other.status_code == 200 and other.json()["description"] == CHANGED
    invalid = call(url, "PUT", "/text-review", ADMIN, json={"required": False, "two_person": True})
    assert invalid.status_code == 422 and registry.reviews.two_person
    asked = call(url, "PUT", "/text-review", ADMIN, json={"required": True})
    assert asked.status_code == 202 and asked.json() == {"required": True, "two_person": True}
    plain = call(url, "PUT", "/text-review", SECOND_ADMIN, json={"required": True})
    assert plain.status_code == 200 and plain.json() == {"required": True, "two_person": False}
    trail = [(e.action, e.principal) for e in registry.store.audit_log(2)]
    assert trail == [("setting", "auditor"), ("setting asked", "ops")]


def test_the_cli_sets_it_and_refuses_the_proposers_approval(tmp_path: Path, embedder: CountingEmbedder) -> None:
    store = str(tmp_path / "tools.db")
    with ToolRegistry(store, embedder, RETRIEVAL) as registry:
        registry.register_many(SAMPLE_TOOLS)
    set_on = runner.invoke(app, ["tools", "text-review", "two-person", "--store", store])
    assert set_on.stdout == "text review: two-person\n"
    updated = runner.invoke(app, ["tools", "update", "weather.forecast", "--description", CHANGED, "--store", store])
    assert "waits for review" in updated.stdout
    waiting = json.loads(runner.invoke(app, ["tools", "pending", "--store", store, "--json"]).stdout)[0]
    own = runner.invoke(
        app, ["tools", "approve", "weather.forecast", "--text-hash", waiting["text_hash"], "--store", store]
    )
    assert own.exit_code == 1 and "under two-person review another admin approves it" in own.stderr
    shown = json.loads(runner.invoke(app, ["tools", "text-review", "--store", store, "--json"]).stdout)
    assert shown == {"text_review": "two-person"}
    wrong = runner.invoke(app, ["tools", "text-review", "twice", "--store", store])
    assert wrong.exit_code == 1 and "'on', 'two-person', 'off'" in wrong.stderr


def test_the_console_says_so_and_refuses_the_proposers_approval(tmp_path: Path, embedder: CountingEmbedder) -> None:
    from .test_console import ADMIN as CONSOLE_ADMIN
    from .test_console import console_config, form_token, seeded, session_of

    registry = seeded(str(tmp_path / "console.db"), embedder)
    registry.reviews.require(True, by="ops", two_person=True)
    with registry, serving(create_app(registry, console_config())) as url:
        cookies = session_of(url, CONSOLE_ADMIN)
        listing = httpx.get(f"{url}/console/text-changes", cookies=cookies)
        assert "Two-person review: whoever proposed a change cannot approve it." in listing.text
        csrf = form_token(httpx.get(f"{url}/console/tools/mail.send", cookies=cookies).text)
        form = {"description": "Send an email to someone, with attachments.", "csrf": csrf}
        assert 'id="held"' in httpx.post(f"{url}/console/tools/mail.send/edit", data=form, cookies=cookies).text
        text_hash = registry.reviews.change("mail.send").shown_hash
        decision = {"decision": "approve", "text_hash": text_hash, "csrf": csrf, "confirmed": "true"}
        own = httpx.post(f"{url}/console/text-changes/mail.send", data=decision, cookies=cookies)
        assert own.status_code == 409 and "under two-person review another admin approves it" in own.text
        assert registry.get("mail.send").description == "Send an email to someone."


def test_oauth_callers_are_compared_as_the_people_their_tokens_name() -> None:
    """The second review: an OAuth caller was recorded by its access rule's name, so everyone under one rule was one
    name (none could approve another's change) and one person matching two rules was two (and could)."""
    rules = ApiConfig.model_validate(
        {
            "oauth": {"issuer": "https://id.example.com", "audience": "https://tools.example.com", "public_key": "k"},
            "tokens": {
                "operators": {"claims": {"scope": "toolrag:admin"}, "role": "admin"},
                "auditors": {"claims": {"scope": "toolrag:audit"}, "role": "admin"},
            },
        }
    ).policy()
    ann = rules.for_claims({"sub": "ann", "scope": "toolrag:admin"})
    ann_again = rules.for_claims({"sub": "ann", "scope": "toolrag:audit"})
    bob = rules.for_claims({"sub": "bob", "scope": "toolrag:admin"})
    assert (ann.name, ann_again.name) == ("operators", "auditors")
    assert ann.actor == ann_again.actor == "oauth:ann" and bob.actor == "oauth:bob"
    assert rules.named("operators").actor == "operators"  # a static token's rule is its actor
    # The third review: a blank or non-string user was recorded as the rule's name (or "123").
    for user in ("", "  ", 123, "ann "):
        with pytest.raises(NotGranted, match="claim is not a name"):
            rules.for_claims({"sub": user, "scope": "toolrag:admin"})
