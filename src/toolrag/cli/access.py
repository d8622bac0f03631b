"""`toolrag api access` and `toolrag mcp access`: what a configured rule's principal, or a token with the claims
given, may use, resolved through the server's own access policy from its configuration file (server/principals.py,
as the API's `/access/...` and the console's access page answer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from toolrag.cli.common import fail, guarded, open_registry, out, plural, print_json

if TYPE_CHECKING:
    from toolrag.access import AccessPolicy
    from toolrag.registry import ToolRegistry
    from toolrag.server.models import AccessOut

RuleArgument = Annotated[
    str | None, typer.Argument(help="A rule of the configuration (\\[tokens.NAME], \\[principals.NAME]).")
]
ClaimsOption = Annotated[
    str | None,
    typer.Option("--claims", help='An access token\'s claims as JSON, e.g. \'{"sub": "kim", "groups": ["support"]}\'.'),
]
ToolOption = Annotated[str | None, typer.Option("--tool", help="Also say whether it sees this tool, and if not, why.")]


def show_access(
    policy: AccessPolicy,
    store: str,
    embedder: str,
    rule: str | None,
    claims: str | None,
    tool: str | None,
    as_json: bool,
) -> None:
    if (rule is None) == (claims is None):
        fail("name a rule or give --claims (one of them)")
    registry = open_registry(store, embedder)
    view = guarded(lambda: _view(policy, registry, rule, claims, tool))
    if as_json:
        print_json(view.model_dump())
        return
    _print(view)


def _view(
    policy: AccessPolicy, registry: ToolRegistry, rule: str | None, claims: str | None, tool: str | None
) -> AccessOut:
    from toolrag.server.principals import claims_view, parse_claims, rule_view

    if claims is not None:
        return claims_view(policy, parse_claims(claims, "--claims"), registry, tool)
    assert rule is not None
    try:
        return rule_view(policy, rule, registry, tool)
    except KeyError:
        known = ", ".join(policy.grants) or "none"
        raise ValueError(f"no access rule named {rule!r} (the configuration's rules: {known})") from None


def _print(view: AccessOut) -> None:
    if not view.granted:
        out.print(f"refused (403): {view.refused or ''}", highlight=False)
        return
    facts = [view.caller or "", view.role or "", *([f"user {view.user}"] if view.user else [])]
    facts += [f"tenant {view.tenant}"] if view.tenant else []
    facts += [f"scopes {', '.join(view.scopes)}"] if view.scopes else []
    out.print(" · ".join(facts), highlight=False)
    if view.tool is not None:
        state = "visible" if view.tool.visible else f"hidden: {view.tool.hidden_by}"
        out.print(f"{view.tool.name}: {state}", highlight=False)
    out.print(f"{plural(len(view.tools), 'tool')} it may use:", highlight=False)
    for name in view.tools:
        out.print(f"  {name}", highlight=False)
