"""Start-up time of the command line and of a first search, on the quick start registry (issue 17's goals:
`toolrag --help` <= 0.3 s, a cold `toolrag search` <= 1.0 s).

    python benchmarks/startup.py [--runs 7] [--python /path/to/venv/bin/python] [--store QUICKSTART.db]

Each command runs as a new process, `--runs` times; the median and the spread are reported (the machine is shared,
so the median is the figure). Then one process opens the registry and searches once, step by step: imports, opening
the store, the first search (model load, snapshot, calibration), and a second search. And the README's first
Python snippet, run as a new process on a new registry: wall and CPU seconds. `--store` reuses a quick start
registry made before (the quick start then only answers its requests: a quick run, not the figure to publish).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = """
import json, time
started = time.perf_counter()
from toolrag import ToolRegistry, Principal
imported = time.perf_counter()
registry = ToolRegistry(STORE)
opened = time.perf_counter()
registry.search("refund the last payment", Principal(scopes=frozenset({"billing:*"})))
first = time.perf_counter()
registry.search("where is my parcel", Principal())
second = time.perf_counter()
print(json.dumps({"import_ms": (imported - started) * 1000, "open_ms": (opened - imported) * 1000,
                  "first_search_ms": (first - opened) * 1000, "second_search_ms": (second - first) * 1000}))
"""


def timed(command: list[str], runs: int) -> dict[str, float]:
    """Wall seconds and CPU seconds (user + system, the process and its children) of `runs` new processes."""
    seconds, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {
        "median_s": round(statistics.median(seconds), 3),
        "min_s": round(min(seconds), 3),
        "max_s": round(max(seconds), 3),
        "median_cpu_s": round(statistics.median(cpus), 3),
        "min_cpu_s": round(min(cpus), 3),
        "max_cpu_s": round(max(cpus), 3),
    }


def readme_snippet(python: str, runs: int) -> dict[str, float]:
    """The README's first Python block, run as a user runs it: a new process in a new folder (a new `tools.db`),
    the models already prepared. Wall and CPU seconds (the process and its children), median of `runs`."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    snippet = readme.split("```python\n", 1)[1].split("```", 1)[0]
    walls, cpus = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="toolrag-snippet-") as folder:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run([python, "-c", snippet], cwd=folder, check=True, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {"median_wall_s": round(statistics.median(walls), 2), "median_cpu_s": round(statistics.median(cpus), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter of the install to measure, e.g. a fresh venv's"
    )
    parser.add_argument("--store", help="a quick start registry to reuse (default: a new one, indexed here)")
    args = parser.parse_args()
    toolrag = [args.python, "-m", "toolrag"]
    store = args.store or str(Path(tempfile.mkdtemp(prefix="toolrag-startup-")) / "quickstart.db")
    started = time.perf_counter()
    subprocess.run([*toolrag, "quickstart", "--store", store, "--json"], check=True, stdout=subprocess.DEVNULL)
    results: dict[str, object] = {"quickstart_s (index 220 tools, answer 9 requests)": time.perf_counter() - started}
    results["toolrag --help"] = timed([*toolrag, "--help"], args.runs)
    results["toolrag --version"] = timed([*toolrag, "--version"], args.runs)
    search = [*toolrag, "search", "refund the last payment", "--store", store, "--scopes", "billing:*"]
    results["cold toolrag search"] = timed(search, args.runs)
    results["README's first Python snippet, new registry"] = readme_snippet(args.python, args.runs)
    steps = []
    for _ in range(args.runs):
        out = subprocess.run(
            [args.python, "-c", STEPS.replace("STORE", repr(store))], check=True, capture_output=True, text=True
        )
        steps.append(json.loads(out.stdout))
    results["one process, step by step (median ms)"] = {
        key: round(statistics.median(step[key] for step in steps), 1) for key in steps[0]
    }
    json.dump(results, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
