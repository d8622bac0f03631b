"""Importing upstream tools into the registry: namespacing, poisoning checks, pinning and quarantine.

Every upstream tool becomes `server.tool` (so no server can shadow another's tool). Its content (name,
description, input schema) is pinned by hash when approved; an upstream that changes an approved tool gets the new
version quarantined: the tool is deactivated (neither retrievable nor callable) until `toolrag mcp approve`.
Tools of a server that no longer lists them, or of a server removed from the configuration, are deactivated, never
deleted. Pins are written before tools, so a crash in between errs towards the tool staying unavailable. A sync
writes only what the server owns (`model.SOURCE_FIELDS`) over the tool as operators left it (`Tool.synced`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import mcp.types as types

from toolrag.catalog.edits import retry_on_conflict
from toolrag.catalog.files import repair_schema
from toolrag.catalog.poisoning import scan, tool_findings
from toolrag.catalog.review import login_name, required_by
from toolrag.errors import ApprovalConflictError, InvalidToolError, ServerNotFoundError, ToolNotFoundError
from toolrag.mcp.config import GatewayConfig, ServerConfig
from toolrag.model import (
    DEACTIVATED_BY_OPERATOR,
    MAX_GROUP_DESCRIPTION_CHARS,
    SYNCED_SOURCE_PREFIX,
    Tool,
    case_twin,
    check_json_schema,
)
from toolrag.registry import ToolRegistry
from toolrag.schemas.drafts import deeper_than
from toolrag.store.base import NO_PIN, AuditEntry, Pin

SOURCE_PREFIX = SYNCED_SOURCE_PREFIX
# The finding of a new text a sync had no scan budget left for: it stays quarantined and is scanned by a later sync.
NOT_SCANNED = "(not scanned yet: the server listed more new text than one sync scans; the next sync scans it)"
log = logging.getLogger("toolrag.mcp")


IMPORT_BATCH = 8  # tools registered (embedded) between two looks at a sync's import budget
PLANS = 3  # times a sync or a lift is planned again when an admin decided one of its tools meanwhile
FIRST_SYNC = "first sync"  # the audit entry that says a server's first sync ran (what trusts its tools on sight)


def source_of(server: str) -> str:
    return f"{SOURCE_PREFIX}{server}"


def split_name(name: str) -> tuple[str, str]:
    """(server, upstream tool name) of a namespaced tool name."""
    server, _, tool = name.partition(".")
    return server, tool


def upstream_hash(tool: types.Tool, passed_on: bool = True) -> str:
    """What is pinned: the text the model reads (name, title, description, input schema, and the output schema
    and annotations `find_tools` passes on, when the server sends them). `passed_on=False`: the hash of toolrag
    0.2 and earlier, which did not pass those on, so their pins carry over."""
    # A bottomless schema (refused on import) is hashed as a marker: serializing it would overflow the recursion.
    schema = "<nested too deep>" if deeper_than(tool.input_schema) else tool.input_schema
    content = {"name": tool.name, "title": tool.title, "description": tool.description, "schema": schema}
    if passed_on:
        content |= {key: value for key, value in _passed_on(tool).items() if value is not None}
    return hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class SyncReport:
    server: str
    imported: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unscanned: list[str] = field(default_factory=list)  # new tools the sync had no scan budget left for
    deferred: list[str] = field(default_factory=list)  # approved tools the sync had no import budget left for
    rejected: list[str] = field(default_factory=list)  # listed with the text an admin rejected: left out again

    def merged(self, later: SyncReport) -> SyncReport:
        """Both syncs in one report; a tool imported by the first and unchanged in the second stays imported."""
        imported = list(dict.fromkeys(self.imported + later.imported))
        return SyncReport(
            self.server,
            imported,
            [name for name in dict.fromkeys(self.unchanged + later.unchanged) if name not in imported],
            list(dict.fromkeys(self.quarantined + later.quarantined)),
            list(dict.fromkeys(self.deactivated + later.deactivated)),
            list(dict.fromkeys(self.refused + later.refused)),
            later.unscanned,
            later.deferred,
            list(dict.fromkeys(self.rejected + later.rejected)),
        )


class ToolImporter:
    """Keeps the registry consistent with what the upstream servers list. Thread-safe (one sync at a time)."""

    def __init__(self, registry: ToolRegistry, settings: GatewayConfig) -> None:
        self.registry = registry
        self.settings = settings
        self._lock = threading.Lock()

    def apply(self, server: str, listed: Sequence[types.Tool], instructions: str | None = None) -> SyncReport:
        """Import what `server` lists now; deactivate its tools that it no longer lists. The server's group is
        described by its configured `description`, else by the instructions it sent in the handshake."""
        with self._lock:
            config = self.settings.servers[server]
            # While the registry reviews what models read, a server's own handshake text is not taken on trust as
            # its group's description (a model reads it, and it moves the ranking): only the configured one is,
            # and a changed one waits for an admin like a tool's text. Without one, the group's description is
            # left as an admin made it.
            reviewed = self.registry.reviews.required
            if config.description or not reviewed:
                self._describe(server, config.description or instructions)
            try:  # planned again when an admin decided one of its tools meanwhile (another process)
                return retry_on_conflict(
                    lambda: self._apply(server, config, listed, reviewed), PLANS, ApprovalConflictError
                )
            except ApprovalConflictError as moved:
                raise ApprovalConflictError(
                    f"server {server!r}: its tools' approvals moved while this sync planned, {PLANS} times in a row"
                    " (admins' decisions or other syncs): it stopped, what it wrote is consistent; the next sync"
                    " completes it"
                ) from moved

    def _describe(self, server: str, text: str | None) -> None:
        text = (text or "").strip()[:MAX_GROUP_DESCRIPTION_CHARS]
        findings = scan(text, {}) if text else []
        if findings:
            # Text aimed at the model is refused as in a tool's description: the group goes undescribed.
            detail = f"server description not used: {'; '.join(findings)}"
            self.registry.store.audit([AuditEntry("refused", detail, None, server)])
            text = ""
        self.registry.describe_groups({server: text or None}, origin="import")

    def _apply(self, server: str, config: ServerConfig, listed: Sequence[types.Tool], reviewed: bool) -> SyncReport:
        plan = _Plan(SyncReport(server), scan_seconds=self.settings.scan_seconds_per_sync)
        names = _NameBook.of(self.registry, reviewed)
        pins = {pin.tool: pin for pin in self.registry.store.pins(server)}
        policy = self.settings.approval_policy(server)
        # The first sync is the first that ever ran for this server, whatever it listed: a server that listed
        # nothing, or only tools an admin then rejected, does not keep the trust of a first sync for later tools.
        first_sync = not pins and not self.registry.store.trail.has(FIRST_SYNC, server)
        trust_new = policy == "always" or (policy == "after-first-sync" and first_sync)
        current = self._tools_of(server)
        for upstream_tool in listed[: self.settings.max_tools_per_server]:
            name, digest = f"{server}.{upstream_tool.name}", upstream_hash(upstream_tool)
            if _in_place(pins.get(name), digest, current.get(name), config):
                plan.report.unchanged.append(name)  # approved and registered as listed: nothing to check again
                continue
            try:
                tool = to_tool(server, config, upstream_tool)
                names.check(tool.name, current)
            except InvalidToolError as exc:
                name = f"{server}.{upstream_tool.name}"
                plan.refuse(name, server, str(exc))
                taken = names.taken_from(name, current)
                if taken and (refused := pins.get(name)) is not None and refused.quarantined:
                    # A text under a name another tool took can never be approved: it waits no more (else it would
                    # block approving the server's other tools at once). Other refusals keep what waits.
                    dropped = replace(refused, pending_hash=None, pending=None, findings=())
                    plan.pin(
                        dropped, "quarantine dropped", "the name is another tool's now: what waited cannot be approved"
                    )
                continue
            pin = pins.get(tool.name)
            if pin is not None and _legacy(pin, upstream_tool, digest, tool, current.get(tool.name)):
                pin = self._carry_over(plan, pin, digest)
            # Under review, a new tool another tool requires is no tool to trust on sight: it would join their sets.
            trusted = trust_new and not (pin is None and names.required(tool.name))
            self._plan_one(plan, tool, digest, pin, current.get(tool.name), trusted)
        for upstream_tool in listed[self.settings.max_tools_per_server :]:
            limit = self.settings.max_tools_per_server
            plan.refuse(f"{server}.{upstream_tool.name}", server, f"the server lists more than {limit:,} tools")
        if first_sync:
            plan.audit.append(AuditEntry(FIRST_SYNC, f"{len(listed):,} tools listed", None, server))
        listed_names = {f"{server}.{t.name}" for t in listed}
        for name, tool in current.items():
            if name not in listed_names and tool.active:
                plan.deactivate(name, "removed", "no longer listed by its server; deactivated")
        # Compare-and-set on every pin as read, written or not: an admin's decision made meanwhile (another
        # process) is neither overwritten by a pin planned from before it nor undone by a deactivation planned so.
        read = {name: pin.pending_hash for name, pin in pins.items()} | {
            pin.tool: NO_PIN for pin in plan.pins if pin.tool not in pins
        }
        self.registry.store.save_pins(plan.pins, collapsed(plan.audit, pins), read)
        self._write_tools(plan, read | {pin.tool: pin.pending_hash for pin in plan.pins})
        return plan.report

    def _write_tools(self, plan: _Plan, saved: Mapping[str, str | None]) -> None:
        """Write what the sync planned within its import budget (`import_seconds_per_sync` of CPU: embedding new
        text is the costly part), in batches, each merged over the tools as operators left them; what is past the
        budget is left for the next sync, which finds it pinned and not registered and writes it then
        (`SyncReport.deferred`). Deactivations come first: they embed nothing. At least one batch is written, so
        every sync makes progress. Each batch is written while its tools' pins wait as `saved` (an approval made
        since the pins were saved is not undone by a deactivation planned before it: the sync plans again)."""
        inactive = {name: edit for name, edit in plan.edits.items() if _deactivates(edit)}
        active = [(name, edit) for name, edit in plan.edits.items() if not _deactivates(edit)]
        if inactive:
            self.registry.write_merged(inactive, pinned={name: saved.get(name) for name in inactive})
        budget, started = self.settings.import_seconds_per_sync, time.process_time()
        for first in range(0, len(active), IMPORT_BATCH):
            if first and time.process_time() - started > budget:
                deferred = {name for name, _ in active[first:]}
                plan.report.deferred = sorted(deferred)
                plan.report.imported = [name for name in plan.report.imported if name not in deferred]
                return
            batch = dict(active[first : first + IMPORT_BATCH])
            self.registry.write_merged(batch, pinned={name: saved.get(name) for name in batch})

    @staticmethod
    def _carry_over(plan: _Plan, pin: Pin, digest: str) -> Pin:
        """A pin of the text approved before output schemas and annotations were pinned too: the approval holds
        for them as they are now (they reached no model before), and a later change of them is a change."""
        carried = Pin(pin.tool, pin.server, digest, pin.pending_hash, pin.pending, pin.findings)
        plan.pin(carried, "repinned", "approved text unchanged; its output schema and annotations are pinned from now")
        return carried

    def _plan_one(
        self, plan: _Plan, tool: Tool, digest: str, pin: Pin | None, existing: Tool | None, trust_new: bool
    ) -> None:
        """`trust_new`: whether an unflagged tool never seen before is approved on sight (a server's first sync,
        by default); later new tools wait for approval, so dropping an approved tool and listing new text under a
        new name is no way around the pin."""
        server = split_name(tool.name)[0]
        # A tool whose server lists a text nobody approved is inactive at the write, whatever it was when read: an
        # approval made meanwhile (another process) may have activated it since, on the text before.
        if pin is not None and pin.rejected_hash == digest:
            plan.report.rejected.append(tool.name)  # an admin said no to this very text: no new quarantine, no audit
            plan.deactivate(tool.name)
            return
        if pin is not None and pin.approved_hash == digest:
            if pin.quarantined:
                plan.pin(Pin(tool.name, server, digest), "restored", "upstream went back to the approved version")
            plan.activate(tool, existing)
            return
        if pin is not None and pin.pending_hash == digest and pin.findings != (NOT_SCANNED,):
            plan.report.quarantined.append(tool.name)  # quarantined as it is now: its findings are kept
            plan.deactivate(tool.name)
            return
        findings = plan.scanned(tool)  # only a text never seen before is scanned, within the sync's budget
        if findings == (NOT_SCANNED,):
            plan.report.unscanned.append(tool.name)
        if pin is None and not findings and trust_new:
            plan.pin(Pin(tool.name, server, digest), "imported", "new tool, approved on first sight")
            plan.activate(tool, existing)
        else:
            approved = pin.approved_hash if pin is not None else None
            plan.pin(Pin(tool.name, server, approved, digest, tool, findings), "quarantined", _reason(pin, findings))
            plan.report.quarantined.append(tool.name)
            plan.deactivate(tool.name)

    def approve(self, names: Iterable[str], approver: str | None = None) -> list[str]:
        """Approve quarantined versions: pin their hash and make them active. Returns the names approved."""
        with self._lock:
            return approve_quarantined(self.registry, names, approver or login_name())

    def approve_server(
        self, server: str, reviewed: Mapping[str, str] | None = None, approver: str | None = None
    ) -> list[str]:
        """Approve every quarantined version of one server's tools, all or none (`approve_server`)."""
        with self._lock:
            return approve_server(self.registry, server, reviewed, approver or login_name())

    def reject(self, names: Iterable[str], rejecter: str | None = None) -> list[str]:
        """Reject quarantined versions; the rejection holds while their servers publish the same text."""
        with self._lock:
            return reject_quarantined(self.registry, names, rejecter or login_name())

    def lift(self, names: Iterable[str], lifter: str | None = None) -> list[str]:
        """Forget rejections: the next sync quarantines those tools for review again."""
        with self._lock:
            return lift_rejections(self.registry, names, lifter or login_name())

    def forget_servers(self, configured: Iterable[str]) -> list[str]:
        """Deactivate the tools of servers that are no longer configured (or disabled)."""
        keep = {source_of(name) for name in configured}
        stale = [t for t in self.registry.tools() if t.source.startswith(SOURCE_PREFIX) and t.source not in keep]
        if stale:
            self.registry.store.audit(
                [AuditEntry("removed", "server no longer configured; deactivated", t.name, t.source[4:]) for t in stale]
            )
            self.registry.write_merged(dict.fromkeys((t.name for t in stale), deactivated))
        return [t.name for t in stale]

    def _tools_of(self, server: str) -> dict[str, Tool]:
        source = source_of(server)
        return {t.name: t for t in self.registry.tools(include_inactive=True) if t.source == source}


@dataclass
class _NameBook:
    """The registry's tool names as a sync checks what a server lists against them: a name that differs only in
    case from another tool's is refused (it would stand in for that tool wherever names resolve case-insensitively),
    and, while the registry reviews what models read, which names other tools require."""

    folded: dict[str, str]
    requirers: dict[str, list[str]]
    taken: dict[str, str]  # the registry's names, by their case-folded form

    @classmethod
    def of(cls, registry: ToolRegistry, reviewed: bool) -> _NameBook:
        folded = {name.casefold(): name for name in registry.store.names()}
        if not reviewed:
            return cls(folded, {}, dict(folded))
        requirers = required_by(registry.tools(include_inactive=True))
        for name in registry.config.always_include:  # every set brings these, as a requirement would
            requirers.setdefault(name.lower(), []).append("always_include")
        return cls(folded, requirers, dict(folded))

    def check(self, name: str, own: Mapping[str, Tool]) -> None:
        """Refuse `name` when another tool holds it: one whose name differs only in case, or one of the same name
        that is not among the server's `own` tools (a catalog tool named like it: the sync may neither quarantine
        it nor switch it off)."""
        other = self.folded.setdefault(name.casefold(), name)
        if other != name:
            raise InvalidToolError(f"tool {name!r}: its name differs only in case from the tool {other!r}")
        if self.taken_from(name, own):
            raise InvalidToolError(f"tool {name!r}: the name is another tool's, not one this server's syncs wrote")

    def taken_from(self, name: str, own: Mapping[str, Tool]) -> bool:
        """Whether a tool of `name`, or of a name that differs only in case, is there that is not among the
        server's `own` tools."""
        holder = self.taken.get(name.casefold())
        return holder is not None and (holder != name or holder not in own)  # a case variant: even its own

    def required(self, name: str) -> bool:
        return any(other != name for other in self.requirers.get(name.lower(), ()))


@dataclass
class _Plan:
    """What one sync will write: pins and audit entries first, then tools; and the scan budget it has left. A tool
    is written as an edit of its version at the write (`ToolRegistry.write_merged`): the upstream's fields over the
    operators' (`Tool.synced`), or the same tool deactivated, never the upstream's bare text."""

    report: SyncReport
    pins: list[Pin] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    edits: dict[str, Callable[[Tool | None], Tool | None]] = field(default_factory=dict)
    scan_seconds: float = 30.0  # of CPU for scanning new text: a server listing thousands of new tools at once
    # cannot keep the gateway busy; what is left waits, quarantined, for the next syncs

    def scanned(self, tool: Tool) -> tuple[str, ...]:
        if self.scan_seconds <= 0:
            return (NOT_SCANNED,)
        started = time.process_time()
        try:
            return tool_findings(tool)
        finally:
            self.scan_seconds -= time.process_time() - started

    def pin(self, pin: Pin, action: str, detail: str) -> None:
        self.pins.append(pin)
        self.audit.append(AuditEntry(action, detail, pin.tool, pin.server))

    def activate(self, tool: Tool, existing: Tool | None) -> None:
        merged = synced(existing, tool)  # active, unless an operator deactivated it
        unchanged = existing is not None and existing.content_hash == merged.content_hash
        (self.report.unchanged if unchanged else self.report.imported).append(tool.name)
        self.edits[tool.name] = partial(synced, upstream=tool)

    def deactivate(self, name: str, action: str | None = None, detail: str | None = None) -> None:
        """`name` inactive at the write, whatever it was when read (nothing written when it is inactive or gone
        then); reported and audited with `action` and `detail`."""
        self.edits[name] = partial(deactivated, source=source_of(split_name(name)[0]))
        if action is not None and detail is not None:
            self.report.deactivated.append(name)
            self.audit.append(AuditEntry(action, detail, name, split_name(name)[0]))

    def refuse(self, name: str, server: str, reason: str) -> None:
        self.report.refused.append(name)
        self.audit.append(AuditEntry("refused", reason, name, server))


def synced(current: Tool | None, upstream: Tool) -> Tool:
    """What a sync that listed `upstream` makes of the tool: the upstream's text over the operators' fields."""
    return upstream if current is None else current.synced(upstream)


def deactivated(current: Tool | None, source: str | None = None) -> Tool | None:
    """The tool as it is, inactive (None, nothing to write, when it is gone or inactive already, or, given the
    `source` of the server switching it off, when it is not that server's: a catalog tool may bear its name)."""
    if current is None or not current.active or (source is not None and current.source != source):
        return None
    return current.model_copy(update={"active": False})


def _deactivates(edit: Callable[[Tool | None], Tool | None]) -> bool:
    return isinstance(edit, partial) and edit.func is deactivated


def collapsed(audit: list[AuditEntry], pins_before: dict[str, Pin]) -> list[AuditEntry]:
    """The sync's audit rows, with the quarantines of tools that were quarantined already (a server whose text
    changes at every listing) written as one row for the sync instead of one per tool and sync; a single one keeps
    its own row."""
    again = [row for row in audit if row.action == "quarantined" and _was_quarantined(pins_before.get(row.tool or ""))]
    if len(again) < 2:
        return audit
    names = ", ".join(str(row.tool) for row in again[:5]) + (f" and {len(again) - 5:,} more" if len(again) > 5 else "")
    detail = f"{len(again):,} quarantined tools changed again: {names}"
    summary = AuditEntry("quarantined", detail, None, again[0].server)
    written = {id(row) for row in again}
    return [row for row in audit if id(row) not in written] + [summary]


def _legacy(pin: Pin, upstream: types.Tool, digest: str, tool: Tool, registered: Tool | None) -> bool:
    """Whether `pin` is an approval of toolrag 0.2 or earlier, whose hash left out the output schema and
    annotations, of the text listed now. A pin of today of a tool that had neither has that same hash, so the
    listed ones must also be those registered (which 0.2 registered as they came): a server that adds an output
    schema or annotations (`readOnlyHint`) to an approved tool has them reviewed."""
    if pin.approved_hash != upstream_hash(upstream, passed_on=False) or pin.approved_hash == digest:
        return False
    if registered is None or (registered.output_schema, registered.annotations) != (
        tool.output_schema,
        tool.annotations,
    ):
        return False
    return not tool_findings(tool)


def _was_quarantined(pin: Pin | None) -> bool:
    return pin is not None and pin.quarantined


def _reason(pin: Pin | None, findings: tuple[str, ...]) -> str:
    flagged = f": {'; '.join(findings)}" if findings else ""
    if pin is None:
        return f"new tool flagged{flagged}" if findings else "new tool awaiting approval"
    return f"description or schema changed since approval{flagged}"


def to_tool(server: str, config: ServerConfig, upstream: types.Tool) -> Tool:
    """The registry entry of an upstream tool. Its text is untrusted: it is stored, checked, never executed."""
    description = (upstream.description or upstream.title or upstream.name).strip()
    entry = {
        "name": f"{server}.{upstream.name}",
        "description": description,
        "input_schema": repair_schema(upstream.input_schema, upstream.name)
        if upstream.input_schema
        else {"type": "object"},
        **_passed_on(upstream),
        "category": server,
        "scopes": list(config.scopes),
        "source": source_of(server),
    }
    return Tool.parse(entry)


def _in_place(pin: Pin | None, digest: str, existing: Tool | None, config: ServerConfig) -> bool:
    """Whether the upstream tool is the approved version and registered, active (or deactivated by an operator),
    holding the configuration's scopes (operators may have added more): then nothing about it needs checking,
    parsing or writing again (a reconnection scans nothing unchanged)."""
    return (
        pin is not None
        and pin.approved_hash == digest
        and not pin.quarantined
        and existing is not None
        and (existing.active or DEACTIVATED_BY_OPERATOR in existing.overrides)
        and set(config.scopes) <= set(existing.scopes)
    )


def _passed_on(upstream: types.Tool) -> dict[str, Any]:
    """The output schema and annotations of an upstream tool, as `find_tools` passes them on. An output schema
    that is not valid JSON Schema is dropped, not the tool: the tool can still be called."""
    output = upstream.output_schema or None
    if output is not None:
        try:
            repaired = repair_schema(output, upstream.name, "output schema")
            output = check_json_schema(repaired, upstream.name, "output schema")
        except InvalidToolError as exc:
            log.warning("%s; the output schema is dropped", exc)
            output = None
    annotations = upstream.annotations.model_dump(by_alias=True, exclude_none=True) if upstream.annotations else None
    return {"output_schema": output, "annotations": annotations or None}


def _approval_detail(pin: Pin) -> str:
    if pin.approved_hash is None:
        return "first version approved" + (f" despite: {'; '.join(pin.findings)}" if pin.findings else "")
    return "changed version approved" + (f" despite: {'; '.join(pin.findings)}" if pin.findings else "")


def _quarantined(registry: ToolRegistry, names: Iterable[str]) -> list[Pin]:
    pins = {pin.tool: pin for pin in registry.store.pins()}
    wanted = list(names)
    for name in wanted:
        pin = pins.get(name)
        if pin is None or not pin.quarantined:
            raise ToolNotFoundError(f"no quarantined tool named {name!r}", name=name)
    return [pins[name] for name in wanted]


def approve_quarantined(
    registry: ToolRegistry, names: Iterable[str], approver: str | None, reviewed: Mapping[str, str] | None = None
) -> list[str]:
    """Pin the quarantined versions' hashes and make them active (the CLI, the console), with what operators set
    on the tool kept (`Tool.synced`). `reviewed`: the text hash each was shown with; ApprovalConflictError, nothing
    approved, when another text waits now."""
    return _approve(registry, _unchanged(_quarantined(registry, names), reviewed, "approved"), approver)


def _unchanged(pins: list[Pin], reviewed: Mapping[str, str] | None, decided: str) -> list[Pin]:
    changed = [p.tool for p in pins if reviewed is not None and reviewed.get(p.tool) != p.pending_hash]
    if changed:
        raise ApprovalConflictError(
            f"{', '.join(map(repr, changed))} changed since it was reviewed (another text waits now): review it"
            f" again; nothing was {decided}"
        )
    return pins


def server_quarantined(registry: ToolRegistry, server: str) -> list[Pin]:
    """The quarantined tools of one server, by name: ServerNotFoundError when the server has no tools here,
    ApprovalConflictError when none of them waits."""
    pins = registry.store.pins(server)
    if not pins:
        raise ServerNotFoundError(server)
    waiting = [pin for pin in pins if pin.quarantined]
    if not waiting:
        raise ApprovalConflictError(f"no tool of server {server!r} is quarantined: nothing to approve")
    return waiting


def approve_server(
    registry: ToolRegistry, server: str, reviewed: Mapping[str, str] | None, approver: str | None
) -> list[str]:
    """Approve every quarantined tool of `server` in one transaction, each audited as a single approval is.
    `reviewed`: the pending text hash of each tool as the approver saw it; when the tools waiting are not exactly
    those, with those hashes (a sync changed one, or listed one more, since), ApprovalConflictError and nothing is
    approved. Without it, the hashes read here are compared at the write (a sync in between is caught too)."""
    waiting = server_quarantined(registry, server)
    if reviewed is not None:
        _check_reviewed(server, waiting, reviewed)
    return _approve(registry, waiting, approver)


def _check_reviewed(server: str, waiting: Sequence[Pin], reviewed: Mapping[str, str]) -> None:
    now = {pin.tool: pin.pending_hash for pin in waiting}
    unseen = sorted(set(now) - set(reviewed))
    if unseen:
        raise ApprovalConflictError(
            f"{', '.join(map(repr, unseen))} of server {server!r} also waits and was not reviewed: nothing was approved"
        )
    gone = sorted(set(reviewed) - set(now))
    if gone:
        raise ApprovalConflictError(
            f"{', '.join(map(repr, gone))} of server {server!r} is not quarantined (any more): nothing was approved"
        )
    changed = sorted(tool for tool, digest in reviewed.items() if now[tool] != digest)
    if changed:
        raise ApprovalConflictError(
            f"{', '.join(map(repr, changed))} changed since it was reviewed (another text waits now): review it"
            " again; nothing was approved"
        )


def _approve(registry: ToolRegistry, approved: Sequence[Pin], approver: str | None) -> list[str]:
    """Pin the pending hashes, compare-and-set on them (a sync that changed one since it was read: nothing is
    approved), then register the approved versions, compare-and-set on the pins as approved (another process's
    sync may have quarantined a newer text meanwhile: that tool stays inactive)."""
    if taken := _held_by_others(registry, approved):  # older than the sync's refusal of such names
        name, holder = next(iter(taken.items()))
        raise InvalidToolError(
            f"tool {name!r}: another tool, {holder!r}, holds its name or one differing only in case: nothing"
            " was approved"
        )
    if twins := case_twin(pin.tool for pin in approved):
        raise InvalidToolError(
            f"tools {twins[0]!r} and {twins[1]!r} differ only in case: approve one; nothing was approved"
        )
    registry.store.save_pins(
        [Pin(p.tool, p.server, p.pending_hash) for p in approved],
        [AuditEntry("approved", _approval_detail(p), p.tool, p.server, approver) for p in approved],
        {p.tool: p.pending_hash for p in approved},
    )

    def activate() -> None:
        now, taken = {pin.tool: pin for pin in registry.store.pins()}, _held_by_others(registry, approved)
        edits = {
            p.tool: partial(synced, upstream=p.pending)
            for p in approved
            if p.pending and _approved_as(now.get(p.tool), p.pending_hash) and p.tool not in taken  # taken meanwhile
        }
        registry.write_merged(edits, pinned=dict.fromkeys(edits))

    retry_on_conflict(activate, PLANS, ApprovalConflictError)
    return [p.tool for p in approved]


def _held_by_others(registry: ToolRegistry, pins: Sequence[Pin]) -> dict[str, str]:
    """The names of `pins` that another tool than their server's holds, or a name differing only in case, each with
    that tool's name (the registry's names read once, the holders in one read)."""
    folded = {name.casefold(): name for name in registry.store.names()}
    holders = {pin.tool: (pin, name) for pin in pins if (name := folded.get(pin.tool.casefold())) is not None}
    tools = registry.store.get_many(name for _, name in holders.values())
    return {
        tool: name
        for tool, (pin, name) in holders.items()
        if name != tool or (held := tools.get(name)) is None or held.source != source_of(pin.server)
    }


def _approved_as(pin: Pin | None, digest: str | None) -> bool:
    """Whether `pin` holds `digest` approved, with nothing newer waiting."""
    return pin is not None and pin.approved_hash == digest and pin.pending_hash is None


def reject_quarantined(
    registry: ToolRegistry, names: Iterable[str], rejecter: str | None, reviewed: Mapping[str, str] | None = None
) -> list[str]:
    """Drop the quarantined versions: an approved tool keeps its approved version, a new one stays out. The
    rejection sticks: while its server publishes the same text, syncs leave it out without quarantining it again
    (`lift_rejections` undoes that). `reviewed` as for `approve_quarantined`; the hashes read here are compared
    again at the write, so a sync in between drops no text nobody saw."""
    rejected = _unchanged(_quarantined(registry, names), reviewed, "rejected")
    registry.store.save_pins(
        [Pin(p.tool, p.server, p.approved_hash, rejected_hash=p.pending_hash) for p in rejected],
        [AuditEntry("rejected", "; ".join(p.findings) or "rejected", p.tool, p.server, rejecter) for p in rejected],
        {p.tool: p.pending_hash for p in rejected},
    )
    return [p.tool for p in rejected]


def lift_rejections(registry: ToolRegistry, names: Iterable[str], lifter: str | None) -> list[str]:
    """Forget the rejected texts of these tools: the next sync that lists one quarantines it for review again."""
    wanted = set(names)

    def lift() -> list[str]:
        lifted = [p for p in registry.store.pins() if p.tool in wanted and p.rejected_hash is not None]
        missing = sorted(wanted - {p.tool for p in lifted})
        if missing:
            raise ToolNotFoundError(f"no rejected tool named {missing[0]!r}", name=missing[0])
        registry.store.save_pins(
            [replace(p, rejected_hash=None) for p in lifted],
            [
                AuditEntry("rejection lifted", "quarantined again at the next sync", p.tool, p.server, lifter)
                for p in lifted
            ],
            {p.tool: p.pending_hash for p in lifted},  # a sync's quarantine made meanwhile is not written over
        )
        return [p.tool for p in lifted]

    return retry_on_conflict(lift, PLANS, ApprovalConflictError)
