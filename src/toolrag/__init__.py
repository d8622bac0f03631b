"""toolrag: tool selection as retrieval for LLM agents with hundreds or thousands of tools."""

from toolrag.catalog import ToolContext, load_catalog, tool
from toolrag.errors import (
    CatalogError,
    EmbeddingError,
    InvalidToolError,
    ModelMismatchError,
    StoreError,
    ToolNotFoundError,
    ToolragError,
)
from toolrag.model import CapabilityCard, Principal, SearchResult, SignalScores, Tool
from toolrag.registry import Selection, ToolRegistry, open_store
from toolrag.search.config import SearchConfig

__version__ = "0.1.0"

__all__ = [
    "CapabilityCard",
    "CatalogError",
    "EmbeddingError",
    "InvalidToolError",
    "ModelMismatchError",
    "Principal",
    "SearchConfig",
    "SearchResult",
    "Selection",
    "SignalScores",
    "StoreError",
    "Tool",
    "ToolContext",
    "ToolNotFoundError",
    "ToolRegistry",
    "ToolragError",
    "load_catalog",
    "open_store",
    "tool",
]
