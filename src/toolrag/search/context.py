"""What every stage of a search reads (search/pipeline.py lists them): one request, frozen, and the settings the
retriever searches with.

A stage reads a `RequestContext` (the snapshot searched, what is searched for, who asks and what they may see and
use) and the snapshot's derived state (`SearchIndex.derived`), and keeps nothing of a request itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from toolrag.embed.base import Embedder
from toolrag.embed.language import looks_english
from toolrag.model import Principal
from toolrag.search.confidence import MODEL, RelevanceModel
from toolrag.search.config import SearchConfig
from toolrag.search.feedback import UsageMemory
from toolrag.search.filter import visibility_mask
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray
from toolrag.search.route import CategoryRouter

if TYPE_CHECKING:
    from toolrag.search.reformulate import Rewriter


@dataclass(frozen=True)
class RequestContext:
    """One request as the ranking reads it, built once by search(), rank() and their kin: the snapshot searched,
    what is searched for (the request, one of its steps, a rephrasing), who asks and what they may see and use."""

    index: SearchIndex
    text: str
    principal: Principal
    visible: BoolArray | None  # positions the principal may see (None: all)
    usable: BoolArray | None  # ... and that are live
    english: bool  # the request's language (the whole request's for its steps): its small-talk level
    mode: str  # hybrid, dense or lexical
    limit: int  # candidates ranked

    @classmethod
    def of(cls, index: SearchIndex, text: str, principal: Principal, limit: int, mode: str) -> RequestContext:
        visible = visibility_mask(index, principal)
        return cls(index, text, principal, visible, usable(index, visible), looks_english(text), mode, limit)

    def about(self, text: str) -> RequestContext:
        """The same request, ranking `text`: one of its steps."""
        return replace(self, text=text)


def usable(index: SearchIndex, visible: BoolArray | None) -> BoolArray | None:
    """Positions a principal who sees `visible` may use and that are live (None: all)."""
    if index.live is None:
        return visible
    return index.live if visible is None else visible & index.live


@dataclass
class SearchSettings:
    """What the stages search with: one object the retriever owns and changes (`Retriever.use_config`, ...), so
    that every stage reads the same settings at every request."""

    config: SearchConfig
    embedder: Embedder  # requests are embedded with the snapshot's model, this one where it names none
    rewriter: Rewriter | None = None  # the optional second chance by a chat model
    relevance: RelevanceModel = MODEL
    memory: UsageMemory | None = None  # what ToolRegistry.learn_from_usage learned
    router: CategoryRouter = field(init=False)

    def __post_init__(self) -> None:
        self.router = CategoryRouter.from_config(self.config.routes)

    def use_config(self, config: SearchConfig) -> None:
        self.config = config
        self.router = CategoryRouter.from_config(config.routes)

    def embedder_of(self, index: SearchIndex) -> Embedder:
        """The snapshot's own model: a search that began before a model switch finishes with the old model."""
        return index.embedder or self.embedder
