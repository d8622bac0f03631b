"""`/search` and `/explain`: the tools for a request, as the token's principal may see them, and why.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

import time

from fastapi import APIRouter, HTTPException

from toolrag.search.explain import Explanation
from toolrag.server.models import ExplainIn, SearchIn, SearchOut
from toolrag.server.routes.deps import Api, Reader

router = APIRouter(tags=["agents"])


@router.post("/search", response_model=SearchOut)
def search(body: SearchIn, who: Reader, api: Api) -> SearchOut:
    """The tools for a request, as the token's principal may see them, rendered for a provider."""
    api.within_rate(who, "search")
    started = time.perf_counter()
    selection = api.registry.select(body.query, who.principal, body.format, body.k, who.session(body.session))
    api.metrics.search_seconds.observe(time.perf_counter() - started)
    api.metrics.searches.labels(str(bool(selection.results)).lower()).inc()
    return SearchOut(
        strategy=selection.strategy,
        results=selection.results,
        tools=selection.tools,
        injected_tokens=selection.injected_tokens,
        catalog_tokens=selection.catalog_tokens,
        request_note=selection.request_note,
    )


@router.post("/explain", response_model=Explanation)
def explain(body: ExplainIn, who: Reader, api: Api) -> Explanation:
    """What /search delivers for the request and why, signal by signal, nothing logged. Admin tokens may name
    another principal and also see the near tools that principal may not use, with the rule hiding each."""
    api.within_rate(who, "search")
    if body.principal is not None and not who.may_explain_for():
        raise HTTPException(403, f"token {who.name!r} is {who.role}; explaining for another principal needs admin")
    principal = body.principal.principal() if body.principal is not None else who.principal
    return api.registry.explain(body.query, principal, body.k, body.format, reveal_hidden=who.may_explain_for())
