"""Untrusted schemas and arguments (issue 25, the second security review): each finding's attack input, handled with
bounded work, refused with a message that names the problem, and never reaching out. Every test here failed on the
code before its fix (a hang that a deadline turns into a failure counts as failing).

Findings that need a running server (another client's latency while the attack runs) are in test_abuse.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolrag.errors import InvalidToolError
from toolrag.model import Principal, Tool
from toolrag.runtime.gateway import CallResult, ToolGateway
from toolrag.runtime.messages import ToolCall
from toolrag.schemas.arguments import MAX_DEPTH, MAX_VALUES
from toolrag.schemas.validation import safe_validator

from .conftest import json_http_server

CALLER = Principal(user="mallory", tenant="t1")
DEADLINE = 60.0  # seconds: far beyond what any of these takes now, far below what they took before


def finishes(work: Callable[[], Any]) -> Any:
    """`work()`'s result, failing the test if it has not finished by DEADLINE (a backtracking regex, a fetch that
    hangs); not a measure of speed."""
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(work()), daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert outcome, f"did not finish within {DEADLINE:g} s"
    return outcome[0]


def gateway_for(schema: dict[str, Any], trusted: bool = False) -> ToolGateway:
    """A gateway over one tool `t.run` with that input schema (`trusted`: as a store hands back a tool registered
    before schemas were checked this way: not checked again)."""
    data = {"name": "t.run", "description": "Run.", "input_schema": schema}
    tool = Tool.model_validate(data, context={"trusted": True}) if trusted else Tool.parse(data)
    return ToolGateway([tool], [], CALLER, lambda name: lambda **arguments: "ran")


def call(gateway: ToolGateway, arguments: Any) -> CallResult:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return finishes(lambda: asyncio.run(gateway.call(ToolCall("c1", "t.run", raw), set())))


# -- finding 2: a schema's pattern ran on a backtracking engine ----------------------------------------------------


def test_finding2_a_catastrophic_pattern_is_checked_in_linear_time() -> None:
    gateway = gateway_for({"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}}})
    refused = call(gateway, {"q": "a" * 40 + "!"})  # 2^40 steps for a backtracking engine
    assert refused.outcome == "invalid_arguments" and "does not match" in refused.message.content
    assert call(gateway, {"q": "a" * 40}).outcome == "ok"
    keys = gateway_for({"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "integer"}}})
    assert call(keys, {"a" * 60 + "b": "x"}).outcome == "ok"  # no key matches: nothing to check
    closed = {"type": "object", "patternProperties": {"^(a|a)*$": {}}, "additionalProperties": False}
    assert call(gateway_for(closed), {"a" * 60 + "!": 1}).outcome == "invalid_arguments"


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("^(a)\\1$", "linear time"), ("^(?=a)", "linear time"), ("a" * 3000, "characters")],
)
def test_finding2_a_pattern_re2_cannot_run_is_refused_at_registration(pattern: str, why: str) -> None:
    for schema in (
        {"type": "object", "properties": {"q": {"type": "string", "pattern": pattern}}},
        {"type": "object", "patternProperties": {pattern: {}}},
        {"type": "object", "propertyNames": {"pattern": pattern}},
    ):
        with pytest.raises(InvalidToolError, match=why):
            Tool.parse({"name": "t.run", "description": "Run.", "input_schema": schema})


def test_ecma_patterns_real_schemas_use_still_work() -> None:
    schema = {
        "type": "object",
        "properties": {
            "day": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
            "name": {"type": "string", "pattern": "^[\\u0400-\\u04FFa-z ]+$"},
            "url": {"type": "string", "pattern": "^https?:\\/\\/"},
        },
    }
    gateway = gateway_for(schema)
    assert call(gateway, {"day": "2026-12-01", "name": "київ kyiv", "url": "https://x"}).outcome == "ok"
    assert call(gateway, {"day": "1 Dec"}).outcome == "invalid_arguments"
    data = {"type": "object", "properties": {"p": {"default": {"pattern": "(a"}, "enum": [{"pattern": "(?=x)"}]}}}
    Tool.parse({"name": "t.run", "description": "Run.", "input_schema": data})  # data, not a pattern: accepted


# -- finding 3: a remote $ref was fetched at call time --------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A web server that records every request: nothing may reach it."""
    seen: list[str] = []

    def respond(path: str, body: None, raw: str) -> tuple[int, dict[str, Any]]:
        seen.append(path)
        return 200, {"type": "string", "description": "SECRET-FROM-INTERNAL-HOST"}

    with json_http_server(respond) as url:
        yield url, seen


def test_finding3_a_remote_ref_is_refused_at_registration_and_never_fetched(listener: tuple[str, list[str]]) -> None:
    url, seen = listener
    schema = {"type": "object", "properties": {"q": {"$ref": f"{url}/internal.json"}}}
    with pytest.raises(InvalidToolError, match="points outside the schema"):
        Tool.parse({"name": "t.run", "description": "Run.", "input_schema": schema})
    # A tool registered before references were checked: its calls are refused, and nothing is fetched.
    refused = call(gateway_for(schema, trusted=True), {"q": 5})
    assert refused.outcome == "invalid_arguments" and "does not resolve inside it" in refused.message.content
    assert "SECRET" not in refused.message.content and seen == []


# -- finding 4: argument errors were rendered with the whole argument, pretty-printed -------------------------------


def test_finding4_errors_are_bounded_whatever_the_argument() -> None:
    nested: Any = list(range(200))
    for _ in range(MAX_DEPTH - 6):
        nested = [nested, {"k": nested if isinstance(nested, dict) else "v"}]
    schema = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}
    refused = call(gateway_for(schema), {"q": nested, "n": [nested] * 3, "x": "y"})
    assert refused.outcome == "invalid_arguments"
    assert len(refused.message.content) < 1200 and "is not of type 'string'" in refused.message.content


# -- finding 12: cycles and depth ended as RecursionError ("tool failed") --------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "$ref": "#"},
        {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/x"}},
            "$defs": {"x": {"anyOf": [{"$ref": "#/$defs/x"}]}},
        },
        {"type": "object", "properties": {"a": {"$ref": "#/definitions/missing"}}},
    ],
)
def test_finding12_a_reference_cycle_or_a_dangling_one_is_refused_at_registration(schema: dict[str, Any]) -> None:
    with pytest.raises(InvalidToolError, match=r"reference cycle|resolves to nothing"):
        Tool.parse({"name": "t.run", "description": "Run.", "input_schema": schema})


def test_a_recursive_schema_that_descends_is_accepted_and_checked() -> None:
    tree = {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}, "n": {"type": "integer"}},
    }
    gateway = gateway_for(tree)
    assert call(gateway, {"kids": [{"kids": [{"n": 1}]}]}).outcome == "ok"
    assert call(gateway, {"kids": [{"kids": [{"n": "one"}]}]}).outcome == "invalid_arguments"


def test_finding12_arguments_nested_too_deep_are_refused_as_invalid() -> None:
    deep = "[" * 900 + "]" * 900
    refused = call(gateway_for({"type": "object"}), f'{{"q": {deep}}}')
    assert refused.outcome == "invalid_arguments" and f"deeper than {MAX_DEPTH} levels" in refused.message.content


# -- finding 13: a lone surrogate ---------------------------------------------------------------------------------


def test_finding13_a_lone_surrogate_in_arguments_is_refused_as_not_text() -> None:
    refused = call(gateway_for({"type": "object"}), '{"q": "\\ud800"}')
    assert refused.outcome == "invalid_arguments" and "not text" in refused.message.content


# -- finding 16: large but allowed arguments cost seconds in the request loop -----------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"xs": list(range(100_000))},  # 100,000 integers where strings are expected: 100,000 errors
        {"m": {str(i): i for i in range(50_000)}},  # 50,000 keys
    ],
)
def test_finding16_large_arguments_are_checked_in_the_checking_process(arguments: dict[str, Any]) -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
    }
    refused = call(gateway_for(schema), arguments)
    assert refused.outcome == "invalid_arguments" and len(refused.message.content) < 1200
    assert "is not of type 'string'" in refused.message.content


def test_arguments_past_the_limits_are_refused_before_they_are_checked() -> None:
    refused = call(gateway_for({"type": "object"}), {"xs": [0] * (MAX_VALUES + 1)})
    assert refused.outcome == "invalid_arguments" and f"more than {MAX_VALUES:,} values" in refused.message.content


def test_a_check_that_outruns_its_budget_refuses_the_call() -> None:
    """A schema whose check costs seconds on a megabyte of arguments (every item against 200 alternatives): the
    checking process is stopped at the budget and the call refused, saying so."""
    from toolrag.runtime.gateway import ExecutionPolicy

    alternatives = [{"type": "string", "minLength": i} for i in range(200)]
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"anyOf": alternatives}}}}
    tool = Tool.parse({"name": "t.run", "description": "Run.", "input_schema": schema})
    gateway = ToolGateway([tool], [], CALLER, lambda name: lambda **a: "ran", policy=ExecutionPolicy(check_seconds=0.5))
    refused = call(gateway, {"xs": ["x"] * 150_000})
    assert refused.outcome == "invalid_arguments" and "longer than 0.5 s" in refused.message.content
    assert call(gateway, {"xs": ["x"] * 10}).outcome == "ok"  # the next call is checked as usual


def test_the_safe_validator_never_retrieves(listener: tuple[str, list[str]]) -> None:
    url, seen = listener
    validator = safe_validator({"type": "object", "properties": {"q": {"$ref": f"{url}/x.json"}}})
    with pytest.raises(Exception, match=r"Unresolvable|unresolvable|resolve"):
        list(validator.iter_errors({"q": 1}))
    assert seen == []


# -- finding 15: an upstream's result was read whole before its size was checked -----------------------------------


def test_finding15_the_relay_passes_lines_under_the_cap_and_answers_for_a_larger_one(tmp_path: Path) -> None:
    """The stdio relay (mcp/relay.py) never holds more than the cap of a line: a larger answer becomes a JSON-RPC
    error for its request, wherever its id is (the TypeScript SDK writes it last); a larger notification is dropped."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"result": {"text": "x" * 300_000}, "jsonrpc": "2.0", "id": "abc"},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "y" * 300_000}},
        {"jsonrpc": "2.0", "id": 2, "result": {"text": "z" * 1000}},
    ]
    written = tmp_path / "answers.jsonl"
    written.write_text("".join(json.dumps(line) + "\n" for line in lines))
    server = [sys.executable, "-c", f"import sys; sys.stdout.write(open({str(written)!r}).read())"]
    command = [sys.executable, "-m", "toolrag.mcp.relay", "--max-bytes", "100000", "--", *server]
    relayed = subprocess.run(command, capture_output=True, check=True, timeout=60).stdout.splitlines()
    assert [json.loads(line) for line in relayed[:1] + relayed[2:]] == [lines[0], lines[3]]
    refusal = json.loads(relayed[1])
    assert refusal["id"] == "abc" and "over the gateway's limit of 100,000 bytes" in refusal["error"]["message"]


# -- issue 31, section 1: the schema sets the cost of a check ---------------------------------------------------


def test_a_schema_whose_references_multiply_is_refused_at_registration_saying_where() -> None:
    """2^16 subschemas for one value, in 1 KB (a 10-byte argument held the API 14 s): refused, naming the count."""
    from .mcp_fixture_server import anyof_chain

    with pytest.raises(
        InvalidToolError, match=r"properties/x: checking one value there .* would take 262,142 steps \(at most 10,000\)"
    ):
        gateway_for(anyof_chain(16))
    assert call(gateway_for(anyof_chain(4)), {"x": 3}).outcome == "ok"  # what real schemas do, and more


def test_a_schema_stored_before_the_bound_is_checked_within_the_budget() -> None:
    """The same schema in a store written by an older release: its check runs out of its budget and the call is
    refused, saying so (before: checked where the call runs, for seconds)."""
    from toolrag.runtime.gateway import ExecutionPolicy

    from .mcp_fixture_server import anyof_chain

    tool = Tool.model_validate(
        {"name": "t.run", "description": "Run.", "input_schema": anyof_chain(16)}, context={"trusted": True}
    )
    gateway = ToolGateway([tool], [], CALLER, lambda name: lambda **a: "ran", policy=ExecutionPolicy(check_seconds=0.5))
    refused = call(gateway, {"x": "no"})
    assert refused.outcome == "invalid_arguments" and "were not checked" in refused.message.content


def test_enums_longer_than_any_real_one_are_refused_at_registration() -> None:
    with pytest.raises(InvalidToolError, match="enum of 20,000 values"):
        gateway_for({"type": "object", "properties": {"x": {"enum": [f"v{i}" for i in range(20_000)]}}})
    many = {f"p{n}": {"enum": [f"v{i}" for i in range(4_000)]} for n in range(6)}
    with pytest.raises(InvalidToolError, match="24,000 values in all"):
        gateway_for({"type": "object", "properties": many})


def test_a_pattern_with_a_huge_automaton_is_refused_at_registration() -> None:
    """4.8 s for one 60 KB string before, on RE2 itself: its DFA runs out of memory."""
    pattern = "(?:(?:a|b|ab|ba){1,100}){1,10}c"
    with pytest.raises(InvalidToolError, match=r"6,004 RE2 instructions \(at most 2,000\)"):
        gateway_for({"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}})


@pytest.fixture
def comparisons(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times jsonschema compares two values (what enum and uniqueItems did value by value, pairwise)."""
    import jsonschema._keywords
    import jsonschema._utils

    count = [0]
    equal = jsonschema._utils.equal

    def counted(one: Any, two: Any) -> bool:
        count[0] += 1
        return equal(one, two)

    monkeypatch.setattr(jsonschema._utils, "equal", counted)
    monkeypatch.setattr(jsonschema._keywords, "equal", counted)
    return count


def test_enum_membership_costs_no_comparison_per_enum_value(comparisons: list[int]) -> None:
    enum = [f"v{i}" for i in range(5_000)]
    gateway = gateway_for({"type": "object", "properties": {"xs": {"type": "array", "items": {"enum": enum}}}})
    assert call(gateway, {"xs": ["v4999"] * 1_990}).outcome == "ok"
    assert comparisons[0] <= 1_990  # before: 1,990 x 5,000


def test_unique_items_over_objects_are_compared_by_hash_not_pairwise(comparisons: list[int]) -> None:
    gateway = gateway_for({"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}})
    assert call(gateway, {"xs": [{"i": i} for i in range(999)]}).outcome == "ok"
    assert comparisons[0] <= 999  # before: 999 x 998 / 2


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"enum": [1, "a", [1, {"k": None}]]}, [1.0, "a", [1.0, {"k": None}]], [True, "A", [True, {"k": None}]]),
        ({"enum": [False, {"a": 1, "b": [2]}]}, [False, {"b": [2.0], "a": 1}], [0, {"a": 1}]),
        (
            {"type": "array", "uniqueItems": True},
            [[1, True], [0, False], [{"a": 1}, {"a": 2}]],
            [[1, 1.0], [{"a": 1, "b": 2}, {"b": 2, "a": 1}]],
        ),
    ],
)
def test_json_equality_is_kept(schema: dict[str, Any], valid: list[Any], invalid: list[Any]) -> None:
    gateway = gateway_for({"type": "object", "properties": {"x": schema}})
    assert [call(gateway, {"x": value}).outcome for value in valid] == ["ok"] * len(valid)
    assert [call(gateway, {"x": value}).outcome for value in invalid] == ["invalid_arguments"] * len(invalid)


def test_a_subschema_declaring_its_own_draft_is_still_checked_safely() -> None:
    """jsonschema checks a subschema with `$schema` with its own validator class: Python's backtracking `re`, no
    budget. RE2 reads `[[:alpha:]]` as a class of letters, `re` as a set of punctuation and letters then `]`."""
    draft_07 = "http://json-schema.org/draft-07/schema#"
    word = {"$schema": draft_07, "type": "string", "pattern": "^[[:alpha:]]+$"}
    gateway = gateway_for({"type": "object", "properties": {"w": word}})
    assert call(gateway, {"w": "abc"}).outcome == "ok"
    assert call(gateway, {"w": "a1"}).outcome == "invalid_arguments"


def test_unevaluated_keywords_are_checked_in_the_checking_process_only() -> None:
    """jsonschema works out unevaluated properties by walking in-place subschemas without spending steps: only the
    worker's deadline bounds that walk, so such schemas are never checked in the serving process."""
    from toolrag.schemas.arguments import ArgumentChecker, measure

    arguments = {"a": 1}
    plain = ArgumentChecker({"type": "object", "properties": {"a": {"type": "integer"}}})
    unevaluated = ArgumentChecker(
        {"type": "object", "allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False}
    )
    assert plain.inline_errors(arguments, measure(arguments)) == []
    assert unevaluated.inline_errors(arguments, measure(arguments)) is None
    assert call(gateway_for(unevaluated.schema), arguments).outcome == "ok"
    assert call(gateway_for(unevaluated.schema), {"a": 1, "b": 2}).outcome == "invalid_arguments"


def test_a_draft_04_enum_of_objects_registers_without_pairwise_comparisons(comparisons: list[int]) -> None:
    """Draft-04's metaschema asks for unique enum values; jsonschema compared objects pairwise (5,000: 138 s)."""
    draft_04 = "http://json-schema.org/draft-04/schema#"
    enum = [{"i": i} for i in range(1_500)]
    gateway_for({"$schema": draft_04, "type": "object", "properties": {"x": {"enum": enum}}})
    assert comparisons[0] <= 1_500  # before: 1,500 x 1,499 / 2
    with pytest.raises(InvalidToolError, match="properties/x/enum: the array has non-unique elements"):
        gateway_for({"$schema": draft_04, "type": "object", "properties": {"x": {"enum": [{"i": 1}, {"i": 1}]}}})


# -- the review of issue 31's fixes: SSE line ends ------------------------------------------------------------------


class _Chunks:
    """An upstream's response body, delivered `size` bytes at a time."""

    def __init__(self, body: bytes, size: int) -> None:
        self.body, self.size = body, size

    async def __aiter__(self) -> Any:
        for start in range(0, len(self.body), self.size):
            yield self.body[start : start + self.size]

    async def aclose(self) -> None:
        pass


def _passed_on(body: bytes, size: int = 65_536) -> bytes:
    from toolrag.mcp.bounds import MessageBounds
    from toolrag.mcp.upstream import _BoundedStream

    async def read() -> bytes:
        stream = _BoundedStream(_Chunks(body, size), 8_000_000, 7, True, MessageBounds(64, 1000, 1000), "srv")
        return b"".join([chunk async for chunk in stream])

    return asyncio.run(read())


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_an_event_is_bounded_whatever_line_ends_it_uses(end: bytes) -> None:
    """The SDK's SSE parser ends lines at LF, CRLF or a lone CR; the gateway split events at LF only, so a server
    writing lone CRs passed a result of 120,000 content parts (and tool pages past the limit) unchecked."""
    parts = [{"type": "text", "text": "x"}] * 120_000
    message = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"content": parts}}, separators=(",", ":"))
    event = b"event: message" + end + b"data: " + message.encode() + end + b"id: 1" + end + end
    passed = _passed_on(event)
    assert len(passed) < 1000 and b"120,000 content parts" in passed and b'"id": 7' in passed


def test_a_crlf_split_between_chunks_is_one_line_end() -> None:
    """A CR at the end of one chunk and the LF that starts the next are one line end, not an empty line (which would
    end the event early): every split of a CRLF event passes on the same events."""
    message = json.dumps({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "hi"}]}})
    event = b"event: message\r\ndata: " + message.encode() + b"\r\n\r\n"
    expected = b"event: message\ndata: " + message.encode() + b"\n\n"
    assert {_passed_on(event, size) for size in range(1, len(event) + 1)} == {expected}


def test_a_message_the_gateway_cannot_parse_is_not_passed_on() -> None:
    from toolrag.mcp.bounds import MessageBounds

    bounds = MessageBounds(64, 1000, 1000)
    broken = b'{"jsonrpc": "2.0", "id": 9, "result": {"content": [' + b"{}," * 70 + b"}"  # not JSON, not deep
    refusal = bounds.refusal(broken)
    assert refusal is not None and b"not one JSON-RPC message" in refusal and b'"id": 9' in refusal


# -- the review of issue 31's fixes: what the cost bound did not see -----------------------------------------------


def test_an_anchor_declared_twice_is_refused_at_registration() -> None:
    """The validator resolves `#x` to one declaration and the cost and cycle checks read the other: a 2^22 tree
    behind a duplicate anchor was costed at 4 steps, and an in-place cycle through one was accepted."""
    levels = {f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}] * 2} for i in range(22)}
    levels["l22"] = {"type": "string"}
    schema = {
        "type": "object",
        "properties": {"x": {"$ref": "#x"}, "y": {"$anchor": "x", "type": "string"}},
        "$defs": {"costly": {"$anchor": "x", "$ref": "#/$defs/l0"}, **levels},
    }
    with pytest.raises(InvalidToolError, match=r"the anchor 'x' is declared at .* too"):
        gateway_for(schema)
    cycle = {"type": "object", "$defs": {"a": {"$anchor": "x", "anyOf": [{"$ref": "#x"}]}, "b": {"$anchor": "x"}}}
    with pytest.raises(InvalidToolError, match="the anchor 'x' is declared"):
        gateway_for(cycle)


def test_dependent_required_is_charged_for_every_name() -> None:
    """33,000 names under one key of `dependentRequired` were charged two steps, and one check took 0.34 s where
    the call runs: each name is now a step, so such a schema is refused at registration."""
    names = [f"n{i}" for i in range(20_000)]
    with pytest.raises(InvalidToolError, match=r"would take 20,0\d\d steps \(at most 10,000\)"):
        gateway_for({"type": "object", "properties": {"x": {"dependentRequired": {"a": names}}}})


def test_enum_sets_are_keyed_by_seeded_hashes() -> None:
    """Python hashes integers without a seed: 5,000 integers of one hash (equal modulo 2^61 - 1) built an enum's
    set in 0.41 s holding the interpreter. Numbers are keyed by their text, whose hash is seeded, and equal values
    keep one key (1 and 1.0)."""
    from toolrag.schemas.equality import canonical

    colliding = [1 + n * (2**61 - 1) for n in range(5_000)]
    assert len({hash(value) for value in colliding}) == 1
    assert len({hash(canonical(value)) for value in colliding}) > 4_900
    assert canonical(1) == canonical(1.0) != canonical(True) and canonical(10**20) == canonical(1e20)
    assert canonical(0.5) != canonical(1) and canonical(2**53 + 1) != canonical(float(2**53))


# -- issue 31, section 1: one caller's checks do not hold everyone's -----------------------------------------------


def test_another_callers_large_arguments_are_checked_next_however_many_one_caller_queued() -> None:
    """Large arguments are checked in one process for the whole server: a caller who kept costly checks queued made
    every other caller's large-argument call wait behind all of them (first come, first served) or be refused when
    the queue was full. Now each caller gets a small share of the waiting checks and callers are served in turn:
    another caller's check runs right after the one running, however many the flood sent."""
    from toolrag.runtime.gateway import ExecutionPolicy

    alternatives = [{"type": "string", "minLength": i} for i in range(200)]
    costly = {"type": "object", "properties": {"xs": {"type": "array", "items": {"anyOf": alternatives}}}}
    flood = json.dumps({"xs": ["x"] * 150_000})  # each check runs to its budget
    policy = ExecutionPolicy(check_seconds=1.0)

    def gateway(identity: str) -> ToolGateway:
        tool = Tool.parse({"name": "t.run", "description": "Run.", "input_schema": costly})
        principal = Principal(user=identity, tenant="t1", identity=json.dumps(["rule", identity]))
        return ToolGateway([tool], [], principal, lambda name: lambda **a: "ran", policy=policy)

    attacker, victim = gateway("mallory"), gateway("alice")

    async def scenario() -> tuple[CallResult, list[str], list[str]]:
        answered: list[str] = []

        async def attack() -> None:
            answered.append((await attacker.call(ToolCall("a", "t.run", flood), set())).message.content)

        attacks = [asyncio.create_task(attack()) for _ in range(12)]
        while not any("were not checked" in answer and "took longer" in answer for answer in answered):
            await asyncio.sleep(0.01)  # the flood is queued once the first of its checks was answered
        before = len(answered)
        result = await victim.call(ToolCall("v", "t.run", json.dumps({"xs": ["x"] * 3_000})), set())
        meanwhile = answered[before:]
        await asyncio.gather(*attacks)
        return result, meanwhile, answered

    result, meanwhile, answered = finishes(lambda: asyncio.run(scenario()))
    assert result.outcome == "ok", result.message.content  # before: waited behind the flood, or was refused
    assert len([answer for answer in meanwhile if "took longer" in answer]) <= 1, meanwhile  # only the running one
    assert any("wait for their answers" in answer for answer in answered), answered  # the flood's own share is small


def test_an_upstreams_costly_answers_do_not_hold_another_upstreams_check() -> None:
    """The HTTP transport's messages that are not plainly within bounds go to one checking process for the whole
    gateway: one upstream sending costly answers without pause held every other upstream's check behind them. Each
    upstream now waits its own turn: another's message is checked right after the one being checked."""
    from toolrag.mcp.bounds import BoundsChecker, MessageBounds

    bounds = MessageBounds(64, 1_000, 1_000)
    parts = [{"type": "text", "text": "x"}] * 120_000
    costly = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": parts}}).encode()
    # brackets in its text: not plainly within bounds by a count of them, so it is checked in the worker too
    calm = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "[" * 100}]}})
    checker = BoundsChecker()

    async def scenario() -> tuple[bytes | None, list[bytes | None], list[bytes | None]]:
        await checker.refusal("warm-up", bounds, calm.encode())  # the worker process has started
        answered: list[bytes | None] = []

        async def attack() -> None:
            answered.append(await checker.refusal("hostile", bounds, costly))

        attacks = [asyncio.create_task(attack()) for _ in range(12)]
        while not any(answer and b"120,000 content parts" in answer for answer in answered):
            await asyncio.sleep(0.001)  # the flood is queued once the first of its messages was checked
        before = len(answered)
        result = await checker.refusal("calm", bounds, calm.encode())
        meanwhile = answered[before:]
        await asyncio.gather(*attacks)
        return result, meanwhile, answered

    result, meanwhile, answered = finishes(lambda: asyncio.run(scenario()))
    assert result is None  # within bounds, and checked: not refused for the flood
    assert len([answer for answer in meanwhile if answer and b"120,000" in answer]) <= 1, len(meanwhile)
    assert any(answer and b"retry" in answer for answer in answered)  # the flood's own share is small


def test_a_caller_that_stops_waiting_gives_up_its_place_and_no_turn_is_lost() -> None:
    """A client that disconnects while its check waits (its task cancelled) leaves the queue; a turn given to it
    just as it was cancelled is passed on: the checker never stays taken by no one."""
    from toolrag.turns import Crowded, Turns

    turns = Turns(per_caller=1, overall=8)
    served: list[str] = []

    async def take(caller: str, hold: asyncio.Event | None = None) -> None:
        async with turns.turn(caller):
            served.append(caller)
            if hold is not None:
                await hold.wait()

    async def scenario() -> None:
        hold = asyncio.Event()
        running = asyncio.create_task(take("a", hold))
        while not served:
            await asyncio.sleep(0)
        gone, waiting = asyncio.create_task(take("b")), asyncio.create_task(take("c"))
        await asyncio.sleep(0)  # both are waiting now
        with pytest.raises(Crowded):
            await take("c")  # its one waiting place is taken
        gone.cancel()
        hold.set()
        await asyncio.gather(running, waiting)
        assert gone.cancelled()
        await asyncio.wait_for(take("d"), 10)  # the checker is free again

    asyncio.run(scenario())
    assert served == ["a", "c", "d"]
