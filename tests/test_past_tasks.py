"""Past tasks (issue 32 §1): a request and every tool its task needed, given to each of those tools as an example
request, so a later request like it retrieves the whole set. Candidates come from agents' sessions in the usage log
(the session's first request, the tools it called successfully); an admin promotes one, or writes one, through the
library, the command line, the API and the console. One tenant's past task moves only that tenant's searches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from toolrag import Principal, Tool, ToolRegistry
from toolrag.cli.app import app
from toolrag.errors import InvalidToolError, ToolNotFoundError
from toolrag.model import ExampleRequest, utc_now
from toolrag.search.gather import _own_first_kept
from toolrag.server.app import create_app
from toolrag.store.usage import CallRecord, RetrievalRecord

from .conftest import RETRIEVAL, CountingEmbedder, make_tool
from .test_api import ADMIN as API_ADMIN
from .test_api import READER, api_config, serving
from .test_console import ACME_READER, ADMIN, browser, console_config, signed_in

runner = CliRunner()
ACME = Principal(user="ann", tenant="acme")
GLOBEX = Principal(user="gus", tenant="globex")
TASK = "chase Acme Corp about the invoices they have not paid"
LIKE_IT = "remind Initech to pay their overdue invoices"
TASK_TOOLS = ["crm.find_customer", "billing.open_invoices", "email.send"]


def office() -> list[Tool]:
    return [
        make_tool("crm.find_customer", "Look up a customer record by company name: contacts, account id, owner."),
        make_tool("billing.open_invoices", "List the unpaid invoices of a customer account, with due dates."),
        make_tool("email.send", "Send an e-mail message to one or more addresses."),
        make_tool("weather.forecast", "Weather forecast for the next days for a city."),
        make_tool("calendar.create_event", "Create a calendar event with a time, a title and guests."),
        make_tool("files.search", "Search documents and files by name or content."),
    ]


Session = tuple[list[RetrievalRecord], list[CallRecord]]


def session(number: int, request: str, tools: list[str], tenant: str = "acme", origin: str | None = None) -> Session:
    """One agent session of `tenant`: `request` searched, then `tools` called successfully, in order."""
    start, name = utc_now() - timedelta(hours=1) + timedelta(minutes=number), f"{tenant}-{number}"
    asked = RetrievalRecord("h", (), request, name, tenant=tenant, caller=f"u{number}", at=start)
    calls = [
        CallRecord(tool, "ok", 3.0, True, name, tenant=tenant, caller=f"u{number}", at=start + timedelta(seconds=n + 1))
        for n, tool in enumerate(tools)
    ]
    calls = [replace(call, origin=origin) for call in calls]
    return [asked], calls


def log(registry: ToolRegistry, *sessions: Session) -> None:
    for retrievals, calls in sessions:
        registry.store.usage.record(retrievals, calls)


@pytest.fixture
def offices(store_url: str, embedder: CountingEmbedder) -> Iterator[ToolRegistry]:
    with ToolRegistry(store_url, embedder, RETRIEVAL) as registry:
        registry.register_many(office())
        yield registry


def test_sessions_that_called_several_tools_are_past_tasks_to_promote(offices: ToolRegistry) -> None:
    follow_up = RetrievalRecord("h", (), "and the e-mail?", "acme-0", tenant="acme", caller="u0", at=utc_now())
    log(
        offices,
        session(0, TASK, TASK_TOOLS),
        session(1, f"  {TASK} ", TASK_TOOLS),  # the same task again: counted, not listed twice
        session(2, "what's the weather in Lviv", ["weather.forecast"]),  # one tool: no task
        session(3, TASK, TASK_TOOLS, origin="console"),  # an admin's trials are no agent's session
        session(4, "plan a meeting about the report", ["files.search", "calendar.create_event"], tenant="globex"),
        ([follow_up], []),
    )
    tasks = offices.examples.past_tasks()
    assert [(t.tenant, t.request, t.tools, t.sessions) for t in tasks] == [
        ("acme", TASK, tuple(TASK_TOOLS), 2),  # the session's first request, the tools in the order called
        ("globex", "plan a meeting about the report", ("files.search", "calendar.create_event"), 1),
    ]
    promoted = offices.examples.add_task(TASK, TASK_TOOLS, "acme", "usage", edited_by="root")
    assert [t.name for t in promoted] == TASK_TOOLS
    written = {"text": TASK, "tenant": "acme", "source": "usage", "task": True}
    assert all(t.examples[-1].definition() == written for t in promoted)
    assert [t.tenant for t in offices.examples.past_tasks()] == ["globex"]  # promoted: no longer a candidate
    assert offices.examples.past_tasks(limit=1) == offices.examples.past_tasks()[:1]
    audit = offices.store.audit_log(3)
    assert {(e.tool, e.action, e.principal) for e in audit} == {(name, "edited", "root") for name in TASK_TOOLS}
    assert audit[0].detail == f"examples: a past task of {', '.join(TASK_TOOLS)}"
    again = offices.examples.add_task(
        TASK, TASK_TOOLS, "acme", edited_by="root"
    )  # each tool has it already: no version
    assert [t.version for t in again] == [t.version for t in promoted]


def test_only_a_session_that_looks_like_one_task_is_proposed(offices: ToolRegistry) -> None:
    """A session id two callers share is two tasks; a session that called more tools than a set holds (an agent
    left running) or opened with a document instead of a request proposes nothing."""
    many = [f"extra.tool_{n}" for n in range(17)]
    offices.register_many([make_tool(name, f"Extra tool number {n}.") for n, name in enumerate(many)])
    mine, mine_calls = session(0, TASK, TASK_TOOLS[:2])
    theirs, theirs_calls = session(1, "plan a meeting about the report", ["files.search", "calendar.create_event"])
    shared = [replace(record, session="shared") for record in (*mine, *theirs)]
    shared_calls = [replace(record, session="shared") for record in (*mine_calls, *theirs_calls)]
    log(
        offices,
        (shared, shared_calls),
        session(2, "keep the office running", many),
        session(3, "summarise this: " + "the quarterly report says " * 60, ["files.search", "email.send"]),
    )
    tasks = offices.examples.past_tasks()
    assert sorted((t.request, t.tools) for t in tasks) == [
        (TASK, tuple(TASK_TOOLS[:2])),
        ("plan a meeting about the report", ("files.search", "calendar.create_event")),
    ]


def test_a_past_task_brings_its_whole_set_to_its_tenant_only(offices: ToolRegistry) -> None:
    implied = {"crm.find_customer", "email.send"}  # the request is about invoices: these two are implied
    before = {r.name: r.score for r in offices.search(LIKE_IT, ACME, k=5)}
    assert all(before.get(name, 0.0) < 0.2 for name in implied), before  # at most a long shot each
    offices.examples.add_task(TASK, TASK_TOOLS, "acme", edited_by="root")
    found = {r.name: r.score for r in offices.search(LIKE_IT, ACME, k=5)}
    assert set(TASK_TOOLS) <= set(found) and all(found[name] > 0.3 for name in implied), found
    elsewhere = {r.name: r.score for r in offices.search(LIKE_IT, GLOBEX, k=5)}
    assert elsewhere == before  # acme's task, acme's searches
    unrelated = offices.search("what's the weather in Lviv tomorrow", ACME, k=5)
    assert [r.name for r in unrelated][:1] == ["weather.forecast"]


def test_among_the_tools_a_past_task_raises_the_one_the_request_is_about_comes_first(offices: ToolRegistry) -> None:
    """A past task raises its tools to one cosine: each tool's own text then orders them (search/examples.py
    `OWN_TEXT_WEIGHT`), instead of their names."""
    trip = ["files.search", "calendar.create_event", "weather.forecast"]
    offices.examples.add_task("get ready for my trip to Lisbon on Friday", trip, "acme")
    ranked = offices.rank("will it rain during my trip to Lisbon on Friday", ACME, limit=3)
    assert ranked[0].name == "weather.forecast" and {r.name for r in ranked} == set(trip)
    assert len({r.signals.dense for r in ranked}) == 1  # the task's example: one cosine for all three
    assert ranked[0].signals.fused - ranked[1].signals.fused > 0.05


def test_a_past_task_is_written_whole_or_not_at_all(offices: ToolRegistry) -> None:
    versions = {t.name: t.version for t in offices.tools(include_inactive=True)}
    with pytest.raises(ToolNotFoundError, match=r"no tool named 'crm\.nothing'"):
        offices.examples.add_task(TASK, ["crm.find_customer", "crm.nothing", "email.send"], "acme")
    with pytest.raises(InvalidToolError, match="a past task names two or more tools"):
        offices.examples.add_task(TASK, ["email.send", "email.send"], "acme")
    with pytest.raises(InvalidToolError, match=r"a past task's request: .*must not be blank"):
        offices.examples.add_task(" \n ", TASK_TOOLS, "acme")
    with pytest.raises(InvalidToolError, match="at most 16 tools"):
        offices.examples.add_task(TASK, [f"tool{n}" for n in range(17)], "acme")
    restricted = make_tool("billing.globex_ledger", "Globex's ledger of invoices.", tenants=["globex"])
    offices.register(restricted)
    versions[restricted.name] = offices.get(restricted.name).version
    with pytest.raises(InvalidToolError):  # acme's example on a tool only globex may use
        offices.examples.add_task(TASK, ["crm.find_customer", "billing.globex_ledger"], "acme")
    assert {t.name: t.version for t in offices.tools(include_inactive=True)} == versions
    assert all(not t.examples for t in offices.tools(include_inactive=True))


def test_the_command_line_lists_and_adds_past_tasks(tmp_path: Path, embedder: CountingEmbedder) -> None:
    store = str(tmp_path / "cli.db")
    with ToolRegistry(store, embedder, RETRIEVAL) as registry:
        registry.register_many(office())
        log(registry, session(0, TASK, TASK_TOOLS))
    listed = runner.invoke(app, ["tools", "tasks", "--store", store, "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output) == [{"tenant": "acme", "request": TASK, "tools": TASK_TOOLS, "sessions": 1}]
    added = runner.invoke(
        app, ["tools", "add-task", TASK, *TASK_TOOLS, "--tenant", "acme", "--from-usage", "--store", store]
    )
    assert added.exit_code == 0, added.output
    assert "crm.find_customer: 1 example request, now version 2" in added.output
    assert json.loads(runner.invoke(app, ["tools", "tasks", "--store", store, "--json"]).output) == []
    one = runner.invoke(app, ["tools", "add-task", TASK, "email.send", "--store", store])
    assert one.exit_code == 1 and "a past task names two or more tools" in one.output


def test_the_api_lists_and_adds_past_tasks_for_admins_only(tmp_path: Path, embedder: CountingEmbedder) -> None:
    registry = ToolRegistry(tmp_path / "api.db", embedder, RETRIEVAL)
    registry.register_many(office())
    log(registry, session(0, TASK, TASK_TOOLS))
    with registry, serving(create_app(registry, api_config())) as url:
        reader = {"authorization": f"Bearer {READER}"}
        admin = {"authorization": f"Bearer {API_ADMIN}"}
        assert httpx.get(f"{url}/past-tasks", headers=reader).status_code == 403
        body = {"text": TASK, "tools": TASK_TOOLS, "tenant": "acme", "source": "usage"}
        assert httpx.post(f"{url}/past-tasks", json=body, headers=reader).status_code == 403
        assert registry.examples.past_tasks() and all(not t.examples for t in registry.tools())
        listed = httpx.get(f"{url}/past-tasks", headers=admin).json()
        assert listed == [{"request": TASK, "tenant": "acme", "tools": TASK_TOOLS, "sessions": 1}]
        added = httpx.post(f"{url}/past-tasks", json=body, headers=admin)
        assert added.status_code == 200 and [t["name"] for t in added.json()] == TASK_TOOLS
        assert httpx.get(f"{url}/past-tasks", headers=admin).json() == []
        one = httpx.post(f"{url}/past-tasks", json={**body, "tools": ["email.send"]}, headers=admin)
        assert one.status_code == 422
        blank = httpx.post(f"{url}/past-tasks", json={**body, "text": "  "}, headers=admin)
        assert blank.status_code == 422 and "must not be blank" in blank.json()["detail"]
        huge = {**body, "text": "x" * 1_000_000, "tools": ["email.send"] * 1_000}  # a megabyte of request
        refused = httpx.post(f"{url}/past-tasks", json=huge, headers=admin, timeout=60)
        assert refused.status_code == 422 and len(refused.content) < 2_000  # says where, echoes nothing
        assert {tuple(p["loc"]) for p in refused.json()["detail"]} == {("body", "text"), ("body", "tools")}
        unknown = httpx.post(f"{url}/past-tasks", json={**body, "tools": ["email.send", "nope"]}, headers=admin)
        assert unknown.status_code == 404


def test_an_admin_promotes_a_past_task_in_the_console_and_a_reader_finds_no_page(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    registry = ToolRegistry(tmp_path / "console.db", embedder, RETRIEVAL)
    registry.register_many(office())
    log(registry, session(0, TASK, TASK_TOOLS))
    with registry, serving(create_app(registry, console_config())) as url, browser() as chromium:
        page: Any = signed_in(chromium, url, ADMIN)
        page.goto(f"{url}/console/tasks")
        row = page.locator(f'#tasks tr[data-request="{TASK}"]')
        assert row.inner_text().split("\t")[:4] == [TASK, "acme", ", ".join(TASK_TOOLS), "1"]
        row.locator("button", has_text="promote").click()
        assert page.url == f"{url}/console/tasks"
        assert page.locator("#tasks tr[data-request]").count() == 0
        assert [e.source for e in registry.get("email.send").examples] == ["usage"]
        page.goto(f"{url}/console/tools/email.send")
        assert page.locator("#examples li").inner_text().endswith("acme · usage · past task remove")
        page.goto(f"{url}/console/tasks")
        page.fill('#add-task input[name="text"]', "plan the quarterly review with the team")
        page.fill('#add-task input[name="tools"]', "files.search, calendar.create_event nope")
        page.locator("#add-task button").click()
        assert "no tool named 'nope'" in page.locator("#error").inner_text()
        page.fill('#add-task input[name="text"]', "   ")
        page.fill('#add-task input[name="tools"]', "files.search calendar.create_event")
        page.locator("#add-task button").click()
        assert "must not be blank" in page.locator("#error").inner_text()
        page.fill('#add-task input[name="text"]', "plan the quarterly review with the team")
        page.fill('#add-task input[name="tools"]', "files.search " * 300)  # longer than a set's names
        page.locator("#add-task button").click()
        assert page.locator("h1").inner_text() == "Not accepted"  # a page, not the API's JSON
        assert "tools: String should have at most" in page.locator("#error").inner_text()
        assert not registry.get("files.search").examples
        reader: Any = signed_in(chromium, url, ACME_READER)
        assert reader.goto(f"{url}/console/tasks").status == 404
        assert reader.locator('nav a[href="/console/tasks"]').count() == 0


@pytest.mark.parametrize("read", ["task_calls", "called_after"])
def test_reading_sessions_costs_their_length_not_calls_times_requests(tmp_path: Path, read: str) -> None:
    """One agent's session of n requests and n calls after n other sessions' requests (a hostile or runaway agent
    can make n large): the SQLite steps a read of the log takes grow with n, not n x n (counted by SQLite's progress
    handler, not timed)."""
    from toolrag.store.sqlite import SQLiteStore

    def steps(n: int) -> int:
        store = SQLiteStore(tmp_path / f"{read}-{n}.db")
        start = utc_now() - timedelta(hours=5)
        others = [RetrievalRecord("h", (), "hi", f"other-{i}", at=start - timedelta(seconds=i)) for i in range(n)]
        asked = [
            RetrievalRecord("h", (), f"request {i}", "long", tenant="a", caller="u", at=start + timedelta(seconds=i))
            for i in range(n)
        ]
        called = [
            CallRecord(f"tool{i % 9}", "ok", 1.0, True, "long", tenant="a", caller="u", at=asked[i].at)
            for i in range(n)
        ]
        store.usage.record(others, [])
        store.usage.record(asked, called)
        counted = [0]

        def count() -> int:
            counted[0] += 1
            return 0

        store._db.set_progress_handler(count, 100)  # type: ignore[attr-defined]
        found = getattr(store.usage, read)(utc_now() - timedelta(days=1))
        store._db.set_progress_handler(None, 100)  # type: ignore[attr-defined]
        assert len(found) == n
        store.close()
        return counted[0]

    assert steps(800) < 8 * steps(200)  # 4 times the session: about 4 times the steps (16 times before)


def test_the_first_request_is_the_earliest_whatever_order_it_was_written_in(offices: ToolRegistry) -> None:
    """Several writers may log a later request before an earlier one: the session's task is the earliest request,
    and a request logged in full, longer than a request may be, pairs with nothing instead of failing the read."""
    start = utc_now() - timedelta(hours=1)
    later = RetrievalRecord("h", (), "and the bills?", "s", tenant="acme", caller="u", at=start + timedelta(seconds=9))
    first = RetrievalRecord("h", (), TASK, "s", tenant="acme", caller="u", at=start)
    calls = [
        CallRecord(tool, "ok", 1.0, True, "s", tenant="acme", caller="u", at=start + timedelta(seconds=5 + 10 * n))
        for n, tool in enumerate(TASK_TOOLS[:2])
    ]
    log(offices, ([later], []), ([first], calls))
    assert [(t.request, t.tools) for t in offices.examples.past_tasks()] == [(TASK, tuple(TASK_TOOLS[:2]))]
    assert offices.examples.promotable("billing.open_invoices") == [("acme", "and the bills?")]  # the latest before
    document = RetrievalRecord("h", (), "x" * 5000, "d", tenant="acme", caller="u", at=start)
    sent = CallRecord("email.send", "ok", 1.0, True, "d", tenant="acme", caller="u", at=utc_now())
    log(offices, ([document], [sent]))
    assert offices.examples.promotable("email.send") == []


def test_an_operators_example_of_a_past_tasks_request_becomes_the_tools_own(offices: ToolRegistry) -> None:
    offices.examples.add_task(TASK, TASK_TOOLS, "acme")
    assert [e.task for e in offices.get("email.send").examples] == [True]
    mine = offices.examples.add("email.send", TASK, "acme")
    assert [(e.text, e.task) for e in mine.examples] == [(TASK, False)]
    assert [e.task for e in offices.get("crm.find_customer").examples] == [True]  # the others keep the task's


def test_an_example_that_is_no_past_tasks_keeps_the_tools_version_hash() -> None:
    """`task` and `written_for` joined the definition only where set: a tool with examples written before either
    keeps its hash."""
    tool = make_tool("email.send", "Send an e-mail.").model_copy(update={"examples": [ExampleRequest(text="mail bob")]})
    assert tool.definition()["examples"] == [{"text": "mail bob", "tenant": None, "source": "operator"}]


def test_another_requests_past_task_never_pushes_down_the_tool_a_request_is_about(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """Issue 52, item 3: a past task raises its whole set, but not above the tool the request's own ranking puts
    first: "text Carlos on WhatsApp" near a Telegram task still gets WhatsApp first (the generated catalog of
    benchmarks/graph_catalog.py, where this cost 7 points of goals delivered)."""
    apps = ("whatsapp", "telegram", "signal")
    registry = ToolRegistry(tmp_path / "m.db", embedder, RETRIEVAL)
    registry.register_many(
        [make_tool(f"{app}_send_message", f"Send a chat message to a contact with {app.title()}.") for app in apps]
        + [
            make_tool("get_contact_phone", "A contact's phone number, looked up by name."),
            make_tool("enable_mobile_data", "Turn mobile data on (asks the user when needed)."),
        ]
    )
    request = "text Carlos on Whatsapp that the dentist appointment"
    first = next(r.name for r in registry.search(request, ACME))
    assert first == "whatsapp_send_message"
    task = ["telegram_send_message", "get_contact_phone", "enable_mobile_data"]
    registry.examples.add_task("message mom via Telegram: the dentist appointment", task, "acme")
    assert next(r.name for r in registry.rank(request, ACME, limit=5)) == first
    assert next(r.name for r in registry.search(request, ACME)) == first
    raised = registry.rank("send mom a Telegram message about dinner", ACME, limit=4)
    assert {r.name for r in raised[:3]} == set(task)  # the task's own request still brings its whole set


def music_apps() -> list[Tool]:
    """Two music apps of the generated catalog (benchmarks/graph_catalog.py, seed 11) and the Wi-Fi they need."""
    no_input: dict[str, Any] = {"type": "object", "properties": {}}
    wifi = [
        Tool(name="check_wifi_status", description="Whether Wi-Fi is on.", input_schema=no_input),
        Tool.model_validate(
            {
                "name": "enable_wifi",
                "description": "Turn Wi-Fi on (asks the user when needed).",
                "input_schema": no_input,
                "requires": [{"tool": "check_wifi_status"}],
            }
        ),
    ]
    apps = []
    for prefix, title in (("apple_music", "Apple Music"), ("youtube_music", "Youtube Music")):
        screens = {
            "app_version": f"The installed version of {title}.",
            "clear_cache": f"Clear the {title} app's cached data.",
            "open_settings": f"Open the {title} settings screen.",
            "notification_settings": f"Change which notifications {title} shows.",
        }
        apps += [
            Tool(name=f"{prefix}_{screen}", description=text, input_schema=no_input) for screen, text in screens.items()
        ]
        search = {"type": "object", "properties": {"query": {"type": "string", "description": "title or artist"}}}
        play = {
            "type": "object",
            "properties": {"song_id": {"type": "string", "description": "the song's id in the catalog"}},
        }
        apps += [
            Tool(
                name=f"{prefix}_search_song", description=f"Search the {title} catalog for a song.", input_schema=search
            ),
            Tool.model_validate(
                {
                    "name": f"{prefix}_play_song",
                    "description": f"Play a song in the {title} app.",
                    "input_schema": play,
                    "requires": [{"tool": "enable_wifi"}, {"tool": f"{prefix}_search_song", "parameter": "song_id"}],
                }
            ),
        ]
    return wifi + apps


def test_a_past_task_about_another_app_leaves_a_request_its_own_first_two_tools(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """Issue 52, item 3: "hear a song in Apple Music" ranks the app's version screen first and its player second.
    The nearest past task, YouTube Music's, holds neither: it is about another tool, and may add its set, but both
    of the request's own first tools stay above it (before, only the first did, and the player fell below the
    other app's whole set: the generated catalogs' goals lost with past tasks, docs/benchmarks.md)."""
    registry = ToolRegistry(tmp_path / "music.db", embedder, RETRIEVAL)
    registry.register_many(music_apps())
    request = "I want to hear Shape of You in Apple Music"
    own = [r.name for r in registry.rank(request, ACME, limit=2)]
    assert own == ["apple_music_app_version", "apple_music_play_song"]
    task = ["youtube_music_play_song", "youtube_music_search_song", "check_wifi_status", "enable_wifi"]
    for past in (
        "play Hey Jude on Youtube Music",
        "put on Clair de Lune using Youtube Music",
        "I want to hear Shape of You in Youtube Music",
    ):
        registry.examples.add_task(past, task, "acme")
    assert [r.name for r in registry.rank(request, ACME, limit=2)] == own
    assert "apple_music_play_song" in {r.name for r in registry.search(request, ACME)}
    # The task's own kind of request still gets its whole set first.
    raised = registry.rank("I want to hear Yesterday in Youtube Music", ACME, limit=4)
    assert {r.name for r in raised} == set(task)


def test_a_past_task_holds_a_tool_that_has_its_request_as_an_own_example() -> None:
    """The rule's reading of "holds" (search/gather.py `_own_first_kept`): a past task's request written as a tool's
    own example (an operator's, which replaces the task's copy) is still that task's, so the task agrees with a
    request about the tool and only its first tool is kept; a tool with nothing as near is another tool's."""
    scores = np.array([0.9, 0.8, 0.7, 0.2], dtype=np.float32)  # with past tasks: the task's tools 0 and 1 lead
    own = np.array([0.1, 0.2, 0.9, 0.5], dtype=np.float32)  # the request's own reading: 2, then 3
    tasks = np.array([0.95, 0.95, -np.inf, -np.inf], dtype=np.float32)  # the nearest task's rows: 0 and 1
    example = np.array([0.95, 0.95, 0.95, 0.4], dtype=np.float32)  # 2 has the task's request as its own example
    kept = _own_first_kept(scores, own, example, tasks, read_as_steps=False)
    assert list(np.argsort(-kept, kind="stable")) == [2, 0, 1, 3]
    apart = np.array([0.95, 0.95, 0.6, 0.4], dtype=np.float32)  # nothing of 2 is as near as the task
    kept = _own_first_kept(scores, own, apart, tasks, read_as_steps=False)
    assert list(np.argsort(-kept, kind="stable")) == [2, 3, 0, 1]
    stepped = _own_first_kept(scores, own, apart, tasks, read_as_steps=True)  # a step keeps its first only
    assert list(np.argsort(-stepped, kind="stable")) == [2, 0, 1, 3]
