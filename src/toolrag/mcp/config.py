"""The gateway's configuration file (TOML): upstream MCP servers, principals and their rules, limits.

store = "toolrag.db"
local_principal = "me"          # who a stdio client is

[servers.time]                  # stdio upstream
command = "uvx"
args = ["mcp-server-time"]

[servers.docs]                  # streamable HTTP upstream
url = "https://docs.example.com/mcp"
headers = { Authorization = "Bearer ..." }

[principals.me]
scopes = ["*"]
servers = ["*"]                 # globs of servers whose tools this principal may use ...
tools = []                      # ... plus globs of single tools (`git.git_status`)
deny_tools = ["git.git_reset"]  # never, whatever else allows it
token = "..."                   # bearer token over HTTP (or token_env = "VARIABLE")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolrag.config_files import beside, read_toml
from toolrag.errors import ConfigError
from toolrag.model import Principal
from toolrag.monitor.config import MonitorConfig, ScheduleConfig, StartupConfig
from toolrag.server.guard import HttpLimits
from toolrag.server.oauth import OAuthConfig
from toolrag.server.rate_limit import RateLimits

ApprovalPolicy = Literal["after-first-sync", "always", "never"]

SERVER_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,48}$"  # no dots: the dot separates server and tool


class ServerConfig(BaseModel):
    """One upstream MCP server, over stdio (`command`) or streamable HTTP (`url`)."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    description: str | None = Field(default=None, description="what the server is for; added to its tools' text")
    scopes: list[str] = Field(default_factory=list, description="scopes every tool of this server requires")
    enabled: bool = True
    approve_new_tools: ApprovalPolicy | None = Field(
        default=None, description="this server's approval policy for new tools (default: the gateway's)"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP), not both or neither")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


class PrincipalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    tenant: str | None = None
    scopes: list[str] = Field(default_factory=list)
    servers: list[str] = Field(default_factory=lambda: ["*"], description="globs of servers")
    tools: list[str] = Field(default_factory=list, description="globs of namespaced tool names")
    deny_tools: list[str] = Field(default_factory=list)
    token: str | None = None
    token_env: str | None = None

    def bearer_token(self) -> str | None:
        if self.token_env is not None:
            return os.environ.get(self.token_env) or None
        return self.token

    def principal(self, name: str) -> Principal:
        allowed = frozenset([f"{server}.*" for server in self.servers] + self.tools)
        return Principal(
            user=self.user or name,
            tenant=self.tenant,
            scopes=frozenset(self.scopes),
            allow_tools=allowed,
            deny_tools=frozenset(self.deny_tools),
        )


class GatewayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str = "toolrag.db"
    embedder: str = "auto"
    local_principal: str | None = Field(default=None, description="the principal of stdio clients")
    expose: list[str] = Field(default_factory=list, description="tools listed beside find_tools and call_tool")
    approve_new_tools: ApprovalPolicy = Field(
        default="after-first-sync",
        description="which unflagged new tools are trusted on sight: those of a server's first sync (later ones wait"
        " for `toolrag mcp approve`, so a server cannot swap an approved tool for a new name), every one, or none;"
        " flagged tools are quarantined whatever the policy",
    )
    call_timeout_seconds: float = Field(default=30.0, gt=0)
    scan_results: Literal["off", "flag", "strip"] = Field(
        default="off",
        description="check the text of upstream results for instructions aimed at the model: `flag` puts a warning"
        " before such a result, `strip` removes the sentences (mcp/poisoning.py)",
    )
    max_result_bytes: int = Field(
        default=4_194_304, ge=1024, description="larger results of upstream calls are refused with an error"
    )
    session_idle_timeout_seconds: float = Field(default=300.0, gt=0, description="an idle HTTP session ends then")
    max_sessions: int = Field(default=10_000, ge=1, description="HTTP sessions open at once, all principals")
    max_sessions_per_principal: int = Field(default=32, ge=1, description="HTTP sessions one principal may hold")
    http: HttpLimits = Field(default_factory=HttpLimits)
    startup: StartupConfig = Field(default_factory=StartupConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    oauth: OAuthConfig | None = Field(default=None, description="JWT access tokens of an OAuth issuer (HTTP)")
    rate_limits: RateLimits = Field(default_factory=RateLimits)
    connect_timeout_seconds: float = Field(default=20.0, gt=0)
    ping_interval_seconds: float = Field(default=5.0, gt=0)
    max_backoff_seconds: float = Field(default=30.0, gt=0)
    find_k: int = Field(default=3, ge=1, le=5)
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    principals: dict[str, PrincipalConfig] = Field(default_factory=dict)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig, description="the usage log of find_tools and calls")

    @field_validator("approve_new_tools", mode="before")
    @classmethod
    def _boolean_policy(cls, value: object) -> object:
        """Configurations written for toolrag 0.1 said true (trust every new tool) or false (none)."""
        return {True: "always", False: "never"}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _names_and_references(self) -> GatewayConfig:
        import re

        for name in self.servers:
            if not re.fullmatch(SERVER_NAME_PATTERN, name):
                raise ValueError(f"server name {name!r} may hold only letters, digits, '_' and '-' (no dots)")
        if self.local_principal is not None and self.local_principal not in self.principals:
            raise ValueError(f"local_principal {self.local_principal!r} is not in [principals]")
        tokens: dict[str, str] = {}
        for name, principal in self.principals.items():
            token = principal.bearer_token()
            if token is not None and token in tokens:
                raise ValueError(f"principals {tokens[token]!r} and {name!r} have the same token")
            if token is not None:
                tokens[token] = name
        return self

    def principal_for_token(self, token: str) -> Principal | None:
        for name, principal in self.principals.items():
            if principal.bearer_token() == token:
                return principal.principal(name)
        return None

    def local(self) -> Principal:
        """The principal of a stdio client: the configured one, or a user without scopes (unrestricted tools only)."""
        if self.local_principal is None:
            return Principal(user="local")
        return self.principals[self.local_principal].principal(self.local_principal)

    def check_http_tokens(self) -> None:
        """Before serving HTTP: every principal that names a token variable must find it set (a stdio client needs
        none, so this is checked only for HTTP)."""
        for name, principal in self.principals.items():
            if principal.token_env and principal.bearer_token() is None:
                raise ConfigError(f"principal {name!r}: the environment variable {principal.token_env} is not set")

    def approval_policy(self, server: str) -> ApprovalPolicy:
        return self.servers[server].approve_new_tools or self.approve_new_tools

    @property
    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: server for name, server in self.servers.items() if server.enabled}


def load_config(path: str | Path) -> GatewayConfig:
    """Read and validate a gateway configuration; a relative store path is taken from the file's folder."""
    config = read_toml(path, GatewayConfig, "gateway configuration")
    return config.model_copy(update={"store": beside(path, config.store)})
