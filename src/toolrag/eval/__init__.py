"""Retrieval evaluation: benchmark sets in the shared format, metrics, and the runner behind `toolrag eval`."""

from toolrag.eval.dataset import (
    BenchmarkSet,
    NoToolRequest,
    example_no_tool_requests,
    load_benchmark,
    load_example,
    load_no_tool,
)
from toolrag.eval.metrics import QueryScores, summarize
from toolrag.eval.runner import EvalReport, evaluate

__all__ = [
    "BenchmarkSet",
    "EvalReport",
    "NoToolRequest",
    "QueryScores",
    "evaluate",
    "example_no_tool_requests",
    "load_benchmark",
    "load_example",
    "load_no_tool",
    "summarize",
]
