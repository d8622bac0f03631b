"""toolrag: tool selection as retrieval for LLM agents with hundreds or thousands of tools.

The names below are imported on first use, so `import toolrag` (and the command line's start) stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from toolrag._version import __version__

if TYPE_CHECKING:
    from toolrag.catalog import ToolContext, load_catalog, tool
    from toolrag.errors import (
        ApprovalConflictError,
        CatalogError,
        ConfigError,
        EditConflictError,
        EmbeddingError,
        EnsembleWeightsError,
        InvalidRequestError,
        InvalidToolError,
        MissingExtraError,
        ModelMismatchError,
        ReviewConflictError,
        ServerNotFoundError,
        StoreError,
        StoreLocationError,
        ToolNotFoundError,
        ToolragError,
        UnknownEmbedderError,
        UnknownModelError,
    )
    from toolrag.inject.budget import Selection
    from toolrag.model import CapabilityCard, Principal, Requirement, SearchResult, SignalScores, Tool
    from toolrag.registry import ToolRegistry, open_store
    from toolrag.search.config import SearchConfig

_WHERE = {
    "ToolContext": "toolrag.catalog",
    "load_catalog": "toolrag.catalog",
    "tool": "toolrag.catalog",
    "ApprovalConflictError": "toolrag.errors",
    "CatalogError": "toolrag.errors",
    "ConfigError": "toolrag.errors",
    "EditConflictError": "toolrag.errors",
    "EmbeddingError": "toolrag.errors",
    "EnsembleWeightsError": "toolrag.errors",
    "InvalidRequestError": "toolrag.errors",
    "InvalidToolError": "toolrag.errors",
    "MissingExtraError": "toolrag.errors",
    "ModelMismatchError": "toolrag.errors",
    "ReviewConflictError": "toolrag.errors",
    "ServerNotFoundError": "toolrag.errors",
    "StoreError": "toolrag.errors",
    "StoreLocationError": "toolrag.errors",
    "ToolNotFoundError": "toolrag.errors",
    "ToolragError": "toolrag.errors",
    "UnknownEmbedderError": "toolrag.errors",
    "UnknownModelError": "toolrag.errors",
    "CapabilityCard": "toolrag.model",
    "Principal": "toolrag.model",
    "Requirement": "toolrag.model",
    "SearchResult": "toolrag.model",
    "SignalScores": "toolrag.model",
    "Tool": "toolrag.model",
    "Selection": "toolrag.inject.budget",
    "ToolRegistry": "toolrag.registry",
    "open_store": "toolrag.registry",
    "SearchConfig": "toolrag.search.config",
}

__all__ = [
    "ApprovalConflictError",
    "CapabilityCard",
    "CatalogError",
    "ConfigError",
    "EditConflictError",
    "EmbeddingError",
    "EnsembleWeightsError",
    "InvalidRequestError",
    "InvalidToolError",
    "MissingExtraError",
    "ModelMismatchError",
    "Principal",
    "Requirement",
    "ReviewConflictError",
    "SearchConfig",
    "SearchResult",
    "Selection",
    "ServerNotFoundError",
    "SignalScores",
    "StoreError",
    "StoreLocationError",
    "Tool",
    "ToolContext",
    "ToolNotFoundError",
    "ToolRegistry",
    "ToolragError",
    "UnknownEmbedderError",
    "UnknownModelError",
    "__version__",
    "load_catalog",
    "open_store",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'toolrag' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
