"""Where tools come from: Python callables (`@tool`) and catalog files (JSON, JSONL, YAML)."""

from toolrag.catalog.decorator import ToolContext, tool, tool_from_callable
from toolrag.catalog.files import load_catalog

__all__ = ["ToolContext", "load_catalog", "tool", "tool_from_callable"]
