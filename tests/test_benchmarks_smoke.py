"""Every benchmark script runs to completion on a tiny input and prints its figures.

The figures themselves are not checked (on a few requests they mean nothing): what breaks here is a script that no
longer runs against the package, as when `score_query` gained an argument the scripts did not pass. Each script runs
as its own process, as a person runs it, with arguments that keep it to seconds; its temporary files (TMPDIR) and
outputs go to a pytest folder, and PostgreSQL, the npm MCP servers and the quick start registry are the ones the
rest of the suite uses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from .conftest import BENCH, copy_registry

ROOT = Path(__file__).resolve().parents[1]
# Imported by the scripts, never run themselves.
HELPERS = {"benchmarks/synthetic.py", "benchmarks/logistic.py", "benchmarks/compare/peers.py"}
TIMEOUT = 600  # seconds per run: a tiny run takes under a minute, but the machine may be shared and busy


@dataclass(frozen=True)
class Smoke:
    """How to run a script on a tiny input: one or more runs, in order, each a list of arguments ({tmp}, {postgres}
    and {quickstart} are filled in), and a pattern the last run's output must match."""

    runs: tuple[tuple[str, ...], ...]
    shows: str
    bench: bool = False  # reads the shared benchmark sets


def once(*args: str, shows: str, bench: bool = False) -> Smoke:
    return Smoke((args,), shows, bench)


SCRIPTS: dict[str, Smoke] = {
    "benchmarks/ablation.py": once(
        *("--sets", "metatool-multilingual", "--requests", "4", "--latency-requests", "4"),
        "--text-variants",  # none: each variant indexes the set again
        shows=r"\| \*\*default\*\* \| [01]\.\d{3} \|",
        bench=True,
    ),
    "benchmarks/abuse.py": once(
        # One server (the gateway); tests/test_abuse.py runs what `untrusted` measures.
        *("--tools", "20", "--seconds", "1", "--only", "long-query", "sessions"),
        shows=r'"sessions one token opened before refusal": \d+',
    ),
    "benchmarks/absent.py": Smoke(
        (
            # A shared set and the generated catalog: fit leaves each out in turn; measure runs the real search.
            ("collect", "--catalogs", "metatool", "graph", "--requests", "4", "--out", "{tmp}/a.json"),
            ("fit", "--out", "{tmp}/a.json"),
            ("measure", "--catalogs", "graph", "--requests", "3", "--out", "{tmp}/a.json"),
        ),
        shows=r"graph: language n .*\n  en +3 ",
        bench=True,
    ),
    "benchmarks/written_examples.py": once(
        "--per-tool", "1", "--limit", "7", shows=r"small talk given a tool: ", bench=True
    ),
    "benchmarks/beyond_100k.py": once(
        *("--sizes", "2000", "--anchors", "20", "--queries", "5"), shows=r'"recall_at_10": [01]\.?\d*'
    ),
    "benchmarks/bulk_writes.py": once(
        # Past BULK_ROWS (tools + vectors): the COPY path and the index built afterwards.
        *("--tools", "600", "--postgres", "{postgres}"),
        shows=r'"row_by_row_over_copy": \d',
    ),
    "benchmarks/catalog_tokens.py": once(shows=r"\| all \| \d+ \| \d+ / \d+ / \d+ \|", bench=True),
    "benchmarks/compare/run.py": Smoke(
        # toolrag alone: each peer indexes the set again (tens of seconds here), and most need the `compare` extra,
        # which the test extra leaves out. They all ran on this input, with the extra, when this test was written.
        # Then seal-tools with its catalog cut (--seal-catalog), as graph-tool-call is measured on it.
        (
            ("--sets", "metatool", "--metatool-limit", "6", "--systems", "toolrag"),
            ("--sets", "seal-tools", "--seal-limit", "4", "--seal-catalog", "40", "--systems", "toolrag"),
        ),
        shows=r"\| toolrag \(default\) \| [01]\.\d{3} \|",
        bench=True,
    ),
    "benchmarks/cut.py": once(
        # Two sets with the same tools, embedded once: each is left out and fitted on the other.
        *("--catalogs", "metatool", "metatool-multilingual", "--requests", "6", "--out", "{tmp}/cut.json"),
        shows=r"metatool-multilingual left out: quantile 0\.\d+",
        bench=True,
    ),
    "benchmarks/confidence.py": Smoke(
        (
            # Two sets (fit leaves each out in turn) with the same tools, embedded once.
            ("collect", "--sets", "metatool", "metatool-multilingual", "--requests", "4", "--out", "{tmp}/c.json"),
            ("fit", "--out", "{tmp}/c.json"),
        ),
        shows=r"MODEL = RelevanceModel\(weights=\(",
        bench=True,
    ),
    "benchmarks/faults.py": once(
        *("--runs", "1", "--tools", "30", "--rebuild-tools", "10", "--rerun-every", "1", "--postgres", "{postgres}"),
        shows=r"\| migration \| 1 \| [01] \|",
    ),
    "benchmarks/fusion.py": Smoke(
        (
            # Two sets with the same tools: each is left out in turn.
            (
                "collect",
                "--sets",
                "metatool-multilingual",
                "metatool-multilingual-xl",
                "--requests",
                "6",
                "--out",
                "{tmp}/f.json",
            ),
            ("fit", "--out", "{tmp}/f.json"),
        ),
        shows=r"\| metatool-multilingual \| held-out \| \d+ \| [01]\.\d{3} \|",
        bench=True,
    ),
    "benchmarks/graph_catalog.py": once(
        "{tmp}/graph", "--providers", "1", shows=r"\d+ tools, \d+ requests; needed set"
    ),
    "benchmarks/inference_cost.py": once(
        *("--producers", "2", "--fields", "8", "--consumers", "1", "--parameters", "4"),
        shows=r"one inference: [\d.]+ s CPU \([\d.]+ s wall\), [\d,]+ pairs scored",
    ),
    "benchmarks/inferred_relations.py": once(shows=r"floor 0\.\d+: \d+ edges, \d+ right: precision", bench=True),
    "benchmarks/load.py": once(
        *("--tools", "20", "--clients", "2", "--seconds", "1", "--soak-minutes", "0"),
        *("--stores", "postgres", "--postgres", "{postgres}"),
        shows=r"\| HTTP API \| postgres \| search \| 2 \| [\d.]+ \|",
    ),
    "benchmarks/mcp_overhead.py": once("--calls", "3", shows=r"\| http \| [\d.]+ \|"),
    "benchmarks/native_search.py": once(
        "--store", "{quickstart}", shows=r"\| openai-responses \| native \+ toolrag search \| \d+ \|"
    ),
    "benchmarks/outages.py": once(
        *("--tools", "20", "--clients", "2", "--seconds", "3"), shows=r"### Database restarted under the HTTP API"
    ),
    "benchmarks/poisoning.py": once(shows=r"held-out +detected [01]\.\d{3}"),
    "benchmarks/reformulation.py": once(
        *("--sets", "metatool-multilingual", "--requests", "6", "--small-talk", "6"),
        shows=r"\| metatool-multilingual \| with a typo \| expand \(default\) \| [01]\.\d{3} \|",
        bench=True,
    ),
    "benchmarks/retrieval.py": once(
        *("--sets", "metatool-multilingual", "--limit", "6", "--models", "minilm", "--models-limit", "6"),
        shows=r"\| minilm \| [01]\.\d{3} \|",
        bench=True,
    ),
    "benchmarks/runtime_overhead.py": once("--runs", "3", "--sizes", "10", shows=r"\| 10 \| discover \| [\d.]+ \|"),
    "benchmarks/scale.py": once("--sizes", "30", "--queries", "3", shows=r"\| 30 \| [\d.]+ \|"),
    "benchmarks/search_cost.py": once(
        "--graph", "--providers", "1", "--requests", "4", shows=r'"search / plain dense": [\d.]+'
    ),
    "benchmarks/small_catalogs.py": once(
        *("--set", "metatool-multilingual", "--seeds", "1", "--size", "10"),
        shows=r"\| en \| \d+ \| [01]\.\d{3} \| [01]\.\d{3} \|",
        bench=True,
    ),
    "benchmarks/snapshot.py": once(
        *("--tools", "50", "--changes", "2", "--reopens", "1", "--stores", "postgres", "--postgres", "{postgres}"),
        shows=r'"change_p50_ms": [\d.]+',
    ),
    "benchmarks/startup.py": once("--runs", "1", "--store", "{quickstart}", shows=r'"cold toolrag search": \{'),
    "benchmarks/stores.py": once(
        *("--sizes", "30", "--queries", "3", "--candidates", "10", "--postgres", "{postgres}"),
        *("--cache", "{tmp}/vectors.npz"),
        shows=r"\| 30 \| PostgreSQL, 10 HNSW candidates \|",
    ),
    "benchmarks/whole_tasks.py": once(
        "--providers", "1", "--half", "tune", "--past-tasks", shows=r"delivered whole set: [01]\.\d+"
    ),
    "benchmarks/tool_text.py": once(
        *("--sets", "metatool", "--metatool-limit", "6", "--variants", "description only"),
        shows=r"\| description only \| [01]\.\d{3} \|",
        bench=True,
    ),
}


def test_every_script_has_a_smoke_run() -> None:
    """A new script fails here until it gets an entry above."""
    found = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "benchmarks").rglob("*.py"))]
    assert sorted(set(found) - HELPERS) == sorted(SCRIPTS)
    for helper in sorted(HELPERS):
        assert helper in found, f"{helper} is gone: take it out of HELPERS"
        assert "__main__" not in (ROOT / helper).read_text(encoding="utf-8"), f"{helper} is a script now"


@pytest.fixture
def database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A new, empty database on the suite's PostgreSQL: the scripts name their own schemas, some always the same."""
    import psycopg

    url: str = request.getfixturevalue("postgres_url")
    name = f"smoke_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


def placeholders(request: pytest.FixtureRequest, script: str, folder: Path) -> dict[str, str]:
    """What the script's arguments name, set up only when they name it."""
    text = " ".join(arg for run in SCRIPTS[script].runs for arg in run)
    values = {"tmp": str(folder)}
    if "{postgres}" in text:
        values["postgres"] = request.getfixturevalue("database")
    if "{quickstart}" in text:
        store, _ = request.getfixturevalue("quickstart")
        values["quickstart"] = str(copy_registry(store, folder))  # the scripts search it and log what they did
    return values


def run(script: str, args: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    # TMPDIR: the scripts' own temporary folders land in the pytest folder too (some never remove theirs).
    env = {**os.environ, "TMPDIR": str(folder)}
    command = [sys.executable, script, *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.parametrize(
    "script",
    [pytest.param(script, marks=pytest.mark.slow) if SCRIPTS[script].bench else script for script in sorted(SCRIPTS)],
)
def test_script_runs_on_a_tiny_input(
    script: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> None:
    smoke = SCRIPTS[script]
    if smoke.bench and not BENCH.is_dir():
        pytest.skip(f"{BENCH} is not here")
    if script == "benchmarks/mcp_overhead.py":
        from .mcp_support import node_bin

        node_bin()  # the npm servers it calls, installed as the gateway tests install them
    # A short folder name: outages.py starts PostgreSQL, whose socket path must stay under 108 bytes.
    folder = tmp_path_factory.mktemp("run")
    values = placeholders(request, script, folder)
    for args in smoke.runs:
        done = run(script, [arg.format(**values) for arg in args], folder)
        assert done.returncode == 0, f"{script} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    assert re.search(smoke.shows, done.stdout), f"{script} printed no {smoke.shows!r}:\n{done.stdout[-4000:]}"
