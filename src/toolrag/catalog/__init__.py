"""Where tools come from: Python callables (`@tool`) and catalog files (JSON, JSONL, YAML)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolrag.catalog.decorator import ToolContext, tool, tool_from_callable
    from toolrag.catalog.files import load_catalog

_WHERE = {
    "ToolContext": "toolrag.catalog.decorator",
    "tool": "toolrag.catalog.decorator",
    "tool_from_callable": "toolrag.catalog.decorator",
    "load_catalog": "toolrag.catalog.files",
}
__all__ = ["ToolContext", "load_catalog", "tool", "tool_from_callable"]


def __getattr__(name: str) -> Any:
    """Imported on first use: reading a registry needs neither the decorator nor the file formats."""
    if name not in _WHERE:
        raise AttributeError(f"module 'toolrag.catalog' has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
