"""The sixth security review, of the runtime: what a model's calls, a hanging tool and a chat model's structured
answers can do to the agent loop, the execution gateway and the admin's terminal (docs/reliability.md "Sixth
security review"). Each test failed on the code before its fix."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolrag import Principal, Tool, ToolRegistry, tool
from toolrag.cli import common
from toolrag.cli.app import app
from toolrag.runtime import (
    Agent,
    ExecutionPolicy,
    ListSink,
    Message,
    ScriptedModel,
    SecurityEvent,
    ToolCall,
    ToolCallEvent,
)
from toolrag.runtime.gateway import SYNC_TOOLS, ToolGateway
from toolrag.runtime.messages import recorded_list
from toolrag.runtime.native import DeferredTools
from toolrag.runtime.propose import RECORD, propose_relations
from toolrag.runtime.threads import TAKEN
from toolrag.runtime.toolbox import Toolbox

from .conftest import RETRIEVAL, CountingEmbedder

RELEASE = threading.Event()  # what the tarpit waits for: set at the end of every test
RAN: list[str] = []


@tool(name="web.fetch_url")
def fetch_url(url: str) -> str:
    """Fetch a web page by its address (this one hangs: a tarpit server)."""
    RELEASE.wait(60)
    return "page"


@tool(name="clock.now")
def now(zone: str) -> str:
    """The time in a time zone."""
    return "12:00"


@tool(name="storage.wipe_bucket")
def wipe_bucket(bucket: str, note: str = "") -> str:
    """Delete every object in a storage bucket."""
    RAN.append(bucket)
    return "wiped"


@tool(name="mail.send")
def send_mail(to: str) -> str:
    """Send an e-mail message to an address."""
    RAN.append(to)
    return "sent"


USER = Principal(user="u-1")
OTHER = Principal(user="u-2")


@pytest.fixture
def registry(tmp_path: Path, embedder: CountingEmbedder) -> Iterator[ToolRegistry]:
    RELEASE.clear()
    RAN.clear()
    until(lambda: SYNC_TOOLS.holding("")[2] == 0)  # an earlier test's timed-out tools have given their threads back
    registry = ToolRegistry(tmp_path / "abuse.db", embedder, RETRIEVAL)
    registry.register(fetch_url, now, wipe_bucket, send_mail)
    yield registry
    RELEASE.set()  # the tarpit's threads end, and give their threads back before the next test
    until(lambda: SYNC_TOOLS.holding("")[2] == 0)
    registry.close()


def until(done: Callable[[], bool]) -> None:
    """Wait for a state the threads reach on their own (readiness, never a fixed time)."""
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_sync_tools_past_their_timeout_hold_their_own_threads_and_no_one_elses(registry: ToolRegistry) -> None:
    """Sync tools ran on asyncio's default pool (cpu + 4 threads, shared with the argument checks): eight calls to a
    hanging tool, each timed out, kept their threads, and every later call of anyone waited for ever. A second review
    then filled the first fix's pool in one burst (it counted only calls past their timeout), slipped calls past the
    count by cancelling them, and made a tool unusable for everyone. Now a call holds a thread of a pool of its own
    until its function returns, however its caller stopped waiting; a caller holds at most `max_calls_in_flight`,
    a tenant three quarters of the threads (callers of no tenant count as one), and a call past either, or finding
    none free, is refused at once."""
    policy = ExecutionPolicy(timeout_seconds=0.3)

    def box(user: str, tenant: str | None = None) -> Toolbox:
        return Toolbox(registry, Principal(user=user, tenant=tenant), policy=policy)

    def tarpit(toolbox: Toolbox, count: int) -> list[Any]:
        return [toolbox.call("web.fetch_url", {"url": f"http://tarpit/{n}"}) for n in range(count)]

    ann, bob, cy, gus = box("ann"), box("bob"), box("cy"), box("gus")
    dee, eve, hal, fay = box("dee", "acme"), box("eve", "acme"), box("hal", "acme"), box("fay", "acme")
    limit = policy.max_calls_in_flight

    async def now(toolbox: Toolbox) -> Any:
        return await toolbox.call("clock.now", {"zone": "UTC"})

    async def released() -> None:
        """The tarpit answers: every thread is given back before the next part."""
        RELEASE.set()
        await asyncio.to_thread(until, lambda: SYNC_TOOLS.holding("")[2] == 0)
        RELEASE.clear()

    async def scenario() -> None:
        burst = await asyncio.gather(*tarpit(ann, limit + 4))
        assert Counter(result.outcome for result in burst) == {"timeout": limit, "error": 4}
        refused = [result.message.content for result in burst if result.outcome == "error"]
        assert all(f"{limit} of your calls to sync tools are still running" in text for text in refused)
        mine = await now(ann)
        assert mine.outcome == "error" and "of your calls" in mine.message.content
        # Another caller's calls run, the hanging tool's included: a tool is no one caller's to block.
        assert (await now(bob)).message.content == "12:00"
        assert (await bob.call("web.fetch_url", {"url": "http://tarpit/b"})).outcome == "timeout"
        await released()
        # Calls whose waiting task is cancelled (a client gone) still hold their threads, and count.
        waiting = [asyncio.create_task(call) for call in tarpit(cy, 4)]
        await asyncio.to_thread(until, lambda: SYNC_TOOLS.holding(cy.principal.caller)[0] == 4)
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert SYNC_TOOLS.holding(cy.principal.caller)[0] == 4
        await released()
        # One tenant holds at most three quarters of the threads; whose calls hold them is not said.
        await asyncio.gather(*tarpit(dee, limit), *tarpit(eve, limit), *tarpit(hal, limit))
        tenant = await now(fay)
        assert tenant.outcome == "error" and TAKEN in tenant.message.content
        assert (await now(bob)).message.content == "12:00"
        await released()
        # Callers of no tenant count as one (the third review: four OAuth subjects took every thread); nobody waits
        # for a thread when none is free.
        await asyncio.gather(*tarpit(ann, limit), *tarpit(bob, limit), *tarpit(cy, limit))
        assert (await now(gus)).outcome == "error" and (await now(fay)).message.content == "12:00"
        await asyncio.gather(*tarpit(dee, limit))
        full = await now(fay)
        assert full.outcome == "error" and TAKEN in full.message.content
        assert SYNC_TOOLS.holding("")[2] == SYNC_TOOLS.threads

    asyncio.run(scenario())
    RELEASE.set()  # the tarpit answers: the threads are given back, and everyone may call again
    until(lambda: SYNC_TOOLS.holding("")[2] == 0)
    assert ann.call_sync("clock.now", {"zone": "UTC"}).message.content == "12:00"


def test_call_sync_answers_at_the_timeout_not_when_the_tool_ends(registry: ToolRegistry) -> None:
    """`Toolbox.call_sync` (LangGraph's CallTools, LangChain's and LlamaIndex's tools) waited for the whole hanging
    tool: `asyncio.run` joins the default pool's threads."""
    box = Toolbox(registry, USER, policy=ExecutionPolicy(timeout_seconds=0.3))
    released_late = threading.Timer(30, RELEASE.set)  # ends the run on the old code instead of hanging it
    released_late.start()
    try:
        result = box.call_sync("web.fetch_url", {"url": "http://tarpit/"})
        assert result.outcome == "timeout" and not RELEASE.is_set()
    finally:
        released_late.cancel()


def test_a_huge_tool_name_is_refused_without_reading_it() -> None:
    """Resolving a 1,000,000-character name against 2,000 tools took 11.6 s on the event loop, and the answer and
    the usage log echoed the whole name."""
    tools = [Tool(name=f"crm.tool_{n}", description="A tool.") for n in range(2000)]
    hidden = [Tool(name="payroll.run", description="Run the payroll.")]
    events = ListSink()
    gateway = ToolGateway(tools, hidden, USER, lambda name: None, events=events)
    name = "crm." + "x_" * 500_000
    started = time.process_time()
    result = asyncio.run(gateway.call(ToolCall("c1", name, "{}"), set()))
    spent = time.process_time() - started
    assert result.outcome == "unknown_tool" and len(result.message.content) < 400, result.message.content[:200]
    assert spent < 2.0  # CPU time of this process, 11.6 s before: far from the boundary either way
    # The second review: the hidden tools' lookup still read the whole name, and a lone surrogate in it failed the
    # call with the whole name in its error; a name folding to a hidden tool went whole to the security log.
    for odd in ("payroll." + "-" * 2_000_000 + "run", "crm.tool_1\ud800" + "x" * 300, "nope\ud800"):
        answered = asyncio.run(gateway.call(ToolCall("c2", odd, "{}"), set()))
        assert answered.outcome == "unknown_tool" and len(answered.message.content) < 400
    assert all(len(getattr(e, "requested_name", "")) < 400 for e in events.events)
    assert len(events.events) == 4 and not [e for e in events.events if isinstance(e, SecurityEvent)]


def test_a_lone_surrogate_in_a_models_call_is_answered_not_raised(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """Half an emoji in a model's arguments (a JSON escape the provider's SDK decodes) crashed the agent when the
    call was logged: the arguments' size was counted by encoding them."""
    registry = ToolRegistry(tmp_path / "logged.db", embedder, RETRIEVAL, monitor=True)
    registry.register(now)
    model = ScriptedModel(
        [
            Message("assistant", "", (ToolCall("c1", "clock.now", '{"zone": "UTC \ud83d"}'),)),
            Message("assistant", "", (ToolCall("c2", "clock.now\udc00", '{"zone": "UTC"}'),)),
            Message("assistant", "done"),
        ]
    )
    result = Agent(registry, model, USER).run("what time is it in UTC?")
    assert result.stopped_by == "answer"
    first, second = [m for m in result.messages if m.role == "tool"]
    assert first.is_error and "lone surrogate" in first.content
    assert second.content == "12:00"  # the stray half character is read as a separator, as a space would be
    assert Toolbox(registry, USER).call_sync("clock.now", '{"zone": "\ud800"}').outcome == "invalid_arguments"
    registry.close()  # the usage log is written: both calls and the refusal
    with ToolRegistry(tmp_path / "logged.db", embedder, RETRIEVAL) as reopened:
        outcomes = [call.outcome for call in reopened.store.usage.calls(datetime(2000, 1, 1, tzinfo=UTC))]
    assert sorted(outcomes) == ["invalid_arguments", "invalid_arguments", "ok"]


def test_a_tool_search_asking_for_infinitely_many_tools_is_an_error_message(registry: ToolRegistry) -> None:
    """`{"k": 1e999}` raised OverflowError out of the agent loop and every `DeferredTools.answer_*`."""
    model = ScriptedModel(
        [
            Message("assistant", "", (ToolCall("c1", "find_tools", '{"query": "time", "k": 1e999}'),)),
            Message("assistant", "done"),
        ]
    )
    result = Agent(registry, model, USER, mode="discover").run("what time is it?")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.is_error and "a tool search takes" in answer.content
    native = DeferredTools(registry, USER)
    for hostile in ('{"query": "time", "k": 1e999}', '{"query": "time", "k": NaN}'):
        assert native.answer_anthropic("c", hostile)["is_error"] is True
        assert native.answer_gemini("c", hostile)["is_error"] is True
        assert native.answer_openai("c", hostile)["tools"] == []


def test_a_deeply_nested_structured_answer_is_one_failed_call(registry: ToolRegistry) -> None:
    """A structured answer nested 3,000 levels deep (6 KB, under the size cap) raised RecursionError out of a whole
    `relations propose` or `write-examples` run, at the same tool every time."""
    nested = '{"requires": ' + "[" * 3000 + "]" * 3000 + "}"
    answer = Message("assistant", "", (ToolCall("c", RECORD, nested),))
    assert recorded_list(answer, RECORD, "requires", 20_000) is None

    class Nested:
        def complete(self, messages: object, tools: object) -> Message:
            return answer

    run = propose_relations(registry, Nested(), "scripted")
    assert run.failed == run.asked > 1  # every tool asked, each a failed call; the run went on


def test_what_a_model_or_a_server_wrote_reaches_the_terminal_as_text(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proposed requirement's reason and a written example request were printed as Rich markup (`[/x]` ended
    `toolrag relations list` and `toolrag tools examples` in a traceback) and their escape codes reached the terminal
    raw (`\\x1b[32mverified by admin`)."""
    hostile = "needs [/x] the zone\x1b[2K\r\x1b[32mverified by admin\x1b[0m\u202e"

    class Hostile:
        def complete(self, messages: object, tools: object) -> Message:
            entry = {"tool": "clock.now", "parameter": "zone", "reason": hostile}
            return Message("assistant", "", (ToolCall("c", RECORD, json.dumps({"requires": [entry]})),))

    registry.register(
        Tool(
            name="clock.alarm",
            description="Set an alarm at a time in a time zone.",
            input_schema={"type": "object", "properties": {"zone": {"type": "string"}}},
        )
    )
    propose_relations(registry, Hostile(), "scripted")
    (proposal,) = [r for r in registry.relations.of("clock.alarm", lambda _: True) if r.source == "proposed"]
    assert "needs [/x] the zone" in str(proposal.detail) and "\x1b" not in str(proposal.detail)  # kept as printable
    registry.examples.add("clock.now", "what's the time in [/x] Paris [bold]now")
    store = str(registry.store.path)  # type: ignore[attr-defined]
    registry.close()
    runner = CliRunner()
    monkeypatch.setenv("COLUMNS", "400")  # one line a row
    for terminal in (False, True):
        monkeypatch.setattr(common.out, "_force_terminal", terminal)
        listed = runner.invoke(app, ["relations", "list", "clock.alarm", "--store", store])
        assert listed.exit_code == 0, listed.output
        assert "needs [/x] the zone" in listed.stdout and "\x1b" not in listed.stdout
        examples = runner.invoke(app, ["tools", "examples", "clock.now", "--store", store])
        assert examples.exit_code == 0, examples.output
        assert "[/x] Paris [bold]now" in examples.stdout
    # What reaches the terminal from elsewhere (a server's text, a search's request) shows its escapes as text.
    assert common.plain("a\x1b[32mb\u202ec\r") == "a\\x1b[32mb\\u202ec\\r"
    printed = common.Table("tool", title="[/x] \x1b[2J")
    printed.add_row("[/x]\x1b[2J")
    with common.out.capture() as captured:
        common.out.print(printed)
    assert captured.get().count("[/x]\\x1b[2J") == 1 and captured.get().count("[/x] \\x1b[2J") == 1


def test_a_tool_switched_off_while_its_call_is_checked_does_not_run(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tool was resolved, its arguments checked (seconds, for large ones, in the checking process), and then run
    with no second look: an operator switching it off in between did not stop the call in flight."""
    box = Toolbox(registry, USER)
    checked = ToolGateway._arguments

    async def switched_off_meanwhile(self: ToolGateway, *args: object, **kwargs: object) -> object:
        arguments = await checked(self, *args, **kwargs)  # type: ignore[arg-type]
        await asyncio.to_thread(registry.set_active, "storage.wipe_bucket", False)
        return arguments

    monkeypatch.setattr(ToolGateway, "_arguments", switched_off_meanwhile)
    result = asyncio.run(box.call("storage.wipe_bucket", {"bucket": "prod"}))
    assert result.outcome == "unknown_tool" and RAN == []
    registry.set_active("storage.wipe_bucket", True)

    async def changed_meanwhile(self: ToolGateway, *args: object, **kwargs: object) -> object:
        arguments = await checked(self, *args, **kwargs)  # type: ignore[arg-type]
        renamed = {"type": "object", "properties": {"bucket_name": {"type": "string"}}, "required": ["bucket_name"]}
        await asyncio.to_thread(registry.update, "storage.wipe_bucket", input_schema=renamed)
        return arguments

    monkeypatch.setattr(ToolGateway, "_arguments", changed_meanwhile)
    result = asyncio.run(Toolbox(registry, USER).call("storage.wipe_bucket", {"bucket": "prod"}))
    assert result.outcome == "invalid_arguments" and "changed while" in result.message.content and RAN == []


def test_one_model_response_runs_at_most_max_calls_per_response(registry: ToolRegistry) -> None:
    """A response of 2,000 `send` calls sent 2,000 e-mails in one round: `max_rounds` bounds rounds, not calls."""
    flood = tuple(ToolCall(f"c{n}", "mail.send", json.dumps({"to": f"v{n}@example.com"})) for n in range(2000))
    model = ScriptedModel([Message("assistant", "", flood), Message("assistant", "done")])
    result = Agent(registry, model, USER).run("e-mail bob the minutes")
    answers = [m for m in result.messages if m.role == "tool"]
    assert len(answers) == 2000 and len(RAN) == ExecutionPolicy().max_calls_per_response == 16
    assert all(m.is_error and "at most 16 calls" in m.content for m in answers[16:])
    # The second review: the calls refused left no trace, and LangGraph's tool node ran every call.
    events = ListSink()
    Agent(
        registry,
        ScriptedModel([Message("assistant", "", flood)]),
        USER,
        events=events,
        max_rounds=1,
        on_max_rounds="stop",
    ).run("e-mail bob the minutes")
    assert Counter(e.outcome for e in events.events if isinstance(e, ToolCallEvent)) == {"ok": 16, "refused": 1984}
    from langchain_core.messages import AIMessage

    from toolrag.integrations.langgraph import CallTools

    RAN.clear()
    calls = [{"name": "mail.send", "args": {"to": f"v{n}@example.com"}, "id": f"c{n}"} for n in range(200)]
    answered = CallTools(Toolbox(registry, USER))({"messages": [AIMessage("", tool_calls=calls)]})["messages"]
    assert len(answered) == 200 and len(RAN) == 16 and answered[16].status == "error"


def test_every_table_of_the_command_line_prints_text_not_markup() -> None:
    """The fix above holds for tables written later: no command builds rich's own Table."""
    folder = Path(common.__file__).parent
    rich_table = re.compile(r"rich\.table|from rich import .*\btable\b")
    direct = [path.name for path in folder.glob("*.py") if rich_table.search(path.read_text(encoding="utf-8"))]
    assert direct == ["common.py"]


def test_every_command_prints_what_others_wrote_as_text(
    tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second review: only tables had been fixed. `toolrag show` printed a tool's description (what an MCP
    server lists, read by the admin reviewing it) as markup, and `[/x]` ended it in a traceback; `explain` and
    `report` passed a request's escape codes to the terminal (`\\x1b[2J` cleared it)."""
    hostile = (
        "Reads [/x] files.\x1b[2J\x1b[H\x1b[32mverified by admin [link=https://evil.example]docs[/link]"
        " :white_check_mark: \U000e0041"
    )
    store = str(tmp_path / "shown.db")
    with ToolRegistry(store, embedder, RETRIEVAL) as registry:
        registry.register(Tool(name="files.read", description=hostile))
    runner = CliRunner()
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(common.out, "_force_terminal", True)
    for command in (["show", "files.read"], ["explain", "read the files \x1b[2J[/x]"]):
        printed = runner.invoke(app, [*command, "--store", store])
        assert printed.exit_code == 0, printed.output
        assert "\x1b[2J" not in printed.stdout and "\\x1b[2J" in printed.stdout and "[/x]" in printed.stdout
    shown = runner.invoke(app, ["show", "files.read", "--store", store]).stdout
    assert "[link=https://evil.example]docs[/link]" in shown and ":white_check_mark: \\U000e0041" in shown


def test_a_progress_label_is_text_not_a_template() -> None:
    """The fourth review: a progress bar's label (a catalog file's name) was a format template and markup: `{x}` in
    a file name ended `toolrag import` with a KeyError."""
    with common.progress_bar("embedding tools{x}[/x].json", 3) as advance:
        advance(3)
