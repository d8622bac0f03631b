"""Every error toolrag raises on purpose derives from :class:`ToolragError`, so callers can catch one type."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path


class ToolragError(Exception):
    """Base class of all toolrag errors."""


class InvalidToolError(ToolragError, ValueError):
    """A tool definition is malformed: bad name, bad schema, wrong field type."""


class CatalogError(ToolragError):
    """A catalog file cannot be read or one of its entries is invalid (the message names file and entry). `path`:
    the file, when there is one; `line`: the line in it (1-based), when known."""

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path, self.line = path, line


class ToolNotFoundError(ToolragError, KeyError):
    """No tool of that name exists in the registry (or it is hidden from the principal). `name`: the tool asked for,
    when the raiser knew it; `version`: the version asked for, when it was one that does not exist."""

    def __init__(self, message: str, *, name: str | None = None, version: int | None = None) -> None:
        super().__init__(message)
        self.name, self.version = name, version

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "tool not found"


class EditConflictError(ToolragError):
    """A tool changed between the read an edit was made from and its write (another operator, the console beside
    the API, an MCP sync, another instance on the same database): nothing was written; read it again and redo the
    edit. Carries what the store knew of the change that won."""

    def __init__(
        self, name: str, expected: int | None, current: int | None, changed_by: str | None, changed_at: datetime | None
    ) -> None:
        self.name, self.expected, self.current = name, expected, current
        self.changed_by, self.changed_at = changed_by, changed_at
        super().__init__(self._message())

    def _message(self) -> str:
        if self.current is None:
            return f"tool {self.name!r} was deleted since version {self.expected} was read; reload"
        if self.expected is None:
            happened = f"tool {self.name!r} was created meanwhile (version {self.current})"
        else:
            happened = f"tool {self.name!r} is at version {self.current}, not {self.expected} as read"
        who = f" by {self.changed_by}" if self.changed_by else ""
        when = f" at {self.changed_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if self.changed_at else ""
        return f"{happened}: changed{who}{when}; reload it and make the edit again (nothing was written)"


class ReviewConflictError(EditConflictError):
    """What waits for review of a tool (a change proposed, a rejection) moved between the read a write held for
    review was made from and its write: another proposal, an admin's decision or a lifted rejection came in
    between. Nothing was written; a write made on the tool as it is is made again (`retry_on_conflict`)."""

    def __init__(self, name: str) -> None:
        self.name, self.expected, self.current, self.changed_by, self.changed_at = name, None, None, None, None
        ToolragError.__init__(
            self,
            f"what waits for review of tool {name!r} moved since it was read (another proposal or an admin's"
            " decision came in between): reload it and make the edit again (nothing was written)",
        )


class ApprovalConflictError(ToolragError):
    """An approval of a server's quarantined tools was made from texts that are no longer the ones waiting (the
    server changed a tool, or listed one more, since they were read), or there is nothing waiting: nothing was
    approved; review what waits now and approve that."""


class ServerNotFoundError(ToolragError, KeyError):
    """No upstream MCP server of that name: none has tools in the registry, or, given `known`, it is none of
    those (named in the message)."""

    def __init__(self, server: str, known: Sequence[str] | None = None) -> None:
        if known is None:
            message = f"no MCP server named {server[:200]!r} has tools in this registry"
        else:
            message = f"no upstream MCP server named {server[:200]!r} (the servers: {', '.join(known[:20]) or 'none'})"
        super().__init__(message)
        self.server = server

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ModelMismatchError(ToolragError):
    """The index was built with another embedding model than the one asked to search it."""


class StoreError(ToolragError):
    """The store cannot be opened or written (corrupt file, newer schema, locked database)."""


class StoreLocationError(StoreError, ValueError):
    """`open_store` was given a URL of no store it knows (`location`). A ValueError too, as it was before."""

    def __init__(self, location: str) -> None:
        scheme = location.partition("://")[0]  # never the rest: a URL of another spelling may hold a password
        super().__init__(f"unsupported store URL {scheme}://...: use a file path, sqlite:///PATH or postgresql://...")
        self.location = location


class InvalidRequestError(ToolragError, ValueError):
    """A search asked for something no way in gives: `k` outside 1 to MAX_K, say."""


class EmbeddingError(ToolragError):
    """The embedding model failed or returned vectors of the wrong shape."""


class ConfigError(ToolragError):
    """A configuration file (gateway, API) is missing, unreadable or invalid."""


class UnknownEmbedderError(ConfigError, ValueError):
    """No embedder has that name (`name`); `choices`: the names there are. A ValueError too, as it was before."""

    def __init__(self, name: str, choices: tuple[str, ...]) -> None:
        super().__init__(f"unknown embedder {name!r}: choose one of {', '.join(choices)}")
        self.name, self.choices = name, choices


class EnsembleWeightsError(ConfigError, ValueError):
    """An ensemble of embedders was given weights that do not make one (negative, unused, or not adding up to 1)."""


class UnknownModelError(ModelMismatchError, ValueError):
    """A registry was indexed with a model (`model_id`) that no built-in embedder produces. `replacement`: the
    embedder to re-embed it with, when the model is one an earlier toolrag retired. A ValueError too, as before."""

    def __init__(self, message: str, *, model_id: str, replacement: str | None = None) -> None:
        super().__init__(message)
        self.model_id, self.replacement = model_id, replacement


class MissingExtraError(ToolragError, ImportError):
    """A feature needs an optional extra that is not installed; the message says how to install it."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(f"{feature} needs the `{extra}` extra: {install_hint(extra)}")


def install_hint(extra: str) -> str:
    """The pip command that adds `extra`: from a source checkout (an editable install), the checkout's own."""
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "toolrag").is_dir():
        return f'pip install -e "{checkout}[{extra}]"'
    return f'pip install "toolrag[{extra}]"'
