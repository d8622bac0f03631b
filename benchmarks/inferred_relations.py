"""Requirements inferred from schemas (search/inferred.py): their precision and recall against seal-tools' `links`,
and what inferring them costs at index time, on the real catalog and on synthetic ones.

    python benchmarks/inferred_relations.py [--half tune|held-out] [--sweep] [--synthetic 10000 100000]

Precision and recall are judged inside the requests of the half that carry `links` (`{"from", "to", "parameter"}`:
one call's output fills another's parameter): among the ordered pairs of a request's relevant tools, an inferred
edge is right when a link of that request says the same producer, consumer and parameter. Edges between tools no
request uses together are not judged (nothing says whether they are wrong). `--sweep` prints the figures for
several confidence floors (choose on `tune`). Synthetic catalogs repeat the real tools under new names, so their
blocks grow as a real catalog's would; the figures are the time (wall and CPU: the machine is shared) of a full
inference and of an update after 1% of the tools changed, and the pairs scored against all pairs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from toolrag.eval import load_benchmark
from toolrag.eval.dataset import halves
from toolrag.model import Tool
from toolrag.search import inferred

SEAL = Path(__file__).resolve().parents[2] / "shared" / "bench" / "seal-tools"


def judged(relations: inferred.InferredRelations, requests: list[dict[str, Any]], floor: float) -> str:
    truth = {
        (r["id"], link["from"].lower(), link["to"].lower(), link["parameter"]) for r in requests for link in r["links"]
    }  # type: ignore[index, attr-defined]
    found = set()
    for request in requests:
        relevant = {name.lower() for name in request["relevant"]}
        for consumer in relevant:
            for edge in relations.of(consumer):
                if edge.producer.lower() in relevant and edge.confidence >= floor:
                    found.add((request["id"], edge.producer.lower(), consumer, edge.parameter))
    right = len(found & truth)
    precision = right / len(found) if found else 0.0
    recall = right / len(truth)
    return f"floor {floor:.2f}: {len(found)} edges, {right} right: precision {precision:.3f}, recall {recall:.3f}"


def synthetic(tools: list[Tool], size: int) -> list[Tool]:
    copies = []
    for n in range(size):
        tool = tools[n % len(tools)]
        copies.append(tool.model_copy(update={"name": f"{tool.name}_{n // len(tools)}"}) if n >= len(tools) else tool)
    return copies


def cost(tools: list[Tool]) -> str:
    started, cpu = time.perf_counter(), time.process_time()
    full = inferred.infer(tools)
    elapsed, elapsed_cpu = time.perf_counter() - started, time.process_time() - cpu
    changed = list(tools)
    for n in range(0, len(changed), 100):  # 1% of the tools get a new description
        changed[n] = changed[n].model_copy(update={"description": changed[n].description + " (v2)"})
    started, cpu = time.perf_counter(), time.process_time()
    update = inferred.infer(changed, previous=full)
    again, again_cpu = time.perf_counter() - started, time.process_time() - cpu
    edges = sum(len(e) for e in full.edges.values())
    consumers = sum(1 for t in tools for _ in inferred.consumed_slots(t))
    producers = sum(1 for t in tools for _ in inferred.produced_slots(t))
    pairs = consumers * producers
    return (
        f"{len(tools):,} tools: full {elapsed:.1f} s ({elapsed_cpu:.1f} s CPU),"
        f" {full.compared:,} pairs scored of {pairs:,} ({full.compared / max(pairs, 1):.4%}), {edges:,} edges;"
        f" after 1% changed {again:.1f} s ({again_cpu:.1f} s CPU), {update.compared:,} pairs scored"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", choices=["tune", "held-out"], default="tune")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--synthetic", type=int, nargs="*", default=[])
    args = parser.parse_args()
    tools = load_benchmark(SEAL).tools
    rows = [json.loads(line) for line in (SEAL / "queries.jsonl").read_text().splitlines() if line.strip()]
    assigned = halves([row["id"] for row in rows])
    requests = [row for row in rows if row.get("links") and assigned[row["id"]] == args.half]
    floor = inferred.MIN_CONFIDENCE
    inferred.MIN_CONFIDENCE = 0.3 if args.sweep else floor
    relations = inferred.infer(tools)
    links = sum(len(row["links"]) for row in requests)
    print(f"seal-tools {args.half} half: {len(requests)} requests with {links} links")
    for value in (0.3, 0.4, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9) if args.sweep else (floor,):
        print(judged(relations, requests, value))
    inferred.MIN_CONFIDENCE = floor
    print(cost(tools))
    for size in args.synthetic:
        print(cost(synthetic(tools, size)))


if __name__ == "__main__":
    main()
