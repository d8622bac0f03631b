"""Load on the HTTP API and the MCP gateway over a 10k-tool registry, on both stores, and a memory soak.

    python benchmarks/load.py [--tools 10000] [--clients 10 100 500] [--seconds 15] [--soak-minutes 10]

Everything runs on loopback, in separate processes: `toolrag api serve` and `toolrag mcp serve --transport http`
over the same registry, each with a real upstream MCP server (mcp-server-time, over stdio) for calls. For each store
(SQLite, then PostgreSQL: the registry copied into an embedded server) and each number of concurrent clients, the
clients send searches for --seconds (`POST /search`; MCP `find_tools`), then tool calls (`POST /execute`; MCP
`call_tool` of `time.get_current_time`). Reported: requests per second, p50/p99 latency, errors, and the servers'
memory (RSS, with their upstream). Then the soak: the API on SQLite at 50 clients, searches and calls mixed, for
--soak-minutes, memory sampled every 15 s. The load generator shares the machine's 2 cores with the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
from stores import postgres
from synthetic import synthetic_requests, synthetic_tools

TOOLRAG = [sys.executable, "-m", "toolrag"]
TOKEN = "load-agent-token-0123456789"
TIME_TOOL = "time.get_current_time"
CALL_ARGUMENTS = {"timezone": "Europe/Kyiv"}
REQUESTS = synthetic_requests(2000)
# Every simulated client uses the one token: lift the per-token limit on requests in flight (access/guard.py).
ONE_TOKEN_FOR_ALL_CLIENTS = "[http]\nmax_requests_per_principal = 10000\n"


@dataclass
class Phase:
    target: str
    store: str
    operation: str
    clients: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None
    rss_mb: float = 0.0

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies) or [0.0]
        return {
            "target": self.target,
            "store": self.store,
            "operation": self.operation,
            "clients": self.clients,
            "requests": len(self.latencies),
            "per_second": round(len(self.latencies) / self.seconds, 1) if self.seconds else 0.0,
            "p50_ms": round(ordered[len(ordered) // 2], 1),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
            "errors": self.errors,
            "first_error": self.first_error,
            "rss_mb": round(self.rss_mb, 1),
        }


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_mb(pid: int) -> float:
    """Resident memory of a server and everything it started (its stdio upstreams)."""
    parent = psutil.Process(pid)
    total = 0
    for process in [parent, *parent.children(recursive=True)]:
        with suppress(psutil.Error):
            total += process.memory_info().rss
    return total / 2**20


@contextmanager
def server(command: list[str], probe: str, headers: dict[str, str] | None = None) -> Iterator[int]:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command[3:5]} exited: {process.stderr.read().decode() if process.stderr else ''}")
            with suppress(httpx.HTTPError):
                if httpx.get(probe, headers=headers, timeout=2).status_code < 500:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{probe} did not answer")
            time.sleep(0.5)
        yield process.pid
    finally:
        family = [*psutil.Process(process.pid).children(recursive=True), psutil.Process(process.pid)]
        for member in family:
            with suppress(psutil.Error):
                member.kill()
        psutil.wait_procs(family, timeout=10)


Operation = Callable[[Any, random.Random], Awaitable[None]]


async def drive(phase: Phase, clients: list[Any], operation: Operation, seconds: float) -> None:
    """Each client sends one request after another for `seconds`, after a few unmeasured requests (the server's
    first requests load its embedding model and build its in-memory index)."""
    warm = random.Random(0)
    for _ in range(3):
        with suppress(Exception):
            await operation(clients[0], warm)
    stop = time.monotonic() + seconds

    async def worker(client: Any, seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                await operation(client, rng)
                phase.latencies.append((time.perf_counter() - started) * 1000)
            except Exception as exc:  # every failure is counted and the first one reported
                phase.errors += 1
                phase.first_error = phase.first_error or f"{type(exc).__name__}: {exc}"[:300]

    started = time.monotonic()
    await asyncio.gather(*(worker(client, n) for n, client in enumerate(clients)))
    phase.seconds = time.monotonic() - started


async def api_search(client: httpx.AsyncClient, rng: random.Random) -> None:
    answer = await client.post("/search", json={"query": rng.choice(REQUESTS)})
    answer.raise_for_status()


async def api_call(client: httpx.AsyncClient, rng: random.Random) -> None:
    answer = await client.post("/execute", json={"name": TIME_TOOL, "arguments": CALL_ARGUMENTS})
    answer.raise_for_status()
    if answer.json()["outcome"] != "ok":
        raise RuntimeError(answer.json()["content"][:200])


async def mcp_search(client: Any, rng: random.Random) -> None:
    result = await client.call_tool("find_tools", {"query": rng.choice(REQUESTS)})
    if result.is_error:
        raise RuntimeError(str(result.content)[:200])


async def mcp_call(client: Any, rng: random.Random) -> None:
    result = await client.call_tool("call_tool", {"name": TIME_TOOL, "arguments": CALL_ARGUMENTS})
    if result.is_error:
        raise RuntimeError(str(result.content)[:200])


async def api_phases(
    url: str, pid: int, store: str, levels: list[int], seconds: float, client_per_caller: bool = False
) -> list[Phase]:
    """One httpx client for all callers (its pool holds every connection), or with `client_per_caller` one each, as
    separate agents would have: on the same two cores, a pool of hundreds of connections costs the load generator
    more per request than the server (docs/benchmarks.md "Many clients")."""
    phases = []
    limits = httpx.Limits(max_connections=max(levels), max_keepalive_connections=max(levels))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with AsyncExitStack() as stack:
        shared = await stack.enter_async_context(
            httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=120)
        )
        for clients in levels:
            async with AsyncExitStack() as own:
                callers = (
                    [
                        await own.enter_async_context(httpx.AsyncClient(base_url=url, headers=headers, timeout=120))
                        for _ in range(clients)
                    ]
                    if client_per_caller
                    else [shared] * clients
                )
                for name, operation in (("search", api_search), ("call_tool", api_call)):
                    phase = Phase("HTTP API", store, name, clients)
                    await drive(phase, callers, operation, seconds)
                    phase.rss_mb = rss_mb(pid)
                    phases.append(phase)
                    print(json.dumps(phase.summary()), file=sys.stderr, flush=True)
    return phases


async def mcp_phases(url: str, pid: int, store: str, levels: list[int], seconds: float) -> list[Phase]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    phases = []
    for clients in levels:
        async with AsyncExitStack() as stack:
            sessions = []
            for _ in range(clients):  # one MCP session per client, as separate agents would hold
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
                sessions.append(await stack.enter_async_context(Client(streamable_http_client(url, http_client=http))))
            for name, operation in (("find_tools", mcp_search), ("call_tool", mcp_call)):
                phase = Phase("MCP gateway", store, name, clients)
                await drive(phase, sessions, operation, seconds)
                phase.rss_mb = rss_mb(pid)
                phases.append(phase)
                print(json.dumps(phase.summary()), file=sys.stderr, flush=True)
    return phases


def configs(folder: Path, store: str) -> tuple[Path, Path]:
    time_server = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    gateway = folder / f"gateway-{abs(hash(store))}.toml"
    gateway.write_text(
        f"store = {json.dumps(store)}\napprove_new_tools = true\n\n[servers.time]\n"
        f"command = {json.dumps(time_server)}\n\n[principals.agent]\ntoken = {json.dumps(TOKEN)}\n"
        'scopes = ["*"]\n\n' + ONE_TOKEN_FOR_ALL_CLIENTS,
        encoding="utf-8",
    )
    api = folder / f"api-{abs(hash(store))}.toml"
    api.write_text(
        f"store = {json.dumps(store)}\nmcp_config = {json.dumps(str(gateway))}\n\n[tokens.agent]\n"
        f'token = {json.dumps(TOKEN)}\nrole = "agent"\nscopes = ["*"]\n\n' + ONE_TOKEN_FOR_ALL_CLIENTS,
        encoding="utf-8",
    )
    return gateway, api


def measure_store(folder: Path, store: str, label: str, args: argparse.Namespace) -> list[Phase]:
    gateway, api = configs(folder, store)
    phases = []
    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    command = [*TOOLRAG, "mcp", "serve", "--config", str(gateway), "--transport", "http", "--port", str(port)]
    if "mcp" in args.targets:
        with server(command, mcp_url, {"Authorization": f"Bearer {TOKEN}"}) as pid:
            phases += asyncio.run(mcp_phases(mcp_url, pid, label, args.clients, args.seconds))
    if "api" not in args.targets:
        return phases
    port = free_port()
    with server(
        [*TOOLRAG, "api", "serve", "--config", str(api), "--port", str(port)], f"http://127.0.0.1:{port}/docs"
    ) as pid:
        phases += asyncio.run(
            api_phases(f"http://127.0.0.1:{port}", pid, label, args.clients, args.seconds, args.api_client_per_caller)
        )
    return phases


async def soak(url: str, pid: int, minutes: float, clients: int = 50) -> dict[str, Any]:
    samples: list[tuple[float, float]] = []
    phase = Phase("HTTP API", "sqlite", "soak (search + call_tool)", clients)

    async def mixed(client: httpx.AsyncClient, rng: random.Random) -> None:
        await (api_search if rng.random() < 0.7 else api_call)(client, rng)

    async def sample() -> None:
        started = time.monotonic()
        while time.monotonic() - started < minutes * 60 + 1:
            samples.append((round(time.monotonic() - started, 1), round(rss_mb(pid), 1)))
            await asyncio.sleep(15)

    limits = httpx.Limits(max_connections=clients)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=120) as client:
        await asyncio.gather(drive(phase, [client] * clients, mixed, minutes * 60), sample())
    after_warmup = [mb for at, mb in samples if at >= 60] or [samples[-1][1]]
    return {
        **phase.summary(),
        "rss_samples": samples,
        "rss_after_first_minute_mb": after_warmup[0],
        "rss_end_mb": samples[-1][1],
        "rss_max_mb": max(mb for _, mb in samples),
        "growth_after_first_minute_pct": round(100 * (samples[-1][1] - after_warmup[0]) / after_warmup[0], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--soak-minutes", type=float, default=10.0)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--targets", nargs="+", default=["mcp", "api"], choices=["mcp", "api"])
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--api-client-per-caller", action="store_true", help="an httpx client per API caller")
    parser.add_argument(
        "--registry", type=Path, help="a copy of this SQLite registry instead of importing --tools synthetic tools"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="toolrag-load-"))
    db = folder / "registry.db"
    if args.registry:
        shutil.copyfile(args.registry, db)
    else:
        catalog = folder / "catalog.jsonl"
        catalog.write_text("\n".join(t.model_dump_json() for t in synthetic_tools(args.tools)), encoding="utf-8")
        subprocess.run([*TOOLRAG, "import", str(catalog), "--store", str(db)], check=True, capture_output=True)
    phases = measure_store(folder, str(db), "sqlite", args) if "sqlite" in args.stores else []
    if "postgres" in args.stores:
        with postgres(args.postgres) as url:
            target = f"{url}{'&' if '?' in url else '?'}schema=load"
            subprocess.run([*TOOLRAG, "store", "copy", str(db), target], check=True, capture_output=True)
            phases += measure_store(folder, target, "postgres", args)
    soaked = None
    if args.soak_minutes > 0:
        _, api = configs(folder, str(db))
        port = free_port()
        command = [*TOOLRAG, "api", "serve", "--config", str(api), "--port", str(port)]
        with server(command, f"http://127.0.0.1:{port}/docs") as pid:
            soaked = asyncio.run(soak(f"http://127.0.0.1:{port}", pid, args.soak_minutes))
    print(json.dumps({"phases": [p.summary() for p in phases], "soak": soaked}), file=sys.stderr)
    print("| target | store | operation | clients | requests/s | p50 ms | p99 ms | errors | server RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in phases:
        s = p.summary()
        print(
            f"| {s['target']} | {s['store']} | {s['operation']} | {s['clients']} | {s['per_second']} | {s['p50_ms']} "
            f"| {s['p99_ms']} | {s['errors']} | {s['rss_mb']} |"
        )
    if soaked:
        print(
            f"\nSoak: {soaked['requests']} requests in {args.soak_minutes:g} min at {soaked['clients']} clients, "
            f"{soaked['per_second']}/s, p50 {soaked['p50_ms']} ms, p99 {soaked['p99_ms']} ms, {soaked['errors']} "
            f"errors; RSS {soaked['rss_after_first_minute_mb']} MB after the first minute, {soaked['rss_end_mb']} MB "
            f"at the end (max {soaked['rss_max_mb']}): {soaked['growth_after_first_minute_pct']}%"
        )


if __name__ == "__main__":
    main()
