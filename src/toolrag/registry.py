"""The facade users hold: register tools, search them for a principal, get the schemas to inject.

registry = ToolRegistry("tools.db")
registry.register(get_weather, send_email)
selection = registry.select("will it rain in Kyiv tomorrow?", principal, fmt="openai")
client.chat.completions.create(..., tools=selection.tools)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from toolrag import tracing
from toolrag.embed import embedder_name_for, make_embedder
from toolrag.embed.base import Embedder, ProgressCallback, embed_in_batches
from toolrag.errors import (
    ConfigError,
    EditConflictError,
    InvalidToolError,
    ModelMismatchError,
    StoreError,
    StoreLocationError,
    ToolNotFoundError,
)
from toolrag.inject.formats import render
from toolrag.inject.tokens import tools_tokens
from toolrag.model import (
    DEACTIVATED_BY_OPERATOR,
    SOURCE_FIELDS,
    SYNCED_SOURCE_PREFIX,
    Principal,
    SearchResult,
    Strategy,
    Tool,
    utc_now,
)
from toolrag.monitor.config import MonitorConfig
from toolrag.search.calibrate import bank_requests, embed_fixed
from toolrag.search.config import SearchConfig
from toolrag.search.feedback import UsageMemory
from toolrag.search.groups import group_text
from toolrag.search.index import SearchIndex, text_hash, texts_by_hash
from toolrag.search.pipeline import Retriever
from toolrag.search.request import searched_text
from toolrag.search.text import embedded_texts
from toolrag.snapshot import Snapshots
from toolrag.store.base import AuditEntry, IndexModel, Store, UpsertReport, Vector, model_mismatch_message
from toolrag.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from toolrag.monitor.recorder import UsageRecorder
    from toolrag.search.explain import Explanation
    from toolrag.search.reformulate import Rewriter

ToolLike = Tool | Callable[..., Any] | dict[str, Any]
Written = TypeVar("Written")
EmbeddedVectors = dict[tuple[str, str], Vector]  # (model id, text hash) -> the vector a write's attempt embedded


@dataclass(frozen=True)
class Selection:
    """The tools chosen for one request, rendered for a provider, with what they cost in prompt tokens."""

    results: list[SearchResult]
    tools: list[dict[str, Any]]
    injected_tokens: int
    catalog_tokens: int
    request_note: str | None = None  # what search left out of a long request (search/request.py)

    @property
    def strategy(self) -> Strategy:
        """`all` when the principal's whole catalog fit the token budget and was returned, else `retrieval`."""
        return "all" if any(r.strategy == "all" for r in self.results) else "retrieval"

    @property
    def saved_pct(self) -> float:
        if self.catalog_tokens == 0:
            return 0.0
        return round(100.0 * (1 - self.injected_tokens / self.catalog_tokens), 1)


# How many times an edit made on the tool as it is (`ToolRegistry.edit`, `write_merged`) is made again after another
# writer moved the tool: every round one writer wins, so this many writers of one tool at once all get through.
EDIT_ATTEMPTS = 32
FIXED_TEXTS_SUFFIX = "#fixed-texts"  # the model key of the small-talk bank's vectors (search/calibrate.py)


def retry_on_conflict(write: Callable[[], Written], attempts: int = EDIT_ATTEMPTS) -> Written:
    """`write` (read the tools, make the edit of them, write it compare-and-set on the versions read) made again
    while another writer moved a tool between its read and its write (EditConflictError), `attempts` times at most:
    each round reads anew, so the edit is made on the tool as the winner left it."""
    attempt = 1
    while True:
        try:
            return write()
        except EditConflictError:
            if attempt >= attempts:
                raise
            attempt += 1


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
        """`monitor` logs every search (and, through agents and gateways, every call) to the store's usage log.
        `rewriter` (e.g. `toolrag.runtime.rewrite.ChatRewriter(model)`) rephrases requests nothing was found for.
        `create=False` refuses a store location where no registry exists yet (a mistyped path)."""
        self.store = store if not isinstance(store, str | Path) else open_store(store, create)
        # "auto": the model the registry was indexed with, followed when a migration switches it.
        self._follows_model = embedder == "auto"
        if isinstance(embedder, str):
            embedder = make_embedder(self._recorded_embedder_name() if self._follows_model else embedder)
        self.embedder = embedder
        self.config = config or SearchConfig()
        self.retriever = Retriever(
            self._snapshot,
            self.embedder,
            self.config,
            rewriter,
            fixed_vectors=self._stored_fixed_vectors,
            catalog_fits=self.catalog_fits,
        )
        self._functions: dict[str, Callable[..., Any]] = {}
        self._snapshots = Snapshots(
            self.store,
            self._snapshot_model,
            self._group_vectors,
            self._bank_requests if self.config.mode != "lexical" else None,
            self.config.save_snapshots_from,
            self.config.ann_min_tools,
        )
        self._token_cache: dict[tuple[str, str], int] = {}
        self._group_cache: dict[str, Vector] = {}
        self.usage: UsageRecorder | None = None
        if monitor:
            from toolrag.monitor.recorder import UsageRecorder  # the recorder knows runtime events: import late

            self.usage = UsageRecorder(self.store, monitor if isinstance(monitor, MonitorConfig) else None)
        self._catalog_totals: dict[tuple[object, ...], int] = {}
        self._catalog_fit: dict[tuple[object, ...], bool] = {}

    # -- registration -------------------------------------------------------------------------------------------

    def register(self, *tools: ToolLike) -> UpsertReport:
        """Register tools given as Tool objects, dicts, or (`@tool`-decorated or plain) functions."""
        parsed = [self._as_tool(item) for item in tools]
        report = self.register_many(parsed)
        for item, tool in zip(tools, parsed, strict=True):
            if callable(item) and not isinstance(item, Tool | dict):
                self._functions[tool.name] = item
        return report

    @staticmethod
    def _as_tool(item: ToolLike) -> Tool:
        from toolrag.catalog.decorator import tool_from_callable
        from toolrag.catalog.files import tool_from_entry

        if isinstance(item, Tool):
            return item
        if isinstance(item, dict):
            return tool_from_entry(item, source="python")
        if callable(item):
            return getattr(item, "__toolrag_tool__", None) or tool_from_callable(item)
        raise InvalidToolError(f"cannot register {item!r}: expected a Tool, a dict or a function")

    def register_many(
        self,
        tools: Sequence[Tool],
        progress: ProgressCallback | None = None,
        audit: Sequence[AuditEntry] = (),
        expected: Mapping[str, int | None] | None = None,
    ) -> UpsertReport:
        """Upsert tools in one transaction, embedding only texts the store has no vector for.

        `progress` is called with the number of texts embedded after each batch; `audit` is written in the same
        transaction (who changed what: the console's edits); `expected`: the versions the tools were read at,
        compared and set in that transaction (EditConflictError when one moved; `Store.upsert`).
        """
        return self._register(tools, progress, audit, expected, {})

    def _register(
        self,
        tools: Sequence[Tool],
        progress: ProgressCallback | None,
        audit: Sequence[AuditEntry],
        expected: Mapping[str, int | None] | None,
        embedded: EmbeddedVectors,
    ) -> UpsertReport:
        """`register_many`, reusing (and adding to) `embedded`: the vectors an earlier attempt of the same write
        embedded before another writer overtook it (its transaction, their vectors with it, rolled back)."""
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise InvalidToolError(f"tool {duplicate!r} is given more than once")

        def upsert() -> UpsertReport:
            model = self._index_model()
            texts = texts_by_hash(tools)
            missing = self._missing(texts, model.model_id)
            new = [key for key in missing if (model.model_id, key) not in embedded]
            vectors = embed_in_batches(self.embedder, [texts[key] for key in new], progress=progress)
            embedded.update(((model.model_id, key), vector) for key, vector in zip(new, vectors, strict=True))
            reused = {key: embedded[model.model_id, key] for key in missing}
            return self.store.upsert(tools, reused, model, audit, expected)

        try:
            return upsert()
        except ModelMismatchError:
            if not self._follows_model:
                raise
            # The index switched models while this import was embedding (`index rebuild` in another process):
            # a registry that follows the index's model embeds again with the new one.
            return upsert()

    def texts_to_embed(self, tools: Sequence[Tool]) -> int:
        """How many texts of `tools` have no vector yet (for sizing a progress bar)."""
        return len(self._missing(texts_by_hash(tools), self._index_model().model_id))

    def _missing(self, texts: dict[str, str], model_id: str) -> list[str]:
        """Hashes of the texts the store holds no vector of `model_id` for."""
        known = self.store.vectors(model_id, texts)
        return [key for key in texts if key not in known]

    def import_file(
        self, path: str | Path, progress: ProgressCallback | None = None, lenient: bool = False
    ) -> UpsertReport:
        from toolrag.catalog.files import load_catalog

        return self.register_over(load_catalog(path, lenient=lenient), progress=progress)

    def register_over(self, tools: Sequence[Tool], progress: ProgressCallback | None = None) -> UpsertReport:
        """Register tools over their current versions, as a catalog or `POST /tools` does: the fields a tool was
        given replace the current ones, and those it does not mention (an operator's tenants, scopes, examples,
        aliases, ...) are kept; compare-and-set on the versions read (`write_merged`). Re-posting a tool without
        its tenants made a tenant's tool every tenant's."""
        return self.write_merged({tool.name: partial(_given_over, tool) for tool in tools}, progress)

    def rebuild(self, progress: ProgressCallback | None = None, batch_size: int = 256) -> int:
        """Embed every tool with this registry's model and switch the index to it; returns texts embedded.

        Vectors are saved a batch at a time beside the old model's, which keeps serving searches until the
        switch; an interrupted rebuild resumes where it stopped when run again. Tools written meanwhile (an import
        in another process) are embedded too before the switch, which happens only when none is missing.
        """
        model = IndexModel(self.embedder.model_id, self.embedder.dimension)
        embedded = 0
        while True:  # until no tool was written between the last look and the switch
            generation = self.store.generation()
            texts = texts_by_hash(self.store.tools(include_inactive=True))
            missing = self._missing(texts, model.model_id)
            for start in range(0, len(missing), batch_size):
                keys = missing[start : start + batch_size]
                vectors = self.embedder.embed_documents([texts[key] for key in keys])
                self.store.save_vectors(model, dict(zip(keys, vectors, strict=True)))
                if progress is not None:
                    progress(len(keys))
            embedded += len(missing)
            if self.store.switch_model(model, if_generation=generation):
                break
        self._snapshots.reset()
        return embedded

    def tools_without_embeddings(self) -> list[str]:
        """Active tools with a text that has no vector for the index's model."""
        model = self._index_model()
        tools = self.store.tools()
        known = self.store.vectors(model.model_id, texts_by_hash(tools))
        return [t.name for t in tools if any(text_hash(x) not in known for x in embedded_texts(t))]

    def embed_missing(self, progress: ProgressCallback | None = None) -> int:
        """Embed the texts that have no vector for the index's model; returns how many."""
        model = self._index_model()
        texts = texts_by_hash(self.store.tools(include_inactive=True))
        missing = self._missing(texts, model.model_id)
        vectors = embed_in_batches(self.embedder, [texts[key] for key in missing], progress=progress)
        self.store.save_vectors(model, dict(zip(missing, vectors, strict=True)))
        self._snapshots.reset()  # saving vectors moves no generation: open the snapshot anew
        return len(missing)

    def texts_to_rebuild(self) -> int:
        """How many texts a rebuild with this registry's model would embed."""
        return len(self._missing(texts_by_hash(self.store.tools(include_inactive=True)), self.embedder.model_id))

    def _recorded_embedder_name(self) -> str:
        recorded = self.store.index_model()
        return embedder_name_for(recorded.model_id) if recorded is not None else "default"

    def _index_model(self) -> IndexModel:
        requested = IndexModel(self.embedder.model_id, self.embedder.dimension)
        recorded = self.store.index_model()
        if recorded is not None and recorded != requested:
            if not self._follows_model:
                raise ModelMismatchError(model_mismatch_message(recorded, requested))
            self.embedder = make_embedder(embedder_name_for(recorded.model_id))
            self.retriever.embedder = self.embedder
            return recorded
        return requested

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def update(
        self, name: str, *, edited_by: str | None = None, expected_version: int | None = None, **changes: Any
    ) -> Tool:
        """A new version of a tool with some fields changed (description, aliases, not_for, examples, ...).

        Only texts that changed are embedded again. `edited_by`: who made the change, written to the audit log in
        the same transaction (the fields changed; an unchanged tool writes nothing). The write is a compare-and-set
        on `expected_version` (the version the caller's edit was made from), else on the version read here:
        EditConflictError, with nothing written, when another writer moved the tool in between."""
        check_changes(name, changes)
        current = self.get(name)
        expected = current.version if expected_version is None else expected_version
        return self._write_edit(current, changes, edited_by, expected, {})

    def edit(self, name: str, change: Callable[[Tool], dict[str, Any]], edited_by: str | None = None) -> Tool:
        """A new version made by `change`, a function of the tool as it is (one more example, deactivation): when
        another writer moves the tool between the read and the write, `change` is made again on the tool as that
        writer left it, so both changes stay (a merge, not a conflict)."""

        embedded: EmbeddedVectors = {}

        def write() -> Tool:
            current = self.get(name)
            changes = change(current)
            check_changes(name, changes)
            return self._write_edit(current, changes, edited_by, current.version, embedded)

        return retry_on_conflict(write)

    def _write_edit(
        self,
        current: Tool,
        changes: dict[str, Any],
        edited_by: str | None,
        expected: int,
        embedded: EmbeddedVectors,
        detail: str | None = None,
    ) -> Tool:
        entry = {**current.model_dump(exclude={"version", "created_at", "updated_at"}), **changes}
        updated = Tool.parse(entry)
        changed = sorted(key for key in changes if getattr(current, key) != getattr(updated, key))
        if current.source.startswith(SYNCED_SOURCE_PREFIX) and "overrides" not in changes:
            updated.overrides = operator_overrides(updated, changed)
            updated.source_values = source_values(current, updated.overrides)
        audit = []
        if edited_by and changed:
            audit.append(AuditEntry("edited", detail or ", ".join(changed), current.name, None, edited_by))
        self._register([updated], None, audit, {current.name: expected}, embedded)
        return self.get(current.name)

    def write_merged(
        self, edits: Mapping[str, Callable[[Tool | None], Tool | None]], progress: ProgressCallback | None = None
    ) -> UpsertReport:
        """Write the tools each edit makes of its tool's current version (None: there is none; an edit returning
        None writes nothing), in one transaction, compare-and-set on the versions read; when another writer moved
        one of them meanwhile, read them again and make the edits again: neither writer's change is lost (an MCP
        sync beside an operator's edit)."""

        embedded: EmbeddedVectors = {}

        def write() -> UpsertReport:
            found = self.store.get_many(edits)
            current = {name: found.get(name) for name in edits}
            written = [tool for name, edit in edits.items() if (tool := edit(current[name])) is not None]
            expected = {tool.name: _version(current[tool.name]) for tool in written}
            return self._register(written, progress, (), expected, embedded) if written else UpsertReport()

        return retry_on_conflict(write)

    def add_example(
        self,
        name: str,
        text: str,
        tenant: str | None = None,
        source: Literal["operator", "usage"] = "operator",
        edited_by: str | None = None,
    ) -> Tool:
        """A new version of the tool with one more example request (search/examples.py): for `tenant`'s searches,
        or every tenant's when None. Made on the tool as it is at the write (`edit`): concurrent additions all stay."""
        example = {"text": text, "tenant": tenant, "source": source}
        return self.edit(name, lambda current: {"examples": [*current.examples, example]}, edited_by)

    def remove_example(self, name: str, text: str, tenant: str | None = None, edited_by: str | None = None) -> Tool:
        wanted = (" ".join(text.split()).casefold(), tenant)

        def without(current: Tool) -> dict[str, Any]:
            kept = [e for e in current.examples if (e.text.casefold(), e.tenant) != wanted]
            if len(kept) == len(current.examples):
                whose = f"tenant {tenant!r}" if tenant else "every tenant"
                raise InvalidToolError(f"{name!r} has no example request {text!r} for {whose}")
            return {"examples": kept}

        return self.edit(name, without, edited_by)

    def promotable_requests(self, name: str, days: int = 90) -> list[tuple[str | None, str]]:
        """(tenant, request) of logged requests after which the tool was called successfully in the same session,
        newest first, without those already among its examples: the candidates to promote to example requests."""
        since = utc_now() - timedelta(days=days)
        known = {(e.text.casefold(), e.tenant) for e in self.get(name).examples}
        found: dict[tuple[str, str | None], tuple[str | None, str]] = {}
        for used in self.store.usage.called_after(since):
            text = " ".join(used.request.split())
            key = (text.casefold(), used.tenant)
            if used.tool == name and text and key not in known:
                found.setdefault(key, (used.tenant, text))
        return list(found.values())

    def drop_overrides(self, name: str, fields: Iterable[str], edited_by: str | None = None) -> Tool:
        """A new version with `fields` (description, schemas, annotations an operator replaced) back at their
        source's value, which syncs then keep current again. Made on the tool as it is at the write (`edit`)."""
        wanted = sorted(set(fields))
        detail = f"{', '.join(wanted)}: the source's again"
        embedded: EmbeddedVectors = {}

        def write() -> Tool:
            current = self.get(name)
            changes = returned_to_source(current, wanted, self.store.history(name))
            return self._write_edit(current, changes, edited_by, current.version, embedded, detail)

        return retry_on_conflict(write)

    def set_active(self, name: str, active: bool, edited_by: str | None = None) -> Tool:
        """Deactivate (or reactivate) a tool: it leaves (or rejoins) search and execution; its history stays."""
        return self.edit(name, lambda _: {"active": active}, edited_by)

    def history(self, name: str) -> list[Tool]:
        versions = self.store.history(name)
        if not versions:
            raise ToolNotFoundError(f"no tool named {name!r}", name=name)
        return versions

    def rollback(self, name: str, version: int) -> Tool:
        """A new version whose content is that of an earlier version (history only grows)."""
        earlier = next((t for t in self.history(name) if t.version == version), None)
        if earlier is None:
            known = ", ".join(str(t.version) for t in self.history(name))
            raise ToolNotFoundError(
                f"{name!r} has no version {version} (versions: {known})", name=name, version=version
            )
        return self.update(name, **earlier.model_dump(exclude={"name", "version", "created_at", "updated_at"}))

    # -- reading ------------------------------------------------------------------------------------------------

    def get(self, name: str) -> Tool:
        tool = self.store.get(name)
        if tool is None:
            raise ToolNotFoundError(f"no tool named {name!r}", name=name)
        return tool

    def tools(self, include_inactive: bool = False) -> list[Tool]:
        return self.store.tools(include_inactive)

    def function(self, name: str) -> Callable[..., Any] | None:
        """The Python callable registered in this process for a tool, if any."""
        return self._functions.get(name)

    def visible_tools(self, principal: Principal) -> list[Tool]:
        return self.partition(principal)[0]

    def partition(self, principal: Principal) -> tuple[list[Tool], list[Tool]]:
        """(the active tools the principal may use, the active tools it may not), from the current snapshot."""
        index = self._snapshot()
        mask = self.retriever.visibility.mask(index, principal)
        if mask is None:
            return list(index.tools), []
        hidden = ~mask if index.live is None else ~mask & index.live
        return [index.tools[i] for i in np.flatnonzero(mask).tolist()], [
            index.tools[i] for i in np.flatnonzero(hidden).tolist()
        ]

    @property
    def generation(self) -> int:
        """Grows with every change to the registry, from any process."""
        return self._snapshot().generation

    # -- search -------------------------------------------------------------------------------------------------

    def search(
        self, query: str, principal: Principal | None = None, k: int | None = None, session: str | None = None
    ) -> list[SearchResult]:
        """The tools for a request: at most k (default 3) for each step it asks for, with the tools they require,
        at most `SearchConfig.max_set_tools` in all (search/steps.py, search/relations.py); possibly none when
        nothing is relevant. Without k, all of them when the principal's whole catalog fits
        `inject_all_below_tokens` (an explicit k wins).

        `session` groups the searches and calls of one conversation in the usage log."""
        principal = principal or Principal.anonymous()
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
        principal = principal or Principal.anonymous()
        results, matched = self.retriever.named(query, principal, limit)
        if results and self.usage is not None:
            self.usage.record_retrieval(query, principal, results, session)
        return results, matched

    def rank(
        self, query: str, principal: Principal | None = None, limit: int = 10, mode: str | None = None
    ) -> list[SearchResult]:
        """The full ranking (no threshold, no cut), for evaluation and debugging."""
        return self.retriever.rank(query, principal or Principal.anonymous(), limit, mode)

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
        index = self._snapshot()
        chosen = [index.tools[index.by_name[r.name.lower()]] for r in results]
        rendered = render(chosen, fmt)
        note = searched_text(query, self.config.max_request_chars).note
        return Selection(results, rendered, tools_tokens(rendered), self.catalog_tokens(principal, fmt), note)

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

        principal = principal or Principal.anonymous()
        results = self.retriever.search(query, principal, k)
        k = self.config.k if k is None else k
        index = self._snapshot()
        injected = tools_tokens(render([index.tools[index.by_name[r.name.lower()]] for r in results], fmt))
        catalog = self.catalog_tokens(principal, fmt)
        explanation = explain(self.retriever, query, principal, results, k, reveal_hidden)
        saved = round(100.0 * (1 - injected / catalog), 1) if catalog else 0.0
        return explanation.model_copy(
            update={"injected_tokens": injected, "catalog_tokens": catalog, "saved_pct": saved}
        )

    def schemas(self, names: Iterable[str], principal: Principal | None = None, fmt: str = "openai") -> list[Any]:
        """Full definitions of named tools the principal may use; a hidden tool is reported as not found."""
        principal = principal or Principal.anonymous()
        visible = {t.name: t for t in self.visible_tools(principal)}
        chosen = []
        for name in names:
            if name not in visible:
                raise ToolNotFoundError(f"no tool named {name!r}", name=name)
            chosen.append(visible[name])
        return render(chosen, fmt)

    def catalog_tokens(self, principal: Principal, fmt: str = "openai") -> int:
        """What injecting every tool the principal can see would cost (counted once per registry generation)."""
        key = (self._snapshot().generation, principal.visibility_key, fmt)
        if key not in self._catalog_totals:
            if len(self._catalog_totals) > 256:
                self._catalog_totals.clear()
            self._catalog_totals[key] = sum(self._tool_tokens(t, fmt) for t in self.visible_tools(principal))
        return self._catalog_totals[key]

    def catalog_fits(self, principal: Principal, budget: int, fmt: str = "openai") -> bool:
        """Whether every tool the principal can see costs fewer tokens than `budget` in full; counts only until the
        budget is reached, once per registry generation."""
        index = self._snapshot()
        key = (index.generation, principal.visibility_key, budget, fmt)
        if key not in self._catalog_fit:
            if len(self._catalog_fit) > 256:
                self._catalog_fit.clear()
            mask = self.retriever.visibility.mask(index, principal)
            total = 0
            for position, tool in enumerate(index.tools):
                if mask is None or mask[position]:
                    total += self._tool_tokens(tool, fmt)
                    if total >= budget:
                        break
            self._catalog_fit[key] = total < budget
        return self._catalog_fit[key]

    def _tool_tokens(self, tool: Tool, fmt: str) -> int:
        key = (tool.content_hash, fmt)
        if key not in self._token_cache:
            self._token_cache[key] = tools_tokens(render([tool], fmt))
        return self._token_cache[key]

    # -- the in-memory snapshot ---------------------------------------------------------------------------------

    def snapshot(self) -> SearchIndex:
        """The current in-memory index (tools, postings, vectors): what search sees right now."""
        return self._snapshot()

    def _snapshot(self) -> SearchIndex:
        return self._snapshots.current()

    def _snapshot_model(self) -> tuple[IndexModel, Embedder]:
        model = self._index_model()
        return model, self.embedder

    def _bank_requests(self, embedder: Embedder) -> Vector:
        return bank_requests(embedder, self._stored_fixed_vectors)

    def _group_vectors(self, model: IndexModel) -> dict[str, Vector]:
        """Description vectors of the described groups, embedded once per text and model (a handful per registry)."""
        texts = {name: group_text(name, text) for name, text in self.store.group_descriptions().items()}
        keys = {name: f"{model.model_id}:{text_hash(text)}" for name, text in texts.items()}
        missing = [name for name, key in keys.items() if key not in self._group_cache]
        if missing:
            vectors = self.embedder.embed_documents([texts[name] for name in missing])
            self._group_cache.update(zip([keys[name] for name in missing], vectors, strict=True))
        return {name: self._group_cache[key] for name, key in keys.items()}

    def learn_from_usage(self, days: int = 90) -> int:
        """Learn the score adjustment of `SearchConfig.usage_weight` from the usage log's successful calls of the
        last `days` (search/feedback.py); returns how many (request, tool) pairs it remembers."""
        since = utc_now() - timedelta(days=days)
        index = self._snapshot()
        memory = UsageMemory.learn(self.store.usage.called_after(since), index.embedder or self.embedder)
        self.retriever.memory = memory
        self.retriever.cache.clear()
        return memory.size

    def describe_groups(self, descriptions: Mapping[str, str | None]) -> None:
        """Say what groups of tools (MCP servers, categories) are for; None forgets a description. Search ranks a
        group's tools higher when the request matches its description (search/groups.py)."""
        for name, text in descriptions.items():
            if text is not None and not text.strip():
                raise ConfigError(f"group {name!r}: the description is blank (use None to remove it)")
        self.store.describe_groups(descriptions)

    def group_descriptions(self) -> dict[str, str]:
        return self.store.group_descriptions()

    def _stored_fixed_vectors(self, embedder: Embedder, texts: Sequence[str], *, as_documents: bool) -> Vector:
        """Fixed texts (the small-talk bank) embedded as requests or documents, kept in the store beside the tool
        vectors under their own keys: embedded once per model and registry, not once per process."""
        kind = "document" if as_documents else "request"
        keys = [text_hash(f"{kind}\n{text}") for text in texts]
        # Under a model key of their own: a nearest-neighbour query of the tools' vectors must never meet them.
        fixed_model = IndexModel(f"{embedder.model_id}{FIXED_TEXTS_SUFFIX}", embedder.dimension)
        known = self.store.vectors(fixed_model.model_id, keys)
        missing = [(key, text) for key, text in zip(keys, texts, strict=True) if key not in known]
        fresh: dict[str, Vector] = {}
        if missing:
            vectors = embed_fixed(embedder, [text for _, text in missing], as_documents=as_documents)
            fresh = {key: vector for (key, _), vector in zip(missing, vectors, strict=True)}
        if fresh:
            # A search waits at most a second for the store's write lock (another instance's import holds it while
            # it writes; the vector index is built beside writes, store/postgres.py IndexBuilder): a save that does
            # not happen costs the next process one embedding.
            with contextlib.suppress(StoreError):  # nor can a registry this process may not write
                self.store.save_vectors(fixed_model, fresh, wait_seconds=1.0)
            known.update(fresh)
        return np.vstack([known[key] for key in keys]).astype(np.float32)

    def close(self) -> None:
        if self.usage is not None:
            self.usage.flush()
        self.store.close()

    def __enter__(self) -> ToolRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_changes(name: str, changes: Mapping[str, Any]) -> None:
    """Refuse an edit of fields a tool does not have, or of its name."""
    unknown = set(changes) - set(Tool.model_fields) - {"name"}
    if unknown or "name" in changes:
        raise InvalidToolError(f"cannot update {', '.join(sorted(unknown or {'name'}))} of {name!r}")


def source_values(before: Tool, overrides: Iterable[str]) -> dict[str, Any]:
    """The source's value of each overridden field of a synced tool after an edit: as recorded, or, for a field the
    edit overrides first, its value before the edit (the source's: no operator had replaced it)."""
    values = {}
    for key in sorted(SOURCE_FIELDS & set(overrides)):
        if key in before.source_values:
            values[key] = before.source_values[key]
        elif key not in before.overrides:
            values[key] = getattr(before, key)
    return values


def returned_to_source(tool: Tool, fields: Sequence[str], history: Sequence[Tool]) -> dict[str, Any]:
    """The changes that give `fields` of `tool` their source's value and drop their overrides. A field overridden
    before source values were recorded gets the value of the latest version that did not override it."""
    if not fields:
        raise InvalidToolError("name a field to return to its source's value")
    kept = [field for field in fields if field not in tool.overrides or field not in SOURCE_FIELDS]
    if kept:
        overridden = ", ".join(sorted(SOURCE_FIELDS & set(tool.overrides))) or "none"
        raise InvalidToolError(
            f"{', '.join(kept)} of {tool.name!r}: not an operator's override (the overridden fields: {overridden})"
        )
    values = {}
    for field in fields:
        if field in tool.source_values:
            values[field] = tool.source_values[field]
            continue
        before = next((v for v in reversed(history) if field not in v.overrides), None)
        if before is None or not before.source.startswith(SYNCED_SOURCE_PREFIX):
            raise InvalidToolError(
                f"the source's {field} of {tool.name!r} is not recorded (overridden before toolrag kept it)"
            )
        values[field] = getattr(before, field)
    return {
        **values,
        "overrides": [key for key in tool.overrides if key not in fields],
        "source_values": {key: value for key, value in tool.source_values.items() if key not in fields},
    }


def operator_overrides(edited: Tool, changed: Iterable[str]) -> list[str]:
    """The overrides of a synced tool after an operator changed `changed`: its own text for a field the source owns,
    and its deactivation (a reactivation hands `active` back to the syncs), are kept by later syncs."""
    overrides = set(edited.overrides) | (SOURCE_FIELDS & set(changed))
    if "active" in changed:
        overrides.discard(DEACTIVATED_BY_OPERATOR)
        if not edited.active:
            overrides.add(DEACTIVATED_BY_OPERATOR)
    return sorted(overrides)


def _given_over(given: Tool, current: Tool | None) -> Tool:
    """`given`'s fields set by its writer over `current` (checked again as a whole: an example must still serve one
    of the tool's tenants)."""
    if current is None:
        return given
    kept = current.model_dump(exclude={"version", "created_at", "updated_at"} | given.model_fields_set)
    return Tool.parse({**kept, **given.model_dump(include=given.model_fields_set)})


def _version(tool: Tool | None) -> int | None:
    return None if tool is None else tool.version
