"""`toolrag explain`: what search() delivers for a request and why, tool by tool (search/explain.py)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from toolrag.cli.common import (
    DEFAULT_STORE,
    EmbedderOption,
    JsonOption,
    ScopesOption,
    StoreOption,
    Table,
    fail,
    guarded,
    marked,
    open_registry,
    out,
    principal_from,
    print_json,
    shown,
)
from toolrag.limits import MAX_K


def explain_command(
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
    as_json: JsonOption = False,
) -> None:
    """Why search() delivers what it does for a request: the ranking with every signal, why each ranked tool was
    cut, and the near tools this principal may not use (the CLI is an operator's view)."""
    if not request.strip():
        fail("the request is empty: give what the user asked for, e.g. toolrag explain 'refund my last order'")
    registry = open_registry(store, embedder)
    principal = principal_from(user, tenant, scopes)
    explanation = guarded(lambda: registry.explain(request, principal, k, reveal_hidden=True))
    if as_json:
        print_json(explanation.model_dump(mode="json"))
        return
    from toolrag.inject.tokens import count_text

    out.print(marked(f"[bold]{shown(explanation.request)}[/]"), highlight=False)
    if explanation.request_note:
        out.print(marked(f"[dim]{shown(explanation.request_note)}[/]"), highlight=False)
    out.print(f"decision: {explanation.decision}", highlight=False)
    for number, step in enumerate(explanation.steps, 1):
        out.print(f"step {number}: {step}", highlight=False)
    for name, reason in (explanation.needed | explanation.related).items():
        out.print(f"{name}: {reason}", highlight=False)
    if not explanation.calibrated:
        out.print(
            marked("[dim]probabilities: the request's language is none they were calibrated on: a rough guide[/]")
        )
    models = list(dict.fromkeys(m for tool in explanation.ranking for m in tool.model_cosines))
    table = Table("#", "tool", "p", "cosine", *(_short(m) for m in models), "lexical", "result")
    notes = []
    for tool in explanation.ranking:
        table.add_row(
            str(tool.rank),
            tool.name,
            f"{tool.probability:.2f}",
            f"{tool.cosine:.2f}",
            *(f"{tool.model_cosines.get(m, 0.0):.2f}" for m in models),
            f"{tool.lexical:.2f}",
            Text("delivered", style="green") if tool.delivered else "cut",
        )
        why = [f"cut: {tool.cut}"] if tool.cut and explanation.needs_tool else []  # else the decision says why
        why += [f"words: {' '.join(tool.matched_words)}"] if tool.matched_words else []
        why += [f"{tool.example_source} example ({tool.example_cosine:.2f}): {tool.example}"] if tool.example else []
        if tool.description != "source":
            cosine = f" ({tool.description_cosine:.2f})" if tool.description_cosine is not None else ""
            why += [f"description: {tool.description}{cosine}"]
        if why:
            notes.append(f"{tool.rank}. {tool.name}: " + "; ".join(why))
    out.print(table)
    for note in notes:
        out.print(note, highlight=False)
    for hidden in explanation.hidden:
        out.print(f"hidden: {hidden.name} (cosine {hidden.cosine:.2f}): {hidden.hidden_by}")
    out.print(
        f"prompt tokens: {count_text(explanation.injected_tokens)} injected instead of"
        f" {count_text(explanation.catalog_tokens)}"
        f" ({explanation.saved_pct}% saved)"
    )
    out.print(marked(f"[dim]{shown(explanation.meaning)}[/]"), highlight=False)


def _short(model_id: str) -> str:
    """A column title for a model: the bundled ones by their family name."""
    for family, title in (("use-", "USE"), ("minilm", "MiniLM"), ("e5", "e5")):
        if family in model_id:
            return title
    return model_id[:12]
