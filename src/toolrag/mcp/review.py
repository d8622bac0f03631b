"""What an admin reviews before approving a quarantined MCP tool: the version the server lists now, whole (its
description, schemas and annotations never reach a model while quarantined, but a person must see them), every
finding with the text that triggered it, and what changed against the approved version."""

from __future__ import annotations

from dataclasses import dataclass

from toolrag.catalog.poisoning import scan_texts
from toolrag.catalog.review import Origin, text_diff
from toolrag.model import Tool, check_description
from toolrag.registry import ToolRegistry


@dataclass(frozen=True)
class PendingReview:
    tool: Tool  # the quarantined version, as its server lists it
    findings: tuple[str, ...]
    pinned: Tool | None  # the approved version, None for a tool never approved
    text_hash: str  # the hash of the text waiting: a decision is made on it (compare-and-set)

    def diff(self) -> list[str]:
        """A unified diff of the approved version's reviewed text against the quarantined one ([] for a new tool)."""
        if self.pinned is None:
            return []
        return text_diff(self.pinned, self.tool, "approved", "quarantined")


def pending_review(registry: ToolRegistry, name: str) -> PendingReview | None:
    """The quarantined version of `name` with its findings, or None when nothing of that name awaits approval."""
    pin = next((p for p in registry.store.pins() if p.tool == name and p.quarantined), None)
    if pin is None or pin.pending is None:
        return None
    pinned = registry.store.get(name) if pin.approved_hash is not None else None
    return PendingReview(pin.pending, pin.findings, pinned, str(pin.pending_hash))


@dataclass(frozen=True)
class Described:
    """A tool after an operator described it for one tenant, and what the poisoning scanner found in the text (a
    finding is shown, not refused: the operator wrote it)."""

    tool: Tool
    findings: tuple[str, ...]
    held: bool = False  # the text waits for review (or was rejected before): the live text serves


def described(
    registry: ToolRegistry,
    name: str,
    tenant: str,
    text: str,
    expected_version: int | None = None,
    edited_by: str | None = None,
    origin: Origin = "python",
) -> Described:
    """`ToolRegistry.descriptions.set` with the text scanned as an MCP server's description is (the CLI,
    the API and the console write through here)."""
    checked = check_description(text, f"the description for tenant {tenant!r}")
    findings = tuple(str(f) for f in scan_texts([(f"description for tenant {tenant}", checked)]))
    edited = registry.descriptions.set(
        name, tenant, checked, expected_version=expected_version, edited_by=edited_by, origin=origin
    )
    return Described(edited.tool, findings, edited.held or edited.rejected)
