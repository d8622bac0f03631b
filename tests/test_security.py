"""Findings of the adversarial review (issue 14), one regression test (or more) each: every one of these failed on
the code before its fix. Findings that need a running server or a store live beside their kin (test_api.py,
test_mcp_gateway.py, test_monitor.py, test_store.py) and are named there after the finding."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolrag import ToolRegistry
from toolrag.events import ListSink, SecurityEvent, ToolCallEvent
from toolrag.limits import MAX_MESSAGE_CHARS, MAX_REQUEST_CHARS
from toolrag.model import Principal, Tool
from toolrag.runtime.gateway import CallResult, ToolGateway
from toolrag.runtime.messages import Message, ToolCall
from toolrag.search.request import searched_text
from toolrag.usagelog.redact import redact

CALLER = Principal(user="mallory", tenant="t1")


def _tool(name: str, **fields: Any) -> Tool:
    return Tool.parse({"name": name, "description": f"The {name} tool.", **fields})


class Spy:
    """Every tool's implementation: records which tool ran, so a test sees any call that should not have run."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def __call__(self, name: str) -> Callable[..., str]:
        def run(**arguments: Any) -> str:
            self.ran.append(name)
            return f"{name} ran"

        return run


def _call(gateway: ToolGateway, name: str) -> CallResult:
    return asyncio.run(gateway.call(ToolCall("c1", name, "{}"), set()))


# -- finding 2: one upstream can shadow another's tool -------------------------------------------------------------


@pytest.mark.parametrize("real_tool", ["hidden", "deactivated"])
@pytest.mark.parametrize(
    "requested", ["srv_b.payroll_run", "srv_b__payroll_run", "SRV_B.Payroll-Run", "srv_b.payroll", "srv_b.payrol_run"]
)
def test_a_name_resolves_only_within_the_namespace_it_names(real_tool: str, requested: str) -> None:
    """Server `evil` lists `srv_b.payroll_run` (registered as `evil.srv_b.payroll_run`); a call naming srv_b's tool
    must never run evil's, whether the real one is denied to the caller or not active at all."""
    spy = Spy()
    evil = _tool("evil.srv_b.payroll_run")
    real = _tool("srv_b.payroll_run", scopes=["payroll:run"])
    hidden = [real] if real_tool == "hidden" else []
    gateway = ToolGateway([evil, _tool("srv_a.notes_read")], hidden, CALLER, spy)
    result = _call(gateway, requested)
    assert result.outcome == "unknown_tool" and result.message.is_error
    assert spy.ran == []


def test_issue25_finding11_a_refusal_suggests_no_look_alike_of_another_server() -> None:
    """Denied srv_b.payroll_run, the caller was told "the closest are: evil.srv_b.payroll_run"."""
    evil, own = _tool("evil.srv_b.payroll_run"), _tool("srv_b.payroll_status")
    gateway = ToolGateway([evil, own], [_tool("srv_b.payroll_run", scopes=["hr"])], CALLER, Spy())
    refused = _call(gateway, "srv_b.payroll_run")
    assert refused.outcome == "unknown_tool" and "evil." not in refused.message.content
    assert "srv_b.payroll_status" in refused.message.content  # suggestions stay within the namespace named
    bare = _call(gateway, "payroll_run")  # a bare name names no server: the closest of any may be suggested
    assert bare.outcome == "unknown_tool"


def test_issue31_a_bare_name_never_suggests_a_look_alike_first() -> None:
    """`payroll_run` was answered "the closest are: evil.srv_b.payroll_run, ...": the look-alike, first."""
    names = ["evil.srv_b.payroll_run", "srv_b.payroll_status", "srv_a.notes_read"]
    gateway = ToolGateway([_tool(name) for name in names], [_tool("srv_b.payroll_run", scopes=["hr"])], CALLER, Spy())
    bare = _call(gateway, "payroll_run")
    assert bare.outcome == "unknown_tool"
    closest = bare.message.content.split("the closest are: ", 1)[1]
    assert closest.startswith("srv_b.payroll_status") and "evil.srv_b.payroll_run" in closest  # listed, last
    assert _call(gateway, "payroll").message.content.split("the closest are: ", 1)[1].startswith("srv_b.")


def test_a_bare_name_is_not_completed_with_another_servers_namespace() -> None:
    spy = Spy()
    gateway = ToolGateway([_tool("evil.payroll_run")], [_tool("srv_b.payroll_run", scopes=["x"])], CALLER, spy)
    result = _call(gateway, "payroll_run")
    assert result.outcome == "unknown_tool" and "evil.payroll_run" in result.message.content  # suggested, not run
    assert spy.ran == []


def test_full_names_in_any_provider_spelling_still_resolve() -> None:
    spy = Spy()
    names = ["evil.srv_b.payroll_run", "github.create_issue", "a__b", "a.b"]
    gateway = ToolGateway([_tool(name) for name in names], [], CALLER, spy)
    for requested, meant in [
        ("evil__srv_b__payroll_run", "evil.srv_b.payroll_run"),
        ("GitHub.Create-Issue", "github.create_issue"),
        ("github__create_issue", "github.create_issue"),
    ]:
        assert _call(gateway, requested).outcome == "ok" and spy.ran[-1] == meant
    from toolrag.inject import provider_name

    # `a__b` is one tool's name and how `a.b` is rendered for providers: ambiguous, never a guess
    assert provider_name("a__b") != provider_name("a.b") == "a__b"
    assert _call(gateway, "a__b").outcome == "unknown_tool"
    for requested, meant in [(provider_name("a__b"), "a__b"), ("a.b", "a.b")]:
        assert _call(gateway, requested).outcome == "ok" and spy.ran[-1] == meant


# -- finding 11: a near miss picked the write tool -----------------------------------------------------------------


def test_a_near_miss_with_several_candidates_answers_with_the_list() -> None:
    spy = Spy()
    gateway = ToolGateway([_tool("srv_a.notes_read"), _tool("srv_a.notes_write")], [], CALLER, spy)
    result = _call(gateway, "srv_a.notes")
    assert result.outcome == "unknown_tool" and spy.ran == []
    assert "srv_a.notes_read" in result.message.content and "srv_a.notes_write" in result.message.content


def test_a_near_miss_never_silently_adds_an_action_verb() -> None:
    spy = Spy()
    gateway = ToolGateway([_tool("srv_a.notes_write"), _tool("files.get_file_set")], [], CALLER, spy)
    for requested in ("srv_a.notes", "files.set_file"):
        result = _call(gateway, requested)
        assert result.outcome == "unknown_tool", requested
    assert spy.ran == []


def test_a_harmless_near_miss_still_resolves() -> None:
    spy = Spy()
    gateway = ToolGateway([_tool("get_current_weather_in_city"), _tool("srv_a.notes_read")], [], CALLER, spy)
    assert _call(gateway, "get_current_weather").outcome == "ok"
    assert _call(gateway, "srv_a.notes_raed").outcome == "ok"
    assert spy.ran == ["get_current_weather_in_city", "srv_a.notes_read"]


# -- finding 6: hidden and nonexistent tools could be told apart ---------------------------------------------------


@pytest.mark.parametrize("requested", ["payments.refund", "payments__refund", "payments.refunds"])
def test_a_hidden_tool_answers_exactly_like_a_missing_one(requested: str) -> None:
    visible = [_tool("payments.list"), _tool("weather.forecast")]
    hidden_sink, missing_sink = ListSink(), ListSink()
    with_hidden = ToolGateway(
        visible, [_tool("payments.refund", scopes=["billing:write"])], CALLER, Spy(), events=hidden_sink
    )
    without = ToolGateway(visible, [], CALLER, Spy(), events=missing_sink)
    hidden_answer, missing_answer = _call(with_hidden, requested), _call(without, requested)
    assert (hidden_answer.outcome, hidden_answer.message) == (missing_answer.outcome, missing_answer.message)
    assert hidden_answer.outcome == "unknown_tool"
    if requested != "payments.refunds":  # only the operator's log tells them apart
        assert [e.tool for e in hidden_sink.events if isinstance(e, SecurityEvent)] == ["payments.refund"]
        assert [e.outcome for e in hidden_sink.events if isinstance(e, ToolCallEvent)] == ["refused"]
    assert not [e for e in missing_sink.events if isinstance(e, SecurityEvent)]


# -- finding 1: redaction was quadratic; requests had no length cap everywhere -------------------------------------

# Python expressions, evaluated in the child process (a megabyte each).
ADVERSARIAL_TEXTS = [
    "'y' * 1_000_000",
    "'a@' * 500_000",
    "'a' * 64 + '@' + 'b.' * 500_000",
    "'1 ' * 500_000 + 'x'",
    "'1' + '.' * 1_000_000",
    "'password ' * 100_000",
    "'eyJ' + 'a' * 1_000_000",
    "'ab1+' * 250_000",
]


def test_redaction_takes_linear_time_on_hostile_text(tmp_path: Path) -> None:
    """The old e-mail pattern took seconds on 32,000 word characters and minutes on a megabyte. Each hostile text
    is redacted through the usage recorder in a child process that gets 20 s of CPU for all of them (generous:
    about a second is enough); the child is killed by the kernel if redaction is still superlinear."""
    script = f"""
import resource
resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
from toolrag.model import Principal
from toolrag.usagelog import MonitorConfig
from toolrag.usagelog.recorder import UsageRecorder
from toolrag.store.sqlite import SQLiteStore
recorder = UsageRecorder(SQLiteStore({str(tmp_path / "log.db")!r}), MonitorConfig(requests="redacted"))
for text in [{", ".join(ADVERSARIAL_TEXTS)}]:
    recorder.record_retrieval(text, Principal(), [])
recorder.flush()
print("done")
"""
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0 and "done" in finished.stdout, finished.stderr[-500:]


REAL_LOOKING_SECRETS = [
    ("my password is {}", "Tr0ub4dor&3"),
    ("Passwort: {}", "hunter2!x"),
    ("пароль {}", "qwerty123456"),
    ("密码是{}", "MiMa2024"),
    ("use the key {} for the charge", "sk-live-4eC39HqLyjWDarjtT1zdp7dc"),
    ("openai key {}", "sk-proj-Rk3vX9pQ2mT7wL5nB8cD1fG4hJ6kZ0aS"),
    ("stripe {}", "sk_live_51H8xYzAbCdEfGhIjKlMnOpQr"),
    ("aws {}", "AKIAIOSFODNN7EXAMPLE"),
    ("github token {}", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("slack {}", "xoxb-2048-4096-AbCdEfGhIjKlMnOp"),
    ("google {}", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    ("the token: {}", "tok_9f8e7d6c5b4a"),
    ("api key is {}", "8f14e45fceea167a5a36dedd4bea2543"),
    (
        "Authorization: Bearer {}",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    ("connect to postgresql://app:{}@db.internal/tools", "s3cr3tP4ss"),
    ("export AWS_SECRET_ACCESS_KEY={}", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("the secret is '{}'", "Blue Horse 42"),
    ("card {} exp 12/29", "4111 1111 1111 1111"),
    ("-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA7bq98"),
]


@pytest.mark.parametrize(("template", "secret"), REAL_LOOKING_SECRETS)
def test_redaction_masks_real_looking_secrets(template: str, secret: str) -> None:
    assert secret not in redact(template.format(secret))


@pytest.mark.parametrize(
    "request_text",
    [
        "count the tokens in this prompt",
        "reset my password please",
        "pin the message to the channel",
        "water the lawn for 10 minutes",
        "internationalization and localization settings",
        "what is the secret of a good sourdough",
        "how do I rotate an api key",
    ],
)
def test_redaction_leaves_ordinary_requests_alone(request_text: str) -> None:
    assert redact(request_text) == request_text


def test_a_long_request_is_searched_in_part_and_the_edges_refuse_only_oversized_messages(
    registry: ToolRegistry,
) -> None:
    """Issue 26, item 12: a request with a pasted image raised RequestTooLongError, aborting evaluations and leaving
    agents without tools. Search reads a bounded view (blobs left out, cut), and says so; the edges cap messages."""
    from toolrag.mcp.config import GatewayConfig
    from toolrag.mcp.gateway import McpGateway
    from toolrag.runtime import Agent, ScriptedModel

    image = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAA" * 800
    pasted = f"What does this image mean? {image} Also, send an email to my team about it."
    plain = registry.search("send an email to my team about it", Principal(scopes=frozenset({"*"})))
    assert [r.name for r in registry.search(pasted, Principal(scopes=frozenset({"*"})))] == [r.name for r in plain]
    selection = registry.select(pasted)
    assert selection.request_note is not None and "1 data URI left out" in selection.request_note
    assert registry.select("send an email").request_note is None
    registry.rank("x" * (MAX_REQUEST_CHARS * 3))  # cut, not refused
    gateway = McpGateway(GatewayConfig(), registry)
    answer = asyncio.run(gateway._answer_find({"query": pasted}, CALLER, "s1"))
    assert not answer.is_error and "data URI" in answer.structured_content["note"]  # type: ignore[index]
    oversized = asyncio.run(gateway._answer_find({"query": "y" * (MAX_MESSAGE_CHARS + 1)}, CALLER, "s1"))
    assert oversized.is_error and "at most 100,000" in oversized.content[0].text  # type: ignore[union-attr]
    model = ScriptedModel([Message("assistant", "done")])
    assert Agent(registry, model).run("please " * 20_000 + "send an email").text == "done"  # trimmed, not refused


def test_the_searched_view_drops_blobs_and_replaces_what_is_not_text() -> None:
    view = searched_text("weather \ud800 in Kyiv " + "ab12" * 40 + " tomorrow 0x" + "f" * 100, 4000)
    assert view.text == "weather \ufffd in Kyiv tomorrow"
    assert view.note is not None and "base64 run" in view.note and "hex run" in view.note and "not text" in view.note
    assert searched_text("a git commit 3f2a1c9e0b7d4a6f8e2c1b0a9d8e7f6a5b4c3d2e", 4000).note is None
    long = searched_text("word " * 2000, 4000)
    assert len(long.text) <= 4000 and long.text.endswith("word") and "cut to its first" in (long.note or "")


@pytest.mark.parametrize(
    "given",
    [
        "host=db user=app password='Sek ret9' dbname=tools",
        "host=db password = 'it\\'s a Sek ret9' dbname=tools",
        "postgresql://app:Sek%20ret9@db/tools?sslpassword=Sek%20ret9",
        "host=db password=Sekret9 dbname=tools",
    ],
)
def test_issue25_finding17_no_part_of_a_postgres_password_is_shown(given: str) -> None:
    from toolrag.store.conninfo import redacted_url

    shown = redacted_url(given)
    assert "Sek" not in shown and "ret9" not in shown and "<hidden>" in shown
    assert "dbname=tools" in shown or "app@db/tools" in shown
