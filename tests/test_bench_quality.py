"""Regression guards on real public data (../shared/bench): the default must beat both of its baselines, and what
search() delivers must hold in every language."""

from __future__ import annotations

import pytest

from toolrag import SearchConfig
from toolrag.embed.base import Embedder
from toolrag.eval import BenchmarkSet, evaluate, load_benchmark, load_no_tool
from toolrag.eval.dataset import in_half, no_tool_in_half

from .conftest import BENCH


def _distractors_thinned(benchmark: BenchmarkSet, keep_every: int) -> BenchmarkSet:
    """The tools the requests need, and every n-th other tool: a smaller index with the same requests (bfcl's 1,853
    tools take a minute and a half to embed here)."""
    needed = {name for query in benchmark.queries for name in query.relevant}
    others = [tool for tool in benchmark.tools if tool.name not in needed][::keep_every]
    return BenchmarkSet(benchmark.name, [t for t in benchmark.tools if t.name in needed] + others, benchmark.queries)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "floor", "requests", "keep_every"), [("bfcl", 0.8, 150, 10), ("metatool", 0.7, 300, 6)]
)
def test_hybrid_beats_dense_and_bm25_on_a_sample(
    real_embedder: Embedder, name: str, floor: float, requests: int, keep_every: int
) -> None:
    if not (BENCH / name).is_dir():
        pytest.skip(f"{BENCH / name} is not here")
    benchmark = _distractors_thinned(load_benchmark(BENCH / name, limit=requests), keep_every)
    report = evaluate(benchmark, real_embedder, modes=("hybrid", "dense", "lexical"))
    modes = report.as_json()["modes"]
    assert modes["hybrid"]["ndcg@10"] > modes["dense"]["ndcg@10"]
    assert modes["hybrid"]["ndcg@10"] > modes["lexical"]["ndcg@10"]
    assert modes["hybrid"]["recall@5"] >= floor


@pytest.mark.slow
def test_what_search_delivers_holds_in_every_language_on_the_held_out_half(real_embedder: Embedder) -> None:
    """Regression floors on requests no default was chosen on (issue 27): the held-out half of the seven-language
    set and of the small talk. The figures measured when the defaults were chosen are in docs/benchmarks.md ("Tuning
    and held-out halves"); each floor sits a few requests below them (one request moves a language's rate by 0.03,
    one small-talk sentence a language's by 0.04), so a real regression fails and noise does not."""
    if not (BENCH / "metatool-multilingual-xl").is_dir():
        pytest.skip(f"{BENCH} is not here")
    small_talk = no_tool_in_half(load_no_tool(BENCH / "notool.jsonl"), "held-out")
    requests = in_half(load_benchmark(BENCH / "metatool-multilingual-xl"), "held-out")
    report = evaluate(requests, real_embedder, no_tool=small_talk, absent=True).as_json()
    assert len(report["by_lang"]) == 7
    for lang, figures in report["by_lang"].items():  # measured: 0.92 at least
        assert figures["delivered"]["hit"] >= 0.85 * figures["hit@3"], lang
    assert report["by_lang"]["en"]["hit@3"] >= 0.85  # measured 0.93
    assert report["by_lang"]["uk"]["hit@3"] >= 0.45  # measured 0.53: the weakest language (docs/benchmarks.md)
    assert report["no_tool"]["given_tool"] <= 0.15  # measured 0.115
    assert all(figures["given_tool"] <= 0.3 for figures in report["no_tool"]["by_lang"].values())  # measured 0.22
    # Calibrated for a registry that lacks half of what it is asked (issue 49): judged on that mix, each request
    # with its tools present and hidden; with them hidden, a tool at 0.5 or more is rare.
    assert report["absent"]["mixed_ece"] <= 0.08  # measured 0.043 on 300 requests
    assert report["absent"]["given_confident"] <= 0.05  # measured 0.000


@pytest.mark.slow
def test_example_requests_find_their_tools_and_let_no_more_small_talk_through(real_embedder: Embedder) -> None:
    """A quarter of metatool's requests given to their tools as example requests: the rest find their tools more
    often, and small talk is not given a tool more often than without the examples. (It was, 0.49 against 0.11 of
    all of notool.jsonl on 4,000 requests: small talk is nearer to requests than to tool descriptions, and was
    judged by the descriptions' level; docs/benchmarks.md, "Example requests".)"""
    if not (BENCH / "metatool").is_dir():
        pytest.skip(f"{BENCH} is not here")
    benchmark = load_benchmark(BENCH / "metatool", limit=800)
    small_talk = no_tool_in_half(load_no_tool(BENCH / "notool.jsonl"), "held-out")
    with_examples = evaluate(benchmark, real_embedder, no_tool=small_talk, example_share=0.25).as_json()
    off = SearchConfig(example_views=False)
    without = evaluate(benchmark, real_embedder, off, no_tool=small_talk, example_share=0.25).as_json()
    assert with_examples["delivered"]["hit"] >= without["delivered"]["hit"] + 0.03
    assert with_examples["no_tool"]["given_tool"] <= without["no_tool"]["given_tool"] + 0.04
