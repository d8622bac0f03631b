from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolrag.cli.app import app

from .conftest import in_schema
from .test_eval import bench

runner = CliRunner()
CATALOG = [
    {"name": "weather.forecast", "description": "Weather forecast for a city.", "category": "weather"},
    {"name": "payments.refund", "description": "Refund a customer's payment.", "scopes": ["billing:write"]},
    {"name": "hr.salary", "description": "Change an employee's salary.", "tenants": ["acme"]},
]


@pytest.fixture
def store(tmp_path: Path) -> str:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(CATALOG))
    path = str(tmp_path / "cli.db")
    result = runner.invoke(app, ["import", str(catalog), "--store", path])
    assert result.exit_code == 0, result.output
    assert "3 added, 0 updated, 0 unchanged" in result.stdout
    return path


def test_list_and_show(store: str) -> None:
    listed = json.loads(runner.invoke(app, ["list", "--store", store, "--json"]).stdout)
    assert [t["name"] for t in listed] == ["hr.salary", "payments.refund", "weather.forecast"]
    shown = runner.invoke(app, ["show", "payments.refund", "--store", store, "--json"])
    assert json.loads(shown.stdout)["scopes"] == ["billing:write"]
    table = runner.invoke(app, ["list", "--store", store])
    assert table.stdout.count("\n") == 3 and "weather.forecast\t1\tweather" in table.stdout


def test_search_obeys_the_principal(store: str) -> None:
    def found(*flags: str) -> list[str]:
        result = runner.invoke(app, ["search", "refund the payment", "--store", store, "--json", *flags])
        assert result.exit_code == 0, result.output
        return [r["name"] for r in json.loads(result.stdout)["results"]]

    assert "payments.refund" not in found()
    assert found("--scopes", "billing:write")[0] == "payments.refund"
    human = runner.invoke(app, ["search", "weather forecast for Kyiv", "--store", store])
    assert "weather.forecast" in human.stdout and "prompt tokens" in human.stdout


def test_errors_go_to_stderr_with_a_non_zero_exit(store: str, tmp_path: Path) -> None:
    missing = runner.invoke(app, ["show", "nope", "--store", store])
    assert missing.exit_code == 1 and "no tool named 'nope'" in missing.stderr and missing.stdout == ""
    bad = tmp_path / "bad.yaml"
    bad.write_text("- name: 'bad name'\n  description: x\n")
    result = runner.invoke(app, ["import", str(bad), "--store", store])
    assert result.exit_code == 1 and "entry 1" in result.stderr
    other_model = runner.invoke(app, ["search", "weather", "--store", store, "--embedder", "use"])
    assert other_model.exit_code == 1 and "rebuild" in other_model.stderr
    too_many = runner.invoke(app, ["search", "weather", "--store", store, "-k", "9"])
    assert too_many.exit_code == 2


def test_eval_json(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", str(bench(tmp_path / "b")), "--json", "--compare"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["n_queries"] == 4 and set(report["modes"]) == {"hybrid", "dense", "lexical"}
    assert report["tokens"]["saved_pct"] > 0


def test_quickstart(quickstart: tuple[Path, dict[str, Any]]) -> None:
    _, data = quickstart
    answers = {a["query"] + "|" + a["who"]: [t["name"] for t in a["tools"]] for a in data["answers"]}
    assert data["tools"] >= 190
    assert answers["Wo ist mein Paket?|guest"][0] == "shop.track_shipment"
    assert answers["Refund the customer's last payment|marc (billing:*)"][0] == "payments.refund_payment"
    assert "payments.refund_payment" not in answers["Refund the customer's last payment|olena (support, billing:read)"]
    assert answers["tell me a joke|guest"] == []


def test_index_rebuild_switches_the_model(store: str) -> None:
    result = runner.invoke(app, ["index", "rebuild", "--store", store, "--embedder", "use", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"model": "use-multilingual-v3", "embedded": 3}
    found = runner.invoke(app, ["search", "weather forecast for Kyiv", "--store", store, "--embedder", "use", "--json"])
    assert json.loads(found.stdout)["results"][0]["name"] == "weather.forecast"
    refused = runner.invoke(app, ["search", "weather", "--store", store, "--embedder", "default"])
    assert refused.exit_code == 1 and "toolrag index rebuild" in refused.stderr
    assert runner.invoke(app, ["search", "weather", "--store", store]).exit_code == 0  # auto: the registry's model


def test_store_copy_to_postgres_and_back(store: str, postgres_url: str, tmp_path: Path) -> None:
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps([{**CATALOG[0], "description": "Weather forecast for a city, by day."}]))
    assert runner.invoke(app, ["import", str(edited), "--store", store]).exit_code == 0
    shared = in_schema(postgres_url, "cli_copy")
    copied = runner.invoke(app, ["store", "copy", store, shared, "--json"])
    assert copied.exit_code == 0, copied.output
    assert json.loads(copied.stdout) | {"seconds": 0} == {
        "tools": 3,
        "versions": 4,
        "vectors": 4,  # the replaced description's vector is kept, for a rollback to reuse
        "model": "use-multilingual-v3+all-minilm-l6-v2-int8+multilingual-e5-small-q4@0.5:0.2/0.5:0/0:0.8",
        "seconds": 0,
    }
    back = str(tmp_path / "back.db")
    assert runner.invoke(app, ["store", "copy", shared, back]).exit_code == 0
    found = json.loads(runner.invoke(app, ["search", "weather in Paris", "--store", back, "--json"]).stdout)
    assert found["results"][0]["name"] == "weather.forecast"
    again = runner.invoke(app, ["store", "copy", store, shared])
    assert again.exit_code == 1 and "already holds tools" in again.stderr


def test_describing_a_group_no_tool_is_in_says_so_and_lists_it(store: str) -> None:
    # A description may come before its tools (an MCP server not synced yet), but a mistyped name must not pass
    # unnoticed: the command says no tool is in the group, and the list shows it so it can be found and removed.
    result = runner.invoke(app, ["groups", "describe", "wether", "Forecasts and alerts.", "--store", store])
    assert result.exit_code == 0, result.output
    assert "no tool is in group 'wether' yet" in result.output and "weather" in result.output
    listed = json.loads(runner.invoke(app, ["groups", "list", "--store", store, "--json"]).stdout)
    assert listed["wether"] == {"tools": 0, "description": "Forecasts and alerts."}
    assert listed["weather"]["tools"] == 1
    known = runner.invoke(app, ["groups", "describe", "weather", "Forecasts.", "--store", store])
    assert known.exit_code == 0 and "no tool is in" not in known.output


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.json", None, "missing.json: no such file"),
        ("bad.json", "{bad", "bad.json: invalid JSON at line 1 column 2"),
        ("tools.csv", "name,description\na,b\n", "a catalog is JSON (.json), JSON Lines (.jsonl) or YAML"),
    ],
)
def test_a_failed_import_names_the_problem_and_leaves_no_registry(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    catalog = tmp_path / name
    if content is not None:
        catalog.write_text(content)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(CATALOG))
    result = runner.invoke(app, ["import", str(good), str(catalog), "--store", str(tmp_path / "new.db")])
    assert result.exit_code == 1 and message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "new.db").exists()  # not even the good file's tools: nothing half-imported


def test_an_empty_request_is_refused(store: str) -> None:
    for request in ("", "   "):
        result = runner.invoke(app, ["search", request, "--store", store])
        assert result.exit_code == 1 and "the request is empty" in result.stderr


def test_a_missing_extra_is_one_line_with_the_command_that_installs_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    hidden = "import sys; sys.modules['psycopg'] = None\nfrom toolrag.cli.app import app\napp()"
    command = [sys.executable, "-c", hidden, "search", "--store", "postgresql://localhost/none", "refund"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "the PostgreSQL store needs the `postgres` extra: pip install" in done.stderr and "[postgres]" in done.stderr


def test_the_command_line_imports_no_numpy_before_it_starts() -> None:
    """`main()` starts BLAS with one thread (limits.start_blas_small): that works only while numpy is not loaded."""
    import subprocess
    import sys

    probe = "import sys\nimport toolrag.cli.app\nprint('numpy' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "False\n"


def test_blas_starts_small_and_large_batches_get_the_cores_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrag.limits import BATCH_THREADS_VARIABLE, batch_threads, start_blas_small

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv(BATCH_THREADS_VARIABLE, raising=False)
    assert batch_threads() is None  # nothing set aside: the library's own thread count
    start_blas_small()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert batch_threads() == len(os.sched_getaffinity(0))

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")  # the user's own setting is kept
    monkeypatch.delenv(BATCH_THREADS_VARIABLE)
    start_blas_small()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "3" and batch_threads() is None
