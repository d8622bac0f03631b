"""`/access`: what a principal may use, for admin tokens (server/principals.py): a configured rule's, or the caller a
set of token claims resolves to through this server's access policy. Any other token gets 403 before the rule or
the claims are looked at, so it learns nothing of them.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from fastapi import APIRouter, HTTPException

from toolrag.server.models import AccessOut, ResolveIn
from toolrag.server.principals import claims_view, rule_view
from toolrag.server.routes.deps import Admin, Api

router = APIRouter(tags=["access"])


@router.get("/access/{rule}/tools", response_model=AccessOut)
def rule_tools(rule: str, who: Admin, api: Api, tool: str | None = None) -> AccessOut:
    """The tools the rule's principal may use; with `tool`, whether it sees that one and, if not, why."""
    try:
        return rule_view(api.policy, rule, api.registry, tool)
    except KeyError:
        raise HTTPException(404, f"no access rule named {rule!r}") from None


@router.post("/access/resolve", response_model=AccessOut)
def resolve(body: ResolveIn, who: Admin, api: Api) -> AccessOut:
    """Whom a token with these claims is (the first rule they match, else its groups), and the tools it may use;
    `granted: false` with the reason when its requests would be refused."""
    return claims_view(api.policy, body.claims, api.registry, body.tool)
