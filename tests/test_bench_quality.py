"""Regression guard on real public data (../shared/bench): the default must beat both of its baselines."""

from __future__ import annotations

import pytest

from toolrag.embed.base import Embedder
from toolrag.eval import evaluate, load_benchmark

from .conftest import BENCH


@pytest.mark.slow
@pytest.mark.parametrize(("name", "floor"), [("bfcl", 0.8), ("metatool", 0.7)])
def test_hybrid_beats_dense_and_bm25_on_a_sample(real_embedder: Embedder, name: str, floor: float) -> None:
    if not (BENCH / name).is_dir():
        pytest.skip(f"{BENCH / name} is not here")
    report = evaluate(load_benchmark(BENCH / name, limit=300), real_embedder, modes=("hybrid", "dense", "lexical"))
    modes = report.as_json()["modes"]
    assert modes["hybrid"]["ndcg@10"] > modes["dense"]["ndcg@10"]
    assert modes["hybrid"]["ndcg@10"] > modes["lexical"]["ndcg@10"]
    assert modes["hybrid"]["recall@5"] >= floor
