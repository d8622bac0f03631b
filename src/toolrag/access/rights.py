"""What an access rule or a group grants (`Rights`: a role, a tenant, scopes and tool-name rules), and the refusal of
a caller granted nothing (`NotGranted`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from toolrag.model import Principal

Role = Literal["admin", "agent", "reader"]
ROLE_RANK: dict[Role, int] = {"reader": 0, "agent": 1, "admin": 2}


class NotGranted(Exception):
    """A valid access token the policy grants nothing, and why (the API and the gateway answer 403 with it)."""


class Rights(BaseModel):
    """What a rule (`Grant`) or a group (`GroupGrant`) grants."""

    model_config = ConfigDict(extra="forbid")

    role: Role | None = Field(default=None, description="admin, agent or reader (default: the section's)")
    tenant: str | None = Field(default=None, description="the principal's tenant (default: the token's claim)")
    scopes: list[str] = Field(
        default_factory=list,
        description="scopes granted, `ns:*` and `*` as wildcards (an OAuth token's own are added, held as written)",
    )
    servers: list[str] | None = Field(default=None, description="globs of MCP servers whose tools may be used")
    tools: list[str] | None = Field(default=None, description="globs of tool names that may be used")
    deny_tools: list[str] = Field(default_factory=list, description="globs of tool names never usable")

    def named_tools(self) -> frozenset[str]:
        """Glob patterns of the tool names `servers` and `tools` name."""
        return frozenset([f"{server}.*" for server in self.servers or []] + list(self.tools or []))

    def principal_of(
        self, user: str, tenant: str | None, scopes: Iterable[str], allow: frozenset[str] | None
    ) -> Principal:
        """The principal granted to `user`; `tenant` and `scopes` come from an access token. The token's scopes are
        the issuer's strings, not toolrag's patterns: they are held as written (an issuer's `*` or `ns:*` grants no
        other scope); only the granted `scopes` are wildcards."""
        return Principal(
            user=user,
            tenant=self.tenant or tenant,
            scopes=frozenset(self.scopes),
            exact_scopes=frozenset(scopes) - frozenset(self.scopes),
            allow_tools=allow,
            deny_tools=frozenset(self.deny_tools),
        )
