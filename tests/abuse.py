"""The hostile inputs of the second and third security reviews (issue 25, findings 2, 4 and 16; issue 31, section 1:
schemas that set the cost), shared by the standing test (tests/test_abuse.py) and the benchmark
(benchmarks/abuse.py): each is the `arguments` of a call of one of the fixture server's hostile tools
(tests/mcp_fixture_server.py, HOSTILE_TOOLS) or of the same tools registered in an API's registry."""

from __future__ import annotations

import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

from toolrag import Tool, ToolRegistry

from .conftest import SAMPLE_TOOLS
from .mcp_fixture_server import HOSTILE_TOOLS, anyof_chain
from .mcp_support import (
    TOOLRAG,
    free_port,
    http_client,
    http_gateway,
    python_server,
    stop_tree,
    wait_until_listening,
    write_config,
)


def nested(depth: int, width: int) -> Any:
    value: Any = list(range(width))
    for _ in range(depth):
        value = [value, {"k": "v"}]
    return value


# Issue 31, section 1, at the most registration allows: references multiplying to 2^11 subschemas for a 10-byte
# argument, a 5,000-value enum over 1,990 valid values, uniqueItems over 999 objects, a 60 KB string against a
# pattern of 1,804 RE2 instructions.
COST_ATTACKS: dict[str, tuple[str, dict[str, Any]]] = {
    "anyOf references": ("refs", {"x": "no"}),
    "long enum": ("pick", {"xs": ["v4999"] * 1990}),
    "uniqueItems over objects": ("distinct", {"xs": [{"i": i} for i in range(999)]}),
    "pattern automaton": ("automaton", {"code": "ab" * 30_000}),
}

ATTACKS: dict[str, tuple[str, dict[str, Any]]] = {
    # finding 2: a catastrophic pattern and an argument that makes a backtracking engine take 2^40 steps
    "redos": ("match", {"code": "a" * 40 + "!"}),
    # finding 4: a deeply nested argument where a string is expected, whose errors were pretty-printed whole
    "error rendering": ("label", {"field": nested(28, 400), "values": [nested(20, 200)] * 3}),
    # finding 16: 100,000 integers where strings are expected, and 50,000 keys
    "100k values": ("label", {"values": list(range(100_000))}),
    "50k keys": ("label", {"field": "x", **{f"k{i}": i for i in range(50_000)}}),
    **COST_ATTACKS,
}
# The 2^16 anyOf schema of issue 31, stored before registration refused it: checked within the budget.
STORED_ATTACKS = {"anyOf references, stored before the bound": ("refs16", {"x": "no"})}


ATTACKER, VICTIM = "attacker-token-0123456789", "victim-token-0123456789"
PROBES = 25


def median_ms(probe: Callable[[int], object], count: int = PROBES) -> float:
    timings = []
    for number in range(count):
        started = time.perf_counter()
        probe(number)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


@contextmanager
def attacking(
    send: Callable[[str, dict[str, Any]], str], threads: int = 2, attacks: dict[str, Any] = ATTACKS
) -> Iterator[list[str]]:
    """Attackers sending every attack in turn, without pause, until the block ends; yields the answers' outcomes."""
    outcomes: list[str] = []
    stop = threading.Event()

    def attack() -> None:
        while not stop.is_set():
            for tool, arguments in attacks.values():
                outcomes.append(send(tool, arguments))

    workers = [threading.Thread(target=attack, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 120
    while not outcomes:  # the attack is under way once an answer came back
        assert time.monotonic() < deadline, "no attack was answered within 120 s: the server is stalled"
        time.sleep(0.05)
    try:
        yield outcomes
    finally:
        stop.set()
        for worker in workers:
            worker.join(120)


def measure_api(folder: Path, probes: int = PROBES) -> dict[str, Any]:
    """`toolrag api serve` over a registry with the hostile tools: the victim's /health and /search latency (medians,
    ms) without and under attack, and the attacks' outcomes."""
    with ToolRegistry(folder / "tools.db") as registry:
        hostile = [
            Tool.parse({"name": f"attack.{n}", "description": d, "input_schema": s}) for n, d, s in HOSTILE_TOOLS
        ]
        # a copy skips validation: the schema as an older release registered it
        stored = hostile[0].model_copy(update={"name": "attack.refs16", "input_schema": anyof_chain(16)})
        registry.register_many([*SAMPLE_TOOLS, *hostile, stored])
    tokens = f'[tokens.attacker]\ntoken = "{ATTACKER}"\nrole = "agent"\n[tokens.victim]\ntoken = "{VICTIM}"\n'
    (folder / "api.toml").write_text(f'store = "tools.db"\n[schedule]\nconsistency = "off"\nreport = "off"\n{tokens}')
    port = free_port()
    command = [TOOLRAG, "api", "serve", "--config", str(folder / "api.toml"), "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_listening(f"{url}/health", process)
        victim = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {VICTIM}"}, timeout=60)
        attacker = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ATTACKER}"}, timeout=120)

        def send(tool: str, arguments: dict[str, Any]) -> str:
            answer = attacker.post("/execute", json={"name": f"attack.{tool}", "arguments": arguments})
            return str(answer.json().get("outcome"))

        probes_of = {
            "health": lambda number: victim.get("/health"),
            "search": lambda number: victim.post("/search", json={"query": f"weather in city number {number}"}),
        }
        assert victim.get("/health").status_code == 200
        quiet = {name: median_ms(probe, probes) for name, probe in probes_of.items()}
        with attacking(send, attacks={**ATTACKS, **STORED_ATTACKS}) as outcomes:
            loaded = {name: median_ms(probe, probes) for name, probe in probes_of.items()}
        return {"quiet_ms": quiet, "attacked_ms": loaded, "outcomes": sorted(set(outcomes))}
    finally:
        stop_tree(process.pid)


def measure_gateway(folder: Path, probes: int = PROBES) -> dict[str, Any]:
    """`toolrag mcp serve --transport http` before a server listing the hostile tools: the victim's find_tools
    latency (median, ms) without and under attack, and the attacks' answers."""
    server = python_server("tests.mcp_fixture_server", FIXTURE_HOSTILE="1")
    principals = {"attacker": {"token": ATTACKER, "scopes": ["*"]}, "victim": {"token": VICTIM, "scopes": ["*"]}}
    config = write_config(folder, {"shop": server}, principals, approve_new_tools="always")
    with http_gateway(config) as url:

        def send(tool: str, arguments: dict[str, Any]) -> str:
            async def one() -> str:
                async with http_client(url, ATTACKER, timeout=120) as client:
                    answer = await client.call_tool("call_tool", {"name": f"shop.{tool}", "arguments": arguments})
                    return answer.content[0].text  # type: ignore[union-attr]

            return anyio.run(one)

        async def victim_latencies() -> tuple[float, float]:
            async with http_client(url, VICTIM, timeout=120) as client:

                async def find(number: int = 0) -> None:  # another request each time: no answer from the cache
                    await client.call_tool("find_tools", {"query": f"look up the status of my order {number}"})

                async def median_of(count: int = probes) -> float:
                    timings = []
                    for number in range(count):
                        started = time.perf_counter()
                        await find(number + int(time.monotonic_ns() % 1_000_000) * 100)
                        timings.append((time.perf_counter() - started) * 1000)
                    return statistics.median(timings)

                await find()
                quiet = await median_of()
                with attacking(send) as outcomes:
                    loaded = await median_of()
                return quiet, loaded, outcomes

        quiet, loaded, outcomes = anyio.run(victim_latencies)
        refused = [text for text in outcomes if "invalid arguments" in text]
        return {"quiet_ms": {"find_tools": quiet}, "attacked_ms": {"find_tools": loaded}, "refused": len(refused)}
