"""The console's access page (admins): what a configured rule's principal, or a token with the claims pasted, may
use, through the server's own access policy (server/principals.py, as `/access/...` answers), and why a tool asked
about is hidden. Anyone else gets the page a tool that does not exist gets: it learns nothing of the rules.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from toolrag.server.console.common import Console, Who
from toolrag.server.models import AccessOut
from toolrag.server.principals import claims_view, parse_claims, rule_view

router = APIRouter()


@router.get("/access")
def access_page(
    request: Request,
    console: Console,
    who: Who,
    rule: Annotated[str, Query(max_length=200)] = "",
    claims: Annotated[str, Query(max_length=20_000)] = "",
    tool: Annotated[str, Query(max_length=200)] = "",
) -> HTMLResponse:
    if not who.is_admin:
        return console.error(request, 403, f"token {who.name!r} is {who.role}: only admins see what others may use")
    shown: dict[str, Any] = {
        "rules": list(console.policy.grants),
        "asked": {"rule": rule, "claims": claims, "tool": tool},
    }
    try:
        view = _view(console, rule, claims, tool or None)
    except ValueError as problem:
        return console.page(request, "access.html", 422, view=None, error=str(problem), **shown)
    return console.page(request, "access.html", view=view, **shown)


def _view(console: Console, rule: str, claims: str, tool: str | None) -> AccessOut | None:
    """The view asked for (pasted claims before a chosen rule); None when nothing was asked."""
    if claims.strip():
        return claims_view(console.policy, parse_claims(claims, "the claims"), console.registry, tool)
    if rule:
        try:
            return rule_view(console.policy, rule, console.registry, tool)
        except KeyError:
            raise ValueError(f"no access rule named {rule!r}") from None
    return None
