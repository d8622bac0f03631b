"""`toolrag store ...`: move a registry between stores (SQLite file <-> PostgreSQL), history and vectors included."""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Annotated

import typer

from toolrag.cli.common import JsonOption, err, guarded, out, print_json

if TYPE_CHECKING:
    from toolrag.store.base import RegistryDump

store_app = typer.Typer(help="Move registries between stores.", no_args_is_help=True)


@store_app.command("copy")
def copy(
    source: Annotated[str, typer.Argument(help="Registry to read: a file, sqlite:///PATH or postgresql://...")],
    destination: Annotated[str, typer.Argument(help="Empty registry to fill (created if missing).")],
    as_json: JsonOption = False,
) -> None:
    """Copy every tool, every version and the index's vectors, in one transaction on the destination."""
    started = time.perf_counter()
    with err.status("reading the source registry", spinner="dots") if not as_json else nullcontext():
        dump = guarded(lambda: read_registry(source))
    with err.status(f"writing {len(dump.tools)} tools", spinner="dots") if not as_json else nullcontext():
        guarded(lambda: write_registry(destination, dump))
    summary = {
        "tools": len(dump.tools),
        "versions": len(dump.versions),
        "vectors": len(dump.vectors),
        "model": dump.model.model_id if dump.model else None,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if as_json:
        print_json(summary)
    else:
        out.print(
            f"copied {summary['tools']} tools ({summary['versions']} versions, {summary['vectors']} vectors of "
            f"{summary['model']}) in {summary['seconds']} s"
        )


def read_registry(location: str) -> RegistryDump:
    """Everything a store holds (no embedding model is loaded)."""
    from toolrag.registry import open_store

    store = open_store(location, create=False)
    try:
        return store.dump()
    finally:
        store.close()


def write_registry(location: str, dump: RegistryDump) -> None:
    """Restore a dump into the (empty) store at `location`, in one transaction."""
    from toolrag.registry import open_store

    store = open_store(location)
    try:
        store.restore(dump)
    finally:
        store.close()
