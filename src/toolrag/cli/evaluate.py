"""`toolrag eval`: retrieval measured on a benchmark set, the ranking beside what a caller receives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from toolrag.cli.common import (
    EmbedderOption,
    JsonOption,
    ScopesOption,
    Table,
    err,
    fail,
    guarded,
    out,
    principal_from,
    print_json,
)
from toolrag.limits import MAX_K


def _settings(pairs: list[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator:
            raise ValueError(f"--set {pair!r}: expected KEY=VALUE")
        try:
            parsed[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key.strip()] = value
    return parsed


def eval_command(
    folder: Annotated[
        Path | None, typer.Argument(help="Folder with tools.jsonl and queries.jsonl (format: docs/evaluation.md).")
    ] = None,
    example: Annotated[
        bool, typer.Option("--example", help="The bundled example catalog and its requests in six languages.")
    ] = False,
    no_tool: Annotated[
        Path | None,
        typer.Option(
            "--no-tool", help="Requests that need no tool (JSON Lines); default: FOLDER/notool.jsonl when there."
        ),
    ] = None,
    user: Annotated[str | None, typer.Option(help="User the requests are made for.")] = None,
    tenant: Annotated[str | None, typer.Option(help="The user's tenant.")] = None,
    scopes: ScopesOption = None,
    embedder: EmbedderOption = "default",
    mode: Annotated[list[str], typer.Option(help="hybrid, dense or lexical; repeat to compare in one run.")] = [  # noqa: B006
        "hybrid"
    ],
    compare: Annotated[bool, typer.Option("--compare", help="Also measure the dense-only and BM25 baselines.")] = False,
    dense_weight: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.8,
    k: Annotated[int, typer.Option("-k", min=1, max=MAX_K, help="Tools injected per request.")] = 3,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Evaluate an evenly spaced sample of this many requests.")
    ] = None,
    settings: Annotated[
        list[str] | None, typer.Option("--set", help="A search setting as KEY=JSON, e.g. multi_intent=false.")
    ] = None,
    replay_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.9,
            help="Replay this share of the requests as a usage log (one session each, calling its tools),"
            " learn from it and measure the rest (with --set usage_weight=0.3: the usage-learned adjustment;"
            " with --set related_tools=true: the relations learned from the sessions).",
        ),
    ] = 0.0,
    example_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.9,
            help="Give this share of the requests to their tools as example requests and measure the rest, with"
            " examples and without (the paired gain).",
        ),
    ] = 0.0,
    half: Annotated[
        str | None,
        typer.Option(
            help="Measure only one half of the requests and of the small talk: `tune` (where the defaults were"
            " chosen) or `held-out` (never used to choose them); halves are cut by a hash of each request's id."
        ),
    ] = None,
    tasks_from: Annotated[
        str | None,
        typer.Option(
            "--tasks-from",
            help="With --half: give the other half's requests that need two or more tools to their tools as past"
            " tasks (example requests of every tool of the task), and measure with them and without.",
        ),
    ] = None,
    absent: Annotated[
        bool,
        typer.Option(
            "--absent",
            help="Also search each request with its needed tools hidden from the user (the right answer is then"
            " nothing): how many still get a tool, and one at 0.5 or more, and the calibration on both cases mixed.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Measure retrieval on a benchmark set: the ranking (Recall@k, Hit@k, nDCG@10, MRR@10) and what search()
    delivers (hit, recall, empty results, tools returned), per language; the false-tool rate on requests that need
    no tool; latency and tokens saved."""
    from toolrag.embed import make_embedder
    from toolrag.eval import evaluate, example_no_tool_requests, load_benchmark, load_example, load_no_tool
    from toolrag.eval.dataset import HALVES, Query, in_half, no_tool_in_half
    from toolrag.search.config import SearchConfig

    if (folder is None) == (not example):
        fail("give a benchmark folder, or --example for the bundled one")
    modes = list(dict.fromkeys([*mode, *(["dense", "lexical"] if compare else [])]))
    if example:  # its tools carry scopes and tenants: measured as someone who may use them all
        user, tenant, scopes = user or "example", tenant or "acme", scopes or ["*"]
    if folder is None:
        benchmark = guarded(lambda: load_example(limit))
        small_talk = guarded(lambda: load_no_tool(no_tool) if no_tool else example_no_tool_requests())
    else:
        source = folder
        benchmark = guarded(lambda: load_benchmark(source, limit))
        given = no_tool or (folder / "notool.jsonl" if (folder / "notool.jsonl").is_file() else None)
        small_talk = guarded(lambda: load_no_tool(given)) if given else []
    past_tasks: list[Query] = []
    if half is not None:
        if half not in HALVES:
            fail(f"--half {half!r}: expected one of {', '.join(HALVES)}")
        chosen = next(h for h in HALVES if h == half)
        if tasks_from is not None:
            if tasks_from == half or tasks_from not in HALVES:
                fail(f"--tasks-from {tasks_from!r}: expected the other half than --half {half!r}")
            other = next(h for h in HALVES if h != half)
            past_tasks = [query for query in in_half(benchmark, other).queries if len(query.relevant) > 1]
        benchmark, small_talk = in_half(benchmark, chosen), no_tool_in_half(small_talk, chosen)
    elif tasks_from is not None:
        fail("--tasks-from needs --half: the past tasks come from the half that is not measured")
    principal = principal_from(user, tenant, scopes)
    overrides = guarded(lambda: _settings(settings or []))
    config = guarded(lambda: SearchConfig(dense_weight=dense_weight, k=k, **overrides))
    model = guarded(lambda: make_embedder(embedder))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=as_json) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        report = guarded(
            lambda: evaluate(
                benchmark,
                model,
                config,
                modes,
                progress,
                replay_share,
                principal,
                small_talk,
                example_share,
                past_tasks,
                absent,
            )
        )
    data = report.as_json()
    if as_json:
        print_json(data)
    else:
        _print_report(data, modes[0], len(benchmark.tools))


RANKING = ("recall@1", "recall@3", "recall@5", "hit@3", "ndcg@10", "mrr@10")
DELIVERED = ("hit", "recall", "empty", "mean_returned")


def interval_text(low: float, high: float, rate: float, n: int, percent: bool = True) -> str:
    """A 95% interval as text. When every request scored alike (none, or all, of the small talk given a tool) the
    bootstrap interval is one point ("0.0%-0.0%"), which says nothing: the rule of three bounds the rate instead."""

    def shown(value: float) -> str:
        return f"{value:.1%}" if percent else f"{value:.3f}"

    if low < high or n == 0:
        return f"{shown(low)}-{shown(high)}"
    if rate == 0.0:
        return f"at most {shown(min(1.0, 3 / n))}"
    if rate == 1.0:
        return f"at least {shown(max(0.0, 1 - 3 / n))}"
    return f"{shown(low)}-{shown(high)}"


def _print_report(data: dict[str, Any], first_mode: str, tools: int) -> None:
    from toolrag.inject.tokens import count_text

    title = f"{data['dataset']}: {tools} tools, {data['n_queries']} requests"
    ranking = Table("mode", "R@1", "R@3", "R@5", "Hit@3", "nDCG@10", "MRR@10", title=f"{title}: the ranking")
    received = Table("mode", "hit", "95% interval", "recall", "empty", "returned", title="what search() delivered")
    for name, figures in data["modes"].items():
        ranking.add_row(name, *(f"{figures[key]:.3f}" for key in RANKING))
        low, high = figures["delivered"]["hit_interval"]
        received.add_row(
            name,
            f"{figures['delivered']['hit']:.3f}",
            interval_text(low, high, figures["delivered"]["hit"], data["n_queries"], percent=False),
            *(f"{figures['delivered'][key]:.3f}" for key in DELIVERED[1:]),
        )
    out.print(ranking)
    out.print(received)
    if "2+" in data["by_needed"]:
        _print_sets(data["by_needed"], first_mode)
    if len(data["by_lang"]) > 1:
        langs = Table(
            "language",
            "n",
            "R@3",
            "Hit@3",
            "nDCG@10",
            "| hit",
            "recall",
            "empty",
            "returned",
            title=f"{first_mode} by language",
        )
        for lang, figures in data["by_lang"].items():
            langs.add_row(
                lang,
                str(figures["n_queries"]),
                *(f"{figures[key]:.3f}" for key in ("recall@3", "hit@3", "ndcg@10")),
                *(f"{figures['delivered'][key]:.3f}" for key in DELIVERED),
            )
        out.print(langs)
    for baseline, compared in data["versus"].items():
        _print_versus(first_mode, baseline, compared)
    if data["no_tool"]:
        small_talk = data["no_tool"]
        by_lang = ", ".join(f"{lang} {v['given_tool']:.0%} of {v['n']}" for lang, v in small_talk["by_lang"].items())
        low, high = small_talk["interval"]
        out.print(
            f"requests that need no tool given one: {small_talk['given_tool']:.1%} of {small_talk['n']}"
            f" (95% interval {interval_text(low, high, small_talk['given_tool'], small_talk['n'])}; {by_lang})",
            highlight=False,
        )
    if data["absent"]:
        hidden = data["absent"]
        by_lang = ", ".join(
            f"{lang} {v['given_tool']:.0%} ({v['given_confident']:.0%})" for lang, v in hidden["by_lang"].items()
        )
        out.print(
            f"requests with their tools hidden given one: {hidden['given_tool']:.1%} of {hidden['n']}, at 0.5 or"
            f" more {hidden['given_confident']:.1%} ({by_lang}); calibration error with the tools present and"
            f" hidden, half and half: {hidden['mixed_ece']:.3f}",
            highlight=False,
        )
    calibration = data["calibration"]
    if calibration["bins"]:
        bins = ", ".join(
            f"{b['low']:.1f}-{b['high']:.1f}: {b['mean_score']:.2f} vs {b['relevant']:.2f} (n={b['n']})"
            for b in calibration["bins"]
        )
        out.print(
            f"scores shown vs share relevant, by bin: {bins}; expected calibration error {calibration['ece']:.3f}",
            highlight=False,
        )
    tokens = data["tokens"]
    from toolrag.search.config import INJECT_ALL_BELOW_TOKENS

    if tokens["catalog"] < INJECT_ALL_BELOW_TOKENS:
        out.print(
            f"(the catalog costs {tokens['catalog']} tokens, below the default budget of {INJECT_ALL_BELOW_TOKENS}:"
            " search() would return all of it, the `all` strategy; measured here with retrieval)",
            highlight=False,
        )
    out.print(
        f"search latency ({first_mode}, request embedding included): p50 {data['latency_ms']['p50']:.1f} ms, "
        f"p95 {data['latency_ms']['p95']:.1f} ms; indexed in {data['index_seconds']:.1f} s"
    )
    out.print(
        f"prompt tokens: {count_text(tokens['injected_mean'])} injected on average instead of"
        f" {count_text(tokens['catalog'])} "
        f"({tokens['saved_pct']:.1f}% saved)"
    )


SETS = ("all_required@5", "all_required@10", "recall@10", "delivered_all_required", "delivered_recall")


def _print_sets(groups: dict[str, dict[str, Any]], first_mode: str) -> None:
    """Whether requests that need several tools got the whole set, per number of tools needed."""
    table = Table(
        "tools needed",
        "n",
        "all@5",
        "all@10",
        "R@10",
        "| all delivered",
        "recall",
        "returned",
        "tokens",
        title=f"{first_mode}: whole sets (all@k: every tool needed is in the top k)",
    )
    for name, figures in groups.items():
        table.add_row(
            name,
            str(figures["n"]),
            *(f"{figures[key]:.3f}" for key in SETS),
            f"{figures['mean_returned']:.2f}",
            f"{figures['injected_tokens']:.0f}",
        )
    out.print(table)


def _print_versus(first_mode: str, baseline: str, compared: dict[str, Any]) -> None:
    """The paired nDCG@10 difference: whether the first mode really ranks better, overall and per language."""
    table = Table(
        "requests",
        "n",
        "difference",
        "95% interval",
        "differing",
        title=f"nDCG@10, {first_mode} minus {baseline}, request by request (paired bootstrap)",
    )
    rows = {"all": compared["ndcg@10"], **(compared["by_lang"] if len(compared["by_lang"]) > 1 else {})}
    for name, d in rows.items():
        table.add_row(
            name, str(d["n"]), f"{d['difference']:+.3f}", f"{d['low']:+.3f} to {d['high']:+.3f}", str(d["differing"])
        )
    out.print(table)
    hits = compared["delivered_hit"]
    out.print(
        f"delivered hit, {first_mode} minus {baseline}: {hits['difference']:+.3f}"
        f" (95% interval {hits['low']:+.3f} to {hits['high']:+.3f}, {hits['differing']} requests differ)",
        highlight=False,
    )
