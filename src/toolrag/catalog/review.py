"""Text changes that wait for review (issue 33 §4): a description edit is a security event, not only a re-embed.

While the registry's `text_review` setting is on (`ToolRegistry.require_text_review`, kept in the store so every
process honours it), an import, API, CLI or Python write that changes the text a model reads of an existing tool
(`REVIEWED_FIELDS`: description, input schema, output schema, annotations, what the MCP pins hash, and what
operators write that is shown with them: the not-for line and each tenant's description) does not put that text
live: the tool is written with its live text and the write's other fields (scopes, tenants, examples, aliases, ...
go live at once), and the proposed text is recorded, with who proposed it, how, when and what the poisoning checks
find in it, until an admin approves it (a new version) or rejects it (remembered by hash: proposing the same text
again leaves it out until the rejection is lifted). New tools, MCP syncs (pinned on their own, mcp/importer.py),
rollbacks and returning MCP overrides to their server's text (both restore text that was live) are not held.
"""

from __future__ import annotations

import difflib
import getpass
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from toolrag.model import REVIEWED_FIELDS, Tool, reviewed_text_hash
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


@dataclass
class Gate:
    """What one write holds back: the rows and audit entries it writes with the tools (`Store.upsert`)."""

    proposal: Proposal
    reviews: dict[str, TextReview]
    rows: list[TextReview] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def admit(self, current: Tool | None, proposed: Tool) -> Tool:
        """The tool to write now: `proposed` itself for a new tool or one whose text did not change, else
        `proposed` with the live text (its proposed text held, or left out as rejected)."""
        if current is None:
            return proposed
        live, wanted = text_of(current), text_of(proposed)
        if wanted == live:
            return proposed
        digest, known = reviewed_text_hash(wanted), self.reviews.get(current.name)
        kept = proposed.model_copy(update={key: getattr(current, key) for key in REVIEWED_FIELDS})
        if known is not None and known.rejected_hash == digest:
            self.rejected.append(current.name)
            return kept
        self.held.append(current.name)
        if known is not None and known.pending_hash == digest:
            return kept  # waits already as it is: its proposer and findings are kept
        findings, by = _findings(proposed), self.proposal.proposer()
        row = TextReview(
            current.name,
            digest,
            wanted,
            findings,
            by,
            self.proposal.origin,
            rejected_hash=None if known is None else known.rejected_hash,
        )
        self.rows.append(row)
        self.reviews[current.name] = row
        changed = ", ".join(sorted(key for key in REVIEWED_FIELDS if wanted[key] != live[key]))
        flagged = f"; findings: {'; '.join(findings)}" if findings else ""
        detail = f"{changed} changed through {self.proposal.origin}: waits for review{flagged}"
        self.audit.append(AuditEntry("text held", detail, current.name, None, by))
        return kept


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
        return self.live.model_copy(update=self.review.pending or {})

    def diff(self) -> list[str]:
        return text_diff(self.live, self.proposed, "live", "proposed")


def text_diff(before: Tool, after: Tool, old: str, new: str) -> list[str]:
    """A unified diff of what a model reads of two versions of a tool (at most MAX_DIFF_LINES lines)."""
    lines = difflib.unified_diff(_shown(before), _shown(after), old, new, lineterm="")
    return list(lines)[:MAX_DIFF_LINES]


def _shown(tool: Tool) -> list[str]:
    """What a model would read of the tool, one line per line, in a stable order."""
    return json.dumps(text_of(tool), indent=2, sort_keys=True, ensure_ascii=False).splitlines()
