"""kill -9 in the middle of long registry operations, many times: the registry must always open, be consistent and
let the operation be rerun to completion.

    python benchmarks/faults.py [--runs 20] [--tools 10000] [--rebuild-tools 2000] [--rerun-every 4] [--postgres URL]

Operations, each started from the same state, killed with SIGKILL at a random moment (half of the moments in the
last tenth of an uninterrupted run, where the writes happen), then checked and rerun to completion:
- import: `toolrag import` of a catalog of --tools synthetic tools into an empty SQLite registry;
- rebuild: `toolrag index rebuild --embedder use` of a --rebuild-tools registry (a model switch, saved per batch);
- migration: `toolrag store copy` of the --tools registry from SQLite to PostgreSQL (embedded server if no URL).
Checks after each kill: the store opens; every current tool parses, has the version row it names with the same
content hash, and every version row belongs to a tool; every active tool has vectors for the recorded model; a
search answers; the rerun (after every --rerun-every-th kill, to bound the run time) ends with exactly the expected
tools. Figures go to docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stores import postgres
from synthetic import synthetic_tools

from toolrag import Principal, ToolRegistry
from toolrag.registry import open_store
from toolrag.search.index import text_hash
from toolrag.search.text import dense_texts

TOOLRAG = [sys.executable, "-m", "toolrag"]


@dataclass
class Outcome:
    operation: str
    runs: int = 0
    killed_mid_way: int = 0  # the process was still running when killed
    states: dict[str, int] = field(default_factory=dict)  # what a kill left: "empty", "complete", "partial (N)"
    inconsistencies: list[str] = field(default_factory=list)
    rerun_seconds: list[float] = field(default_factory=list)


def check(location: str, expected: int) -> tuple[str, list[str]]:
    """The state a store is in after a kill, and every inconsistency found."""
    problems: list[str] = []
    store = open_store(location)
    try:
        dump = store.dump()
        versions = {(t.name, t.version): t.content_hash for t in dump.versions}
        for tool in dump.tools:
            if versions.get((tool.name, tool.version)) != tool.content_hash:
                problems.append(f"{tool.name}: current version {tool.version} has no matching version row")
        orphans = {name for name, _ in versions} - {t.name for t in dump.tools}
        problems.extend(f"{name}: version rows without a tool" for name in sorted(orphans))
        model = store.index_model()
        if dump.tools and model is None:
            problems.append("tools but no index model recorded")
        elif model is not None:
            keys = {text_hash(text) for t in dump.tools if t.active for text in dense_texts(t)}
            missing = keys - set(store.vectors(model.model_id, keys))
            if missing:
                problems.append(f"{len(missing)} texts of active tools without a vector of {model.model_id}")
    finally:
        store.close()
    if dump.tools and not problems:
        registry = ToolRegistry(location, "auto")
        try:
            registry.search("list recent invoices", Principal.anonymous())
        except Exception as exc:  # the point of the check: any failure to search is an inconsistency
            problems.append(f"search failed: {exc}")
        finally:
            registry.close()
    count = len(dump.tools)
    state = "empty" if count == 0 else "complete" if count == expected else f"partial ({count})"
    return state, problems


Writing = Callable[[float], bool]  # given the seconds since the start: has the operation begun writing? (polled)


def sqlite_write_locked(path: Path) -> bool:
    """Whether a transaction holds the registry's write lock (a probe that takes and drops the lock when it is free;
    the store's writers wait for it rather than fail)."""
    if not path.exists():
        return False
    probe = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


def kill_at(command: list[str], delay: float, writing: Writing | None = None) -> bool:
    """Run `command`, SIGKILL it `delay` seconds after it starts, or, with `writing`, `delay` seconds after it
    begins writing; whether it was still running then."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.perf_counter()
    if writing is not None:
        while process.poll() is None and not writing(time.perf_counter() - started):
            time.sleep(0.005)
    try:
        process.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        return True


def run(command: list[str], writing: Writing | None = None) -> tuple[float, float]:
    """Run to completion: (seconds in all, seconds from the first write on; 0 when `writing` is not given)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started = time.perf_counter()
    wrote = None
    while process.poll() is None:
        if writing is not None and wrote is None and writing(time.perf_counter() - started):
            wrote = time.perf_counter()
        time.sleep(0.005)
    if process.returncode != 0:
        raise RuntimeError(f"{command}: {process.stderr.read().decode() if process.stderr else ''}")
    ended = time.perf_counter()
    return ended - started, ended - wrote if wrote is not None else 0.0


def moments(duration: float, write_window: float, runs: int, rng: random.Random) -> list[tuple[float, bool]]:
    """(delay, counted from the first write?): half anywhere in the run, half inside the writing phase."""
    anywhere = [(rng.uniform(0.3, duration), False) for _ in range(runs - runs // 2)]
    if write_window > 0:
        # The window runs to the process's exit; its transaction is the first part of it.
        writing = [(rng.uniform(0.0, write_window / 2), True) for _ in range(runs // 2)]
    else:
        writing = [(rng.uniform(0.9 * duration, duration), False) for _ in range(runs // 2)]
    return anywhere + writing


def exercise(
    name: str,
    reset: Callable[[], None],
    command: list[str],
    location: str,
    expected: int,
    runs: int,
    settle: Callable[[], None] = lambda: None,
    rerun_when_complete: bool = True,
    rerun_every: int = 1,
    writing: Writing | None = None,
) -> Outcome:
    """`settle` waits until the killed client's work is over on the server's side; `rerun_when_complete`: False for
    an operation that refuses to run twice (a copy into a registry that is no longer empty); `writing` tells when
    the operation has begun writing, so that half the kills land inside its writes."""
    outcome = Outcome(name, runs)
    reset()
    duration, write_window = run(command, writing)
    print(f"{name}: an uninterrupted run takes {duration:.1f} s, writing {write_window:.1f} s", file=sys.stderr)
    for number, (delay, after_write) in enumerate(moments(duration, write_window, runs, random.Random(name)), 1):
        reset()
        outcome.killed_mid_way += kill_at(command, delay, writing if after_write else None)
        settle()
        state, problems = check(location, expected)
        outcome.states[state.split(" ")[0]] = outcome.states.get(state.split(" ")[0], 0) + 1
        when = f"{delay:.2f} s after {'its first write' if after_write else 'it started'}"
        outcome.inconsistencies.extend(f"run {number} (killed {when}): {p}" for p in problems)
        if number % rerun_every == 0:
            if state != "complete" or rerun_when_complete:
                outcome.rerun_seconds.append(run(command)[0])
            final, problems = check(location, expected)
            if final != "complete" or problems:
                outcome.inconsistencies.append(f"run {number}: the rerun left {final}: {problems}")
        print(f"{name} {number}/{runs}: killed {when} -> {state}", file=sys.stderr, flush=True)
    return outcome


def exercise_rebuild(folder: Path, args: argparse.Namespace) -> Outcome:
    small = folder / "small.jsonl"
    small.write_text("\n".join(t.model_dump_json() for t in synthetic_tools(args.rebuild_tools)), encoding="utf-8")
    pristine, rebuilt = folder / "pristine.db", folder / "rebuild.db"
    run([*TOOLRAG, "import", str(small), "--store", str(pristine)])
    pristine_size = pristine.stat().st_size

    def pristine_copy() -> None:
        for suffix in ("-wal", "-shm"):
            Path(f"{rebuilt}{suffix}").unlink(missing_ok=True)
        shutil.copy(pristine, rebuilt)

    rebuild = [*TOOLRAG, "index", "rebuild", "--embedder", "use", "--store", str(rebuilt)]

    def rebuild_writing(elapsed: float) -> bool:
        """The rebuild saves a batch of vectors at a time: writing has begun once the registry grows."""
        wal = Path(f"{rebuilt}-wal")
        return rebuilt.stat().st_size > pristine_size or (wal.exists() and wal.stat().st_size > 100_000)

    rebuilding = (str(rebuilt), args.rebuild_tools, args.runs)
    return exercise(
        "rebuild", pristine_copy, rebuild, *rebuilding, writing=rebuild_writing, rerun_every=args.rerun_every
    )


def exercise_migration(db: Path, args: argparse.Namespace) -> Outcome:
    with postgres(args.postgres) as url:
        target = f"{url}{'&' if '?' in url else '?'}schema=faults"

        def empty_postgres() -> None:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP SCHEMA IF EXISTS faults CASCADE")

        def settle() -> None:
            """A client killed after sending COMMIT still commits: wait until the server is done with it."""
            import psycopg

            deadline = time.monotonic() + 60
            with psycopg.connect(url, autocommit=True) as conn:
                while time.monotonic() < deadline:
                    others = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                        " AND pid <> pg_backend_pid()"
                    ).fetchone()
                    if others is not None and others[0] == 0:
                        return
                    time.sleep(0.1)

        copy = [*TOOLRAG, "store", "copy", str(db), target]
        once = {"settle": settle, "rerun_when_complete": False, "rerun_every": args.rerun_every}
        return exercise("migration", empty_postgres, copy, target, args.tools, args.runs, **once)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--rebuild-tools", type=int, default=2_000)
    parser.add_argument("--rerun-every", type=int, default=4, help="rerun to completion after every n-th kill")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (default: an embedded server)")
    parser.add_argument("--operations", nargs="+", default=["import", "rebuild", "migration"])
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="toolrag-faults-"))
    catalog = folder / "catalog.jsonl"
    catalog.write_text("\n".join(t.model_dump_json() for t in synthetic_tools(args.tools)), encoding="utf-8")
    db = folder / "import.db"

    def empty_sqlite() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)

    def import_writing(elapsed: float) -> bool:
        """The import's one transaction holds the write lock (after the first seconds, when the new registry's
        schema is written)."""
        return elapsed > 5 and sqlite_write_locked(db)

    every = {"rerun_every": args.rerun_every}
    importing = [*TOOLRAG, "import", str(catalog), "--store", str(db)]
    outcomes = []
    if "import" in args.operations:
        writes = {"writing": import_writing, **every}
        outcomes.append(exercise("import", empty_sqlite, importing, str(db), args.tools, args.runs, **writes))
    if "rebuild" in args.operations:
        outcomes.append(exercise_rebuild(folder, args))
    if "migration" in args.operations:
        if not db.exists():
            run(importing)
        outcomes.append(exercise_migration(db, args))
    print(json.dumps([o.__dict__ for o in outcomes], indent=1))

    print(
        "| operation | kills | killed mid-way | left empty / complete / partial | inconsistencies | rerun s (median) |"
    )
    print("|---|---|---|---|---|---|")
    for o in outcomes:
        left = " / ".join(str(o.states.get(k, 0)) for k in ("empty", "complete", "partial"))
        median = sorted(o.rerun_seconds)[len(o.rerun_seconds) // 2] if o.rerun_seconds else 0.0
        print(f"| {o.operation} | {o.runs} | {o.killed_mid_way} | {left} | {len(o.inconsistencies)} | {median:.1f} |")


if __name__ == "__main__":
    main()
