"""What a principal may use, for operators: a configured rule, or the caller a set of access-token claims resolves
to through the server's own access policy (the same `AccessPolicy.for_claims` its requests go through), and the
tools that caller sees (`Caller.sees`, as GET /tools lists them for it), with why one asked about is hidden. The API
(`/access/...`), the console's access page and `toolrag api access` all answer with this."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolrag.access import AccessPolicy, Caller, NotGranted
from toolrag.errors import ToolNotFoundError
from toolrag.model import Tool, ToolRelation
from toolrag.registry import ToolRegistry
from toolrag.search.filter import may_use_named
from toolrag.search.learned import learner_key
from toolrag.server.models import AccessOut, ToolAccessOut


def parse_claims(text: str, what: str) -> dict[str, Any]:
    """An access token's claims given as JSON text; ValueError naming `what` (where the text came from) when it is
    not a JSON object."""
    try:
        claims = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what}: not JSON ({exc})") from None
    if not isinstance(claims, dict):
        raise ValueError(f'{what} must be a JSON object, e.g. {{"sub": "kim", "groups": ["support"]}}')
    return claims


def served(who: Caller, registry: ToolRegistry) -> Caller:
    """The caller as the registry serves it now: the tools of upstream servers an operator switched off are
    hidden from it (`ToolRegistry.served_as`), in every listing and page as in its searches."""
    return replace(who, principal=registry.served_as(who.principal))


def visible_tool(who: Caller, registry: ToolRegistry, name: str) -> Tool:
    """The tool as the caller may read it (`Caller.view`), or ToolNotFoundError when it may not: a tool hidden from it
    is not even confirmed to exist, in the answer or its timing (the snapshot answers before the store is read)."""
    if not who.is_admin and not may_use_named(registry.snapshot(), registry.served_as(who.principal), name):
        raise ToolNotFoundError(f"no tool named {name!r}", name=name)
    tool = registry.get(name)
    if not served(who, registry).sees(tool):  # the store moved on since the snapshot
        raise ToolNotFoundError(f"no tool named {name!r}", name=name)
    return who.view(tool)


def relations_shown(who: Caller, registry: ToolRegistry, name: str) -> list[ToolRelation]:
    """A tool's relations as the caller may read them: only to tools it sees, and, unless it is an admin, only
    what its own tenant's (or, with no tenant, its own) sessions taught of the learned ones, no rejected learned
    relation (whichever tenant's sessions taught it), a verdict's "an admin" for who gave it, and inferred, learned
    and proposed ones only while search uses them (not under review, until an admin confirms them; inferring costs
    the whole catalog's schemas: a reader must not set it off when nothing else would), a proposal without its
    model's reason."""
    mine = learner_key(who.principal.tenant, who.principal.caller)
    learning = not registry.reviews.required
    return registry.relations.of(
        name,
        served(who, registry).sees,
        lambda learner: who.is_admin or (learning and learner == mine),
        rejected_learned=who.is_admin,
        deciders=who.is_admin,
        inferred=who.is_admin or (learning and registry.config.infer_requirements),
        proposed=who.is_admin or (learning and registry.config.accept_proposed_relations),
        reasons=who.is_admin,
    )


def rule_view(policy: AccessPolicy, rule: str, registry: ToolRegistry, tool: str | None) -> AccessOut:
    """What the rule's principal may use; KeyError for a rule the policy does not hold."""
    return caller_view(policy.named(rule), registry, tool)


def claims_view(policy: AccessPolicy, claims: Mapping[str, Any], registry: ToolRegistry, tool: str | None) -> AccessOut:
    """What a token with these claims may use, or why it is refused."""
    try:
        caller = policy.for_claims(claims)
    except NotGranted as refusal:
        return AccessOut(granted=False, refused=str(refusal))
    return caller_view(caller, registry, tool)


def caller_view(caller: Caller, registry: ToolRegistry, tool: str | None) -> AccessOut:
    caller = served(caller, registry)
    principal = caller.principal
    return AccessOut(
        granted=True,
        caller=caller.name,
        role=caller.role,
        user=principal.user,
        tenant=principal.tenant,
        scopes=sorted(principal.scopes | principal.exact_scopes),
        tools=sorted(t.name for t in registry.tools() if caller.sees(t)),
        tool=None if tool is None else _asked(caller, registry, tool),
    )


def _asked(caller: Caller, registry: ToolRegistry, name: str) -> ToolAccessOut:
    try:
        reason = caller.hidden_by(registry.get(name))
    except ToolNotFoundError:
        return ToolAccessOut(name=name, visible=False, hidden_by="no tool of this name is registered")
    return ToolAccessOut(name=name, visible=reason is None, hidden_by=reason)
