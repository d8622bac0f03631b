"""`toolrag quickstart`: the bundled example catalog, indexed and searched for a few people in a few languages."""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

from rich.console import Console

from toolrag.catalog.files import load_catalog
from toolrag.cli.common import closed_with_command, marked, plain, print_json, progress_bar, results_table
from toolrag.inject.tokens import count_text
from toolrag.model import Principal
from toolrag.registry import ToolRegistry

GUEST = Principal()
SUPPORT_AGENT = Principal(
    user="olena", tenant="acme", scopes=frozenset({"support:*", "email:read", "email:send", "billing:read"})
)
BILLING_LEAD = Principal(user="marc", tenant="acme", scopes=frozenset({"billing:*", "support:*"}))
SRE = Principal(user="sam", tenant="acme", scopes=frozenset({"k8s:write", "deploy:write", "ops:*"}))
EMPLOYEE = Principal(user="li", tenant="acme", scopes=frozenset({"hr:self", "calendar:write", "calendar:read"}))
TRAVELLER = Principal(user="ana", tenant="acme", scopes=frozenset({"travel:*", "calendar:write"}))

EXAMPLES: list[tuple[str, str, Principal]] = [
    ("guest", "Where is my package? It should have arrived yesterday.", GUEST),
    ("guest", "Wo ist mein Paket?", GUEST),
    ("guest", "我的包裹在哪里？", GUEST),
    ("guest", "¿Puedes reservar una mesa para cuatro esta noche?", GUEST),
    ("olena (support, billing:read)", "Refund the customer's last payment", SUPPORT_AGENT),
    ("marc (billing:*)", "Refund the customer's last payment", BILLING_LEAD),
    ("sam (sre)", "restart the checkout service in production", SRE),
    ("li (employee)", "How many vacation days do I have left?", EMPLOYEE),
    ("ana (travel)", "Book me a flight to Rome for Friday, then a hotel near the Colosseum.", TRAVELLER),
    ("guest", "tell me a joke", GUEST),
]


def example_catalog_path() -> Any:
    return resources.files("toolrag") / "data" / "example_catalog.yaml"


def run_quickstart(store: str, out: Console, err: Console, as_json: bool) -> None:
    registry = closed_with_command(ToolRegistry(store))
    with resources.as_file(example_catalog_path()) as path:
        tools = load_catalog(path)
    started = time.perf_counter()
    total = registry.texts_to_embed(tools)
    embedded_at = started
    with progress_bar("embedding the example catalog", total, not as_json) as advance:

        def embedded(count: int) -> None:
            nonlocal embedded_at
            advance(count)
            embedded_at = time.perf_counter()

        report = registry.register_over(tools, embedded)
    seconds = time.perf_counter() - started
    embedding = embedded_at - started
    answers = []
    if not as_json:
        rate = f"{total / embedding:.0f} texts/s, " if total and embedding > 0 else ""
        out.print(
            marked(f"[bold]Indexed {len(tools)} tools[/] ")
            + plain(
                f"into {store} in {seconds:.1f} s: {total} texts embedded with "
                f"{registry.embedder.model_id} in {embedding:.1f} s ({rate}the rest is writing the registry); "
                f"{len(report.added)} added, {len(report.updated)} updated, {len(report.unchanged)} unchanged\n"
            ),
            highlight=False,
        )
    registry.search("load the models", GUEST)  # the first request of a process loads the models: not timed
    for who, request, principal in EXAMPLES:
        started = time.perf_counter()
        registry.search(request, principal)
        millis = (time.perf_counter() - started) * 1000
        selection = registry.select(request, principal)  # the same search, from the cache, rendered
        answers.append(
            {
                "who": who,
                "query": request,
                "tools": [r.model_dump() for r in selection.results],
                "injected_tokens": selection.injected_tokens,
                "catalog_tokens": selection.catalog_tokens,
                "search_ms": round(millis, 2),
            }
        )
        if not as_json:
            out.print(results_table(f"{who}: {request}", selection.results))
            out.print(
                f"  {count_text(selection.injected_tokens)} prompt tokens instead of"
                f" {count_text(selection.catalog_tokens)} "
                f"({selection.saved_pct}% saved); found in {millis:.1f} ms\n",
                highlight=False,
            )
    if as_json:
        print_json({"store": store, "tools": len(tools), "index_seconds": round(seconds, 2), "answers": answers})
    else:
        out.print(
            'Next: `toolrag search "your request" --store ' + store + " --scopes billing:read`, "
            "`toolrag list --store " + store + "`, `toolrag eval --example --compare`."
        )
