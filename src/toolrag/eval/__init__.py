"""Retrieval evaluation: benchmark sets in the shared format, metrics, and the runner behind `toolrag eval`."""

from toolrag.eval.dataset import BenchmarkSet, load_benchmark, load_example
from toolrag.eval.metrics import QueryScores, summarize
from toolrag.eval.runner import EvalReport, evaluate

__all__ = ["BenchmarkSet", "EvalReport", "QueryScores", "evaluate", "load_benchmark", "load_example", "summarize"]
