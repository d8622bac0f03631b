"""The hostile upstreams of the third security review (issue 31, section 1), replayed against the HTTP gateway,
shared by the standing test (tests/test_abuse.py) and the benchmark (benchmarks/abuse.py --only upstreams):
another principal's find_tools latency (median, ms) quiet and while an upstream attacks, measured in one run.

- result parts: an attacker calls a tool whose result is 120,000 one-character content parts (under the size
  cap), without pause, from two threads;
- pagination: a server whose tools/list never ends, listed again and again (it is retried every second).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

from .mcp_support import http_client, http_gateway, python_server, write_config

ATTACKER, VICTIM, ADMIN = "attacker-token-0123456789", "victim-token-0123456789", "admin-token-0123456789"
PARTS = 120_000


def hostile(mode: str) -> dict[str, Any]:
    return python_server("tests.mcp_hostile_server", HOSTILE_MODE=mode)


def gateway_config(folder: Path, hostile_servers: dict[str, dict[str, Any]]) -> Path:
    principals = {
        "attacker": {"servers": list(hostile_servers), "token": ATTACKER},
        "victim": {"servers": ["shop"], "token": VICTIM},
        "admin": {"scopes": ["*"], "token": ADMIN, "role": "admin"},
    }
    servers = {"shop": python_server("tests.mcp_fixture_server"), **hostile_servers}
    return write_config(folder, servers, principals, max_backoff_seconds=1, start_deadline_seconds=60)


def victim_median_ms(url: str, probes: int) -> float:
    """The victim's find_tools latency, median of `probes` requests, each another query (no answer cached)."""

    async def measure() -> float:
        async with http_client(url, VICTIM, timeout=300) as client:
            await client.call_tool("find_tools", {"query": "look up the status of my order"})  # waits for readiness
            timings = []
            for number in range(probes):
                query = f"look up the status of my order {number + time.monotonic_ns() % 1_000_000 * 100}"
                started = time.perf_counter()
                await client.call_tool("find_tools", {"query": query})
                timings.append((time.perf_counter() - started) * 1000)
            return statistics.median(timings)

    return anyio.run(measure)


@contextmanager
def attacking(url: str, threads: int = 2) -> Iterator[list[str]]:
    """Attackers calling `bulk.parts` for 120,000 parts without pause until the block ends; yields the answers."""
    answers: list[str] = []
    stop = threading.Event()

    def attack() -> None:
        async def loop() -> None:
            async with http_client(url, ATTACKER, timeout=300) as client:
                while not stop.is_set():
                    result = await client.call_tool("call_tool", {"name": "bulk.parts", "arguments": {"count": PARTS}})
                    answers.append(" ".join(getattr(part, "text", "") for part in result.content[:1]))

        anyio.run(loop)

    workers = [threading.Thread(target=attack, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    wait_for(lambda: bool(answers), "no attack was answered: the gateway is stalled")
    try:
        yield answers
    finally:
        stop.set()
        for worker in workers:
            worker.join(300)


def wait_for(condition: Callable[[], bool], failure: str, tries: int = 2400) -> None:
    for _ in range(tries):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(failure)


def server_health(url: str, name: str) -> dict[str, Any]:
    answer = httpx.get(url.replace("/mcp", "/health"), headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60)
    return dict(next(s for s in answer.json()["servers"] if s["server"] == name))


def measure_upstreams(folder: Path, probes: int = 25) -> dict[str, Any]:
    """The victim's find_tools latency: quiet, while an attacker asks for 120,000 parts, and beside a server whose
    tool list never ends (another gateway, in the same run); what the attacks were answered."""
    (folder / "parts").mkdir()
    (folder / "pages").mkdir()
    with http_gateway(gateway_config(folder / "parts", {"bulk": hostile("")})) as url:
        quiet = victim_median_ms(url, probes)
        with attacking(url) as answers:
            parts = victim_median_ms(url, probes)
        refused = sum("max_result_parts" in answer for answer in answers)
    with http_gateway(gateway_config(folder / "pages", {"endless": hostile("pages")})) as url:
        wait_for(lambda: "error" in server_health(url, "endless"), "the endless listing was never refused")
        pages = victim_median_ms(url, probes)
        endless = server_health(url, "endless")
    return {
        "quiet_ms": {"find_tools": quiet},
        "attacked_ms": {"result parts": parts, "endless pages": pages},
        "parts_answers": len(answers),
        "parts_refused": refused,
        "endless_server": endless,
    }
