"""Every error toolrag raises on purpose derives from :class:`ToolragError`, so callers can catch one type."""

from __future__ import annotations


class ToolragError(Exception):
    """Base class of all toolrag errors."""


class InvalidToolError(ToolragError, ValueError):
    """A tool definition is malformed: bad name, bad schema, wrong field type."""


class CatalogError(ToolragError):
    """A catalog file cannot be read or one of its entries is invalid (the message names file and entry)."""


class ToolNotFoundError(ToolragError, KeyError):
    """No tool of that name exists in the registry (or it is hidden from the principal)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "tool not found"


class ModelMismatchError(ToolragError):
    """The index was built with another embedding model than the one asked to search it."""


class StoreError(ToolragError):
    """The store cannot be opened or written (corrupt file, newer schema, locked database)."""


class EmbeddingError(ToolragError):
    """The embedding model failed or returned vectors of the wrong shape."""


class ConfigError(ToolragError):
    """A configuration file (gateway, API) is missing, unreadable or invalid."""


class MissingExtraError(ToolragError, ImportError):
    """A feature needs an optional extra that is not installed; the message says how to install it."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(f"{feature} needs the `{extra}` extra: {install_hint(extra)}")


def install_hint(extra: str) -> str:
    """The pip command that adds `extra`: from a source checkout (an editable install), the checkout's own."""
    from pathlib import Path

    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "toolrag").is_dir():
        return f'pip install -e "{checkout}[{extra}]"'
    return f'pip install "toolrag[{extra}]"'
