"""The gateway's configuration file (TOML): upstream MCP servers, principals and their rules, limits.

store = "toolrag.db"
local_principal = "me"          # who a stdio client is

[servers.time]                  # stdio upstream
command = "uvx"
args = ["mcp-server-time"]

[servers.docs]                  # streamable HTTP upstream
url = "https://docs.example.com/mcp"
headers = { Authorization = "Bearer ..." }

[principals.me]                 # an access rule (toolrag/access/policy.py); a rule grants no server
scopes = ["*"]                  #   and no tool it does not name, unless it names neither
servers = ["*"]                 # globs of servers whose tools this principal may use ...
tools = []                      # ... plus globs of single tools (`git.git_status`)
deny_tools = ["git.git_reset"]  # never, whatever else allows it
token_env = "MY_TOKEN"          # bearer token over HTTP (or token = "...")
role = "agent"                  # agent (the default): find and call; reader: find only

[principals.team]               # with [oauth]: access tokens whose claims match
claims = { scope = "mcp:team" }
servers = ["docs"]

[groups.docs-readers]           # with [oauth] groups_claim: a token no rule matches, of group "docs-readers"
role = "reader"
servers = ["docs"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolrag.access import AccessPolicy, Grant, GroupGrant, check_grants
from toolrag.access.guard import HttpLimits
from toolrag.access.oauth import OAuthConfig, access_policy, check_groups
from toolrag.access.rate_limit import RateLimits
from toolrag.config_files import beside, read_toml
from toolrag.errors import ConfigError
from toolrag.monitor.config import ScheduleConfig, StartupConfig
from toolrag.usagelog.config import MonitorConfig

ApprovalPolicy = Literal["after-first-sync", "always", "never"]

# No dots: the dot separates server and tool. A letter or digit first: a name of '-' and '_' alone resolves as no
# name at all (`_`'s tool `pay.roll` would stand for `pay`'s).
SERVER_NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]{0,47}$"


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
        " before such a result, `strip` removes the sentences (catalog/poisoning.py)",
    )
    max_scanned_result_chars: int = Field(
        default=131_072,
        ge=1024,
        description="with `scan_results`, the characters of a result's text that are read (about 25 s of CPU a"
        " megabyte): the rest is left out (`strip`) or said to be unread (`flag`)",
    )
    max_result_bytes: int = Field(
        default=4_194_304, ge=1024, description="larger results of upstream calls are refused with an error"
    )
    max_result_parts: int = Field(
        default=1000, ge=1, description="results of upstream calls with more content parts are refused with an error"
    )
    max_result_depth: int = Field(
        default=64, ge=8, description="upstream messages nested deeper are refused with an error"
    )
    session_idle_timeout_seconds: float = Field(default=300.0, gt=0, description="an idle HTTP session ends then")
    max_sessions: int = Field(default=10_000, ge=1, description="HTTP sessions open at once, all principals")
    max_sessions_per_principal: int = Field(default=32, ge=1, description="HTTP sessions one principal may hold")
    list_ttl_seconds: float = Field(
        default=60.0,
        ge=0,
        description="how long a client may cache a tool list or a find_tools answer (`ttlMs`, always private to the"
        " caller); a change to what the caller sees is announced at once to clients that listen (toolsListChanged)",
    )
    conversation_idle_seconds: float = Field(
        default=1800.0, gt=0, description="what find_tools offered in a conversation is forgotten this long after it"
    )
    max_conversations_per_principal: int = Field(
        default=64, ge=1, description="conversations remembered per caller; past this its least recent one goes"
    )
    max_conversation_callers: int = Field(
        default=1000, ge=1, description="callers whose conversations are remembered; past this the least active go"
    )
    max_listen_streams: int = Field(default=1024, ge=1, description="subscriptions/listen streams open at once")
    max_listen_streams_per_principal: int = Field(
        default=64,
        ge=1,
        description="subscriptions/listen streams one principal may hold open; more are refused, so a few tokens"
        " cannot take all of max_listen_streams",
    )
    http: HttpLimits = Field(default_factory=HttpLimits)
    startup: StartupConfig = Field(default_factory=StartupConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    oauth: OAuthConfig | None = Field(default=None, description="JWT access tokens of an OAuth issuer (HTTP)")
    rate_limits: RateLimits = Field(default_factory=RateLimits)
    connect_timeout_seconds: float = Field(default=20.0, gt=0, description="for an upstream's handshake")
    start_deadline_seconds: float = Field(
        default=120.0,
        gt=0,
        description="the gateway answers its clients once every enabled upstream is imported or has failed, or"
        " after this long; answers given while a server is still connecting say so",
    )
    ping_interval_seconds: float = Field(default=5.0, gt=0)
    max_backoff_seconds: float = Field(default=30.0, gt=0)
    find_k: int = Field(default=3, ge=1, le=5)
    scan_seconds_per_sync: float = Field(
        default=30.0,
        gt=0,
        description="CPU seconds one sync of a server spends scanning new tool text at most; new tools past it stay"
        " quarantined until a later sync scans them",
    )
    import_seconds_per_sync: float = Field(
        default=10.0,
        gt=0,
        description="CPU seconds one sync of a server spends registering (embedding) tools at most; the rest is"
        " registered by the next syncs, and the gateway is ready meanwhile",
    )
    max_tools_per_server: int = Field(
        default=2000, ge=1, description="tools of one server imported at most; the rest are refused (and audited)"
    )
    max_list_pages: int = Field(
        default=100, ge=1, description="pages of one server's tool list read at most; a longer list is refused"
    )
    max_list_bytes: int = Field(
        default=33_554_432, ge=1024, description="bytes of one server's tool list read at most; a larger one is refused"
    )
    list_timeout_seconds: float = Field(
        default=60.0, gt=0, description="for reading one server's whole tool list; a slower one is refused"
    )
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    principals: dict[str, Grant] = Field(
        default_factory=dict, description="the access rules (access/policy.py); a rule's role defaults to agent"
    )
    groups: dict[str, GroupGrant] = Field(
        default_factory=dict,
        description="what an access token no rule matches is granted by the groups its groups claim names"
        " (access/groups.py); a group's role defaults to agent",
    )
    monitor: MonitorConfig = Field(default_factory=MonitorConfig, description="the usage log of find_tools and calls")

    @field_validator("approve_new_tools", mode="before")
    @classmethod
    def _boolean_policy(cls, value: object) -> object:
        """Configurations written for toolrag 0.1 said true (trust every new tool) or false (none)."""
        return {True: "always", False: "never"}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="after")
    def _names_and_references(self) -> GatewayConfig:
        import re

        folded: dict[str, str] = {}
        for name in self.servers:
            if not re.fullmatch(SERVER_NAME_PATTERN, name):
                raise ValueError(
                    f"server name {name!r} may hold only letters, digits, '_' and '-' (no dots),"
                    " a letter or digit first"
                )
            # A call's name resolves ignoring case, '-' and '_', and reads '__' as a dot (runtime/resolve.py): two
            # such servers, or `pay__roll` beside `pay`'s tool `roll.run`, would share their tools' names, and a call
            # refused on one could reach the other.
            if "__" in name:
                raise ValueError(f"server name {name!r} may not hold '__': it separates namespaces in a tool's name")
            other = folded.setdefault(name.lower().replace("-", "").replace("_", ""), name)
            if other != name:
                raise ValueError(f"server names {other!r} and {name!r} differ only in case, '-' or '_': rename one")
        if self.local_principal is not None and self.local_principal not in self.principals:
            raise ValueError(f"local_principal {self.local_principal!r} is not in [principals]")
        for name, principal in self.principals.items():
            if principal.claims is not None and self.oauth is None:
                raise ValueError(f"principal {name!r} matches OAuth claims, but there is no [oauth] section")
        check_groups(self.groups, self.oauth)
        check_grants(self.principals, "principal")
        return self

    def policy(self) -> AccessPolicy:
        """Every rule of this configuration: static tokens, OAuth claims, and the stdio client (`local_principal`);
        a rule without a role grants agent (find and call)."""
        return access_policy(self.principals, "agent", self.local_principal, self.oauth, self.groups)

    def check_http_tokens(self) -> None:
        """Before serving HTTP: every principal that names a token variable must find it set (a stdio client needs
        none, so this is checked only for HTTP)."""
        for name, principal in self.principals.items():
            if principal.token_env and principal.secret() is None:
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
