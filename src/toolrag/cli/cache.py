"""`toolrag cache ...`: what the per-machine cache holds (prepared models, fixed-text vectors, snapshots), and
pruning what no installation uses any more."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from toolrag.cli.common import JsonOption, Table, out, print_json

if TYPE_CHECKING:
    from toolrag.embed.cache import CacheEntry

cache_app = typer.Typer(help="The per-machine cache: list it, prune it.", no_args_is_help=True)


def _entries() -> list[CacheEntry]:
    from toolrag.embed import current_cache_keys
    from toolrag.embed.cache import cache_entries

    return cache_entries(current_cache_keys())


def _folder() -> str:
    from toolrag.embed.cache_folder import cache_root

    try:
        return str(cache_root())
    except OSError as error:
        return f"no cache folder ({error})"


@cache_app.command("list")
def list_entries(as_json: JsonOption = False) -> None:
    """Every entry with its size and last use, and whether `prune` keeps it."""
    entries = _entries()
    if as_json:
        rows = [
            {"name": e.name, "kind": e.kind, "bytes": e.bytes, "last_used": e.last_used.isoformat(), "kept": e.kept}
            for e in entries
        ]
        print_json({"folder": _folder(), "bytes": sum(e.bytes for e in entries), "entries": rows})
        return
    table = Table("entry", "kind", "size", "last used", "prune", title=_folder())
    for entry in entries:
        table.add_row(
            entry.name,
            entry.kind,
            size_text(entry.bytes),
            f"{entry.last_used:%Y-%m-%d}",
            "keeps" if entry.kept else "removes",
        )
    out.print(table)
    out.print(f"{size_text(sum(e.bytes for e in entries))} in {len(entries)} entries")


@cache_app.command("prune")
def prune_entries(
    everything: Annotated[bool, typer.Option("--all", help="Remove every entry (rebuilt when next needed).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove models this installation does not use, unfinished builds, and vectors and snapshots unused for 30
    days."""
    from toolrag.embed.cache import prune

    removed = prune(_entries(), everything)
    freed = sum(entry.bytes for entry in removed)
    if as_json:
        print_json({"removed": [entry.name for entry in removed], "bytes": freed})
        return
    out.print(f"removed {len(removed)} entries, {size_text(freed)}")


def size_text(count: int) -> str:
    amount = float(count)
    for unit in ("B", "KB", "MB"):
        if amount < 1024:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GB"
