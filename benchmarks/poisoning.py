"""The poisoning detector on a labelled corpus: detection and false alarms on each half, and the scan's cost.

    python benchmarks/poisoning.py [--corpus tests/data/mcp_texts.jsonl] [--show tune|held-out] [--json]

The corpus (tests/data/mcp_texts.jsonl, sources in tests/data/mcp_texts_SOURCES.md) is split in two halves by a
hash of each row's `group`, so the translations and encodings of one attack stay on one side: `tune` is where the
detector's rules and thresholds were chosen, `held-out` is only reported. `--show` lists a half's misses and false
alarms (look only at the tuning half's, or the held-out figures stop meaning anything). The cost is CPU time per
tool (description and schema) or text, measured in this process after the model is loaded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from toolrag.mcp.poisoning import Finding, PoisoningScanner

ROOT = Path(__file__).resolve().parents[1]


def half(row: dict[str, Any]) -> str:
    """`tune` or `held-out`: the same for every row of a group, about half the groups each (the older corpus,
    tests/data/poisoning.jsonl, says its own: dev is tuning, test held out)."""
    if "split" in row:
        return "tune" if row["split"] == "dev" else "held-out"
    return "tune" if int(hashlib.sha256(row["group"].encode()).hexdigest(), 16) % 2 == 0 else "held-out"


def load(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    return [{**row, "text": row.get("text", row.get("description"))} for row in rows]


def findings(scanner: PoisoningScanner, row: dict[str, Any]) -> list[Finding]:
    if row["where"] == "description":
        return scanner.scan_tool(row["text"], row.get("schema"))
    return scanner.scan_text(row["text"], row["where"])


def measure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scanner = PoisoningScanner()
    scanner.scan_text("Warm up: load the model before timing.", "description")
    results = []
    for row in rows:
        started = time.process_time()
        found = findings(scanner, row)
        results.append((row, found, (time.process_time() - started) * 1000))
    report: dict[str, Any] = {"halves": {}, "by_kind": defaultdict(dict), "by_lang": defaultdict(dict)}
    for name in ("tune", "held-out"):
        mine = [(row, found) for row, found, _ in results if half(row) == name]
        malicious = [bool(found) for row, found in mine if row["label"] == "malicious"]
        benign = [bool(found) for row, found in mine if row["label"] == "benign"]
        report["halves"][name] = {
            "malicious": len(malicious),
            "benign": len(benign),
            "detected": round(sum(malicious) / len(malicious), 3),
            "false_alarms": round(sum(benign) / len(benign), 3),
        }
    for key in ("kind", "lang"):
        groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for row, found, _ in results:
            groups[(row["label"], row[key])].append(bool(found))
        for (label, value), flags in sorted(groups.items()):
            report[f"by_{key}"][label][value] = f"{sum(flags)}/{len(flags)}"
    tools = [ms for row, _, ms in results if row["label"] == "benign" and row["where"] == "description"]
    report["ms_per_real_tool"] = _percentiles(tools)
    report["ms_per_text"] = _percentiles([ms for _, _, ms in results])
    report["rows"] = results
    return report


def _percentiles(values: list[float]) -> dict[str, float]:
    deciles = statistics.quantiles(values, n=10) if len(values) > 1 else values * 9
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 2),
        "p90": round(deciles[8], 2),
        "max": round(max(values), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "data" / "mcp_texts.jsonl")
    parser.add_argument("--show", choices=["tune", "held-out"], help="list that half's misses and false alarms")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(load(args.corpus))
    results = report.pop("rows")
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for name, figures in report["halves"].items():
            print(
                f"{name:9} detected {figures['detected']:.3f} of {figures['malicious']}, false alarms"
                f" {figures['false_alarms']:.3f} of {figures['benign']}"
            )
        print(f"ms per real tool: {report['ms_per_real_tool']}; per text: {report['ms_per_text']}")
    if args.show:
        for row, found, _ in results:
            if half(row) != args.show or bool(found) == (row["label"] == "malicious"):
                continue
            what = f"FALSE ALARM {found[0]}" if found else f"MISSED {row['text'][:160]!r}"
            print(f"{row['id']} [{row['kind']}, {row['lang']}, {row['where']}] {what}")


if __name__ == "__main__":
    main()
