"""Changes of what a model is given or told to call, held for review (issue 33 §4, issue 48): a description edit is
a security event, not only a re-embed, and so is a requirement, an alias or an example request that changes which
tools reach the model.

While the registry's `text_review` setting is on (`ToolRegistry.reviews.require`, kept in the store so every
process honours it), an import, API, console, CLI or Python write that changes what a model reads of an existing
tool, or what it is given or told to call because of it (`REVIEWED_FIELDS`: description, input schema, output
schema, annotations, the not-for line, each tenant's description, `requires`, aliases, example requests and past
tasks), does not put it live: the tool is written with its live values of those fields and the write's other
fields (scopes, tenants, category, ... go live at once), and the proposed values are recorded, with who proposed
them, how, when and what the poisoning checks find in them, until an admin approves them (a new version) or rejects
them (remembered by hash: proposing the same again leaves it out until the rejection is lifted).

A new tool's text is written live, its aliases and example requests held; a new tool another tool would bring into
a set (its name is in a tool's `requires`, or in `always_include`) is written inactive and its activation waits
like a text change. A new name that differs only in case from an existing tool's is refused (catalog/edits.py).
A held change records only the fields it changes, so approving it later leaves the others as they are then. MCP
syncs are pinned on their own (mcp/importer.py); a rollback, and returning an MCP override to its server's value,
are held unless that text was live (an active version had it) and was not rejected (catalog/edits.py).
"""

from __future__ import annotations

import difflib
import getpass
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolrag.model import ACTIVATION, NEW_TOOL_VIEWS, REVIEWED_FIELDS, Tool, reviewed_text_hash
from toolrag.store.base import AuditEntry, TextReview

Origin = Literal["import", "api", "console", "cli", "python"]

MAX_DIFF_LINES = 400  # of the unified diff shown; a schema rewritten whole is still readable in the tool itself


@dataclass(frozen=True)
class Proposal:
    """Who writes (None: the user running this process, looked up only when a change is held), and through which
    way in: what a held change is recorded with."""

    origin: Origin
    by: str | None

    def proposer(self) -> str | None:
        if self.by is not None:
            return self.by
        try:
            return getpass.getuser()
        except (OSError, KeyError):  # no login name and no password entry (a container's arbitrary uid)
            return None


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


@dataclass
class Gate:
    """What one write holds back: the rows and audit entries it writes with the tools (`Store.upsert`).
    `requirers`: every tool's requirements by needed name (`required_by`, and the always-included names), read
    only when a write adds or activates a tool; `ever_active`: whether a tool was ever active (its history)."""

    proposal: Proposal
    reviews: dict[str, TextReview]
    requirers: Callable[[], Mapping[str, Sequence[str]]] = dict
    ever_active: Callable[[str], bool] = lambda _: False
    rows: list[TextReview] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    _requirers: Mapping[str, Sequence[str]] | None = field(default=None, init=False, repr=False)

    def admit(self, current: Tool | None, proposed: Tool) -> Tool:
        """The tool to write now: `proposed` itself when none of its reviewed fields changed; else `proposed` with
        the live values of the fields that changed (their proposed values held, or left out as rejected). A tool
        that another tool requires and that was never active (new, or held new before) is written inactive, its
        activation held; a new tool's aliases and example requests wait like an existing tool's."""
        if current is None:
            return self._admit_new(proposed)
        known = self.reviews.get(current.name)
        needing = self._needing(current.name) if proposed.active and not current.active else []
        # A new tool held inactive stays so, whatever a later write says of `active`, until an admin approves it.
        waiting = _waits_for_activation(known) and not current.active
        activation = waiting or (bool(needing) and not self.ever_active(current.name))
        if activation:
            proposed = proposed.model_copy(update={"active": False})
        live, wanted = text_of(current), text_of(proposed)
        changed = {key: value for key, value in wanted.items() if value != live[key]}
        if known is not None and known.waiting:
            # A held change builds on the one waiting before it: a field this write leaves as it is live keeps its
            # waiting value (two example requests added in a row both wait; a description waits beside aliases).
            changed = {**(known.pending or {}), **changed}
            changed.pop(ACTIVATION, None)
            changed = {key: value for key, value in changed.items() if key in live and value != live[key]}
        if not changed and not activation:
            return proposed
        kept = proposed.model_copy(update={key: getattr(current, key) for key in changed})
        what = ", ".join(sorted(changed))
        if activation:
            activated = f"a new tool that {', '.join(needing or ['another tool'])} require(s), written inactive"
            held = f"{activated}; {what} changed" if what else activated
            # A new tool's activation is reviewed on its whole text, as when it was added (and rejected as a whole).
            return self._hold(current.name, {**live, **changed, ACTIVATION: True}, proposed, kept, known, held)
        return self._hold(current.name, changed, proposed, kept, known, f"{what} changed")

    def rejects(self, current: Tool, proposed: Tool) -> bool:
        """Whether what `proposed` changes of `current`'s reviewed fields is the change an admin rejected."""
        known = self.reviews.get(current.name)
        if known is None or known.rejected_hash is None:
            return False
        live, wanted = text_of(current), text_of(proposed)
        changed = {key: value for key, value in wanted.items() if value != live[key]}
        return bool(changed) and reviewed_text_hash(changed) == known.rejected_hash

    def brings_in(self, name: str) -> bool:
        """Whether another tool requires `name` or `always_include` names it (a new tool of that name is held)."""
        return bool(self._needing(name))

    def _needing(self, name: str) -> list[str]:
        """The tools that require `name`, but itself: every tool's requirements, an inactive tool's too (it can be
        reactivated without review, as it was live)."""
        if self._requirers is None:
            self._requirers = self.requirers()
        return sorted(other for other in self._requirers.get(name.lower(), ()) if other != name)

    def _admit_new(self, proposed: Tool) -> Tool:
        needing = self._needing(proposed.name) if proposed.active else []
        known = self.reviews.get(proposed.name)
        if needing:
            inactive = proposed.model_copy(update={"active": False})
            pending = {**text_of(proposed), ACTIVATION: True}
            changed = f"a new tool that {', '.join(needing)} require(s), written inactive"
            return self._hold(proposed.name, pending, proposed, inactive, known, changed)
        views = {key: value for key, value in text_of(proposed).items() if key in NEW_TOOL_VIEWS and value}
        if not views:
            return proposed
        bare = proposed.model_copy(update={key: [] for key in views})
        held = f"{', '.join(sorted(views))} of a new tool"
        return self._hold(proposed.name, views, proposed, bare, known, held)

    def _hold(
        self, name: str, pending: dict[str, Any], proposed: Tool, kept: Tool, known: TextReview | None, changed: str
    ) -> Tool:
        digest = reviewed_text_hash(pending)
        if known is not None and known.rejected_hash == digest:
            self.rejected.append(name)
            return kept
        self.held.append(name)
        if known is not None and known.pending_hash == digest:
            return kept  # waits already as it is: its proposer and findings are kept
        findings, by = _findings(proposed), self.proposal.proposer()
        rejected = None if known is None else known.rejected_hash
        row = TextReview(name, digest, pending, findings, by, self.proposal.origin, rejected_hash=rejected)
        self.rows.append(row)
        self.reviews[name] = row
        flagged = f"; findings: {'; '.join(findings)}" if findings else ""
        detail = f"{changed} through {self.proposal.origin}: waits for review{flagged}"
        self.audit.append(AuditEntry("text held", detail, name, None, by))
        return kept


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

    @property
    def proposed(self) -> Tool:
        """The live tool with the proposed text: what approving it makes live."""
        return Tool.parse({**self.live.model_dump(mode="json"), **(self.review.pending or {})})

    @property
    def new_tool(self) -> bool:
        """Whether approving it activates a new tool (held because a live tool requires it)."""
        return _waits_for_activation(self.review) and not self.live.active

    def diff(self) -> list[str]:
        if self.new_tool:  # nothing of it was ever live: all of it is new
            lines = difflib.unified_diff([], _shown(self.proposed), "(new tool)", "proposed", lineterm="")
            return list(lines)[:MAX_DIFF_LINES]
        return text_diff(self.live, self.proposed, "live", "proposed")


def text_diff(before: Tool, after: Tool, old: str, new: str) -> list[str]:
    """A unified diff of what a model reads of two versions of a tool (at most MAX_DIFF_LINES lines)."""
    lines = difflib.unified_diff(_shown(before), _shown(after), old, new, lineterm="")
    return list(lines)[:MAX_DIFF_LINES]


def _shown(tool: Tool) -> list[str]:
    """What a model would read of the tool, one line per line, in a stable order."""
    return json.dumps(text_of(tool), indent=2, sort_keys=True, ensure_ascii=False).splitlines()
