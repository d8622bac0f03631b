"""The facade users hold: register tools, search them for a principal, get the schemas to inject.

registry = ToolRegistry("tools.db")
registry.register(get_weather, send_email)
selection = registry.select("will it rain in Kyiv tomorrow?", principal, fmt="openai")
client.chat.completions.create(..., tools=selection.tools)

Each method delegates to the room of its concern, whose docstring says more: catalog/ (edits, `reviews`, `examples`,
`relations`), snapshot/, search/pipeline.py (its stages), inject/. A new feature's body goes there, not here
(tests/test_architecture_stages.py keeps this file under 350 lines).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrag import tracing
from toolrag.catalog.decisions import ReviewDesk
from toolrag.catalog.edits import Edited, ToolWriter, as_tool
from toolrag.catalog.relations import RelationDesk
from toolrag.catalog.review import Origin, Proposal
from toolrag.catalog.views import ExampleDesk, TenantDescriptions, describe_groups
from toolrag.embed.base import Embedder, ProgressCallback
from toolrag.inject import budget as token_budget
from toolrag.inject.budget import Selection as Selection  # toolrag.registry.Selection, as before
from toolrag.model import Principal, SearchResult, Tool
from toolrag.search import filter as visibility
from toolrag.search.config import SearchConfig
from toolrag.search.feedback import UsageMemory
from toolrag.search.index import SearchIndex
from toolrag.search.learned import stored_relations
from toolrag.search.pipeline import Retriever
from toolrag.search.request import searched_text
from toolrag.snapshot import Snapshots
from toolrag.snapshot.embedding import IndexEmbeddings
from toolrag.snapshot.fixed import stored_fixed_vectors
from toolrag.store.base import AuditEntry, Store, UpsertReport
from toolrag.store.groups import GroupWrite
from toolrag.store.location import open_store as open_store  # toolrag.registry.open_store, as before
from toolrag.store.switches import DisabledServer
from toolrag.usagelog.config import MonitorConfig
from toolrag.usagelog.recorder import UsageRecorder

log = logging.getLogger("toolrag")
# Short names for the facade's many optional arguments, so that each signature stays one line.
Who = str | None  # who writes, approves or asks (None: the user running this, or nobody)
Version = int | None  # the version a write was made from (None: the one read at the write)
Progress = ProgressCallback | None
Asker = Principal | None  # None: the anonymous principal
Versions = Mapping[str, int | None] | None  # the version each tool was read at (None: it did not exist)
Edit = Callable[[Tool | None], Tool | None]  # a sync's edit of a tool as it is (None: none; returned: none written)
Pins = Mapping[str, str | None] | None  # the pending hash each MCP tool's pin must still have at the write
PYTHON: Origin = "python"  # the way in of a write made in Python

if TYPE_CHECKING:
    from toolrag.search.explain import Explanation
    from toolrag.search.reformulate import Rewriter


class ToolRegistry:
    """A registry of tools on a store, searched with one embedding model. Thread-safe."""

    def __init__(
        self,
        store: Store | str | Path = "toolrag.db",
        embedder: Embedder | str = "default",
        config: SearchConfig | None = None,
        monitor: MonitorConfig | bool = False,
        rewriter: Rewriter | None = None,
        create: bool = True,
    ) -> None:
        """`embedder` "auto": the model the registry was indexed with, followed when a migration switches it.
        `monitor` logs every search (and, through agents and gateways, every call) to the store's usage log.
        `rewriter` (`toolrag.runtime.rewrite.ChatRewriter(model)`) rephrases requests nothing was found for.
        `create=False` refuses a store location where no registry exists yet (a mistyped path)."""
        self.store = store if not isinstance(store, str | Path) else open_store(store, create)
        self._embeddings = IndexEmbeddings(self.store, embedder, lambda switched: self.retriever.use_embedder(switched))
        self._writer = ToolWriter(self._embeddings, lambda: self.config.always_include)
        self.reviews = ReviewDesk(self._writer)  # what waits for an admin, and the decisions (catalog/decisions.py)
        self.examples = ExampleDesk(self._writer)  # example requests and past tasks (catalog/views.py)
        self.descriptions = TenantDescriptions(self._writer)  # tenants' own descriptions of tools
        self.config = config or SearchConfig()
        fixed, relations = stored_fixed_vectors(self.store), lambda: stored_relations(self.store)
        costs = token_budget.position_tokens
        self.retriever = Retriever(
            self._snapshot, self.embedder, self.config, rewriter, fixed, self.catalog_fits, relations, costs
        )
        self.relations = RelationDesk(
            self.store, self.get, self.tools, lambda: self.retriever.inferred(self._snapshot())
        )
        self._functions: dict[str, Callable[..., Any]] = {}
        self._snapshots = Snapshots.of(self._embeddings, self.config, self.retriever.prepare)
        self.usage: UsageRecorder | None = None
        if monitor:
            self.usage = UsageRecorder(self.store, monitor if isinstance(monitor, MonitorConfig) else None)

    @property
    def embedder(self) -> Embedder:
        """The model texts are embedded with (the index's, for a registry made with `embedder="auto"`)."""
        return self._embeddings.embedder

    # -- registration and embeddings (catalog/edits.py, snapshot/embedding.py) -----------------------------------

    def register(self, *tools: Tool | Callable[..., Any] | dict[str, Any]) -> UpsertReport:
        """Register tools given as Tool objects, dicts, or (`@tool`-decorated or plain) functions."""
        parsed = [as_tool(item) for item in tools]
        report = self.register_many(parsed)
        self._functions |= {
            t.name: i for i, t in zip(tools, parsed, strict=True) if callable(i) and not isinstance(i, Tool | dict)
        }
        return report

    def register_many(
        self,
        tools: Sequence[Tool],
        progress: Progress = None,
        audit: Sequence[AuditEntry] = (),
        expected: Versions = None,
    ) -> UpsertReport:
        """Upsert tools in one transaction, compare-and-set on `expected` (`ToolWriter.register_gated`)."""
        return _logged(self._writer.register_gated(tools, progress, audit, expected, Proposal("python", None)))

    def texts_to_embed(self, tools: Sequence[Tool]) -> int:
        return self._embeddings.texts_to_embed(tools)

    def import_file(self, path: str | Path, progress: Progress = None, lenient: bool = False) -> UpsertReport:
        from toolrag.catalog.files import load_catalog

        return self.register_over(load_catalog(path, lenient=lenient), progress=progress, origin="import")

    def register_over(
        self, tools: Sequence[Tool], progress: Progress = None, origin: Origin = PYTHON, proposed_by: Who = None
    ) -> UpsertReport:
        """Register tools over their current versions, as a catalog or `POST /tools` does (`ToolWriter`)."""
        return _logged(self._writer.register_over(tools, progress, Proposal(origin, proposed_by)))

    def rebuild(self, progress: Progress = None, batch_size: int = 256) -> int:
        """Embed every tool with this registry's model and switch the index to it (`IndexEmbeddings.rebuild`)."""
        embedded = self._embeddings.rebuild(progress, batch_size)
        self._snapshots.reset()
        return embedded

    def tools_without_embeddings(self) -> list[str]:
        return self._embeddings.tools_without_embeddings()

    def embed_missing(self, progress: Progress = None) -> int:
        embedded = self._embeddings.embed_missing(progress)
        self._snapshots.reset()  # saving vectors moves no generation: open the snapshot anew
        return embedded

    def texts_to_rebuild(self) -> int:
        return self._embeddings.texts_to_rebuild()

    # -- edits (catalog/edits.py) ---------------------------------------------------------------------------------

    def update(self, name: str, *, edited_by: Who = None, expected_version: Version = None, **changes: Any) -> Tool:
        """A new version with some fields changed (`ToolWriter.update`); `update_reviewed` says whether it waits."""
        return _told(self.update_reviewed(name, edited_by=edited_by, expected_version=expected_version, **changes))

    def update_reviewed(
        self,
        name: str,
        *,
        edited_by: Who = None,
        expected_version: Version = None,
        origin: Origin = PYTHON,
        **changes: Any,
    ) -> Edited:
        return self._writer.update(name, edited_by, expected_version, changes, Proposal(origin, edited_by))

    def edit(self, name: str, change: Callable[[Tool], dict[str, Any]], edited_by: Who = None) -> Tool:
        """A new version made by `change`, a function of the tool as it is (`ToolWriter.edit`: a merge, no conflict)."""
        return self._writer.edit(name, change, edited_by, Proposal("python", edited_by))

    def write_merged(self, edits: Mapping[str, Edit], progress: Progress = None, pinned: Pins = None) -> UpsertReport:
        """A sync's write (`ToolWriter.write_merged`): not held for review, the MCP importer pins what it writes."""
        return self._writer.write_merged(edits, progress, pinned=pinned)

    def drop_overrides(
        self, name: str, fields: Iterable[str], edited_by: Who = None, origin: Origin = PYTHON
    ) -> Edited:
        """Fields an operator replaced back at their source's value (`ToolWriter.drop_overrides`)."""
        return self._writer.drop_overrides(name, fields, edited_by, Proposal(origin, edited_by))

    def set_active(self, name: str, active: bool, edited_by: Who = None, origin: Origin = PYTHON) -> Tool:
        """Deactivate (or reactivate) a tool; under text review a reactivation waits for an admin's approval."""
        return self._writer.edit(name, lambda _: {"active": active}, edited_by, Proposal(origin, edited_by))

    def history(self, name: str) -> list[Tool]:
        return self._writer.history(name)

    def rollback(self, name: str, version: int, *, expected_version: Version = None, edited_by: Who = None) -> Tool:
        """A new version with the content of `version`, compare-and-set (`ToolWriter.rollback`)."""
        return _told(self._writer.rollback(name, version, expected_version, edited_by, Proposal("python", edited_by)))

    # -- reading --------------------------------------------------------------------------------------------------

    def get(self, name: str) -> Tool:
        return self._writer.get(name)

    def tools(self, include_inactive: bool = False) -> list[Tool]:
        return self.store.tools(include_inactive)

    def function(self, name: str) -> Callable[..., Any] | None:
        """The Python callable registered in this process for a tool, if any."""
        return self._functions.get(name)

    def visible_tools(self, principal: Principal) -> list[Tool]:
        return self.partition(principal)[0]

    def partition(self, principal: Principal) -> tuple[list[Tool], list[Tool]]:
        """(the active tools the principal may use, the active tools it may not), from the current snapshot."""
        return visibility.partition(self._snapshot(), self.served_as(principal))

    def disabled_servers(self) -> dict[str, DisabledServer]:
        """The upstreams an operator switched off (`toolrag mcp disable`), by name, read once per snapshot."""
        return visibility.switched_off(self._snapshot(), self.store.switches.disabled)

    def disabled_servers_seen(self, principal: Principal, everything: bool = False) -> dict[str, DisabledServer]:
        """The switched-off servers a principal may be told of (`search.filter.switches_seen`)."""
        return visibility.switches_seen(self._snapshot(), principal, self.disabled_servers(), everything)

    def served_as(self, principal: Principal) -> Principal:
        """The principal with the tools of switched-off servers denied (`search.filter.served_as`)."""
        return visibility.served_as(principal, self.disabled_servers())

    @property
    def generation(self) -> int:
        """Grows with every change to the registry, from any process."""
        return self._snapshot().generation

    # -- search (search/pipeline.py) ------------------------------------------------------------------------------

    def search(
        self, query: str, principal: Asker = None, k: int | None = None, session: Who = None
    ) -> list[SearchResult]:
        """The tools for a request: at most k (default 3) for each step it asks for, with the tools they require,
        at most `SearchConfig.max_set_tools` in all; possibly none. Without k, all of them when the principal's
        whole catalog fits `inject_all_below_tokens`. `session` groups one conversation in the usage log."""
        principal = self.served_as(principal or Principal.anonymous())
        with tracing.span("toolrag.search", k=k, user=principal.user, tenant=principal.tenant) as current:
            results = self.retriever.search(query, principal, k)
            if current is not None:
                current.set_attribute("toolrag.results", len(results))
                current.set_attribute("toolrag.strategy", results[0].strategy if results else "retrieval")
        if self.usage is not None:
            step = results[0].signals.reformulation if results else None
            self.usage.record_retrieval(query, principal, results, session, step)
        return results

    def named(
        self, query: str, principal: Asker = None, limit: int = 3, session: Who = None
    ) -> tuple[list[SearchResult], int]:
        """The usable tools a request names outright, and how many matched (`Retriever.named`)."""
        principal = self.served_as(principal or Principal.anonymous())
        results, matched = self.retriever.named(query, principal, limit)
        if results and self.usage is not None:
            self.usage.record_retrieval(query, principal, results, session)
        return results, matched

    def rank(self, query: str, principal: Asker = None, limit: int = 10, mode: str | None = None) -> list[SearchResult]:
        """The full ranking (no threshold, no cut), for evaluation and debugging."""
        return self.retriever.rank(query, self.served_as(principal or Principal.anonymous()), limit, mode)

    def select(
        self, query: str, principal: Asker = None, fmt: str = "openai", k: int | None = None, session: Who = None
    ) -> Selection:
        """Search, then render the chosen tools' full schemas for a provider and count their tokens."""
        principal = self.served_as(principal or Principal.anonymous())
        results = self.search(query, principal, k, session)
        note = searched_text(query, self.config.max_request_chars).note
        return token_budget.selected(self._snapshot(), results, fmt, principal, note)

    def explain(
        self,
        query: str,
        principal: Asker = None,
        k: int | None = None,
        fmt: str = "openai",
        reveal_hidden: bool = False,
    ) -> Explanation:
        """What search() delivers for the request and why (search/explain.py); nothing is written to the usage log.
        `reveal_hidden` (operators only): also the near tools the principal may not use."""
        from toolrag.search.explain import explain

        principal = self.served_as(principal or Principal.anonymous())
        results = self.retriever.search(query, principal, k)
        costs = token_budget.selected(self._snapshot(), results, fmt, principal, None)
        k = self.config.k if k is None else k
        return explain(self.retriever, query, principal, results, k, reveal_hidden).model_copy(update=costs.costs())

    def schemas(self, names: Iterable[str], principal: Asker = None, fmt: str = "openai") -> list[Any]:
        """Full definitions of named tools the principal may use; a hidden tool is reported as not found."""
        return token_budget.schemas(self.visible_tools(principal or Principal.anonymous()), names, fmt)

    def catalog_tokens(self, principal: Principal, fmt: str = "openai") -> int:
        """What injecting every tool the principal can see would cost (counted once per snapshot, inject/budget.py)."""
        return token_budget.catalog_tokens(self._snapshot(), self.served_as(principal), fmt)

    def catalog_fits(self, principal: Principal, budget: int, fmt: str = "openai") -> bool:
        """Whether every tool the principal can see costs fewer tokens than `budget` in full (inject/budget.py)."""
        return token_budget.catalog_fits(self._snapshot(), self.served_as(principal), budget, fmt)

    # -- the in-memory snapshot, learning, groups -----------------------------------------------------------------

    def snapshot(self) -> SearchIndex:
        """The current in-memory index (tools, postings, vectors): what search sees right now."""
        return self._snapshot()

    def _snapshot(self) -> SearchIndex:
        return self._snapshots.current()

    def learn_from_usage(self, days: int = 90) -> int:
        """Learn `SearchConfig.usage_weight`'s adjustment from the last `days` of the usage log (search/feedback.py)."""
        memory = UsageMemory.from_log(self.store, days, self._snapshot().embedder or self.embedder)
        self.retriever.use_memory(memory)
        return memory.size

    def describe_groups(self, texts: Mapping[str, str | None], by: Who = None, origin: Origin = PYTHON) -> GroupWrite:
        """Say what groups of tools (MCP servers, categories) are for; None forgets one (catalog/views.py)."""
        return describe_groups(self.store, texts, by, origin)

    def group_descriptions(self) -> dict[str, str]:
        return self.store.group_descriptions()

    def close(self) -> None:
        if self.usage is not None:
            self.usage.flush()
        self.store.close()

    def __enter__(self) -> ToolRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _told(edited: Edited) -> Tool:
    if edited.held or edited.rejected:
        log.warning("the change of %s waits for review or was rejected before: the live tool serves", edited.tool.name)
    return edited.tool


def _logged(report: UpsertReport) -> UpsertReport:
    if report.held:
        log.warning("text changes wait for review, the live text serves: %s", ", ".join(report.held))
    return report
