"""`toolrag relations ...`: a tool's relations with their sources and strengths, learning them from the usage log,
and an admin's verdicts on inferred and learned ones (catalog/relations.py)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from toolrag.cli.chat_models import (
    ApiKeyEnvOption,
    BaseUrlOption,
    MaxCallsOption,
    MaxTokensOption,
    ModelOption,
    ProviderOption,
)
from toolrag.cli.common import (
    DEFAULT_STORE,
    JsonOption,
    StoreOption,
    Table,
    ToolNameArgument,
    cli_user,
    err,
    guarded,
    open_registry,
    out,
    plural,
    print_json,
    progress_bar,
    table_or_lines,
)
from toolrag.search.learned_defaults import MAX_CALLS, MIN_CALLERS, MIN_SESSIONS, MIN_STRENGTH, WINDOW_DAYS

if TYPE_CHECKING:
    from toolrag.store.relations import RelationKind, Verdict

relations_app = typer.Typer(
    help="Tool relations: list them, learn them from usage, have your chat model propose them, confirm or reject them.",
    no_args_is_help=True,
)
OtherArgument = Annotated[str, typer.Argument(help="The other tool: the one required, or called next.")]
# A pair can have both an inferred requirement and a learned relation.
KindOption = Annotated[
    Literal["requires", "related"] | None, typer.Option("--kind", help="Which relation of the pair to judge.")
]


@relations_app.command("list")
def list_relations(name: ToolNameArgument, store: StoreOption = DEFAULT_STORE, as_json: JsonOption = False) -> None:
    """Every relation of a tool: declared, confirmed, inferred from schemas, learned from usage, and rejected."""
    registry = open_registry(store)
    relations = guarded(lambda: registry.relations.of(name, lambda _: True))
    if as_json:
        print_json([relation.model_dump(mode="json") for relation in relations])
        return
    table = Table("tool", "kind", "source", "strength", "why", title=f"{name}: {plural(len(relations), 'relation')}")
    rows = [
        [
            r.other,
            r.kind + (f" `{r.parameter}`" if r.parameter else ""),
            r.source + (" (rejected)" if r.rejected else ""),
            f"{r.strength:.2f}",
            r.detail or "",
        ]
        for r in relations
    ]
    table_or_lines(table, rows)


@relations_app.command("learn")
def learn(
    days: Annotated[int, typer.Option("--days", min=1, help="Read the usage log this far back.")] = WINDOW_DAYS,
    max_calls: Annotated[
        int,
        typer.Option(
            "--max-calls",
            min=1,
            help="Read at most this many calls of each tenant (or tenantless caller), the latest.",
        ),
    ] = MAX_CALLS,
    min_sessions: Annotated[
        int, typer.Option("--min-sessions", min=1, help="Distinct sessions that must call B next after A.")
    ] = MIN_SESSIONS,
    min_strength: Annotated[
        float,
        typer.Option("--min-strength", min=0.0, max=1.0, help="Share of the sessions calling A that called B next."),
    ] = MIN_STRENGTH,
    min_callers: Annotated[
        int,
        typer.Option("--min-callers", min=1, help="Distinct callers of a tenant those sessions must come from."),
    ] = MIN_CALLERS,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Learn `related` relations from the tools called one after another in each tenant's sessions, in place of
    what was learned before."""
    from toolrag.search.learned import Thresholds

    registry = open_registry(store)
    thresholds = Thresholds(min_sessions, min_strength, min_callers=min_callers)
    run = guarded(lambda: registry.relations.learn(days, max_calls, thresholds, _progress))
    if as_json:
        print_json(
            {
                "calls": run.calls,
                "days": run.days,
                "relations": [
                    {
                        "learner": r.learner,
                        "tool": r.tool,
                        "related": r.related,
                        "strength": r.strength,
                        "support": r.support,
                        "sessions": r.sessions,
                    }
                    for r in run.relations
                ],
            }
        )
        return
    out.print(
        f"{plural(len(run.relations), 'relation')} learned from {plural(run.calls, 'call')} of the last {days} days"
    )
    for r in run.relations:
        out.print(
            f"  {r.learner}: {r.tool} -> {r.related} ({r.support} of {r.sessions} sessions, {r.strength:.2f})",
            highlight=False,
        )


@relations_app.command("propose")
def propose(
    model: ModelOption,
    provider: ProviderOption = "openai",
    base_url: BaseUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    max_calls: MaxCallsOption = 500,
    max_tokens: MaxTokensOption = 2_000_000,
    neighbours: Annotated[
        int, typer.Option("--neighbours", min=1, max=20, help="Candidate tools the model reads per tool.")
    ] = 6,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Ask your chat model which requirements each tool has among a few retrieved candidates: proposals wait for an
    admin's `confirm` (or SearchConfig.accept_proposed_relations); only tools whose text or candidates changed are
    asked again."""
    from toolrag.runtime.chat_models import chat_model
    from toolrag.runtime.propose import RECORD, propose_relations

    registry = open_registry(store)
    chat = guarded(lambda: chat_model(provider, model, base_url, api_key_env, RECORD))
    with progress_bar("proposing requirements", len(registry.tools()), enabled=not as_json) as advance:
        run = guarded(
            lambda: propose_relations(
                registry, chat, f"{provider}:{model}", max_calls, max_tokens, neighbours, lambda done, total: advance(1)
            )
        )
    if as_json:
        print_json(dataclasses.asdict(run))
        return
    out.print(
        f"{plural(run.proposed, 'requirement')} proposed by {run.model} in {plural(run.asked, 'call')}"
        f" ({run.prompt_tokens} prompt tokens); {run.unchanged} tools unchanged, {run.left} left for a later run"
        f" (the bounds), {run.dropped} answers refused, {run.failed} calls failed. Review them with"
        " `toolrag relations list TOOL`, then `confirm` or `reject`.",
        highlight=False,
    )
    if run.stopped:
        out.print(f"The run stopped early: {run.stopped}", highlight=False)


def _progress(done: int, total: int) -> None:
    if total >= 10_000:
        err.print(f"read {done} of {total} sessions", highlight=False)


def _decide(name: str, other: str, verdict: Verdict, kind: RelationKind | None, store: str, as_json: bool) -> None:
    registry = open_registry(store)
    decided = guarded(lambda: registry.relations.decide(name, other, verdict, cli_user(), kind))
    if as_json:
        print_json({"tool": decided.tool, "other": decided.other, "kind": decided.kind, "verdict": decided.verdict})
        return
    out.print(f"{verdict}: {decided.kind} {decided.tool} -> {decided.other}", highlight=False)


@relations_app.command("confirm")
def confirm(
    name: ToolNameArgument,
    other: OtherArgument,
    kind: KindOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Confirm an inferred, learned or proposed relation: as strong as a declared one, kept whatever comes next."""
    _decide(name, other, "confirmed", kind, store, as_json)


@relations_app.command("reject")
def reject(
    name: ToolNameArgument,
    other: OtherArgument,
    kind: KindOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Reject an inferred, learned or proposed relation: never found again for the pair until lifted."""
    _decide(name, other, "rejected", kind, store, as_json)


@relations_app.command("lift")
def lift(
    name: ToolNameArgument,
    other: OtherArgument,
    kind: KindOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
) -> None:
    """Drop a confirmation or a rejection: inference and learning decide again."""
    registry = open_registry(store)
    dropped = guarded(lambda: registry.relations.lift(name, other, cli_user(), kind))
    if as_json:
        print_json({"lifted": dropped})
        return
    if not dropped:
        err.print(f"no verdict on {name} -> {other}", highlight=False)
        raise typer.Exit(1)
    out.print(f"lifted: {name} -> {other}", highlight=False)
