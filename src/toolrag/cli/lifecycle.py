"""Registry lifecycle commands: edit tools (each edit a new version), history and rollback, backups, validation,
model migration and the health report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolrag.cli.common import (
    DEFAULT_STORE,
    HASH_PREFIX,
    JsonOption,
    StoreOption,
    Table,
    ToolNameArgument,
    cli_user,
    err,
    fail,
    full_hash,
    guarded,
    marked,
    open_registry,
    out,
    plain,
    plural,
    print_json,
    progress_bar,
    shown,
)
from toolrag.search.learned_defaults import MIN_CALLERS

if TYPE_CHECKING:
    from toolrag.catalog.review import TextChange
    from toolrag.model import Tool
    from toolrag.registry import ToolRegistry

tools_app = typer.Typer(
    help="Edit tools: every change is a new version; nothing is ever deleted.", no_args_is_help=True
)


def _csv(value: str | None) -> list[str] | None:
    return None if value is None else [part.strip() for part in value.split(",") if part.strip()]


def _print_tool(tool: Tool, as_json: bool, what: str) -> None:
    if as_json:
        print_json({"name": tool.name, "version": tool.version, "active": tool.active})
    else:
        out.print(f"{tool.name}: {what}, now version {tool.version}")


@tools_app.command()
def update(
    name: ToolNameArgument,
    store: StoreOption = DEFAULT_STORE,
    description: Annotated[str | None, typer.Option(help="New description.")] = None,
    aliases: Annotated[str | None, typer.Option(help="Comma-separated aliases (replaces the list).")] = None,
    not_for: Annotated[str | None, typer.Option("--not-for", help="When not to use the tool.")] = None,
    scopes: Annotated[str | None, typer.Option(help="Comma-separated scopes it requires (replaces the list).")] = None,
    tenants: Annotated[str | None, typer.Option(help="Comma-separated tenants (replaces the list).")] = None,
    category: Annotated[str | None, typer.Option(help="Category.")] = None,
    if_version: Annotated[
        int | None,
        typer.Option(
            "--if-version", min=1, help="The version this edit was made from: refused when the tool moved on since."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Change a tool's text or permissions; only texts that changed are embedded again. An edit that another writer
    overtook between its read and its write is refused, nothing written (read the tool again and redo it)."""
    given: dict[str, Any] = {
        "description": description,
        "aliases": _csv(aliases),
        "not_for": not_for,
        "scopes": _csv(scopes),
        "tenants": _csv(tenants),
        "category": category,
    }
    changes = {key: value for key, value in given.items() if value is not None}
    if not changes:
        fail("nothing to change: give --description, --aliases, --not-for, --scopes, --tenants or --category")
    registry = open_registry(store)
    edited = guarded(
        lambda: registry.update_reviewed(
            name, edited_by=cli_user(), expected_version=if_version, origin="cli", **changes
        )
    )
    if as_json:
        tool = edited.tool
        print_json(
            {
                "name": name,
                "version": tool.version,
                "active": tool.active,
                "held": edited.held,
                "rejected": edited.rejected,
            }
        )
        return
    _print_tool(edited.tool, False, "updated")
    print_held([name] if edited.held else [], [name] if edited.rejected else [])


def print_held(held: list[str], rejected: list[str]) -> None:
    """The lines saying which text changes did not go live (the registry's text review)."""
    if held:
        out.print(
            f"text change waits for review, the live text serves: {', '.join(held)}"
            " (`toolrag tools pending`, then `toolrag tools approve NAME --text-hash HASH`)",
            highlight=False,
        )
    if rejected:
        out.print(
            f"left out as rejected before: {', '.join(rejected)} (`toolrag tools reject --lift NAME` to review again)",
            highlight=False,
        )


@tools_app.command("text-review")
def text_review(
    state: Annotated[
        str | None,
        typer.Argument(
            help="on: text changes of existing tools wait for review; two-person: on, and whoever proposed a change"
            " cannot approve it; off: they go live."
        ),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Show, or turn on or off, the registry's text review (kept in the registry: every process honours it)."""
    if state not in (None, *REVIEW_STATES):
        fail(f"text review is {', '.join(map(repr, REVIEW_STATES))}, not {state!r}")
    registry = open_registry(store)
    changed = state is None or guarded(
        lambda: registry.reviews.require(state != "off", cli_user(), two_person=state == "two-person")
    )
    shown_state = ("two-person" if registry.reviews.two_person else "on") if registry.reviews.required else "off"
    if as_json:
        print_json({"text_review": shown_state} | ({} if changed else {"asked": state}))
    elif changed:
        out.print(f"text review: {shown_state}")
    else:
        out.print(f"text review: {shown_state} ({state} asked: it changes when another admin asks the same)")


REVIEW_STATES = ("on", "two-person", "off")


@tools_app.command()
def pending(
    name: Annotated[str | None, typer.Argument(help="A tool: its proposed text and the diff against the live.")] = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """The text changes waiting for review (who proposed them, how, when, what the poisoning checks found), or
    one of them with its diff against the live text."""
    registry = open_registry(store)
    changes = [guarded(lambda: registry.reviews.change(name))] if name else registry.reviews.waiting()
    rows = [_change_json(change, with_diff=name is not None) for change in changes]
    if as_json:
        print_json(rows[0] if name else rows)
        return
    if name:
        row = rows[0]
        out.print(
            f"{name}: text {row['text_hash']} proposed by {', '.join(row['proposers']) or None} through {row['origin']}"
            f" at {row['proposed_at']}",
            highlight=False,
        )
        for finding in row["findings"]:
            out.print(f"finding: {finding}", highlight=False)
        out.print("\n".join(row["diff"]), highlight=False, soft_wrap=True)
        return
    table = Table("tool", "text hash", "proposed by", "through", "at", "findings", title=f"{len(rows)} waiting")
    for row in rows:
        table.add_row(
            row["tool"],
            row["text_hash"][:HASH_PREFIX],
            ", ".join(row["proposers"]) or "None",
            row["origin"],
            row["proposed_at"],
            "\n".join(row["findings"]),
        )
    out.print(table)


def _change_json(change: TextChange, with_diff: bool) -> dict[str, Any]:
    review = change.review
    row: dict[str, Any] = {
        "tool": review.tool,
        "text_hash": change.shown_hash,
        "proposed_by": review.proposed_by,
        "proposers": list(review.proposers),
        "origin": review.origin,
        "proposed_at": review.proposed_at.isoformat(timespec="seconds"),
        "findings": list(review.findings),
        "description": change.proposed.description,
    }
    return row | {"diff": change.diff()} if with_diff else row


def _full_hash(registry: ToolRegistry, name: str, given: str | None) -> str | None:
    """The waiting text's hash when `given` is its start as `tools pending` shows it."""
    return full_hash(given, lambda: guarded(lambda: registry.reviews.change(name)).shown_hash)


TextHashOption = Annotated[
    str | None,
    typer.Option(
        "--text-hash", help="The pending text as `tools pending` showed it: refused when another text waits now."
    ),
]


@tools_app.command()
def approve(
    name: ToolNameArgument,
    text_hash: Annotated[
        str,
        typer.Option(
            "--text-hash",
            help="The pending text as `tools pending` showed it (required: an approval names the text it makes"
            " live; refused when another text waits now).",
        ),
    ],
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Make a tool's waiting text change live: a new version, in the audit log with who approved it."""
    registry = open_registry(store)
    reviewed = _full_hash(registry, name, text_hash)
    approved = guarded(lambda: registry.reviews.approve(name, reviewed, cli_user()))
    _print_tool(approved, as_json, "text change approved")


@tools_app.command()
def reject(
    name: ToolNameArgument,
    text_hash: TextHashOption = None,
    lift: Annotated[
        bool, typer.Option("--lift", help="Forget the rejection: the same text proposed again waits again.")
    ] = False,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Drop a tool's waiting text change (the live text stays) and remember it: importing the same text again
    leaves it out until `--lift`."""
    registry = open_registry(store)
    if lift:
        guarded(lambda: registry.reviews.lift(name, cli_user()))
        if as_json:
            print_json({"name": name, "lifted": True})
        else:
            out.print(f"{name}: rejection lifted")
        return
    reviewed = _full_hash(registry, name, text_hash)
    rejected = guarded(lambda: registry.reviews.reject(name, reviewed, cli_user()))
    if as_json:
        print_json({"name": name, "rejected_hash": rejected})
    else:
        out.print(f"{name}: text {rejected[:12]} rejected; the live text stays")


@tools_app.command("drop-override")
def drop_override(
    name: ToolNameArgument,
    fields: Annotated[
        list[str],
        typer.Argument(help="Fields an operator replaced: description, input_schema, output_schema, annotations."),
    ],
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Return fields of an MCP server's tool that an operator replaced (`update --description`) to the server's
    value, which syncs keep current again: a new version, in the audit log."""
    registry = open_registry(store)
    edited = guarded(lambda: registry.drop_overrides(name, fields, edited_by=cli_user(), origin="cli"))
    done = "waits for review" if edited.held else "was rejected before" if edited.rejected else "back to the server's"
    _print_tool(edited.tool, as_json, f"{', '.join(fields)} {done}")


@tools_app.command()
def deactivate(name: ToolNameArgument, store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """Take a tool out of search and execution (its history stays; `reactivate` brings it back)."""
    registry = open_registry(store)
    tool = guarded(lambda: registry.set_active(name, False, edited_by=cli_user(), origin="cli"))
    _print_tool(tool, as_json, "deactivated")


@tools_app.command()
def reactivate(name: ToolNameArgument, store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """Bring a deactivated tool back (under text review, once an admin approves it)."""
    registry = open_registry(store)
    tool = guarded(lambda: registry.set_active(name, True, edited_by=cli_user(), origin="cli"))
    _print_tool(tool, as_json, "reactivated" if tool.active else "stays inactive: its reactivation waits for review")


@tools_app.command()
def history(name: ToolNameArgument, store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """Every version of a tool, oldest first, with its full state."""
    registry = open_registry(store)
    versions = guarded(lambda: registry.history(name))
    if as_json:
        print_json([t.model_dump(mode="json") for t in versions])
        return
    table = Table("v", "at", "active", "scopes", "description", title=name)
    for tool in versions:
        table.add_row(
            str(tool.version),
            f"{tool.updated_at:%Y-%m-%d %H:%M:%S}",
            str(tool.active),
            ", ".join(tool.scopes),
            tool.description,
        )
    out.print(table)


@tools_app.command()
def rollback(
    name: ToolNameArgument,
    to: Annotated[int, typer.Option("--to", help="The version whose content to restore.")],
    expected_version: Annotated[
        int | None,
        typer.Option(
            "--expected-version", help="The tool's current version as you saw it: refused when it has moved on."
        ),
    ] = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Restore an earlier version's content as a new version (with --expected-version: only over that version)."""
    registry = open_registry(store)
    restored = guarded(lambda: registry.rollback(name, to, expected_version=expected_version, edited_by=cli_user()))
    _print_tool(restored, as_json, f"rolled back to the content of version {to}")


def export_registry(
    file: Annotated[Path, typer.Argument(help="Backup file to write (JSON).")],
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Write the whole registry (tools, every version, vectors) to one file; `toolrag import FILE` restores it."""
    from toolrag.cli.store import read_registry
    from toolrag.store.backup import write_backup

    dump = guarded(lambda: read_registry(store))
    guarded(lambda: write_backup(dump, file))
    summary = {
        "file": str(file),
        "tools": len(dump.tools),
        "versions": len(dump.versions),
        "vectors": len(dump.vectors),
    }
    if as_json:
        print_json(summary)
    else:
        out.print(
            f"wrote {summary['tools']} tools, {summary['versions']} versions, {summary['vectors']} vectors to {file}"
        )


def restore_backup(file: Path, store: str, as_json: bool) -> None:
    from toolrag.catalog.review import Proposal
    from toolrag.cli.store import write_registry
    from toolrag.store.backup import as_restored, read_backup

    dump = as_restored(guarded(lambda: read_backup(file)), file, Proposal("cli", None).proposer())
    guarded(lambda: write_registry(store, dump))
    summary = {"file": str(file), "tools": len(dump.tools), "versions": len(dump.versions), "restored": True}
    if as_json:
        print_json(summary)
    else:
        out.print(f"{file}: restored {summary['tools']} tools with {summary['versions']} versions")


def migrate(
    model: Annotated[str, typer.Option("--model", help="default, use, minilm or openai:MODEL[@BASE_URL].")],
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Move the index to another embedding model (any dimension): built beside the old one, switched atomically,
    resumable; searches keep being served by the old model until the switch."""
    registry = open_registry(store, model)
    total = guarded(registry.texts_to_rebuild)
    with progress_bar(f"embedding with {model}", total, not as_json) as advance:
        embedded = guarded(lambda: registry.rebuild(advance))
    if as_json:
        print_json(
            {"model": registry.embedder.model_id, "dimension": registry.embedder.dimension, "embedded": embedded}
        )
    else:
        out.print(
            f"index now uses {registry.embedder.model_id} ({registry.embedder.dimension} dimensions): "
            f"{embedded} texts embedded"
        )


def validate_command(
    store: StoreOption = DEFAULT_STORE,
    fix: Annotated[bool, typer.Option("--fix", help="Embed tools that have no vectors.")] = False,
    mcp_config: Annotated[
        Path | None,
        typer.Option("--mcp-config", help="Gateway configuration: MCP tools of unlisted servers are orphans."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Report orphans, tools without embeddings, near-duplicates, and descriptions too short or too long."""
    from toolrag.monitor.validate import validate

    servers = None
    if mcp_config is not None:
        from toolrag.mcp.config import load_config

        servers = set(guarded(lambda: load_config(mcp_config)).enabled_servers)
    registry = open_registry(store)
    findings = guarded(lambda: validate(registry, servers, fix))
    if as_json:
        print_json([{"kind": f.kind, "tools": list(f.tools), "detail": f.detail, "fixed": f.fixed} for f in findings])
    elif not findings:
        out.print("no findings: every tool has its embeddings, no orphans, no near-duplicates, descriptions fit")
    else:
        table = Table("kind", "tools", "detail", title=plural(len(findings), "finding"))
        for finding in findings:
            table.add_row(
                finding.kind, "\n".join(finding.tools), finding.detail + (" (fixed)" if finding.fixed else "")
            )
        out.print(table)
    if any(not f.fixed for f in findings if f.kind in ("orphan", "missing_embedding")):
        raise typer.Exit(2)  # problems that break search or execution: a non-zero exit for CI


def report_command(
    store: StoreOption = DEFAULT_STORE,
    days: Annotated[int, typer.Option(min=1, help="Time window, in days back from now.")] = 30,
    compare_with: Annotated[
        str | None,
        typer.Option("--compare", help="LAST: what changed since the latest report the scheduled job stored."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The usage health report: dead, unused and low-relevance tools, retrieval misses and the requests behind them."""
    from toolrag.monitor.report import build_report

    registry = open_registry(store)
    if compare_with is not None:
        _compare_with_last(registry, days, compare_with, as_json)
        return
    report = guarded(lambda: build_report(registry.store, days))
    if as_json:
        print_json(report.as_json())
        return
    totals = report.totals
    out.print(
        marked(f"[bold]Last {days} days[/]: ") + f"{plural(totals.retrievals, 'search', 'searches')} in "
        f"{plural(totals.sessions, 'session')} ({totals.no_tool} found no tool, {totals.reformulated} found tools on a"
        f" second chance, {totals.whole_catalog} got the whole catalog), "
        f"{plural(totals.calls, 'call')} ({totals.failed_calls} failed, {totals.refused_calls} more refused); "
        f"{plural(report.active_tools, 'active tool')}, {report.inactive_tools} inactive",
        highlight=False,
    )
    err.print(
        "(the log holds what the HTTP API, the MCP gateway and monitored registries record; `toolrag search` on the"
        " command line is not recorded)",
        style="dim",
        highlight=False,
    )
    table = Table("tool", "injected", "called", "call rate", "mean rel.", "min rel.", title="tools")
    for usage in sorted(report.tools, key=lambda u: -u.injected)[:30]:
        table.add_row(
            usage.tool,
            str(usage.injected),
            str(usage.called),
            f"{usage.call_rate:.2f}",
            "" if usage.mean_score is None else f"{usage.mean_score:.2f}",
            "" if usage.min_score is None else f"{usage.min_score:.2f}",
        )
    out.print(table)
    _names("dead tools (offered often, rarely called: rewrite or retire)", [u.tool for u in report.dead])
    _names(
        "low-relevance tools (descriptions far from the requests they serve)", [u.tool for u in report.low_relevance]
    )
    _names("unused tools (never offered nor called)", report.unused)
    _names(
        f"surging tools (chosen for {report.rules.surge_ratio:g}x the share of searches of before in the last "
        f"{report.rules.surge_days} days: check recent description edits)",
        [f"{s.tool} {s.earlier_share:.1%} -> {s.recent_share:.1%}" for s in report.surging],
    )
    for kind, samples in report.misses.items():
        lines = [f"{s.request or '(no request text)'} {s.detail}".strip() for s in samples]
        _names(f"misses: {kind.replace('_', ' ')}", lines)


def _names(title: str, names: list[str]) -> None:
    if names:
        out.print(marked(f"[bold]{shown(title)}[/]: ") + plain("; ".join(names[:20])), highlight=False)
    else:
        err.print(f"{title}: none", style="dim", highlight=False)


def suggest_aliases_command(
    store: StoreOption = DEFAULT_STORE,
    days: Annotated[int, typer.Option(min=1, help="Time window, in days back from now.")] = 30,
    min_count: Annotated[int, typer.Option(min=1, help="Sessions a suggestion needs.")] = 1,
    min_callers: Annotated[
        int, typer.Option("--min-callers", min=1, help="Distinct callers whose sessions a suggestion needs.")
    ] = MIN_CALLERS,
    apply: Annotated[list[str] | None, typer.Option("--apply", help="Tool whose suggestions to apply.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Propose aliases from usage (requests after which a tool was called although they had not found it);
    review them, then apply per tool with --apply. A tenant's request is suggested only for a tool no other
    tenant sees."""
    from toolrag.monitor.aliases import apply_suggestions, suggest_aliases

    registry = open_registry(store)
    suggestions = guarded(lambda: suggest_aliases(registry, days, min_count, min_callers))
    applied = guarded(lambda: apply_suggestions(registry, suggestions, set(apply or []), cli_user())) if apply else []
    if as_json:
        print_json({"suggestions": [vars(s) for s in suggestions], "applied": applied})
        return
    table = Table(
        "tool", "suggested alias", "sessions", "callers", "tenants", title=plural(len(suggestions), "alias suggestion")
    )
    for suggestion in suggestions:
        tenants = ", ".join(suggestion.tenants)
        table.add_row(suggestion.tool, suggestion.alias, str(suggestion.count), str(suggestion.callers), tenants)
    out.print(table)
    if applied:
        out.print(f"applied to {', '.join(applied)}")


def _compare_with_last(registry: ToolRegistry, days: int, which: str, as_json: bool) -> None:
    from toolrag.monitor.config import ScheduleConfig
    from toolrag.monitor.schedule import REPORT, Scheduler, compare

    if which.lower() != "last":
        fail(f"--compare takes LAST (the latest stored report), not {which!r}")
    stored = registry.store.jobs.job_reports(REPORT, 1)
    if not stored:
        fail("no stored report to compare with: the servers' scheduled weekly report ([schedule] report) writes them")
    current = Scheduler(registry, ScheduleConfig(report_days=days)).report()
    changes = compare(stored[0].body, current)
    if as_json:
        print_json({"compared_with": stored[0].at.isoformat(), "current": current, "changes": changes})
        return
    out.print(
        marked(f"[bold]Since the report of {stored[0].at:%Y-%m-%d %H:%M} UTC[/] ") + plain(f"({stored[0].holder}):"),
        highlight=False,
    )
    for line in changes:
        out.print(f"  {line}", highlight=False)


TenantOption = Annotated[
    str | None, typer.Option(help="The tenant whose searches the example serves (default: every tenant's).")
]


FromUsageOption = Annotated[bool, typer.Option("--from-usage", help="It is a logged request (promoted).")]


@tools_app.command("examples")
def list_examples(
    name: ToolNameArgument,
    store: StoreOption = DEFAULT_STORE,
    from_usage: Annotated[
        bool, typer.Option("--from-usage", help="Also logged requests after which the tool was called: candidates.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """A tool's example requests (extra views of it in retrieval, per tenant)."""
    registry = open_registry(store)
    tool = guarded(lambda: registry.get(name))
    examples = [e.model_dump() for e in tool.examples]
    candidates = [{"tenant": t, "text": text} for t, text in registry.examples.promotable(name)] if from_usage else []
    if as_json:
        print_json({"examples": examples, "candidates": candidates})
        return
    table = Table("example request", "tenant", "source", title=f"{name}: {plural(len(examples), 'example')}")
    for example in examples:
        table.add_row(example["text"], example["tenant"] or "(every tenant)", example["source"])
    out.print(table)
    if from_usage:
        table = Table("logged request", "tenant", title="called after (promote with add-example --from-usage)")
        for candidate in candidates:
            table.add_row(candidate["text"], candidate["tenant"] or "")
        out.print(table)


@tools_app.command("add-example")
def add_example(
    name: ToolNameArgument,
    text: Annotated[str, typer.Argument(help="A request the tool serves, as a user would write it.")],
    tenant: TenantOption = None,
    from_usage: FromUsageOption = False,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Add an example request: searches like it (of that tenant) find the tool. A new version."""
    registry = open_registry(store)
    tool = guarded(
        lambda: registry.examples.add(
            name, text, tenant, "usage" if from_usage else "operator", edited_by=cli_user(), origin="cli"
        )
    )
    _print_tool(tool, as_json, f"{plural(len(tool.examples), 'example request')}")


@tools_app.command("remove-example")
def remove_example(
    name: ToolNameArgument,
    text: Annotated[str, typer.Argument(help="The example request, as `toolrag tools examples NAME` shows it.")],
    tenant: TenantOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Remove an example request. A new version."""
    registry = open_registry(store)
    tool = guarded(lambda: registry.examples.remove(name, text, tenant, edited_by=cli_user(), origin="cli"))
    _print_tool(tool, as_json, f"{plural(len(tool.examples), 'example request')}")


@tools_app.command("tasks")
def list_tasks(
    store: StoreOption = DEFAULT_STORE,
    days: Annotated[int, typer.Option(min=1, help="How far back the usage log is read.")] = 90,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many, the most frequent first.")] = 100,
    as_json: JsonOption = False,
) -> None:
    """Past tasks to promote: logged requests after which an agent called two or more tools, with those tools."""
    registry = open_registry(store)
    tasks = registry.examples.past_tasks(days, limit)
    if as_json:
        print_json([dataclasses.asdict(task) for task in tasks])
        return
    table = Table("request", "tenant", "tools", "sessions", title="past tasks (promote with add-task --from-usage)")
    for task in tasks:
        table.add_row(task.request, task.tenant or "(every tenant)", ", ".join(task.tools), str(task.sessions))
    out.print(table)


@tools_app.command("add-task")
def add_task(
    text: Annotated[str, typer.Argument(help="The request, as a user wrote it.")],
    names: Annotated[list[str], typer.Argument(help="Every tool the task needed (two or more).")],
    tenant: TenantOption = None,
    from_usage: FromUsageOption = False,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Add a past task: the request becomes an example of each of its tools, so a request like it gets them all."""
    registry = open_registry(store)
    tools = guarded(
        lambda: registry.examples.add_task(
            text, names, tenant, "usage" if from_usage else "operator", edited_by=cli_user(), origin="cli"
        )
    )
    if as_json:
        print_json([{"name": tool.name, "version": tool.version, "examples": len(tool.examples)} for tool in tools])
        return
    for tool in tools:
        _print_tool(tool, False, plural(len(tool.examples), "example request"))


IfVersionOption = Annotated[
    int | None,
    typer.Option("--if-version", min=1, help="The version this edit was made from: refused when the tool moved on."),
]
DescribedTenantArgument = Annotated[str, typer.Argument(help="The tenant whose principals get the text.")]


@tools_app.command("describe-for-tenant")
def describe_for_tenant(
    name: ToolNameArgument,
    tenant: DescribedTenantArgument,
    text: Annotated[str, typer.Argument(help="The description that tenant's principals get instead of the source's.")],
    if_version: IfVersionOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Describe a tool in other words for one tenant: shown, injected and searched with for its principals only."""
    from toolrag.mcp.review import described

    registry = open_registry(store)
    done = guarded(lambda: described(registry, name, tenant, text, if_version, edited_by=cli_user(), origin="cli"))
    for finding in done.findings:
        err.print(marked(f"[yellow]poisoning check:[/] {shown(finding)}"), highlight=False)
    if as_json:
        fields = {"name": done.tool.name, "version": done.tool.version, "findings": list(done.findings)}
        print_json(fields | {"held": done.held})
    elif done.held:
        out.print(f"{done.tool.name}: the text waits for review, the live text serves (`toolrag tools pending {name}`)")
    else:
        out.print(f"{done.tool.name}: description for tenant {tenant}, now version {done.tool.version}")


@tools_app.command("drop-tenant-description")
def drop_tenant_description(
    name: ToolNameArgument,
    tenant: DescribedTenantArgument,
    if_version: IfVersionOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Give a tenant's principals the source's description of a tool again. A new version."""
    registry = open_registry(store)
    edit = lambda: registry.descriptions.drop(  # noqa: E731
        name, tenant, expected_version=if_version, edited_by=cli_user(), origin="cli"
    )
    _print_tool(guarded(edit).tool, as_json, f"the source's description for tenant {tenant}")
