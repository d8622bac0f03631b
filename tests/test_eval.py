from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrag import CatalogError, Principal
from toolrag.eval import evaluate, load_benchmark
from toolrag.eval.metrics import (
    by_needed,
    expected_calibration_error,
    mrr_at_10,
    ndcg_at_10,
    paired_difference,
    recall_at,
    reliability,
    score_query,
)

from .conftest import CountingEmbedder

TOOLS = [
    {
        "id": "weather",
        "name": "weather",
        "description": "Weather forecast for a city.",
        "parameters": None,
        "category": None,
    },
    {"id": "fx", "name": "fx", "description": "Currency exchange rates.", "parameters": None, "category": None},
    {
        "id": "PDF&URL",
        "name": "pdf",
        "description": "Summarize a PDF or a web page.",
        "parameters": None,
        "category": None,
    },
    {
        "id": "mail",
        "name": "mail",
        "description": "Send an email.",
        "parameters": {"type": "dict", "properties": {"to": {"type": "String"}}},
        "category": None,
    },
]
QUERIES = [
    {"id": "q1", "query": "will it rain tomorrow", "relevant": ["weather"], "lang": "en"},
    {"id": "q2", "query": "how many euros is a dollar", "relevant": ["fx"], "lang": "en"},
    {"id": "q3", "query": "Wie ist das Wetter morgen?", "relevant": ["weather"], "lang": "de"},
    {"id": "q4", "query": "summarize this pdf and mail it to Ann", "relevant": ["PDF&URL", "mail"], "lang": "en"},
]


def bench(folder: Path, tools: list[dict[str, object]] = TOOLS, queries: list[dict[str, object]] = QUERIES) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "tools.jsonl").write_text("\n".join(json.dumps(t) for t in tools))
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    return folder


def test_metrics_follow_the_shared_definitions() -> None:
    gold = frozenset({"a", "b"})
    assert recall_at(["x", "a", "y", "b"], gold, 3) == 0.5
    assert mrr_at_10(["x", "a"], gold) == 0.5
    assert ndcg_at_10(["a", "b"], gold) == pytest.approx(1.0)
    assert ndcg_at_10(["x", "a"], frozenset({"a"})) == pytest.approx(0.6309, abs=1e-4)
    assert mrr_at_10(["x"] * 10 + ["a"], gold) == 0.0


def test_set_metrics_judge_the_whole_set() -> None:
    gold = frozenset({"a", "b", "c"})
    ranking = ["a", "x", "b", "y", "z", "q", "w", "e", "r", "c"]
    scores = [
        score_query(ranking, gold, "en", ["a", "b", "c"]),
        score_query(ranking, gold, "en", ["a", "b"]),
        score_query(ranking, frozenset({"a"}), "en", ["a"]),
    ]
    assert (scores[0].all_5, scores[0].all_10, scores[0].delivered_all) == (0.0, 1.0, 1.0)
    assert scores[1].delivered_all == 0.0 and scores[1].delivered_recall == pytest.approx(2 / 3)
    groups = by_needed(scores)
    assert list(groups) == ["1", "3", "2+"]
    assert groups["3"]["n"] == 2 and groups["3"]["delivered_all_required"] == 0.5
    assert groups["3"]["all_required@10"] == 1.0 and groups["3"]["all_required@5"] == 0.0
    assert groups["2+"] == groups["3"] and groups["1"]["delivered_all_required"] == 1.0


def test_benchmark_loading_maps_ids_and_samples(tmp_path: Path) -> None:
    data = load_benchmark(bench(tmp_path / "b"))
    assert [t.name for t in data.tools] == ["weather", "fx", "PDF_URL", "mail"]
    assert data.queries[3].relevant == frozenset({"PDF_URL", "mail"})
    assert len(load_benchmark(tmp_path / "b", limit=2).queries) == 2


def test_benchmark_ids_that_differ_only_in_case_stay_apart_and_index(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """bfcl holds `calculate_BMI` and `calculate_bmi`: a registry refuses names equal but for case, so `toolrag
    eval` of bfcl failed before any request (issue 49)."""
    tools = [
        {"id": "calculate_BMI", "name": "calculate_BMI", "description": "Body mass index from weight and height."},
        {"id": "calculate_bmi", "name": "calculate_bmi", "description": "BMI of a person."},
        {"id": "weather", "name": "weather", "description": "Weather forecast for a city."},
    ]
    queries = [{"id": "q1", "query": "what is my bmi", "relevant": ["calculate_bmi"]}]
    data = load_benchmark(bench(tmp_path / "b", tools, queries))
    assert [t.name for t in data.tools] == ["calculate_BMI", "calculate_bmi_2", "weather"]
    assert data.queries[0].relevant == frozenset({"calculate_bmi_2"})
    report = evaluate(data, embedder)
    assert report.n_tools == 3 and len(report.modes["hybrid"].queries) == 1


def test_benchmark_with_unknown_gold_or_missing_files(tmp_path: Path) -> None:
    bad = bench(tmp_path / "bad", queries=[{"id": "q", "query": "x", "relevant": ["nope"], "lang": "en"}])
    with pytest.raises(CatalogError, match="unknown tools"):
        load_benchmark(bad)
    with pytest.raises(CatalogError, match="no such file"):
        load_benchmark(tmp_path / "empty")


def test_a_set_without_requests_or_a_sample_of_none_is_refused(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    with pytest.raises(CatalogError, match=r"queries\.jsonl: holds no request"):
        load_benchmark(bench(tmp_path / "none", queries=[]))
    folder = bench(tmp_path / "b")
    for limit in (0, -3):
        with pytest.raises(ValueError, match="at least one request"):
            load_benchmark(folder, limit)
        result = CliRunner().invoke(app, ["eval", str(folder), "--limit", str(limit)])
        assert result.exit_code == 2 and "--limit" in result.output and "Traceback" not in result.output
    # A folder given as "." is named after itself in the report.
    assert load_benchmark(folder / ".").name == "b"


def test_evaluate_reports_every_promised_figure(tmp_path: Path, embedder: CountingEmbedder) -> None:
    report = evaluate(load_benchmark(bench(tmp_path / "b")), embedder, modes=("hybrid", "dense", "lexical")).as_json()
    for key in (
        "n_queries",
        "recall@1",
        "recall@3",
        "recall@5",
        "ndcg@10",
        "mrr@10",
        "by_lang",
        "latency_ms",
        "tokens",
    ):
        assert key in report
    assert report["n_queries"] == 4 and set(report["by_lang"]) == {"de", "en"}
    assert report["recall@5"] == 1.0 and report["recall@1"] >= 0.75
    assert set(report["latency_ms"]) == {"p50", "p95"} and report["latency_ms"]["p50"] > 0
    assert report["tokens"]["catalog"] > report["tokens"]["injected_mean"] > 0
    assert set(report["modes"]) == {"hybrid", "dense", "lexical"}
    assert (
        report["modes"]["lexical"]["by_lang"]["de"]["recall@5"] <= report["modes"]["dense"]["by_lang"]["de"]["recall@5"]
    )
    # The first mode against each other one, request by request, overall and per language.
    assert set(report["versus"]) == {"dense", "lexical"}
    versus = report["versus"]["lexical"]
    hybrid, lexical = report["modes"]["hybrid"], report["modes"]["lexical"]
    assert versus["ndcg@10"]["n"] == 4 and set(versus["by_lang"]) == {"de", "en"}
    assert versus["ndcg@10"]["difference"] == pytest.approx(hybrid["ndcg@10"] - lexical["ndcg@10"], abs=1e-3)
    assert versus["by_lang"]["de"]["n"] == 1


DELIVERED_KEYS = {"hit", "hit_interval", "recall", "all_required", "all_required_interval", "empty", "mean_returned"}


def test_evaluate_reports_what_search_delivers_and_the_false_tool_rate(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    from toolrag.eval import NoToolRequest

    small_talk = [NoToolRequest("n1", "thanks, have a nice evening", "en"), NoToolRequest("n2", "Danke dir!", "de")]
    report = evaluate(load_benchmark(bench(tmp_path / "b")), embedder, no_tool=small_talk).as_json()
    assert {"hit@3", "hit@5"} <= set(report) and report["hit@5"] == 1.0
    assert set(report["delivered"]) == DELIVERED_KEYS
    low, high = report["delivered"]["hit_interval"]
    assert 0 <= low <= report["delivered"]["hit"] <= high <= 1
    assert 0 <= report["delivered"]["recall"] <= report["delivered"]["hit"] <= 1
    assert report["no_tool_rate"] == report["delivered"]["empty"]
    for figures in report["by_lang"].values():
        assert set(figures["delivered"]) == DELIVERED_KEYS
    assert report["no_tool"]["n"] == 2 and set(report["no_tool"]["by_lang"]) == {"de", "en"}
    # One request needs two tools: the whole-set figures cover it apart.
    assert report["by_needed"]["2"]["n"] == report["by_needed"]["2+"]["n"] == 1
    assert report["by_needed"]["2"]["injected_tokens"] > 0
    assert report["no_tool"]["given_tool"] in (0.0, 0.5, 1.0)
    # The catalog is tiny, but retrieval is what is measured; the scores shown are checked against relevance.
    assert report["strategy"] == "retrieval" and report["delivered"]["mean_returned"] <= 3
    bins = report["calibration"]["bins"]
    assert sum(b["n"] for b in bins) > 0 and 0 <= report["calibration"]["ece"] <= 1


def test_reliability_bins_and_the_calibration_error() -> None:
    table = reliability([0.05, 0.15, 0.95, 1.0], [False, True, True, True])
    assert [(b.low, b.n, b.relevant) for b in table] == [(0.0, 1, 0.0), (0.1, 1, 1.0), (0.9, 2, 1.0)]
    assert expected_calibration_error(table) == pytest.approx((0.05 + 0.85 + 0.025 * 2) / 4, abs=1e-4)
    assert expected_calibration_error([]) == 0.0


def test_paired_difference_says_whether_a_difference_is_more_than_a_few_requests() -> None:
    same = paired_difference([0.5, 1.0, 0.0], [0.5, 1.0, 0.0])
    assert (same.difference, same.low, same.high, same.differing) == (0.0, 0.0, 0.0, 0)
    # One request of twenty better by 0.4: the mean moves by 0.02, and the interval reaches 0.
    one = paired_difference([0.4] + [0.0] * 19, [0.0] * 20)
    assert one.difference == pytest.approx(0.02) and one.low == 0.0 and one.differing == 1
    # Every request better: the interval excludes 0.
    every = paired_difference([0.6 + 0.01 * i for i in range(20)], [0.5] * 20)
    assert every.low > 0.1 and every.differing == 20
    assert paired_difference([0.3, 0.7], [0.1, 0.2]) == paired_difference([0.3, 0.7], [0.1, 0.2])  # seeded
    with pytest.raises(ValueError, match="same non-empty set of requests"):
        paired_difference([0.1], [0.1, 0.2])
    with pytest.raises(ValueError, match="same non-empty set of requests"):
        paired_difference([], [])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=300))
def test_paired_interval_lies_within_the_request_differences(pairs: list[tuple[float, float]]) -> None:
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    result = paired_difference(first, second)
    differences = [a - b for a, b in pairs]
    assert min(differences) - 1e-4 <= result.low <= result.high <= max(differences) + 1e-4
    assert result.n == len(pairs) and 0 <= result.differing <= len(pairs)


def test_eval_compare_prints_the_paired_difference(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    result = CliRunner().invoke(app, ["eval", str(bench(tmp_path / "b")), "--mode", "hybrid", "--mode", "lexical"])
    assert result.exit_code == 0, result.output
    assert "nDCG@10, hybrid minus lexical, request by request" in result.output and "95% interval" in result.output


def test_eval_reads_notool_jsonl_beside_the_set(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    folder = bench(tmp_path / "b")
    (folder / "notool.jsonl").write_text(json.dumps({"id": "n1", "query": "thank you so much", "lang": "en"}))
    result = CliRunner().invoke(app, ["eval", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["no_tool"]["n"] == 1


def test_eval_absent_hides_each_requests_tools_and_says_what_still_came(tmp_path: Path) -> None:
    """Issue 49, item 1: `--absent` searches each request again as a user its needed tools are hidden from; what
    comes then is a wrong tool, whatever its score. A name with glob characters is hidden as written, not as a
    pattern."""
    from typer.testing import CliRunner

    from toolrag.cli.app import app
    from toolrag.eval.runner import hidden_from

    folder = bench(tmp_path / "b")
    result = CliRunner().invoke(app, ["eval", str(folder), "--absent", "--json"])
    assert result.exit_code == 0, result.output
    absent = json.loads(result.stdout)["absent"]
    assert absent["n"] == 4 and set(absent["by_lang"]) == {"de", "en"} and absent["by_lang"]["de"]["n"] == 1
    assert 0 <= absent["given_confident"] <= absent["given_tool"] <= 1 and 0 <= absent["mixed_ece"] <= 1
    shown = CliRunner().invoke(app, ["eval", str(folder), "--absent"])
    assert "requests with their tools hidden given one:" in shown.output and "half and half" in shown.output
    assert json.loads(CliRunner().invoke(app, ["eval", str(folder), "--json"]).stdout)["absent"] is None
    denied = hidden_from(Principal(deny_tools=frozenset({"ops.*"})), ["a*b", "plain"])
    assert denied.deny_tools == {"ops.*", "a[*]b", "plain"}
    assert not denied.may_name("a*b") and denied.may_name("axxb") and not denied.may_name("ops.restart")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.from_regex(r"[a-z_]{1,8}[0-9]{0,3}", fullmatch=True), min_size=1, max_size=40, unique=True))
def test_halves_split_evenly_and_keep_translations_together(bases: list[str]) -> None:
    from toolrag.eval.dataset import halves

    ids = [f"{base}#{lang}" for base in bases for lang in ("en", "de", "uk")]
    assigned = halves(ids)
    for base in bases:
        assert len({assigned[f"{base}#{lang}"] for lang in ("en", "de", "uk")}) == 1  # translations together
    tune = sum(assigned[f"{base}#en"] == "tune" for base in bases)
    assert abs(tune - (len(bases) - tune)) <= 1
    assert halves(list(reversed(ids))) == assigned  # the order of the file does not matter


def test_eval_half_measures_one_half_and_names_a_wrong_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    folder = bench(tmp_path / "b")
    counts = []
    for half in ("tune", "held-out"):
        result = CliRunner().invoke(app, ["eval", str(folder), "--half", half, "--json"])
        assert result.exit_code == 0, result.output
        counts.append(json.loads(result.stdout)["n_queries"])
    assert counts == [2, 2]
    wrong = CliRunner().invoke(app, ["eval", str(folder), "--half", "test"])
    assert wrong.exit_code != 0 and "--half 'test': expected one of tune, held-out" in wrong.output


def test_eval_gives_the_other_halfs_multi_tool_requests_as_past_tasks(tmp_path: Path) -> None:
    """q4 (two tools) is on the tuning side: measuring the held-out half with --tasks-from tune gives it to both of
    its tools as an example, and measures with and without."""
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    folder = bench(tmp_path / "b")
    result = CliRunner().invoke(app, ["eval", str(folder), "--half", "held-out", "--tasks-from", "tune", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["n_queries"], report["examples"]) == (2, 2)  # q4's text, an example of pdf and of mail
    assert set(report["modes"]) == {"hybrid", "hybrid, examples off"}
    for wrong, said in (
        (["--tasks-from", "tune"], "--tasks-from needs --half"),
        (["--half", "tune", "--tasks-from", "tune"], "expected the other half than --half 'tune'"),
    ):
        refused = CliRunner().invoke(app, ["eval", str(folder), *wrong])
        assert refused.exit_code != 0 and said in refused.output


def test_no_tool_file_may_hold_one_plain_request_per_line(tmp_path: Path) -> None:
    from toolrag.eval import load_no_tool

    plain = tmp_path / "smalltalk.txt"
    plain.write_text("Thanks a lot, that was kind!\n\nDanke schön, das ist nett\nДякую, це чудово\n谢谢你\n")
    requests = load_no_tool(plain)
    assert [(r.id, r.lang) for r in requests] == [("1", "en"), ("3", "de"), ("4", "uk"), ("5", "zh")]
    with pytest.raises(CatalogError, match="does not exist"):
        load_no_tool(tmp_path / "missing.txt")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=200))
def test_bootstrap_interval_brackets_the_mean(values: list[float]) -> None:
    from toolrag.eval.metrics import interval

    low, high = interval(values)
    mean = sum(values) / len(values)
    assert min(values) - 1e-4 <= low <= mean + 1e-4 and mean - 1e-4 <= high <= max(values) + 1e-4
    assert interval(values) == (low, high)  # seeded
