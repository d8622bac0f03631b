"""Principals defined only by an access token's claims: the token names groups (the `[oauth]` section's
`groups_claim`), the configuration says what each group grants (`[groups.NAME]`), and a verified token that no access
rule matches gets the combination of the configured groups it names. Group names the configuration does not know
are ignored; a token naming none it knows is refused, as one no rule matches (deny by default).

How the groups a token names combine, each choice made so that joining a group never grants more than some group
grants on its own:

- **Tools**: a group allows the names its `servers` and `tools` match, and, unlike a rule, a group naming neither
  allows no tool (groups add up: one that only denies, or only sets a tenant, must not open every tool; write
  `tools = ["*"]` for all). The token may use the union of the allowed names.
- **deny_tools**: the union of every named group's, and a deny always wins, over any other group's allowance.
- **Role**: the highest role among the groups, and only the groups holding that role grant tools and scopes. A
  reader group grants reading its tools, not running them: a token in a reader group of weather tools and an agent
  group of billing tools is an agent of the billing tools (taking the highest role with every group's tools would
  let it run weather tools no group lets anyone run). Grant both in one agent group when that is what is meant.
  (The lower groups' denies still apply.)
- **Scopes**: the union of the scopes of the groups holding that role; the token's own are added, held as written.
- **Tenant**: the tenant the groups name (a group's tenant is the principal's, as a rule's is; none named: the
  token's tenant claim). Groups naming different tenants are refused, not merged: a principal acts for one tenant,
  and guessing which (or taking none, which would change whose records it reads) would hide the mistake.

The caller is keyed by the token's issuer and subject (`("oauth-groups", issuer, subject)`), never by its groups:
one subject keeps one rate and one usage record when its groups change, and never shares a rule's caller's.

    [oauth]
    groups_claim = "groups"           # the token's claim listing its groups (a list, or one name)

    [groups.support]                  # a token with "support" in its groups ...
    role = "agent"
    servers = ["tickets", "kb"]

    [groups.no-deletes]               # ... and "no-deletes" uses tickets and kb, but never deletes
    deny_tools = ["*.delete_*"]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import model_validator

from toolrag.access.rights import ROLE_RANK, NotGranted, Rights, Role

RULE_ONLY = ("token", "token_env", "claims", "user")


class GroupGrant(Rights):
    """`[groups.NAME]`: what a token whose groups claim names this group is granted."""

    @model_validator(mode="before")
    @classmethod
    def _no_way_in(cls, data: Any) -> Any:
        named = sorted(set(RULE_ONLY) & data.keys()) if isinstance(data, dict) else []
        if named:
            raise ValueError(
                f"a group is reached only through the token's groups claim: {', '.join(named)} belong to an access"
                " rule ([tokens.NAME] in the API's configuration, [principals.NAME] in the gateway's)"
            )
        return data


def combined(groups: Mapping[str, GroupGrant], named: Collection[str], default_role: Role) -> GroupGrant | None:
    """What the configured groups among `named` grant together (the rules above); None when it names none. Raises
    NotGranted when they name different tenants."""
    members = {name: groups[name] for name in sorted(named) if name in groups}
    if not members:
        return None
    role = max((group.role or default_role for group in members.values()), key=ROLE_RANK.__getitem__)
    top = [group for group in members.values() if (group.role or default_role) == role]
    return GroupGrant(
        role=role,
        tenant=_one_tenant(members),
        scopes=sorted({scope for group in top for scope in group.scopes}),
        tools=sorted(frozenset().union(*(group.named_tools() for group in top))),
        deny_tools=sorted({pattern for group in members.values() for pattern in group.deny_tools}),
    )


def _one_tenant(members: Mapping[str, GroupGrant]) -> str | None:
    named = {name: group.tenant for name, group in members.items() if group.tenant}
    first = next(iter(named), None)
    other = next((name for name in named if named[name] != named[first]), None) if first else None
    if first is not None and other is not None:
        raise NotGranted(
            f"the token's groups {first!r} and {other!r} name different tenants ({named[first]}, {named[other]}):"
            " a principal acts for one tenant"
        )
    return named.get(first) if first else None
