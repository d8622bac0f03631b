"""The `toolrag` command. Tables for people, `--json` for programs, errors on stderr with a non-zero exit."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from toolrag.cli.api import api_app
from toolrag.cli.cache import cache_app
from toolrag.cli.common import (
    DEFAULT_STORE,
    EmbedderOption,
    JsonOption,
    ScopesOption,
    StoreOption,
    Table,
    ToolNameArgument,
    close_opened_registries,
    err,
    fail,
    guarded,
    marked,
    one_line_summaries,
    open_registry,
    out,
    plural,
    principal_from,
    print_json,
    progress_bar,
    results_table,
    shown,
    table_or_lines,
)
from toolrag.cli.doctor import doctor_command
from toolrag.cli.evaluate import eval_command
from toolrag.cli.examples import write_examples_command  # noqa: F401  (a command of `toolrag tools`)
from toolrag.cli.explain import explain_command
from toolrag.cli.groups import groups_app
from toolrag.cli.lifecycle import (
    export_registry,
    migrate,
    print_held,
    report_command,
    restore_backup,
    suggest_aliases_command,
    tools_app,
    validate_command,
)
from toolrag.cli.mcp import mcp_app
from toolrag.cli.relations import relations_app
from toolrag.cli.store import store_app
from toolrag.limits import MAX_K, start_blas_small

if TYPE_CHECKING:
    from toolrag.model import Tool
    from toolrag.registry import ToolRegistry

app = typer.Typer(
    name="toolrag",
    help="Tool selection as retrieval: a permission-aware tool registry with offline hybrid search.",
    no_args_is_help=True,
    add_completion=True,  # `toolrag --install-completion` / `--show-completion SHELL`
)


def _show_version(value: bool) -> None:
    if value:
        from toolrag._version import __version__

        out.print(f"toolrag {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    context: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Tool selection as retrieval: a permission-aware tool registry with offline hybrid search."""
    context.call_on_close(close_opened_registries)


# -- catalog ------------------------------------------------------------------------------------------------------


@app.command("import")
def import_catalog(
    files: Annotated[list[Path], typer.Argument(help="Catalog files: .json, .jsonl, .yaml/.yml.")],
    store: StoreOption = DEFAULT_STORE,
    embedder: EmbedderOption = "auto",
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Repair non-JSON-Schema types such as 'String' or 'any'.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Add or update the tools of catalog files (each whole or not at all), or restore a `toolrag export` backup
    into an empty registry."""
    from toolrag.catalog.files import load_catalog
    from toolrag.store.backup import is_backup

    if len(files) == 1 and is_backup(files[0]):
        restore_backup(files[0], store, as_json)
        return
    # Every file is read and checked before the registry is opened: a bad file leaves no new registry behind.
    catalogs = [(path, guarded(lambda path=path: load_catalog(path, lenient=lenient))) for path in files]  # type: ignore[misc]
    registry = open_registry(store, embedder, create=True)
    reports = {}
    for path, tools in catalogs:
        total = guarded(lambda tools=tools: registry.texts_to_embed(tools))  # type: ignore[misc]
        with progress_bar(f"embedding {path.name}", total, not as_json) as advance:
            report = guarded(
                lambda tools=tools, advance=advance: registry.register_over(tools, advance, origin="import")  # type: ignore[misc]
            )
        reports[str(path)] = {
            "added": len(report.added),
            "updated": len(report.updated),
            "unchanged": len(report.unchanged),
            "held": report.held,
            "rejected": report.rejected,
        }
        if not as_json:
            out.print(
                f"{path}: {len(report.added)} added, {len(report.updated)} updated, {len(report.unchanged)} unchanged"
            )
            print_held(report.held, report.rejected)
    if as_json:
        print_json(reports)


app.command("add", help="Same as import.")(import_catalog)


@app.command("list")
def list_tools(
    store: StoreOption = DEFAULT_STORE,
    include_inactive: Annotated[bool, typer.Option("--all", help="Also list deactivated tools.")] = False,
    as_json: JsonOption = False,
) -> None:
    """List the registry's tools with their capability cards (an operator's view: no permission filter)."""
    registry = open_registry(store)
    tools = guarded(lambda: registry.tools(include_inactive))
    if as_json:
        print_json(
            [
                {
                    "name": t.name,
                    "version": t.version,
                    "active": t.active,
                    "category": t.category,
                    "scopes": t.scopes,
                    "tenants": t.tenants,
                    "card": t.card().text(),
                }
                for t in tools
            ]
        )
        return
    table = Table("name", "v", "category", "scopes", "purpose", title=f"{plural(len(tools), 'tool')} in {store}")
    rows = [[t.name, str(t.version), t.category or "", ", ".join(t.scopes), t.purpose()] for t in tools]
    table_or_lines(table, rows)


@app.command()
def show(
    name: ToolNameArgument,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Show one tool in full: definition, schema, card; a quarantined one as its server lists it, with its findings
    and what changed."""
    from toolrag.mcp.review import pending_review

    registry = open_registry(store)
    review = guarded(lambda: pending_review(registry, name))
    tool = review.tool if review is not None else guarded(lambda: registry.store.get(name))
    if tool is None:
        fail(f"no tool named {name!r}{_did_you_mean(registry, name)}")
        return
    data = tool.model_dump(mode="json") | {"card": tool.card().text(), "content_hash": tool.content_hash}
    if review is not None:  # awaiting approval: what the server lists now, why it waits, what changed
        data |= {"quarantined": True, "findings": list(review.findings), "diff": review.diff()}
    data["inferred_requires"] = _inferred_requires(registry, tool)
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        if value is None or value == []:
            continue  # unset fields say nothing
        text = json.dumps(value, indent=2, ensure_ascii=False) if isinstance(value, dict | list) else str(value)
        out.print(marked(f"[bold]{key}[/]: {shown(text)}"), highlight=False)


def _inferred_requires(registry: ToolRegistry, tool: Tool) -> list[str]:
    """The producers inferred for the tool's required parameters, best first (search/inferred.py): an operator's
    command, so hidden producers too; a declared requirement for the same parameter wins over these in search."""
    if not registry.config.infer_requirements:
        return []
    retriever = registry.retriever
    edges = guarded(lambda: retriever.inferred(retriever.snapshot())).of(tool.name)
    strength = {True: "required", False: "optional"}
    return [f"{e.producer}.{e.output} -> `{e.parameter}` ({e.confidence:.2f}, {strength[e.strong]})" for e in edges]


def _did_you_mean(registry: ToolRegistry, name: str) -> str:
    """The nearest names of the registry (an operator's command: every tool, hidden or not)."""
    from rapidfuzz import fuzz, process

    names = [t.name for t in guarded(lambda: registry.tools(include_inactive=True))]
    close = [match for match, score, _ in process.extract(name, names, scorer=fuzz.WRatio, limit=3) if score >= 60]
    return f"; did you mean {' or '.join(close)}?" if close else ""


index_app = typer.Typer(help="Maintain the search index.", no_args_is_help=True)
app.add_typer(index_app, name="index")
app.add_typer(store_app, name="store")
app.add_typer(mcp_app, name="mcp")
app.add_typer(tools_app, name="tools")
app.add_typer(groups_app, name="groups")
app.add_typer(api_app, name="api")
app.add_typer(cache_app, name="cache")
app.add_typer(relations_app, name="relations")
index_app.command("migrate")(migrate)
app.command("export")(export_registry)
app.command("validate")(validate_command)
app.command("report")(report_command)
app.command("suggest-aliases")(suggest_aliases_command)
app.command("eval")(eval_command)
app.command("doctor")(doctor_command)
app.command("explain")(explain_command)


@index_app.command("rebuild")
def rebuild_index(
    store: StoreOption = DEFAULT_STORE,
    embedder: EmbedderOption = "default",
    as_json: JsonOption = False,
) -> None:
    """Re-embed every tool with the given model and switch the index to it (resumable after an interruption)."""
    registry = open_registry(store, embedder)
    total = guarded(registry.texts_to_rebuild)
    with progress_bar("embedding", total, not as_json) as advance:
        embedded = guarded(lambda: registry.rebuild(advance))
    if as_json:
        print_json({"model": registry.embedder.model_id, "embedded": embedded})
    else:
        out.print(f"index now uses {registry.embedder.model_id}: {embedded} texts embedded")


# -- search -------------------------------------------------------------------------------------------------------


@app.command()
def search(
    request: Annotated[str, typer.Argument(help="What the user asked for.")],
    store: StoreOption = DEFAULT_STORE,
    embedder: EmbedderOption = "auto",
    user: Annotated[str | None, typer.Option(help="User the request is made for.")] = None,
    tenant: Annotated[str | None, typer.Option(help="The user's tenant.")] = None,
    scopes: ScopesOption = None,
    k: Annotated[
        int | None,
        typer.Option(
            "-k",
            min=1,
            max=MAX_K,
            help="Tools at most (default 3; given, it wins over returning a small catalog whole).",
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="Injection format for the token count.")] = "openai",
    as_json: JsonOption = False,
) -> None:
    """Find the tools for a request, as the given principal may see them."""
    if not request.strip():
        fail("the request is empty: give what the user asked for, e.g. toolrag search 'refund my last order'")
    registry = open_registry(store, embedder)
    principal = principal_from(user, tenant, scopes)
    selection = guarded(lambda: registry.select(request, principal, fmt=fmt, k=k))
    if as_json:
        print_json(
            {
                "query": request,
                "strategy": selection.strategy,
                "results": [r.model_dump() for r in selection.results],
                "tools": selection.tools,
                "tokens": {
                    "injected": selection.injected_tokens,
                    "catalog": selection.catalog_tokens,
                    "saved_pct": selection.saved_pct,
                },
            }
        )
        return
    from toolrag.inject.tokens import count_text

    out.print(results_table(request, selection.results))
    if selection.strategy == "all":
        out.print(
            f"strategy: all (every tool this principal may use costs {count_text(selection.catalog_tokens)} prompt"
            " tokens, below"
            f" the budget of {registry.config.inject_all_below_tokens}: all of them, likeliest first)"
        )
    else:
        out.print(
            f"prompt tokens: {count_text(selection.injected_tokens)} injected instead of"
            f" {count_text(selection.catalog_tokens)} "
            f"for every visible tool ({selection.saved_pct}% saved)"
        )


# -- chat ---------------------------------------------------------------------------------------------------------


CHAT_TIMEOUT_SECONDS = 600.0  # the SDK's own default: a local model on a CPU may take minutes for an answer


@app.command()
def chat(
    base_url: Annotated[str, typer.Option(help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1.")],
    model: Annotated[str, typer.Option(help="Model name at that endpoint.")],
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY", help="API key (OPENAI_API_KEY).")] = "none",
    store: StoreOption = DEFAULT_STORE,
    embedder: EmbedderOption = "auto",
    user: Annotated[str | None, typer.Option(help="User the agent acts for.")] = None,
    tenant: Annotated[str | None, typer.Option(help="The user's tenant.")] = None,
    scopes: ScopesOption = None,
    mode: Annotated[str, typer.Option(help="preselect (retrieve per request) or discover (find_tools).")] = "preselect",
    system: Annotated[str | None, typer.Option(help="System prompt.")] = None,
) -> None:
    """Chat with an agent over the registry, showing which tools were injected and called."""
    from openai import APIError

    from toolrag.runtime import Agent, AgentResult, ListSink, Message, RoundEvent, ToolCallEvent
    from toolrag.runtime.agent import Mode
    from toolrag.runtime.chat_models import ChatAnswerRefusedError, capped_openai_client, failure_reason
    from toolrag.runtime.providers import OpenAIChatModel

    if mode not in ("preselect", "discover"):
        fail(f"unknown mode {mode!r}: use preselect or discover")
    registry = open_registry(store, embedder)
    sink = ListSink()
    client = capped_openai_client(base_url, api_key, CHAT_TIMEOUT_SECONDS)
    agent = Agent(
        registry,
        OpenAIChatModel(client, model),
        principal_from(user, tenant, scopes),
        mode=cast(Mode, mode),
        system=system,
        events=sink,
    )

    def answered(turn: list[Message]) -> AgentResult | None:
        try:
            return agent.run(turn)
        except (APIError, ChatAnswerRefusedError) as exc:  # this turn failed: say why, keep the conversation
            said = " ".join(failure_reason(exc).split())[:500]  # an endpoint's error body: one line, no markup
            out.print(marked(f"[red]the model at {shown(base_url)} failed: {shown(said)}[/]"), highlight=False)
            return None

    history: list[Message] = []
    while True:
        try:
            line = input("you> ").strip()
        except EOFError:
            return
        if line in ("/quit", "/exit"):
            return
        if not line:
            continue
        sink.events.clear()
        turn = [*history, Message.user(line)]
        result = guarded(lambda turn=turn: answered(turn))  # type: ignore[misc]
        if result is None:
            continue
        history = result.messages
        # What the model wrote and named is text, never markup: "[/INST]" in an answer ended the chat.
        for event in sink.events:
            if isinstance(event, RoundEvent):
                out.print(
                    marked(f"[dim]round {event.round}: offered {shown(', '.join(event.offered) or '(no tools)')}[/]")
                )
            elif isinstance(event, ToolCallEvent):
                resolved = f" -> {event.resolved_name} ({event.resolution})" if event.resolution != "exact" else ""
                out.print(marked(f"[dim]  called {shown(event.requested_name + resolved)}: {event.outcome}[/]"))
        out.print(marked(f"[bold]assistant>[/] {shown(result.text)}"), highlight=False)


# -- quickstart ---------------------------------------------------------------------------------------------------


@app.command()
def quickstart(
    store: Annotated[str, typer.Option("--store", help="Registry file to create or reuse.")] = "toolrag-quickstart.db",
    as_json: JsonOption = False,
) -> None:
    """Index the bundled example catalog and answer example requests in several languages."""
    from toolrag.cli.quickstart import run_quickstart

    guarded(lambda: run_quickstart(store, out, err, as_json))


one_line_summaries(app)


def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start_blas_small()  # before numpy is imported: nothing the command line imports up to here loads it
    if hasattr(signal, "SIGPIPE"):  # `toolrag list | head` ends quietly, as other command-line tools do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    app()


if __name__ == "__main__":
    main()
