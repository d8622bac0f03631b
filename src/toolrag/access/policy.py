"""One policy for every way in: who a request comes from, and what it may do.

A caller arrives with a static bearer token, an OAuth access token (its verified claims), as the local stdio client
of the MCP gateway, or as Python code that names a rule. Each way resolves through the same rules (`Grant`, the
`[tokens.NAME]` of the API and the `[principals.NAME]` of the gateway) to one `Caller`: a name, a role and the
`Principal` that search, listing, deferred loading, the adapters, the API and the gateway all filter by.

An OAuth token no rule matches may still be granted by the groups its groups claim names (`[groups.NAME]`, how they
combine: access/groups.py).

Deny by default: a caller no rule matches gets nothing. An unknown static token is refused; an OAuth token whose
claims match no rule and that names no configured group is refused (it is valid, but nothing was granted to it,
`NotGranted`); a stdio client of a gateway without
`local_principal` sees and calls no tool. A rule without `servers` and `tools` allows every tool name; with either,
only the names they match; `deny_tools` always wins. Scopes and tenants of tools apply on top (`Principal`).

    [principals.support]             # the gateway's rules ([tokens.support] in the API's configuration)
    token_env = "SUPPORT_TOKEN"      # matched by this static token ...
    role = "agent"
    tenant = "acme"
    servers = ["tickets", "kb"]
    deny_tools = ["tickets.delete_*"]

    [principals.oauth-support]
    claims = { scope = "support", tenant = "acme" }   # ... or by an OAuth token with these claims
    servers = ["tickets", "kb"]
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field, model_validator

from toolrag.access.groups import GroupGrant, combined
from toolrag.access.rights import ROLE_RANK, NotGranted, Rights, Role
from toolrag.model import Principal, Tool
from toolrag.store.usage import EVERYONE, Audience

MIN_TOKEN_CHARS = 16
ClaimValue = str | list[str]


class Grant(Rights):
    """One access rule: whom it matches (a static token, OAuth claims, or both: one grant, two ways in) and what it
    grants."""

    token: str | None = Field(default=None, description="a static bearer token (prefer token_env)")
    token_env: str | None = Field(default=None, description="the environment variable holding the static token")
    claims: dict[str, ClaimValue] | None = Field(
        default=None,
        description="OAuth: the rule matches an access token whose every listed claim holds one of the values (a"
        " list claim or the space-separated scope claim: contains one)",
    )
    user: str | None = Field(default=None, description="the principal's user (default: the rule's name or `sub`)")

    @model_validator(mode="after")
    def _one_way_in(self) -> Grant:
        if self.token is not None and self.token_env is not None:
            raise ValueError("give `token` or `token_env`, not both")
        if self.claims is not None and not self.claims:
            raise ValueError("`claims` must name at least one claim (deny by default: an empty match is no rule)")
        return self

    def secret(self) -> str | None:
        if self.token_env is not None:
            return os.environ.get(self.token_env) or None
        return self.token

    def allowed_names(self) -> frozenset[str] | None:
        """Glob patterns of the tool names this rule allows; None (a rule naming neither servers nor tools) allows
        every name."""
        return None if self.servers is None and self.tools is None else self.named_tools()

    def matches(self, claims: Mapping[str, Any], scopes_claim: str) -> bool:
        """Whether an access token with these (verified) claims is one this rule is for."""
        if self.claims is None:
            return False
        for name, wanted in self.claims.items():
            held = _claim_values(claims.get(name), split=name == scopes_claim)
            if not held & ({wanted} if isinstance(wanted, str) else set(wanted)):
                return False
        return True

    def principal(
        self, name: str, user: str | None = None, tenant: str | None = None, scopes: Iterable[str] = ()
    ) -> Principal:
        """The principal this rule grants; `user`, `tenant` and `scopes` come from an access token."""
        return self.principal_of(self.user or user or name, tenant, scopes, self.allowed_names())


def _claim_values(value: Any, split: bool) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return set(value.split()) if split else {value}
    if isinstance(value, list | tuple):
        return {str(item) for item in value}
    return {str(value)}


NO_TOOLS = Principal(user="nobody", allow_tools=frozenset())


def identity(*parts: str) -> str:
    """A caller's identity, the key its in-flight requests, sessions, rate limits, usage log and learned usage are
    kept under: the way in and what names the caller there, a JSON array so no two differ only in where a part
    ends (`("rule", name)`; `("oauth", rule, issuer, subject)`: an OAuth subject is never taken for a rule's name)."""
    return json.dumps(parts)


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: the rule that matched (`name`), its role and principal, and its identity (`key`,
    distinct for every caller, stable across its requests; the principal carries it too)."""

    name: str
    role: Role
    principal: Principal
    key: str
    granted: bool = True  # False: no rule matched (the stdio client of a gateway without local_principal)
    person: str | None = None  # an OAuth token's user: the same under every rule its claims match

    @property
    def actor(self) -> str:
        """Whom a write or a decision is recorded as, and compared by under two-person review: `oauth:USER` for an
        OAuth token's user (one person matching two rules is one actor; two people under one rule are two; no
        static token's rule is taken for one), else the rule of the static token. One person holding two
        credentials is two actors."""
        return f"oauth:{self.person}" if self.person else self.name

    def may(self, role: Role) -> bool:
        return self.granted and ROLE_RANK[self.role] >= ROLE_RANK[role]

    # -- what the caller may read: one rule for the API, the console, the reports and the gateway ---------------

    @property
    def is_admin(self) -> bool:
        """An operator: manages every tool and reads every tenant's records (a caller granted nothing never is)."""
        return self.may("admin")

    def audience(self) -> Audience:
        """Whose usage records it reads: every tenant's (admins), else its tenant's (without a tenant, its own)."""
        return EVERYONE if self.is_admin else Audience.of(self.principal)

    def sees(self, tool: Tool) -> bool:
        """Admins see every tool; any other caller only the tools its principal may use: a tool it does not see is
        not even confirmed to exist."""
        return self.is_admin or self.principal.can_use(tool)

    def hidden_by(self, tool: Tool) -> str | None:
        """Why the caller does not see the tool (`Principal.hidden_by`), None when it does: for operators asking
        what another principal may use, never for the caller itself (that would confirm the tool exists)."""
        return None if self.sees(tool) else self.principal.hidden_by(tool)

    def sees_version(self, version: Tool) -> bool:
        """A tool's history is read version by version: an earlier version restricted to another tenant stays that
        tenant's, even once the tool is shared."""
        return self.is_admin or self.principal.may_see(version)

    def view(self, tool: Tool) -> Tool:
        """The tool as the caller may read it: admins whole, others without other tenants' example requests."""
        return tool.seen_by(self.principal.tenant, everything=self.is_admin)

    def may_explain_for(self) -> bool:
        """Whether it may search and explain as another principal, and see the near tools hidden from that one."""
        return self.is_admin

    def session(self, given: str | None) -> str | None:
        """A session id the caller named, bound to the caller: another caller naming the same id gets another
        session, so nobody can attach records to a conversation that is not theirs."""
        if given is None:
            return None
        return hashlib.sha256(f"{self.key}\x00{given}".encode()).hexdigest()[:32]


class TokenTable:
    """Static bearer tokens and the rules they stand for. Every lookup compares against every token in constant
    time, so neither timing nor an early exit tells how close a guess was."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(secret.encode(), name) for secret, name in tokens.items()]

    def find(self, secret: str) -> str | None:
        given = secret.encode("utf-8", "replace")
        found = None
        for known, name in self._tokens:
            if hmac.compare_digest(known, given):
                found = name
        return found


@dataclass(frozen=True)
class ClaimNames:
    """Which claims of an access token say what (the `[oauth]` section's `*_claim`); `groups` None: groups are
    not read, so no token gets a group's rights."""

    scopes: str = "scope"
    user: str = "sub"
    tenant: str | None = "tenant"
    groups: str | None = None


@dataclass(frozen=True)
class _Token:
    """What a verified access token says about its holder."""

    user: str
    issuer: str
    tenant: str | None
    scopes: frozenset[str]


@dataclass
class AccessPolicy:
    """The rules of one server (the API, the gateway) and how each way in resolves through them: `grants`, the
    named rules; `groups`, what a token's groups grant (access/groups.py); `local`, the rule of the stdio client."""

    grants: Mapping[str, Grant]
    default_role: Role
    local_rule: str | None = None
    claims: ClaimNames = field(default_factory=ClaimNames)
    groups: Mapping[str, GroupGrant] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._tokens = TokenTable(
            {secret: name for name, grant in self.grants.items() if (secret := grant.secret()) is not None}
        )

    def named(self, name: str) -> Caller:
        """The caller a rule stands for, as Python code (adapters, deferred loading) takes it."""
        grant = self.grants.get(name)
        if grant is None:
            raise KeyError(f"no access rule named {name!r}")
        return self._caller(name, grant, grant.principal(name), identity("rule", name))

    def for_token(self, secret: str) -> Caller | None:
        """The caller of a static bearer token; None when no rule holds it."""
        name = self._tokens.find(secret)
        return None if name is None else self.named(name)

    def for_claims(self, claims: Mapping[str, Any]) -> Caller:
        """The caller of a verified OAuth access token: the first rule (in the file's order) its claims match, with
        the token's subject, tenant and scopes; else the groups it names. Raises NotGranted when neither grants it
        anything."""
        token = self._read(claims)
        for name, grant in self.grants.items():
            if grant.matches(claims, self.claims.scopes):
                principal = grant.principal(name, token.user, token.tenant, token.scopes)
                caller = self._caller(name, grant, principal, identity("oauth", name, token.issuer, token.user))
                return replace(caller, person=token.user)
        return self._group_caller(claims, token)

    def _read(self, claims: Mapping[str, Any]) -> _Token:
        user = claims.get(self.claims.user)
        if user is None:
            raise NotGranted(f"the token has no {self.claims.user!r} claim")
        if not isinstance(user, str) or not user.strip() or user != user.strip():
            # Writes and decisions are recorded by it, and two-person review tells people apart by it.
            raise NotGranted(f"the token's {self.claims.user!r} claim is not a name")
        tenant = claims.get(self.claims.tenant) if self.claims.tenant else None
        scopes = _claim_values(claims.get(self.claims.scopes), split=True)
        return _Token(str(user), str(claims.get("iss", "")), str(tenant) if tenant else None, frozenset(scopes))

    def _group_caller(self, claims: Mapping[str, Any], token: _Token) -> Caller:
        """The caller of the configured groups the token names (access/groups.py), keyed by issuer and subject."""
        groups_claim = self.claims.groups
        named = (
            set()
            if groups_claim is None
            else _claim_values(claims.get(groups_claim), groups_claim == self.claims.scopes)
        )
        rights = combined(self.groups, named, self.default_role)
        if rights is None:
            raise NotGranted(f"no access rule of this server matches the token of {token.user[:80]!r}")
        principal = rights.principal_of(token.user, token.tenant, token.scopes, rights.named_tools())
        name = "groups " + "+".join(sorted(named & self.groups.keys()))
        caller = self._caller(name, rights, principal, identity("oauth-groups", token.issuer, token.user))
        return replace(caller, person=token.user)

    def local(self) -> Caller:
        """The stdio client: the rule named by `local_principal`, or a caller granted nothing."""
        if self.local_rule is None:
            key = identity("local")
            return Caller("local", "reader", NO_TOOLS.model_copy(update={"identity": key}), key, granted=False)
        return self.named(self.local_rule)

    def _caller(self, name: str, rights: Rights, principal: Principal, key: str) -> Caller:
        return Caller(name, rights.role or self.default_role, principal.model_copy(update={"identity": key}), key)


def check_grants(grants: Mapping[str, Grant], what: str) -> None:
    """Static tokens are distinct and long enough; `what` names the section in errors (`token`, `principal`)."""
    seen: dict[str, str] = {}
    for name, grant in grants.items():
        secret = grant.secret()
        if secret is None:
            continue
        if len(secret) < MIN_TOKEN_CHARS:
            raise ValueError(f"{what} {name!r}: its token is shorter than {MIN_TOKEN_CHARS} characters")
        if secret in seen:
            raise ValueError(f"{what}s {seen[secret]!r} and {name!r} have the same token")
        seen[secret] = name
