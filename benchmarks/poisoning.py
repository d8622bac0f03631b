"""The poisoning detector on a labelled corpus: detection and false alarms on each half, and the scan's cost; and
fitting its model.

    python benchmarks/poisoning.py [--corpus tests/data/mcp_texts.jsonl] [--show tune|held-out] [--json]
    python benchmarks/poisoning.py fit [--extra MORE.jsonl ...]     # writes src/toolrag/data/poisoning_model.json

The corpus (tests/data/mcp_texts.jsonl, sources in tests/data/mcp_texts_SOURCES.md) is split in two halves by a
hash of each row's `group`, so the translations and encodings of one attack stay on one side: `tune` is where the
detector's model is fitted and its threshold chosen, `held-out` is only reported. The tuning side also takes the
older corpus (tests/data/poisoning.jsonl, all of it: its test half was looked at before) and any `--extra` files.
`--show` lists a half's misses and false alarms (look only at the tuning half's, or the held-out figures stop
meaning anything). The cost is CPU time per tool (description and schema) or text, measured in this process after
the model is loaded.

Fitting: a logistic model over the signs of each sentence, their pairs, and each signed sentence's nearness by
meaning to attack sentences rather than to ordinary tool texts (catalog/poisoning.py); the attack sentences are the
hand-written ones and the sentences of the tuning side's attacks that carry a strong sign (a sentence's own copy is
ignored while fitting); the threshold is the lowest one that keeps false alarms on the tuning side at or under
`--false-alarms` (3%). `fit --out FILE` writes the model to FILE instead (a trial fit that leaves the package alone).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.catalog import poisoning
from toolrag.catalog.poisoning import Finding, PoisoningScanner, margins
from toolrag.catalog.poisoning_signs import MARKS, WEAK_SIGNS

ROOT = Path(__file__).resolve().parents[1]


def half(row: dict[str, Any]) -> str:
    """`tune` or `held-out`: the same for every row of a group, about half the groups each (a row with a `split`
    says its own: dev is tuning, test held out; the older tests/data/poisoning.jsonl has both, the hand-written
    tests/data/mcp_texts_4.jsonl is all tuning)."""
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
    scanner.scan_text("Warm up: you must always load the model and its references before timing.", "description")
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
        if not malicious or not benign:
            continue  # a corpus that is all tuning side (tests/data/mcp_texts_4.jsonl) has no held-out half
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


def texts(row: dict[str, Any]) -> list[tuple[str, str]]:
    if row["where"] == "description":
        return list(poisoning.texts_of(row["text"], row.get("schema")))
    return [(row["where"], row["text"])]


MODEL = ROOT / "src" / "toolrag" / "data" / "poisoning_model.json"


def fit(extra: list[Path], false_alarms: float, l2: float, target: Path = MODEL, folds: int = 5) -> None:
    """Fit the model on the tuning side and write it to `target` (the package's data folder by default).

    Stacked by group folds: each tuning row's meaning features (its nearness to the attack sentences, and the
    linear reading of its sentences as attacks) come from references and a reading fitted on the other folds, so
    the row model learns how much they are worth on text they never saw; the references and the reading shipped
    are then fitted on the whole tuning side."""
    rows = load(ROOT / "tests" / "data" / "mcp_texts.jsonl")
    tuning = [r for r in rows if half(r) == "tune"] + load(ROOT / "tests" / "data" / "poisoning.jsonl")
    for path in extra:
        tuning += [r for r in load(path) if half(r) == "tune"]
    readings = [poisoning.read(texts(row)) for row in tuning]
    embedded = [poisoning.embedded_sentences(reading) for reading in readings]
    attack_sentences = [
        [s.text for s in reading.sentences if (s.signs - WEAK_SIGNS) or len(s.signs - MARKS) >= 2]
        if row["label"] == "malicious"
        else []
        for row, reading in zip(tuning, readings, strict=True)
    ]
    scanner = PoisoningScanner()
    everything = sorted({t for ts in embedded for t in ts} | {t for ts in attack_sentences for t in ts})
    vectors = dict(zip(everything, scanner.embed(everything), strict=True))
    hand_written = scanner.embed(list(poisoning.ATTACKS))
    ordinary = scanner.embed(poisoning.ordinary_tool_texts())
    y = np.array([row["label"] == "malicious" for row in tuning], dtype=np.float64)
    fold = np.array(
        [int(hashlib.sha256(row.get("group", row["id"]).encode()).hexdigest(), 16) % folds for row in tuning]
    )

    def meaning(train: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The attack references and the linear reading fitted on the rows of `train`."""
        attacks = sorted({t for i in np.flatnonzero(train) for t in attack_sentences[i]})
        bank = np.vstack([hand_written, *(vectors[t][None] for t in attacks)])
        examples = [(vectors[t], 1.0) for i in np.flatnonzero(train) for t in embedded[i] if t in attack_sentences[i]]
        examples += [(vectors[t], 0.0) for i in np.flatnonzero(train) if y[i] == 0 for t in embedded[i]]
        likeness, likeness_bias = _logistic(
            np.vstack([v for v, _ in examples]), np.array([label for _, label in examples]), 3.0
        )
        return bank, likeness, likeness_bias

    def features(indices: np.ndarray, bank: np.ndarray, likeness: np.ndarray, bias: float) -> np.ndarray:
        rows_out = []
        for i in indices:
            chosen = embedded[i]
            near: poisoning.Nearness = {}
            if chosen:
                matrix = np.vstack([vectors[t] for t in chosen])
                scores = matrix @ likeness + bias
                for text, (a, b), c in zip(chosen, margins(matrix, bank, ordinary), scores, strict=True):
                    near[text] = (a, b, poisoning.sigmoid(float(c)))
            rows_out.append(poisoning.features_of(readings[i], near))
        return np.vstack(rows_out)

    x = np.zeros((len(tuning), len(poisoning.FEATURES)))
    for k in range(folds):
        held = np.flatnonzero(fold == k)
        x[held] = features(held, *meaning(fold != k))
    weights, bias = _logistic(x, y, l2)
    scores = 1.0 / (1.0 + np.exp(-(x @ weights + bias)))
    threshold = min(t for t in np.arange(0.05, 0.96, 0.01) if np.mean(scores[y == 0] >= t) <= false_alarms)
    detected = float(np.mean(scores[y == 1] >= threshold))
    alarms = float(np.mean(scores[y == 0] >= threshold))
    _, likeness, likeness_bias = meaning(np.ones(len(tuning), dtype=bool))
    model = {
        "features": poisoning.FEATURES,
        "weights": [round(float(w), 5) for w in weights],
        "bias": round(float(bias), 5),
        "threshold": round(float(threshold), 2),
        "likeness": [round(float(w), 5) for w in likeness],
        "likeness_bias": round(float(likeness_bias), 5),
        "attacks": sorted({t for ts in attack_sentences for t in ts}),
        "fitted_on": {
            "rows": len(tuning),
            "malicious": int(y.sum()),
            "benign": int(len(y) - y.sum()),
            "sources": ["tests/data/mcp_texts.jsonl (tuning half)", "tests/data/poisoning.jsonl", *map(str, extra)],
            "l2": l2,
            "out_of_fold_detected": round(detected, 3),
            "out_of_fold_false_alarms": round(alarms, 3),
        },
    }
    target.write_text(json.dumps(model, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
    print(
        f"fitted on {len(tuning)} rows: threshold {threshold:.2f}; out of fold: detected {detected:.3f}, false alarms"
        f" {alarms:.3f}; {len(model['attacks'])} attack sentences; written to {shown}"
    )


def _logistic(
    x: np.ndarray, y: np.ndarray, l2: float, steps: int = 5000, rate: float = 0.5
) -> tuple[np.ndarray, float]:
    """Logistic regression by gradient descent, L2 on the weights (not the bias)."""
    weights, bias = np.zeros(x.shape[1]), 0.0
    for _ in range(steps):
        error = 1.0 / (1.0 + np.exp(-(x @ weights + bias))) - y
        weights -= rate * (x.T @ error / len(y) + l2 * weights / len(y))
        bias -= rate * float(error.mean())
    return weights, bias


def main() -> None:
    if sys.argv[1:2] == ["fit"]:
        fitting = argparse.ArgumentParser(description="Fit the poisoning model on the tuning side.")
        fitting.add_argument("--extra", type=Path, nargs="*", default=[], help="more labelled rows to fit on")
        fitting.add_argument("--false-alarms", type=float, default=0.03)
        fitting.add_argument("--l2", type=float, default=1.0)
        fitting.add_argument("--out", type=Path, default=MODEL, help="where the model is written")
        options = fitting.parse_args(sys.argv[2:])
        fit(options.extra, options.false_alarms, options.l2, options.out)
        return
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
