"""The facade users hold: register tools, search them for a principal, get the schemas to inject.

registry = ToolRegistry("tools.db")
registry.register(get_weather, send_email)
selection = registry.select("will it rain in Kyiv tomorrow?", principal, fmt="openai")
client.chat.completions.create(..., tools=selection.tools)

Each method delegates to the package of its concern: writes and edits to catalog/edits.py, embeddings and the
snapshot's life to snapshot/, search to search/pipeline.py, the token budget and rendering to inject/.
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from toolrag import tracing
from toolrag.catalog.edits import Edited, ToolWriter, as_tool
from toolrag.catalog.relations import RelationDesk
from toolrag.catalog.review import Origin, Proposal, TextChange
from toolrag.embed.base import Embedder, ProgressCallback
from toolrag.errors import StoreLocationError
from toolrag.inject import budget as token_budget
from toolrag.inject.budget import Selection as Selection  # toolrag.registry.Selection, as before
from toolrag.model import Principal, SearchResult, Tool, example_key, utc_now
from toolrag.search.config import SearchConfig
from toolrag.search.examples import PastTask, past_tasks, promotable_requests
from toolrag.search.feedback import UsageMemory
from toolrag.search.filter import partition
from toolrag.search.groups import checked_descriptions
from toolrag.search.index import SearchIndex
from toolrag.search.learned import RelationBook
from toolrag.search.pipeline import Retriever
from toolrag.search.request import searched_text
from toolrag.snapshot import Snapshots
from toolrag.snapshot.embedding import IndexEmbeddings
from toolrag.snapshot.fixed import stored_fixed_vectors
from toolrag.store.base import AuditEntry, Store, UpsertReport
from toolrag.store.sqlite import SQLiteStore
from toolrag.store.switches import DisabledServer
from toolrag.usagelog.config import MonitorConfig
from toolrag.usagelog.recorder import UsageRecorder

log = logging.getLogger("toolrag")

if TYPE_CHECKING:
    from toolrag.search.explain import Explanation
    from toolrag.search.reformulate import Rewriter


def open_store(location: str | Path, create: bool = True) -> Store:
    """A store from a path or URL: `tools.db` and `sqlite:///tools.db` open SQLite files,
    `postgresql://...` a PostgreSQL database (the `toolrag[postgres]` extra). `create=False` refuses a registry that
    does not exist yet (StoreError naming the registries it can see) instead of creating an empty one."""
    text = str(location)
    if text.startswith("sqlite:///"):
        return SQLiteStore(text.removeprefix("sqlite:///"), create)
    if text.startswith(("postgresql://", "postgres://")):
        from toolrag.store.postgres import PostgresStore

        return PostgresStore.from_url(text, create)
    if "://" in text:
        raise StoreLocationError(text)
    return SQLiteStore(text, create)


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
        self._writer = ToolWriter(self._embeddings)
        self.config = config or SearchConfig()
        fixed = stored_fixed_vectors(self.store)
        self.retriever = Retriever(
            self._snapshot,
            self.embedder,
            self.config,
            rewriter,
            fixed_vectors=fixed,
            catalog_fits=self.catalog_fits,
            stored_relations=self._stored_relations,
        )
        self.relations = RelationDesk(
            self.store, self.get, self.tools, lambda: self.retriever.inferred(self.retriever.snapshot())
        )
        self._functions: dict[str, Callable[..., Any]] = {}
        self._snapshots = Snapshots.of(self._embeddings, self.config, self.retriever.prepare)
        self._switches: tuple[int, dict[str, DisabledServer]] | None = None  # (generation, disabled servers)
        self.usage: UsageRecorder | None = None
        if monitor:
            self.usage = UsageRecorder(self.store, monitor if isinstance(monitor, MonitorConfig) else None)

    def _stored_relations(self) -> RelationBook:
        """The relations search reads: learned ones only while no review is asked for (under review, a relation
        learned from usage reaches search only once an admin confirms it, as a `confirmed` verdict)."""
        learned = () if self.store.reviews.required() else self.store.relations.learned()
        return RelationBook.of(learned, self.store.relations.verdicts())

    @property
    def embedder(self) -> Embedder:
        """The model texts are embedded with (the index's, for a registry made with `embedder="auto"`)."""
        return self._embeddings.embedder

    # -- registration and embeddings ------------------------------------------------------------------------------

    def register(self, *tools: Tool | Callable[..., Any] | dict[str, Any]) -> UpsertReport:
        """Register tools given as Tool objects, dicts, or (`@tool`-decorated or plain) functions."""
        parsed = [as_tool(item) for item in tools]
        report = self.register_many(parsed)
        for item, tool in zip(tools, parsed, strict=True):
            if callable(item) and not isinstance(item, Tool | dict):
                self._functions[tool.name] = item
        return report

    def register_many(
        self,
        tools: Sequence[Tool],
        progress: ProgressCallback | None = None,
        audit: Sequence[AuditEntry] = (),
        expected: Mapping[str, int | None] | None = None,
    ) -> UpsertReport:
        """Upsert tools in one transaction, embedding only texts the store has no vector for. `progress`: called with
        the texts embedded after each batch; `audit`: written in the same transaction; `expected`: the versions the
        tools were read at, compared and set (EditConflictError when one moved; `Store.upsert`). A text change of
        an existing tool waits for review while the registry asks for it (`require_text_review`; `report.held`)."""
        report = self._writer.register_gated(tools, progress, audit, expected, Proposal("python", None))
        _log_held(report)
        return report

    def texts_to_embed(self, tools: Sequence[Tool]) -> int:
        """How many texts of `tools` have no vector yet (for sizing a progress bar)."""
        return self._embeddings.texts_to_embed(tools)

    def import_file(
        self, path: str | Path, progress: ProgressCallback | None = None, lenient: bool = False
    ) -> UpsertReport:
        from toolrag.catalog.files import load_catalog

        return self.register_over(load_catalog(path, lenient=lenient), progress=progress, origin="import")

    def register_over(
        self,
        tools: Sequence[Tool],
        progress: ProgressCallback | None = None,
        origin: Origin = "python",
        proposed_by: str | None = None,
    ) -> UpsertReport:
        """Register tools over their current versions (as a catalog or `POST /tools` does): the fields a tool was
        given replace the current ones, those it does not mention (an operator's tenants, scopes, ...) are kept.
        A text change waits for review while the registry asks for it (`report.held`), recorded as proposed by
        `proposed_by` (default: the user running this) through `origin`."""
        proposal = Proposal(origin, proposed_by)
        report = self._writer.register_over(tools, progress, proposal)
        _log_held(report)
        return report

    def rebuild(self, progress: ProgressCallback | None = None, batch_size: int = 256) -> int:
        """Embed every tool with this registry's model and switch the index to it; returns texts embedded (resumable,
        the old model serves searches until the switch: snapshot/embedding.py `IndexEmbeddings.rebuild`)."""
        embedded = self._embeddings.rebuild(progress, batch_size)
        self._snapshots.reset()
        return embedded

    def tools_without_embeddings(self) -> list[str]:
        """Active tools with a text that has no vector for the index's model."""
        return self._embeddings.tools_without_embeddings()

    def embed_missing(self, progress: ProgressCallback | None = None) -> int:
        """Embed the texts that have no vector for the index's model; returns how many."""
        embedded = self._embeddings.embed_missing(progress)
        self._snapshots.reset()  # saving vectors moves no generation: open the snapshot anew
        return embedded

    def texts_to_rebuild(self) -> int:
        """How many texts a rebuild with this registry's model would embed."""
        return self._embeddings.texts_to_rebuild()

    # -- edits (catalog/edits.py) ---------------------------------------------------------------------------------

    def update(
        self, name: str, *, edited_by: str | None = None, expected_version: int | None = None, **changes: Any
    ) -> Tool:
        """A new version of a tool with some fields changed, compare-and-set (catalog/edits.py `ToolWriter.update`);
        a text change waits for review while the registry asks for it (`update_reviewed` says so)."""
        edited = self.update_reviewed(name, edited_by=edited_by, expected_version=expected_version, **changes)
        if edited.held or edited.rejected:
            log.warning("the text change of %s waits for review or was rejected before: the live text serves", name)
        return edited.tool

    def update_reviewed(
        self,
        name: str,
        *,
        edited_by: str | None = None,
        expected_version: int | None = None,
        origin: Origin = "python",
        **changes: Any,
    ) -> Edited:
        """`update`, saying whether its text change waits for review (`held`) or was rejected before."""
        proposal = Proposal(origin, edited_by)
        return self._writer.update(name, edited_by, expected_version, changes, proposal)

    def edit(self, name: str, change: Callable[[Tool], dict[str, Any]], edited_by: str | None = None) -> Tool:
        """A new version made by `change`, a function of the tool as it is (`ToolWriter.edit`: a merge, no conflict)."""
        return self._writer.edit(name, change, edited_by, Proposal("python", edited_by))

    # -- text changes held for review (catalog/review.py) -------------------------------------------------------

    @property
    def text_review_required(self) -> bool:
        """Whether text changes of existing tools wait for an admin (the registry's setting, every process's)."""
        return self.store.reviews.required()

    def require_text_review(self, on: bool = True, by: str | None = None) -> None:
        """Turn the registry's text review on (or off), audited with `by`: while on, an import or edit that changes
        an existing tool's description, schemas or annotations leaves the live text serving and waits for
        `approve_text_change`. Changes already waiting keep waiting when it is turned off."""
        detail = f"text changes need review: {'on' if on else 'off'}"
        self.store.reviews.require(on, AuditEntry("setting", detail, None, None, by or getpass.getuser()))

    def text_changes(self) -> list[TextChange]:
        """The text changes waiting for review, by tool name: who proposed what, how, when, the findings."""
        return self._writer.text_changes()

    def text_change(self, name: str) -> TextChange:
        """The text change of `name` waiting (its `diff()` against the live text); ToolNotFoundError when none."""
        return self._writer.text_change(name)

    def approve_text_change(self, name: str, text_hash: str | None = None, approver: str | None = None) -> Tool:
        """Make the waiting text live (a new version, audited); compare-and-set on `text_hash`, the pending text
        reviewed: ApprovalConflictError when another text waits now."""
        return self._writer.approve_text(name, text_hash, approver or getpass.getuser())

    def reject_text_change(self, name: str, text_hash: str | None = None, rejecter: str | None = None) -> str:
        """Drop the waiting text, remembered by hash (returned): proposing it again leaves it out until lifted."""
        return self._writer.reject_text(name, text_hash, rejecter or getpass.getuser())

    def lift_text_rejection(self, name: str, lifter: str | None = None) -> None:
        """Forget a rejected text: proposing it again waits for review again."""
        self._writer.lift_text_rejection(name, lifter or getpass.getuser())

    def write_merged(
        self, edits: Mapping[str, Callable[[Tool | None], Tool | None]], progress: ProgressCallback | None = None
    ) -> UpsertReport:
        """Write what each edit makes of its tool's current version in one transaction (`ToolWriter.write_merged`)."""
        return self._writer.write_merged(edits, progress)

    def add_example(
        self,
        name: str,
        text: str,
        tenant: str | None = None,
        source: Literal["operator", "usage"] = "operator",
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Tool:
        """One more example request (search/examples.py) for `tenant`'s searches, or every tenant's when None; held
        for review like a text change while the registry asks for it (it changes which tools a request reaches)."""
        return self._writer.add_example(name, text, tenant, source, edited_by, Proposal(origin, edited_by))

    def remove_example(
        self,
        name: str,
        text: str,
        tenant: str | None = None,
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Tool:
        return self._writer.remove_example(name, text, tenant, edited_by, Proposal(origin, edited_by))

    def promotable_requests(self, name: str, days: int = 90) -> list[tuple[str | None, str]]:
        """(tenant, request) of logged requests after which the tool was called successfully in the same session,
        newest first, without those already among its examples: the candidates to promote to example requests."""
        used = self.store.usage.called_after(utc_now() - timedelta(days=days))
        return promotable_requests(name, self.get(name).examples, used)

    def past_tasks(self, days: int = 90, limit: int = 100) -> list[PastTask]:
        """The requests of the last `days` after which an agent's session called two or more tools successfully,
        with those tools, most frequent first, at most `limit`, without those promoted already or naming a tool that
        is gone: candidates for `add_task`."""
        calls = self.store.usage.task_calls(utc_now() - timedelta(days=days))
        tools = self.store.get_many({call.tool for call in calls})

        def promoted(name: str, tenant: str | None, text: str) -> bool:
            tool = tools.get(name)
            wanted = example_key(text, tenant)
            return tool is not None and any(e.key == wanted for e in tool.examples)

        return [task for task in past_tasks(calls, promoted) if all(name in tools for name in task.tools)][:limit]

    def add_task(
        self,
        text: str,
        tools: Sequence[str],
        tenant: str | None = None,
        source: Literal["operator", "usage"] = "operator",
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> list[Tool]:
        """A past task (search/examples.py): `text` becomes an example request of every one of `tools`, for
        `tenant`'s searches (None: every tenant's), in one transaction: a later request like it retrieves the whole
        set. `source` "usage": promoted from a logged session (`past_tasks`)."""
        return self._writer.add_task_example(tools, text, tenant, source, edited_by, Proposal(origin, edited_by))

    def set_tenant_description(
        self,
        name: str,
        tenant: str,
        text: str,
        *,
        expected_version: int | None = None,
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Edited:
        """Describe the tool in `text` for the principals of `tenant` only: what they are shown and injected, and
        one more view of the tool their searches use; every other tenant keeps the source's text. Kept by syncs and
        re-imports; compare-and-set on `expected_version`; held for review like any text a model reads while the
        registry asks for it (`Edited.held`). Scan the text first: `toolrag.mcp.review.described`."""
        proposal = Proposal(origin, edited_by)
        return self._writer.set_tenant_description(name, tenant, text, expected_version, edited_by, proposal)

    def drop_tenant_description(
        self,
        name: str,
        tenant: str,
        *,
        expected_version: int | None = None,
        edited_by: str | None = None,
        origin: Origin = "python",
    ) -> Edited:
        """The principals of `tenant` get the source's description again (a new version, compare-and-set; held for
        review as `set_tenant_description` is)."""
        proposal = Proposal(origin, edited_by)
        return self._writer.drop_tenant_description(name, tenant, expected_version, edited_by, proposal)

    def drop_overrides(
        self, name: str, fields: Iterable[str], edited_by: str | None = None, origin: Origin = "python"
    ) -> Edited:
        """A new version with `fields` an operator replaced back at their source's value, kept current by syncs;
        held for review while the registry asks for it, unless that value was live before (`Edited.held`)."""
        return self._writer.drop_overrides(name, fields, edited_by, Proposal(origin, edited_by))

    def set_active(self, name: str, active: bool, edited_by: str | None = None) -> Tool:
        """Deactivate (or reactivate) a tool: it leaves (or rejoins) search and execution; its history stays. A new
        tool held for review (a live tool requires it) stays inactive until an admin approves it."""
        return self._writer.edit(name, lambda _: {"active": active}, edited_by, Proposal("python", edited_by))

    def history(self, name: str) -> list[Tool]:
        return self._writer.history(name)

    def rollback(
        self, name: str, version: int, *, expected_version: int | None = None, edited_by: str | None = None
    ) -> Tool:
        """A new version whose content is that of an earlier version (history only grows); compare-and-set on
        `expected_version`, the current version the caller saw (EditConflictError when it moved on)."""
        return self._writer.rollback(name, version, expected_version, edited_by)

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
        return partition(self._snapshot(), self.served_as(principal))

    # -- upstream MCP servers switched off (`toolrag mcp disable`) -------------------------------------------------

    def disabled_servers(self) -> dict[str, DisabledServer]:
        """The upstreams an operator switched off, by name: read again only when the registry's generation moved
        (every switch moves it), so a request costs no read of the switches."""
        generation = self._snapshot().generation
        cached = self._switches
        if cached is None or cached[0] != generation:
            disabled = {d.server: d for d in self.store.switches.disabled()}
            self._switches = cached = (generation, disabled)
        return cached[1]

    def disabled_servers_seen(self, principal: Principal, everything: bool = False) -> dict[str, DisabledServer]:
        """The switched-off servers a principal may be told of: those with a tool it could use were they on, each
        without who switched it off or why; `everything` (admins): all of them, whole. Anyone else learns nothing
        of a switch (as a call refused for it says nothing, mcp/gateway.py)."""
        disabled = self.disabled_servers()
        if everything or not disabled:
            return disabled
        usable = {tool.name.partition(".")[0] for tool in partition(self._snapshot(), principal)[0]}
        return {
            server: DisabledServer(server, disabled_at=d.disabled_at)
            for server, d in disabled.items()
            if server in usable
        }

    def served_as(self, principal: Principal) -> Principal:
        """The principal with the tools of disabled servers denied: every search, listing and schema leaves them
        out before scoring (k fills with other tools), and no call resolves to them, whichever way in."""
        disabled = self.disabled_servers()
        if not disabled:
            return principal
        denied = principal.deny_tools | {f"{server}.*" for server in disabled}
        return principal.model_copy(update={"deny_tools": frozenset(denied)})

    @property
    def generation(self) -> int:
        """Grows with every change to the registry, from any process."""
        return self._snapshot().generation

    # -- search ---------------------------------------------------------------------------------------------------

    def search(
        self, query: str, principal: Principal | None = None, k: int | None = None, session: str | None = None
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
        self, query: str, principal: Principal | None = None, limit: int = 3, session: str | None = None
    ) -> tuple[list[SearchResult], int]:
        """The usable tools a request names outright: its whole text is a tool's name, or a prefix ending in `*`
        (`shop.*`); at most `limit` in name order, and how many matched (search/pipeline.py `Retriever.named`)."""
        principal = self.served_as(principal or Principal.anonymous())
        results, matched = self.retriever.named(query, principal, limit)
        if results and self.usage is not None:
            self.usage.record_retrieval(query, principal, results, session)
        return results, matched

    def rank(
        self, query: str, principal: Principal | None = None, limit: int = 10, mode: str | None = None
    ) -> list[SearchResult]:
        """The full ranking (no threshold, no cut), for evaluation and debugging."""
        return self.retriever.rank(query, self.served_as(principal or Principal.anonymous()), limit, mode)

    def select(
        self,
        query: str,
        principal: Principal | None = None,
        fmt: str = "openai",
        k: int | None = None,
        session: str | None = None,
    ) -> Selection:
        """Search, then render the chosen tools' full schemas for a provider and count their tokens."""
        principal = principal or Principal.anonymous()
        results = self.search(query, principal, k, session)
        note = searched_text(query, self.config.max_request_chars).note
        return token_budget.selected(self._snapshot(), results, fmt, principal, note)

    def explain(
        self,
        query: str,
        principal: Principal | None = None,
        k: int | None = None,
        fmt: str = "openai",
        reveal_hidden: bool = False,
    ) -> Explanation:
        """What search() delivers for the request and why, signal by signal (search/explain.py); nothing is
        written to the usage log. `reveal_hidden` (operators only): also the near tools the principal may not use."""
        from toolrag.search.explain import explain

        principal = self.served_as(principal or Principal.anonymous())
        results = self.retriever.search(query, principal, k)
        costs = token_budget.selected(self._snapshot(), results, fmt, principal, None)
        k = self.config.k if k is None else k
        return explain(self.retriever, query, principal, results, k, reveal_hidden).model_copy(update=costs.costs())

    def schemas(self, names: Iterable[str], principal: Principal | None = None, fmt: str = "openai") -> list[Any]:
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
        """Learn the score adjustment of `SearchConfig.usage_weight` from the usage log's successful calls of the
        last `days` (search/feedback.py); returns how many (request, tool) pairs it remembers."""
        used = self.store.usage.called_after(utc_now() - timedelta(days=days))
        memory = UsageMemory.learn(used, self._snapshot().embedder or self.embedder)
        self.retriever.use_memory(memory)
        return memory.size

    def describe_groups(self, descriptions: Mapping[str, str | None]) -> None:
        """Say what groups of tools (MCP servers, categories) are for; None forgets a description. Search ranks a
        group's tools higher when the request matches its description (search/groups.py)."""
        self.store.describe_groups(checked_descriptions(descriptions))

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


def _log_held(report: UpsertReport) -> None:
    if report.held:
        log.warning("text changes wait for review, the live text serves: %s", ", ".join(report.held))
