"""The poisoning detector on the corpus in tests/data/poisoning.jsonl: detection and false-alarm rates, per split,
language and attack kind, and what it missed or flagged wrongly.

    python benchmarks/poisoning.py [--split dev|test|all] [--show-errors]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from toolrag.mcp.poisoning import PoisoningScanner

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "poisoning.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--split", default="all", choices=["dev", "test", "all"])
    parser.add_argument("--show-errors", action="store_true")
    args = parser.parse_args()
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if args.split == "all" or r["split"] == args.split]
    scanner = PoisoningScanner()
    started = time.perf_counter()
    by: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    errors = []
    for row in rows:
        findings = (
            scanner.scan_text(row["description"], row["where"])
            if row["where"] != "description"
            else scanner.scan_tool(row["description"], row.get("schema"))
        )
        flagged = bool(findings)
        for key in [
            ("all", row["label"]),
            ("lang:" + row["lang"], row["label"]),
            ("kind:" + row["kind"], row["label"]),
        ]:
            by[key][0] += flagged
            by[key][1] += 1
        if flagged != (row["label"] == "malicious"):
            errors.append((row["id"], row["label"], [str(f) for f in findings][:2], row["description"][:160]))
    seconds = time.perf_counter() - started
    print(f"{len(rows)} texts ({args.split}), {seconds:.1f} s ({1000 * seconds / len(rows):.1f} ms a text)\n")
    print("| group | malicious flagged | benign flagged (false alarms) |\n|---|---|---|")
    for group in sorted({g for g, _ in by}, key=lambda g: (g != "all", g)):
        bad, good = by.get((group, "malicious")), by.get((group, "benign"))
        cells = [f"{b[0]}/{b[1]} ({100 * b[0] / b[1]:.0f}%)" if b else "-" for b in (bad, good)]
        print(f"| {group} | {cells[0]} | {cells[1]} |")
    if args.show_errors:
        for error in errors:
            print(error)


if __name__ == "__main__":
    main()
