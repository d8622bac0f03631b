"""Several processes writing and searching one PostgreSQL registry at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from toolrag import Tool, ToolRegistry

from .conftest import in_schema

ROOT = Path(__file__).resolve().parents[1]


def test_processes_share_one_registry_without_lost_updates(postgres_url: str) -> None:
    url = in_schema(postgres_url, "shared_by_processes")
    workers, per_worker = 4, 6
    ToolRegistry(url, "use").register_many([Tool.parse({"name": "shared.notes", "description": "Notes."})])
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.store_worker", url, str(worker), str(workers), str(per_worker)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for worker in range(workers)
    ]
    outputs = [process.communicate(timeout=300) for process in processes]
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
    reports = [json.loads(out) for out, _ in outputs]
    for report in reports:
        assert report["tools"] == workers * per_worker + 1  # every process saw every other's tools
        for name, top in report["found"].items():
            assert top[0] == name  # and finds them by search
    registry = ToolRegistry(url, "use")
    history = registry.store.history("shared.notes")
    assert [t.version for t in history] == list(range(1, workers * per_worker + 2))  # no rewrite lost or merged
    edits = {t.description for t in history[1:]}
    assert edits == {f"Notes, edited by {w} round {n}." for w in range(workers) for n in range(per_worker)}
