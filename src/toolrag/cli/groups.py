"""`toolrag groups`: what groups of tools (categories, MCP servers) are for, and the descriptions waiting for
review while the registry asks for it (`toolrag tools text-review on`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from toolrag.cli.common import (
    DEFAULT_STORE,
    JsonOption,
    StoreOption,
    Table,
    cli_user,
    fail,
    full_hash,
    guarded,
    marked,
    open_registry,
    out,
    plain,
    print_json,
)

if TYPE_CHECKING:
    from toolrag.catalog.decisions import GroupChange
    from toolrag.registry import ToolRegistry

groups_app = typer.Typer(
    help="Say what groups of tools (categories, MCP servers) are for: search ranks groups as a whole too.",
    no_args_is_help=True,
)

GroupArgument = Annotated[
    str, typer.Argument(help="The group: a category or an MCP server, as `toolrag groups list` shows.")
]


@groups_app.command("list")
def list_groups(store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """Every group of the registry with its tool count and description."""
    registry = open_registry(store)
    described = registry.group_descriptions()
    # Described groups no tool is in yet are listed too (with 0): a mistyped name can be found and removed.
    sizes = _group_sizes(registry)
    counts = {**sizes, **{name: 0 for name in described if name not in sizes}}
    if as_json:
        print_json({name: {"tools": counts[name], "description": described.get(name)} for name in counts})
        return
    table = Table("group", "tools", "description")
    for name, count in counts.items():
        table.add_row(name, str(count), described.get(name, ""))
    out.print(table)


@groups_app.command("describe")
def describe_group(
    name: GroupArgument,
    description: Annotated[str | None, typer.Argument(help="What the group is for; leave out with --remove.")] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Forget the group's description.")] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Set or remove a group's description (embedded once; unchanged text is not embedded again). While the
    registry asks for review, a new description waits for an admin (`toolrag groups pending`)."""
    if (description is None) == (not remove):
        fail("give a description, or --remove (not both)")
    registry = open_registry(store)
    written = guarded(lambda: registry.describe_groups({name: None if remove else description}, origin="cli"))
    if written.held:
        out.print(
            f"group {name}: the description waits for review, the live one serves (`toolrag groups pending`, then"
            f" `toolrag groups approve {name} --text-hash HASH`)",
            highlight=False,
        )
    elif written.rejected:
        out.print(
            f"group {name}: left out as rejected before (`toolrag groups reject {name} --lift` to review it again)",
            highlight=False,
        )
    else:
        out.print(f"group {name}: " + ("description removed" if remove else "described"), highlight=False)
    if remove:
        return
    sizes = _group_sizes(registry)
    if name not in sizes:
        out.print(
            marked("[yellow]note:[/] ")
            + plain(
                f"no tool is in group {name!r} yet (a tool's group is its category, else the namespace of its name);"
                f" the groups with tools: {', '.join(sorted(sizes)) or 'none'}"
            ),
            highlight=False,
        )


@groups_app.command("pending")
def pending_groups(store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """The group descriptions waiting for review: the live one and the proposed one, who proposed it, how, when."""
    rows = [_change_json(change) for change in open_registry(store).reviews.waiting_groups()]
    if as_json:
        print_json(rows)
        return
    for row in rows:
        out.print(
            f"{row['group']}: text {row['text_hash']} proposed by {row['proposed_by']} through {row['origin']} at"
            f" {row['proposed_at']}\n- {row['live'] or '(none: a summary of its tools)'}\n+ {row['proposed']}",
            highlight=False,
            soft_wrap=True,
        )
    out.print(f"{len(rows)} waiting", highlight=False)


@groups_app.command("approve")
def approve_group(
    name: GroupArgument,
    text_hash: Annotated[
        str,
        typer.Option(
            "--text-hash",
            help="The description as `groups pending` showed it (required: an approval names the text it makes"
            " live; refused when another description waits now).",
        ),
    ],
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Make a group's waiting description live, in the audit log with who approved it."""
    registry = open_registry(store)
    guarded(lambda: registry.reviews.approve_group(name, _full_hash(registry, name, text_hash), cli_user()))
    out.print(f"group {name}: description approved", highlight=False)


@groups_app.command("reject")
def reject_group(
    name: GroupArgument,
    text_hash: Annotated[
        str | None,
        typer.Option("--text-hash", help="The description as `groups pending` showed it."),
    ] = None,
    lift: Annotated[
        bool, typer.Option("--lift", help="Forget the rejection: the same description proposed again waits again.")
    ] = False,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Drop a group's waiting description (the live one stays) and remember it: proposing it again (a sync of the
    server's configured description, too) leaves it out until `--lift`."""
    registry = open_registry(store)
    if lift:
        guarded(lambda: registry.reviews.lift_group(name, cli_user()))
        out.print(f"group {name}: rejection lifted", highlight=False)
        return
    reviewed = _full_hash(registry, name, text_hash)
    rejected = guarded(lambda: registry.reviews.reject_group(name, reviewed, cli_user()))
    out.print(f"group {name}: description {rejected[:12]} rejected; the live one stays", highlight=False)


def _change_json(change: GroupChange) -> dict[str, str | None]:
    review = change.review
    return {
        "group": review.name,
        "text_hash": change.text_hash,
        "live": change.live,
        "proposed": change.proposed,
        "proposed_by": review.proposed_by,
        "origin": review.origin,
        "proposed_at": review.proposed_at.isoformat(timespec="seconds"),
    }


def _full_hash(registry: ToolRegistry, name: str, given: str | None) -> str | None:
    """The waiting description's hash when `given` is its start as `groups pending` shows it."""
    waiting = {change.review.name: change.text_hash for change in registry.reviews.waiting_groups()}
    return full_hash(given, lambda: waiting.get(name, ""))


def _group_sizes(registry: ToolRegistry) -> dict[str, int]:
    """Each group with tools, and how many it has."""
    groups = guarded(registry.snapshot).groups
    if groups is None:
        return {}
    return {name: int((groups.of_tool == i).sum()) for i, name in enumerate(groups.names)}
