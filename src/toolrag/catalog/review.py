"""Changes of what a model is given or told to call, held for review (issue 33 §4, issue 48): a description edit is
a security event, not only a re-embed, and so is a requirement, an alias or an example request that changes which
tools reach the model.

While the registry's `text_review` setting is on (`ToolRegistry.reviews.require`, kept in the store so every
process honours it), an import, API, console, CLI or Python write that changes what a model reads of an existing
tool, or what it is given or told to call because of it (`REVIEWED_FIELDS`: description, input schema, output
schema, annotations, the not-for line, each tenant's description, `requires`, aliases, example requests and past
tasks, the category, `return_direct`), or widens whom it reaches (a scope dropped, a tenant added or every
tenant's, a reactivation: `widening`), does not put it live: the tool is written with its live values of those
fields, the narrower of both for whom it reaches, and the write's other fields (a narrowing goes live at once), and
the proposed values are recorded, with who proposed them, how, when and what the poisoning checks find in what
approving would make live, until an admin approves them (a new version) or rejects them (remembered by hash:
proposing the same again leaves it out until the rejection is lifted). What waits is kept able to make a tool: a
narrowing takes out the views of the tenants it drops (`model.fitted_to_tenants`), and the hash an admin decides by
is of what the diff shows.

A new tool's text is written live, its aliases and example requests held; a new tool another tool would bring into
a set (its name is in a tool's `requires`, the same write's included, or in `always_include`) is written inactive
and its activation waits like a text change. A new name that differs only in case from an existing tool's is
refused (catalog/edits.py). A held change records only the fields it changes, so approving it later leaves the
others as they are then. MCP syncs are pinned on their own (mcp/importer.py); a rollback, and returning an MCP
override to its server's value, are held unless that text was live (an active version had it) and was not rejected,
and a rollback that brings back a requirement, widens or reactivates is held too (catalog/edits.py).
"""

from __future__ import annotations

import difflib
import functools
import getpass
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import ValidationError

from toolrag.errors import InvalidToolError
from toolrag.model import (
    ACCESS_FIELDS,
    ACTIVATION,
    NEW_TOOL_VIEWS,
    REVIEWED_FIELDS,
    Tool,
    fitted_to_tenants,
    reviewed_text_hash,
)
from toolrag.store.base import AuditEntry, ReviewState, TextReview

Origin = Literal["import", "api", "console", "cli", "python"]

MAX_DIFF_LINES = 400  # of the unified diff shown; a schema rewritten whole is still readable in the tool itself


def login_name() -> str | None:
    """The user running this process, None when it has no name (a container's arbitrary uid has no password entry)."""
    try:
        return named(getpass.getuser())
    except (OSError, KeyError):
        return None


def named(name: str | None) -> str | None:
    """A writer's or approver's name as it is recorded and compared: a blank one is no name."""
    return name.strip() or None if name is not None else None


ON_BEHALF = " via "  # `ann via chat-model:gpt`: a writer that ann set to work (runtime/write_examples.py)


def on_behalf_of(person: str | None, writer: str) -> str:
    """What a write made by `writer` (a chat model) for `person` (None: for nobody named) is recorded as."""
    return writer if person is None else f"{person}{ON_BEHALF}{writer}"


def person_of(proposer: str) -> str:
    """Who is answerable for a proposal: the person a writer worked for, else the proposer itself."""
    return proposer.split(ON_BEHALF, 1)[0]


@dataclass(frozen=True)
class Proposal:
    """Who writes (None: the user running this process, looked up only when a change is held), and through which
    way in: what a held change is recorded with."""

    origin: Origin
    by: str | None

    def proposer(self) -> str | None:
        return named(self.by) if self.by is not None else login_name()


def text_of(tool: Tool) -> dict[str, Any]:
    """The text a model reads of the tool, as JSON values."""
    return tool.model_dump(mode="json", include=set(REVIEWED_FIELDS))


def required_by(tools: Sequence[Tool]) -> dict[str, list[str]]:
    """The tools `tools` require (declared, optional ones too), by name in lower case (requirements resolve names
    case-insensitively), each with the tools that require it."""
    needed: dict[str, list[str]] = {}
    for tool in tools:
        for requirement in tool.requires:
            needed.setdefault(requirement.tool.lower(), []).append(tool.name)
    return needed


def widening(current: Tool, proposed: Tool) -> tuple[dict[str, Any], dict[str, Any]]:
    """What `proposed` widens of whom `current` reaches (`ACCESS_FIELDS`): the proposed values that wait for review,
    and the values written meanwhile. A dropped scope widens (every scope is needed): meanwhile every scope either
    asks for. A tenant added, or no tenant left (every tenant's), widens: meanwhile the tenants both name, or the
    live ones when they share none (a tool moved to other tenants reaches no new one before approval)."""
    held: dict[str, Any] = {}
    meanwhile: dict[str, Any] = {}
    if any(scope not in proposed.scopes for scope in current.scopes):
        held["scopes"] = list(proposed.scopes)
        meanwhile["scopes"] = [*current.scopes, *(scope for scope in proposed.scopes if scope not in current.scopes)]
    if current.tenants and (not proposed.tenants or any(t not in current.tenants for t in proposed.tenants)):
        held["tenants"] = list(proposed.tenants)
        both = [tenant for tenant in current.tenants if tenant in proposed.tenants]
        meanwhile["tenants"] = both or list(current.tenants)
    return held, meanwhile


@dataclass
class Gate:
    """What one write holds back: the rows and audit entries it writes with the tools (`Store.upsert`).
    `requirers`: every tool's requirements by needed name (`required_by`, and the always-included names), read
    only when a write adds or activates a tool; `ever_active`: whether a tool was ever active (its history)."""

    proposal: Proposal
    reviews: dict[str, TextReview]
    requirers: Callable[[], Mapping[str, Sequence[str]]] = dict
    ever_active: Callable[[str], bool] = lambda _: False
    # Reviewed fields whose proposed values were live before (a rollback's, a return to a source's value): not held.
    live_before: frozenset[str] = frozenset()
    rows: list[TextReview] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    _requirers: Mapping[str, Sequence[str]] | None = field(default=None, init=False, repr=False)
    _writing: tuple[Tool, ...] = field(default=(), init=False, repr=False)
    _read: dict[str, ReviewState] = field(default_factory=dict, init=False, repr=False)
    _consulted: set[str] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self._read = {name: row.state for name, row in self.reviews.items()}

    @property
    def read(self) -> dict[str, ReviewState]:
        """What waited for each tool of this write as the gate read it (its change and its rejection): what the
        gate decided (held, left out as rejected, live) and the rows it wrote were made from it, so the store
        writes them only while it is so (compare-and-set; another proposal or a decision in between)."""
        names = self._consulted | {row.tool for row in self.rows}
        return {name: self._read.get(name, (None, None)) for name in sorted(names)}

    def admit(self, current: Tool | None, proposed: Tool) -> Tool:
        """The tool to write now: `proposed` itself when none of its reviewed fields changed and it reaches nobody
        new; else `proposed` with the live values of the fields that changed (their proposed values held, or left
        out as rejected), and of whom it reaches the narrower of both (`widening`). A tool reactivated, or new and
        required by another tool, is written inactive, its activation held; a new tool's aliases and example
        requests wait like an existing tool's."""
        self._consulted.add(proposed.name)
        if current is None:
            return self._admit_new(proposed)
        known = self.reviews.get(current.name)
        # A tool held inactive stays so, whatever a later write says of `active`, until an admin approves it.
        activation = not current.active and (proposed.active or _waits_for_activation(known))
        if activation:
            proposed = proposed.model_copy(update={"active": False})
        widened, meanwhile = widening(current, proposed)
        # A narrowing goes live with the views of the tenants it drops: they serve nobody now, no change to review.
        serving = _narrowed(current, meanwhile.get("tenants", proposed.tenants))
        live, wanted = text_of(serving), text_of(proposed)
        changed = {k: v for k, v in wanted.items() if v != live[k] and k not in self.live_before}
        earlier = dict(known.pending or {}) if known is not None and known.waiting else {}
        if earlier:
            # A held change builds on the one waiting before it: a field this write leaves as it is live keeps its
            # waiting value (two example requests added in a row both wait; a description waits beside aliases).
            # Whom the tool reaches keeps its waiting value only where this write leaves it: approving must not
            # undo a narrowing made since.
            left = {key for key in ACCESS_FIELDS if set(getattr(proposed, key)) == set(getattr(current, key))}
            widened = {**{key: earlier[key] for key in left if key in earlier}, **widened}
            changed = {**{key: value for key, value in earlier.items() if key in live}, **changed}
            changed = {key: value for key, value in changed.items() if value != live[key]}
        pending = {**changed, **widened, **({ACTIVATION: True} if activation else {})}
        if not pending:
            return self._withdraw(current.name, known, proposed) if earlier else proposed
        held_back = {key: getattr(serving, key) for key in changed if key not in self.live_before}
        kept = proposed.model_copy(update={**held_back, **meanwhile})
        base = kept.model_dump(mode="json")
        # Fitted, a view may be left as the live tool has it: it no longer waits.
        fitted = fitted_to_tenants(base, pending).items()
        pending = {key: value for key, value in fitted if key not in base or key not in live or value != base[key]}
        if not pending:
            return self._withdraw(current.name, known, kept) if earlier else kept
        if not (_valid_json(base) and _valid_json({**base, **pending})):  # `model_copy` checks none of the rules
            raise InvalidToolError(f"tool {current.name!r}: this change and the one waiting make no tool together")
        what = ", ".join(sorted(key for key in pending if key != ACTIVATION))
        if not activation:
            return self._hold(current.name, pending, kept, known, f"{what} changed")
        needing = ", ".join(self._needing(current.name))
        if self.ever_active(current.name):
            # Only what changes: approving a reactivation must not put back a text a sync replaced since.
            activated = "a tool reactivated, written inactive"
        else:
            # A new tool's activation is reviewed on its whole text, as when it was added (and rejected as a whole).
            pending = {**live, **pending}
            activated = f"a new tool{f' that {needing} require(s)' if needing else ''}, written inactive"
        held = f"{activated}; {what} changed" if what else activated
        return self._hold(current.name, pending, kept, known, held)

    def rejects(self, current: Tool, proposed: Tool) -> bool:
        """Whether what `proposed` changes of `current`'s reviewed fields is the change an admin rejected."""
        self._consulted.add(current.name)
        known = self.reviews.get(current.name)
        if known is None or known.rejected_hash is None:
            return False
        live, wanted = text_of(current), text_of(proposed)
        changed = {key: value for key, value in wanted.items() if value != live[key]}
        return bool(changed) and reviewed_text_hash(changed) == known.rejected_hash

    def writing(self, tools: Sequence[Tool]) -> None:
        """The tools of this write, whose requirements count as the registry's: a new tool that another new tool
        of the same write requires is held as one a live tool requires."""
        self._writing = tuple(tools)

    def brings_in(self, name: str) -> bool:
        """Whether another tool requires `name` or `always_include` names it (a new tool of that name is held)."""
        return bool(self._needing(name))

    def _needing(self, name: str) -> list[str]:
        """The tools that require `name`, but itself: every tool's requirements, an inactive tool's too (approving
        its reactivation must not bring in a tool nobody reviewed)."""
        return sorted(other for other in self._requirers_read().get(name.lower(), ()) if other != name)

    def _requirers_read(self) -> Mapping[str, Sequence[str]]:
        if self._requirers is None:
            needed = {name: list(requirers) for name, requirers in self.requirers().items()}
            for name, requirers in required_by(self._writing).items():
                needed.setdefault(name, []).extend(requirers)
            self._requirers = needed
        return self._requirers

    def _admit_new(self, proposed: Tool) -> Tool:
        needing = self._needing(proposed.name) if proposed.active else []
        known = self.reviews.get(proposed.name)
        if needing:
            inactive = proposed.model_copy(update={"active": False})
            pending = {**text_of(proposed), ACTIVATION: True}
            changed = f"a new tool that {', '.join(needing)} require(s), written inactive"
            return self._hold(proposed.name, pending, inactive, known, changed)
        views = {key: value for key, value in text_of(proposed).items() if key in NEW_TOOL_VIEWS and value}
        if not views:
            return proposed
        bare = proposed.model_copy(update={key: [] for key in views})
        held = f"{', '.join(sorted(views))} of a new tool"
        return self._hold(proposed.name, views, bare, known, held)

    def _hold(self, name: str, pending: dict[str, Any], kept: Tool, known: TextReview | None, changed: str) -> Tool:
        digest = reviewed_text_hash(pending)
        if known is not None and known.rejected_hash == digest:
            self.rejected.append(name)
            return kept
        base = kept.model_dump(mode="json")
        earlier = (known.pending or {}) if known is not None and known.waiting else {}
        replaced = sorted(key for key in earlier if pending.get(key) != earlier[key])  # what no longer waits as it was
        if known is not None and earlier and digest != known.pending_hash and _only_taken_out(base, pending, earlier):
            # This write only took something out of what waits (made live, or narrowed): the rest waits as its
            # proposer left it.
            self.rows.append(replace(known, pending_hash=digest, pending=pending))
            self.reviews[name] = self.rows[-1]
            detail = f"{', '.join(replaced)}: no longer waits as proposed (made live or narrowed since)"
            self.audit.append(AuditEntry("text narrowed", detail, name, None, self.proposal.proposer()))
            return kept
        self.held.append(name)
        if known is not None and known.pending_hash == digest:
            return kept  # waits already as it is: its proposer and findings are kept
        # The findings are of what approving would make live, not only of what this write brings.
        findings, by = _findings(Tool.parse({**base, **pending})), self.proposal.proposer()
        rejected = None if known is None else known.rejected_hash
        # A write builds on what waits (an edit is made on the waiting tool): everyone who wrote to it while it
        # waited stays its proposer, until it is decided or withdrawn, and none of them approves it.
        inherited = known.proposers if known is not None and known.waiting else ()
        contributors = tuple(dict.fromkeys([*inherited, *([by] if by else [])]))
        row = TextReview(
            name, digest, pending, findings, by, self.proposal.origin, rejected_hash=rejected, contributors=contributors
        )
        self.rows.append(row)
        self.reviews[name] = row
        flagged = f"; findings: {'; '.join(findings)}" if findings else ""
        if others := [who for who in inherited if who != by]:
            flagged += f"; builds on what {', '.join(others)} proposed"
        if replaced:  # named with its proposer
            who = known.proposed_by if known is not None and known.proposed_by else "someone unknown"
            flagged += f"; replaces what {who} proposed of {', '.join(replaced)}"
        detail = f"{changed} through {self.proposal.origin}: waits for review{flagged}"
        self.audit.append(AuditEntry("text held", detail, name, None, by))
        return kept

    def _withdraw(self, name: str, known: TextReview | None, proposed: Tool) -> Tool:
        """Drop the change waiting for `name`: what it held is live now, or was narrowed since (its rejection, if
        any, is kept)."""
        rejected = None if known is None else known.rejected_hash
        self.rows.append(TextReview(name, rejected_hash=rejected))
        self.reviews[name] = self.rows[-1]
        detail = "the change waiting for review was dropped: a later write made it live or narrowed it"
        self.audit.append(AuditEntry("text withdrawn", detail, name, None, self.proposal.proposer()))
        return proposed


def _narrowed(tool: Tool, tenants: Sequence[str]) -> Tool:
    """`tool` without the example requests and descriptions of the tenants not in `tenants` (none: every tenant)."""
    views = fitted_to_tenants(tool.model_dump(mode="json"), {"tenants": list(tenants)})
    del views["tenants"]
    if not views:
        return tool
    return Tool.parse({**tool.model_dump(mode="json", exclude={"version", "created_at", "updated_at"}), **views})


def _only_taken_out(base: Mapping[str, Any], pending: Mapping[str, Any], earlier: Mapping[str, Any]) -> bool:
    """Whether `pending` is what waited (`earlier`) with some of it taken out, and the views of tenants it no longer
    serves with them, and nothing else: no value of the writer's own."""
    return set(pending) <= set(earlier) and pending == fitted_to_tenants(base, {k: earlier[k] for k in pending})


def _valid_json(tool: Mapping[str, Any]) -> bool:
    """Whether `tool` (as JSON) keeps the rules a tool is parsed by."""
    try:
        Tool.parse(dict(tool))
    except (ValidationError, InvalidToolError):
        return False
    return True


def _waits_for_activation(review: TextReview | None) -> bool:
    return review is not None and review.waiting and bool((review.pending or {}).get(ACTIVATION))


def _findings(tool: Tool) -> tuple[str, ...]:
    """What the poisoning checks find in every text of the tool a model reads: its source's (`tool_findings`, as for
    an MCP tool) and the operators' not-for line and tenants' descriptions."""
    from toolrag.catalog.poisoning import scan_texts, tool_findings  # the scanner's model loads only when text changes

    written = [("not_for", tool.not_for)] if tool.not_for else []
    written += [(f"description for tenant {tenant}", text) for tenant, text in sorted(tool.tenant_descriptions.items())]
    return (*tool_findings(tool), *(str(finding) for finding in scan_texts(written)))


@dataclass(frozen=True)
class TextChange:
    """A held text change as an admin reviews it: the live tool, the proposal and what changed."""

    review: TextReview
    live: Tool

    @functools.cached_property
    def applied(self) -> dict[str, Any]:
        """What approving it writes: what waits, without the views of tenants the live tool has been narrowed away
        from since (a write made while review was off fits nothing)."""
        return fitted_to_tenants(self.live.model_dump(mode="json"), self.review.pending or {})

    @property
    def shown_hash(self) -> str:
        """The hash an admin decides by: of what the diff shows (`applied`). It is the waiting change's own while
        the two are the same, and only then can the change be approved."""
        return reviewed_text_hash(self.applied)

    @property
    def proposed(self) -> Tool:
        """The live tool with the proposed text: what approving it makes live."""
        return Tool.parse({**self.live.model_dump(mode="json"), **self.applied})

    @property
    def activation(self) -> bool:
        """Whether approving it makes an inactive tool active (new, or reactivated): all of it reaches models."""
        return _waits_for_activation(self.review) and not self.live.active

    def diff(self) -> list[str]:
        # An activation: nothing of it serves now, so all of it is new to models.
        return text_diff(None if self.activation else self.live, self.proposed, "live", "proposed")


def text_diff(before: Tool | None, after: Tool, old: str, new: str) -> list[str]:
    """A unified diff of two versions of a tool (None: an inactive one; all of `after` is new to models): whom it
    reaches first and whole, then what a model reads of it (at most MAX_DIFF_LINES lines)."""
    if before is None:
        old = "(inactive)"
    reach = difflib.unified_diff(_reach(before), _reach(after), f"{old}: reaches", f"{new}: reaches", lineterm="")
    text = difflib.unified_diff(_shown(before), _shown(after), old, new, lineterm="")
    return [*reach, *itertools.islice(text, MAX_DIFF_LINES)]


def _reach(tool: Tool | None) -> list[str]:
    """Whom the tool reaches, one line per field."""
    if tool is None:
        return []
    return [f"{key}: {json.dumps(getattr(tool, key), ensure_ascii=False)}" for key in (*ACCESS_FIELDS, "active")]


def _shown(tool: Tool | None) -> list[str]:
    """What a model would read of the tool, one line per line, in a stable order."""
    if tool is None:
        return []
    return json.dumps(text_of(tool), indent=2, sort_keys=True, ensure_ascii=False).splitlines()
