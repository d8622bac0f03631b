"""Writing tools: registration (embedding only texts the store has no vector for) and edits of the tools as they are.

Every write is a compare-and-set on the versions read (`Store.upsert`); an edit made on the tool as it is
(`ToolWriter.edit`, `write_merged`) is made again when another writer moved the tool in between, so concurrent edits
merge instead of conflicting. A synced tool (an MCP server's) keeps an operator's overrides of the fields its source
owns, with the source's values recorded to return to (`drop_overrides`). A write that says who proposes it
(`Proposal`) holds text changes for review while the registry asks for it (catalog/review.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from toolrag.catalog.review import Gate, Proposal, TextChange, required_by, text_of, widening
from toolrag.embed.base import ProgressCallback, embed_in_batches
from toolrag.errors import (
    EditConflictError,
    InvalidToolError,
    ModelMismatchError,
    ToolNotFoundError,
)
from toolrag.limits import MAX_SET_TOOLS
from toolrag.model import (
    DEACTIVATED_BY_OPERATOR,
    REVIEWED_FIELDS,
    SOURCE_FIELDS,
    SYNC_FIELDS,
    SYNCED_SOURCE_PREFIX,
    ExampleRequest,
    Requirement,
    Tool,
    case_twin,
    check_description,
    check_tenant_name,
    example_key,
)
from toolrag.search.index import texts_by_hash
from toolrag.snapshot.embedding import IndexEmbeddings
from toolrag.store.base import AuditEntry, ReviewState, TextReview, UpsertReport, Vector

Written = TypeVar("Written")
ToolLike = Tool | Callable[..., Any] | dict[str, Any]
EmbeddedVectors = dict[tuple[str, str], Vector]  # (model id, text hash) -> the vector a write's attempt embedded

# How many times an edit made on the tool as it is (`ToolWriter.edit`, `write_merged`) is made again after another
# writer moved the tool: every round one writer wins, so this many writers of one tool at once all get through.
EDIT_ATTEMPTS = 32


def retry_on_conflict(
    write: Callable[[], Written],
    attempts: int = EDIT_ATTEMPTS,
    conflict: type[Exception] = EditConflictError,
) -> Written:
    """`write` (read the tools, make the edit of them, write it compare-and-set on the versions read) made again
    while another writer moved a tool between its read and its write (`conflict`, nothing written), `attempts`
    times at most: each round reads anew, so the edit is made on the tool as the winner left it."""
    attempt = 1
    while True:
        try:
            return write()
        except conflict:
            if attempt >= attempts:
                raise
            attempt += 1


@dataclass(frozen=True)
class Edited:
    """An edit's outcome: the tool as it is now, and whether its text change waits for review (`held`) or was the
    text an admin rejected (`rejected`), the live text serving in both cases."""

    tool: Tool
    held: bool = False
    rejected: bool = False


@dataclass(frozen=True)
class Decision:
    """What an approval writes with its tool: the cleared row, the pending hash it was made on, its audit entry,
    and what waited as it was read (the row keeps its rejection: a lift made since must not be undone)."""

    rows: list[TextReview] = dataclasses.field(default_factory=list)
    reviewed: dict[str, str | None] = dataclasses.field(default_factory=dict)
    audit: list[AuditEntry] = dataclasses.field(default_factory=list)
    read: dict[str, ReviewState] = dataclasses.field(default_factory=dict)


def as_tool(item: ToolLike) -> Tool:
    """A tool given as a Tool, a catalog entry (dict), or a (`@tool`-decorated or plain) function."""
    from toolrag.catalog.decorator import tool_from_callable
    from toolrag.catalog.files import tool_from_entry

    if isinstance(item, Tool):
        return item
    if isinstance(item, dict):
        return tool_from_entry(item, source="python")
    if callable(item):
        return getattr(item, "__toolrag_tool__", None) or tool_from_callable(item)
    raise InvalidToolError(f"cannot register {item!r}: expected a Tool, a dict or a function")


class ToolWriter:
    """The writes of one registry's tools (`ToolRegistry` delegates to it; its methods say more)."""

    def __init__(self, embeddings: IndexEmbeddings, brought_in: Callable[[], Iterable[str]] = tuple) -> None:
        """`brought_in()`: names search adds to every set (`SearchConfig.always_include`): a new tool of such a
        name is held like one a tool requires."""
        self._embeddings = embeddings
        self._brought_in = brought_in
        self.store = embeddings.store

    def get(self, name: str) -> Tool:
        tool = self.store.get(name)
        if tool is None:
            raise ToolNotFoundError(f"no tool named {name!r}", name=name)
        return tool

    def register(
        self,
        tools: Sequence[Tool],
        progress: ProgressCallback | None,
        audit: Sequence[AuditEntry],
        expected: Mapping[str, int | None] | None,
        embedded: EmbeddedVectors,
        decision: Decision | Gate | None = None,
        pinned: Mapping[str, str | None] | None = None,
    ) -> UpsertReport:
        """`ToolRegistry.register_many`, reusing (and adding to) `embedded`: the vectors an earlier attempt of the
        same write embedded before another writer overtook it (its transaction, their vectors with it, rolled
        back). `decision`: the text reviews written in the same transaction (held changes, compare-and-set on what
        waited when the gate read it; an approval). `pinned`: MCP pins compared in it (`Store.upsert`)."""
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise InvalidToolError(f"tool {duplicate!r} is given more than once")
        embeddings = self._embeddings

        def upsert() -> UpsertReport:
            model = embeddings.index_model()
            texts = texts_by_hash(tools)
            missing = embeddings.missing(texts, model.model_id)
            new = [key for key in missing if (model.model_id, key) not in embedded]
            vectors = embed_in_batches(embeddings.embedder, [texts[key] for key in new], progress=progress)
            embedded.update(((model.model_id, key), vector) for key, vector in zip(new, vectors, strict=True))
            reused = {key: embedded[model.model_id, key] for key in missing}
            rows, reviewed = ([], None) if decision is None else (decision.rows, _reviewed(decision))
            read = None if decision is None else decision.read
            report = self.store.upsert(tools, reused, model, audit, expected, rows, reviewed, read, pinned)
            if isinstance(decision, Gate):
                report.held, report.rejected = list(decision.held), list(decision.rejected)
            return report

        try:
            return upsert()
        except ModelMismatchError:
            if not embeddings.follows_model:
                raise
            # The index switched models while this import was embedding (`index rebuild` in another process):
            # a registry that follows the index's model embeds again with the new one.
            return upsert()

    def register_gated(
        self,
        tools: Sequence[Tool],
        progress: ProgressCallback | None,
        audit: Sequence[AuditEntry],
        expected: Mapping[str, int | None] | None,
        proposal: Proposal,
    ) -> UpsertReport:
        """`register` of whole tools (the Python API's), holding their text changes for review when the registry
        asks for it: compare-and-set on the versions the held text was compared with (made again when another
        writer moved one, unless the caller gave the versions it read)."""
        embedded: EmbeddedVectors = {}

        def write() -> UpsertReport:
            current = self.store.get_many(t.name for t in tools)
            for tool in tools:
                check_sync_fields(tool, current.get(tool.name))
            written = [kept_off(tool, current.get(tool.name)) for tool in tools]
            self._check_new_names([t.name for t in written if t.name not in current])
            gate = self._gate(proposal)
            if gate is None:
                return self.register(written, progress, audit, expected, embedded)
            gate.writing(written)
            admitted = [gate.admit(current.get(t.name), t) for t in written]
            versions = {t.name: _version(current.get(t.name)) for t in written} | dict(expected or {})
            return self.register(admitted, progress, [*audit, *gate.audit], versions, embedded, gate)

        return retry_on_conflict(write, 1 if expected else EDIT_ATTEMPTS)

    def register_over(
        self, tools: Sequence[Tool], progress: ProgressCallback | None = None, proposal: Proposal | None = None
    ) -> UpsertReport:
        """Register tools over their current versions, as a catalog or `POST /tools` does: the fields a tool was
        given replace the current ones, and those it does not mention (an operator's tenants, scopes, examples,
        aliases, ...) are kept; compare-and-set on the versions read (`write_merged`). Re-posting a tool without
        its tenants made a tenant's tool every tenant's. `proposal`: who writes, for text changes held."""
        return self.write_merged({tool.name: partial(given_over, tool) for tool in tools}, progress, proposal)

    def _gate(self, proposal: Proposal | None) -> Gate | None:
        """The gate of a write that says who proposes it, while the registry asks for text review; else None."""
        if proposal is None or not self.store.reviews.required():
            return None
        reviews = {row.tool: row for row in self.store.reviews.read()}

        def requirers() -> dict[str, list[str]]:
            needed = required_by(self.store.tools(include_inactive=True))
            # A requirement waiting for review counts too: approving it must not bring in a tool nobody reviewed.
            for row in reviews.values():
                for requirement in (row.pending or {}).get("requires", []) if row.waiting else []:
                    needed.setdefault(Requirement.model_validate(requirement).tool.lower(), []).append(row.tool)
            for name in self._brought_in():
                needed.setdefault(name.lower(), []).append("always_include")
            return needed

        return Gate(proposal, reviews, requirers, lambda name: any(v.active for v in self.store.history(name)))

    def _check_new_names(self, new: Sequence[str]) -> None:
        """Refuse a new tool whose name differs only in case from another tool's (of the registry or of the same
        write): requirements and agents resolve names case-insensitively, so it would stand in for that tool. And
        one named '.' or '..': pages address a tool by its name in the path, where browsers resolve those (one
        written before this rule stays, and is restored from a backup)."""
        if not new:
            return
        if dots := sorted({".", ".."} & set(new)):
            raise InvalidToolError(f"invalid tool name {dots[0]!r}: a name of dots only would address another page")
        if twins := case_twin([*self.store.names(), *new]):
            other, name = twins
            raise InvalidToolError(
                f"tool {name!r}: its name differs only in case from the tool {other!r}; choose another name"
            )

    def update(
        self,
        name: str,
        edited_by: str | None,
        expected_version: int | None,
        changes: dict[str, Any],
        proposal: Proposal | None = None,
    ) -> Edited:
        """A new version of a tool with some fields changed (description, aliases, not_for, examples, ...).

        Only texts that changed are embedded again. `edited_by`: who made the change, written to the audit log in
        the same transaction (the fields changed; an unchanged tool writes nothing). The write is a compare-and-set
        on `expected_version` (the version the caller's edit was made from), else on the version read here:
        EditConflictError, with nothing written, when another writer moved the tool in between. `proposal`: who
        writes, for a text change held for review."""
        check_changes(name, changes)
        current = self.get(name)
        expected = current.version if expected_version is None else expected_version
        return self._write_edit(current, changes, edited_by, expected, {}, proposal=self._gate(proposal))

    def edit(
        self,
        name: str,
        change: Callable[[Tool], dict[str, Any]],
        edited_by: str | None = None,
        proposal: Proposal | None = None,
    ) -> Tool:
        """A new version made by `change`, a function of the tool as it is (one more example, deactivation): when
        another writer moves the tool between the read and the write, `change` is made again on the tool as that
        writer left it, so both changes stay (a merge, not a conflict)."""
        embedded: EmbeddedVectors = {}

        def write() -> Tool:
            current = self.get(name)
            gate = self._gate(proposal)
            changes = change(_as_waiting(current, gate))
            check_changes(name, changes)
            return self._write_edit(current, changes, edited_by, current.version, embedded, proposal=gate).tool

        return retry_on_conflict(write)

    def _write_edit(
        self,
        current: Tool,
        changes: dict[str, Any],
        edited_by: str | None,
        expected: int,
        embedded: EmbeddedVectors,
        detail: str | None = None,
        proposal: Gate | None = None,
        decision: Decision | None = None,
    ) -> Edited:
        """The edit written compare-and-set on `expected`: with `proposal`, its text change held for review;
        with `decision`, an approval's row and audit entry written with it."""
        updated, changed = _edited(current, changes, proposal)
        audit = [] if proposal is None else list(proposal.audit)
        if decision is not None:
            audit = list(decision.audit)
        elif edited_by and changed:
            audit.append(AuditEntry("edited", detail or ", ".join(changed), current.name, None, edited_by))
        self.register([updated], None, audit, {current.name: expected}, embedded, decision or proposal)
        held = proposal is not None and current.name in proposal.held
        return Edited(self.get(current.name), held, proposal is not None and current.name in proposal.rejected)

    def write_merged(
        self,
        edits: Mapping[str, Callable[[Tool | None], Tool | None]],
        progress: ProgressCallback | None = None,
        proposal: Proposal | None = None,
        pinned: Mapping[str, str | None] | None = None,
    ) -> UpsertReport:
        """Write the tools each edit makes of its tool's current version (None: there is none; an edit returning
        None writes nothing), in one transaction, compare-and-set on the versions read; when another writer moved
        one of them meanwhile, read them again and make the edits again: neither writer's change is lost (an MCP
        sync beside an operator's edit). `proposal`: who writes, for text changes held for review (an MCP sync
        gives none: its text is pinned by the importer). `pinned`: the pending hash each named tool's MCP pin must
        still have at the write (the importer's plan; ApprovalConflictError, nothing written, when one moved)."""
        embedded: EmbeddedVectors = {}

        def write() -> UpsertReport:
            gate = self._gate(proposal)
            found = self.store.get_many(edits)
            current = {name: found.get(name) for name in edits}
            written = [tool for name, edit in edits.items() if (tool := edit(current[name])) is not None]
            self._check_new_names([tool.name for tool in written if current.get(tool.name) is None])
            if proposal is None:
                _check_synced(written, current, self._gate(Proposal("python", None)))
            if gate is not None:
                gate.writing(written)
                written = [gate.admit(current[tool.name], tool) for tool in written]
            expected = {tool.name: _version(current[tool.name]) for tool in written}
            audit = [] if gate is None else gate.audit
            if not written:
                return UpsertReport()
            return self.register(written, progress, audit, expected, embedded, gate, pinned)

        return retry_on_conflict(write)

    def add_example(
        self,
        name: str,
        text: str,
        tenant: str | None,
        source: Literal["operator", "usage"],
        edited_by: str | None,
        proposal: Proposal | None = None,
    ) -> Tool:
        example = {"text": text, "tenant": tenant, "source": source}
        wanted = example_key(text, tenant)

        def added(current: Tool) -> dict[str, Any]:
            # Given to this tool alone, a request a past task gave it becomes one of its own views.
            kept = [e for e in current.examples if not (e.task and e.key == wanted)]
            return {"examples": [*kept, example]}

        return self.edit(name, added, edited_by, proposal)

    def add_task_example(
        self,
        names: Sequence[str],
        text: str,
        tenant: str | None,
        source: Literal["operator", "usage"],
        edited_by: str | None,
        proposal: Proposal | None = None,
    ) -> list[Tool]:
        """A past task: `text` as one more example request of each of `names`, every tool its task used, written
        in one transaction (all of them or none); a tool that has the example already is left as it is. Made
        again on the tools as they are when another writer moved one of them, like `edit`. `proposal`: who
        writes, for the examples held for review (a past task redirects retrieval as much as a description)."""
        names = list(dict.fromkeys(names))
        if len(names) < 2:
            raise InvalidToolError("a past task names two or more tools; for one tool, add an example request")
        if len(names) > MAX_SET_TOOLS:
            raise InvalidToolError(f"a past task names at most {MAX_SET_TOOLS} tools (a set holds no more)")
        example = _task_example(text, tenant, source)
        embedded: EmbeddedVectors = {}

        def write() -> list[Tool]:
            found = self.store.get_many(names)
            if missing := [name for name in names if name not in found]:
                raise ToolNotFoundError(f"no tool named {missing[0]!r}", name=missing[0])
            others = ", ".join(names)
            gate = self._gate(proposal)
            written, audit = [], []
            for current in (found[name] for name in names):
                seen = _as_waiting(current, gate)
                if any(e.key == example.key for e in seen.examples):
                    continue
                updated, changed = _edited(current, {"examples": [*seen.examples, example]}, gate)
                written.append(updated)
                if changed:
                    detail = f"examples: a past task of {others}"
                    audit.append(AuditEntry("edited", detail, current.name, None, edited_by))
            if written:
                versions = {tool.name: found[tool.name].version for tool in written}
                self.register(written, None, [*audit, *(gate.audit if gate else ())], versions, embedded, gate)
            now = self.store.get_many(names)
            return [now[name] for name in names]

        return retry_on_conflict(write)

    def remove_example(
        self, name: str, text: str, tenant: str | None, edited_by: str | None, proposal: Proposal | None = None
    ) -> Tool:
        wanted = example_key(text, tenant)

        def without(current: Tool) -> dict[str, Any]:
            kept = [e for e in current.examples if e.key != wanted]
            if len(kept) == len(current.examples):
                whose = f"tenant {tenant!r}" if tenant else "every tenant"
                raise InvalidToolError(f"{name!r} has no example request {text!r} for {whose}")
            return {"examples": kept}

        return self.edit(name, without, edited_by, proposal)

    def set_tenant_description(
        self,
        name: str,
        tenant: str,
        text: str,
        expected_version: int | None,
        edited_by: str | None,
        proposal: Proposal | None = None,
    ) -> Edited:
        """A new version whose principals of `tenant` get `text` as its description (shown, injected and searched
        with, for them only), compare-and-set on `expected_version` (else on the version read here)."""
        tenant = check_tenant_name(tenant)
        text = check_description(text, f"the description for tenant {tenant!r}")
        current = self.get(name)
        if current.tenants and tenant not in current.tenants:
            raise InvalidToolError(
                f"tenant {tenant!r} may not use {name!r} (its tenants: {', '.join(current.tenants)}): no description"
                " for it"
            )
        changes = {"tenant_descriptions": {**current.tenant_descriptions, tenant: text}}
        expected = current.version if expected_version is None else expected_version
        detail = f"description for tenant {tenant}"
        return self._write_edit(current, changes, edited_by, expected, {}, detail, proposal=self._gate(proposal))

    def drop_tenant_description(
        self,
        name: str,
        tenant: str,
        expected_version: int | None,
        edited_by: str | None,
        proposal: Proposal | None = None,
    ) -> Edited:
        """A new version whose principals of `tenant` get the source's description again."""
        current = self.get(name)
        if tenant not in current.tenant_descriptions:
            described = ", ".join(current.tenant_descriptions) or "none"
            raise InvalidToolError(
                f"{name!r} has no description for tenant {tenant!r} (the tenants it has one for: {described})"
            )
        kept = {owner: text for owner, text in current.tenant_descriptions.items() if owner != tenant}
        expected = current.version if expected_version is None else expected_version
        detail = f"description for tenant {tenant}: the source's again"
        gate = self._gate(proposal)
        return self._write_edit(current, {"tenant_descriptions": kept}, edited_by, expected, {}, detail, proposal=gate)

    def drop_overrides(
        self, name: str, fields: Iterable[str], edited_by: str | None = None, proposal: Proposal | None = None
    ) -> Edited:
        """A new version with `fields` (description, schemas, annotations an operator replaced) back at their
        source's value, which syncs then keep current again. Made on the tool as it is at the write (`edit`).
        While the registry asks for review (`proposal`: who writes), a source value that was never live (no version
        of the tool had it) waits for review like any text change, the tool left as it is, and a rejected text is
        never returned to."""
        wanted = sorted(set(fields))
        detail = f"{', '.join(wanted)}: the source's again"
        embedded: EmbeddedVectors = {}

        def write() -> Edited:
            current = self.get(name)
            history = self.store.history(name)
            changes = returned_to_source(current, wanted, history)
            gate = self._gate(proposal)
            if gate is not None:
                returned, _ = _edited(current, changes, None)
                if not _was_live(returned, wanted, history) or gate.rejects(current, returned):
                    return self._held_or_written(current, changes, edited_by, current.version, embedded, detail, gate)
                # Its text was live: nothing is held, but the write carries what the gate read (a rejection of
                # that very text made meanwhile must stop it: `Gate.read`).
                gate.live_before = REVIEWED_FIELDS
            return self._write_edit(current, changes, edited_by, current.version, embedded, detail, proposal=gate)

        return retry_on_conflict(write)

    def history(self, name: str) -> list[Tool]:
        versions = self.store.history(name)
        if not versions:
            raise ToolNotFoundError(f"no tool named {name!r}", name=name)
        return versions

    def rollback(
        self,
        name: str,
        version: int,
        expected_version: int | None = None,
        edited_by: str | None = None,
        proposal: Proposal | None = None,
    ) -> Edited:
        """A new version with the content of `version`, compare-and-set on `expected_version` (the current version
        the caller saw) when given, else on the version read here: EditConflictError, nothing written, when the
        tool is at another version (someone changed it after the caller chose what to roll back to). While the
        registry asks for review (`proposal`: who writes), a version that was never active (a new tool's, held)
        or whose text was rejected, or one that brings back a requirement (the tool it names may have come since,
        unreviewed) or widens whom the tool reaches, is held like any change, the tool left as it is."""
        versions = self.history(name)
        earlier = next((t for t in versions if t.version == version), None)
        if earlier is None:
            known = ", ".join(str(t.version) for t in versions)
            raise ToolNotFoundError(
                f"{name!r} has no version {version} (versions: {known})", name=name, version=version
            )
        changes = earlier.model_dump(exclude={"name", "version", "created_at", "updated_at"})
        current = self.get(name)
        expected = current.version if expected_version is None else expected_version
        detail = f"rolled back to version {version}"
        gate = self._gate(proposal)
        if gate is not None:
            returned, _ = _edited(current, changes, None)
            if not earlier.active or _reaches_further(current, returned, gate):
                return self._held_or_written(current, changes, edited_by, expected, {}, detail, gate)
            gate.live_before = REVIEWED_FIELDS  # its text was live: what waits is only fitted to it
        return self._write_edit(current, changes, edited_by, expected, {}, detail, proposal=gate)

    def _held_or_written(
        self,
        current: Tool,
        changes: dict[str, Any],
        edited_by: str | None,
        expected: int,
        embedded: EmbeddedVectors,
        detail: str,
        gate: Gate,
    ) -> Edited:
        """An edit that must pass the review gate whole: written when it changes nothing reviewed; else the tool is
        left as it is (an override kept, an inactive version not restored) and the change waits, or is left out as
        rejected."""
        updated, _ = _edited(current, changes, None)
        if gate.admit(current, updated) is updated:
            return self._write_edit(current, changes, edited_by, expected, embedded, detail)
        self.register([current], None, gate.audit, {current.name: expected}, embedded, gate)
        return Edited(self.get(current.name), current.name in gate.held, current.name in gate.rejected)

    def write_decision(self, live: Tool, changes: dict[str, Any], approver: str | None, decision: Decision) -> Tool:
        """An approval's write (catalog/decisions.py): `changes` over `live`, compare-and-set on its version, with
        the decision's review row and audit entry in the same transaction."""
        return self._write_edit(live, changes, approver, live.version, {}, decision=decision).tool


def check_changes(name: str, changes: Mapping[str, Any]) -> None:
    """Refuse an edit of fields a tool does not have, of its name, or of what only syncs write."""
    unknown = set(changes) - set(Tool.model_fields) - {"name"}
    if unknown or "name" in changes:
        raise InvalidToolError(f"cannot update {', '.join(sorted(unknown or {'name'}))} of {name!r}")
    if synced := sorted(SYNC_FIELDS & set(changes)):
        raise InvalidToolError(f"cannot update {', '.join(synced)} of {name!r}: {_SYNC_ONLY}")


_SYNC_ONLY = "written by MCP syncs only (return a field to its server's value with drop_overrides)"


def check_sync_fields(given: Tool, current: Tool | None) -> None:
    """Refuse a tool given with `overrides` or `source_values` other than the registry's (none for a new tool): only
    syncs write them, and a forged source value would go live unreviewed when returned to."""
    for key in sorted(SYNC_FIELDS & given.model_fields_set):
        field = Tool.model_fields[key]
        theirs = getattr(current, key) if current is not None else field.get_default(call_default_factory=True)
        if getattr(given, key) != theirs:
            raise InvalidToolError(f"tool {given.name!r}: {key} is {_SYNC_ONLY}")


def _reaches_further(current: Tool, returned: Tool, gate: Gate) -> bool:
    """Whether a rollback to `returned` (a version that was live) must still pass review: its text was rejected,
    it requires a tool `current` does not, it widens whom the tool reaches, or it reactivates the tool."""
    required = {requirement.tool.lower() for requirement in current.requires}
    return (
        gate.rejects(current, returned)
        or any(requirement.tool.lower() not in required for requirement in returned.requires)
        or any(widening(current, returned))
        or (returned.active and not current.active)
    )


def _was_live(returned: Tool, fields: Sequence[str], history: Sequence[Tool]) -> bool:
    """Whether every one of `fields` of `returned` had its value in an active version of the tool (a held change
    is never written; a held new tool's text is, in its inactive first version)."""
    active = [version for version in history if version.active]
    return all(any(getattr(version, key) == getattr(returned, key) for version in active) for key in fields)


def _check_synced(written: Sequence[Tool], current: Mapping[str, Tool | None], gate: Gate | None) -> None:
    """A write no review gate holds (a sync's, whose text the MCP importer pins) may change of what a model reads
    only what a server owns (its text and schemas) of tools a server owns; the rest (requirements, aliases,
    examples, ...) goes through `update` or `register_over`, where review holds it. While the registry asks for
    review (`gate`), such a write adds no tool another tool requires or `always_include` names: the importer
    quarantines those instead."""
    for tool in written:
        before = current.get(tool.name)
        owned = tool.source.startswith(SYNCED_SOURCE_PREFIX) and (before is None or before.source == tool.source)
        if before is not None:
            live, wanted = text_of(before), text_of(tool)
            changed = {key for key in live if live[key] != wanted[key]}
        else:  # a new tool of a server: its text, and its server as its category (mcp/importer.py `to_tool`)
            server = tool.source.removeprefix(SYNCED_SOURCE_PREFIX)
            changed = {key for key, value in text_of(tool).items() if value and key not in SOURCE_FIELDS}
            changed -= {"category"} if tool.category == server else set()
        if changed and (not owned or changed - SOURCE_FIELDS):
            raise InvalidToolError(
                f"tool {tool.name!r}: a sync's write changes only what an MCP server owns; edit the rest with update"
            )
        if before is None and gate is not None and gate.brings_in(tool.name):
            raise InvalidToolError(f"tool {tool.name!r}: another tool brings it into sets; it waits for review")


def _as_waiting(current: Tool, gate: Gate | None) -> Tool:
    """The tool as its waiting change would leave it (itself when none waits or no review is asked for): under
    review, an edit is made on it, so that a second example request added while the first waits is added to it."""
    waiting = None if gate is None else gate.reviews.get(current.name)
    return TextChange(waiting, current).proposed if waiting is not None and waiting.waiting else current


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


def _task_example(text: str, tenant: str | None, source: Literal["operator", "usage"]) -> ExampleRequest:
    try:
        return ExampleRequest(text=text, tenant=tenant, source=source, task=True)
    except ValidationError as exc:
        raise InvalidToolError(f"a past task's request: {exc.errors()[0]['msg']}") from None


def _edited(current: Tool, changes: Mapping[str, Any], proposal: Gate | None) -> tuple[Tool, list[str]]:
    """`current` with `changes` made (a text change held for review by `proposal`), and the fields that changed; a
    synced tool records which fields its operators now own."""
    updated = Tool.parse({**current.model_dump(exclude={"version", "created_at", "updated_at"}), **changes})
    if proposal is not None:
        updated = proposal.admit(current, updated)
    changed = sorted(key for key in changes if getattr(current, key) != getattr(updated, key))
    if current.source.startswith(SYNCED_SOURCE_PREFIX) and "overrides" not in changes:
        updated.overrides = operator_overrides(updated, changed)
        updated.source_values = source_values(current, updated.overrides)
    return updated, changed


def given_over(given: Tool, current: Tool | None) -> Tool:
    """`given`'s fields set by its writer over `current` (checked again as a whole: an example must still serve one
    of the tool's tenants). A synced tool it deactivates stays so whatever later syncs list, as with `set_active`."""
    check_sync_fields(given, current)
    if current is None:
        return given
    kept = current.model_dump(exclude={"version", "created_at", "updated_at"} | given.model_fields_set)
    return kept_off(Tool.parse({**kept, **given.model_dump(include=given.model_fields_set)}), current)


def kept_off(tool: Tool, current: Tool | None) -> Tool:
    """`tool` as written over `current`: a synced tool an operator's write deactivates stays so whatever later syncs
    list (the override `set_active` records)."""
    if current is not None and current.source.startswith(SYNCED_SOURCE_PREFIX) and current.active and not tool.active:
        return tool.model_copy(update={"overrides": operator_overrides(tool, ["active"])})
    return tool


def _reviewed(decision: Decision | Gate) -> dict[str, str | None] | None:
    return decision.reviewed if isinstance(decision, Decision) else None


def _version(tool: Tool | None) -> int | None:
    return None if tool is None else tool.version
