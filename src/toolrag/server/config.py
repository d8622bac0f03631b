"""The HTTP API's configuration (TOML): the registry, tokens with their role and principal, monitoring.

store = "toolrag.db"
mcp_config = "toolrag-mcp.toml"     # optional: execute MCP tools through their upstream servers

[tokens.ops]
token_env = "TOOLRAG_OPS_TOKEN"     # or token = "..."
role = "admin"                      # admin: everything; agent: search and execute; reader: read-only
scopes = ["*"]

[monitor]
requests = "redacted"
retention_days = 30

[startup]
missing_embeddings = "repair"       # or "refuse": tools without embeddings stop the server from starting

[schedule]                          # the defaults: a daily consistency check, a weekly report
consistency = "daily"
report = "weekly"
webhook_url = "https://hooks.slack.com/services/..."   # optional: each run's summary, Slack-compatible

[rate_limits]                       # per principal, per instance; unlimited when absent
search = { per_minute = 120, burst = 20 }
call = { per_minute = 60, burst = 10 }
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolrag.config_files import beside, read_toml
from toolrag.model import Principal
from toolrag.monitor.config import MonitorConfig, ScheduleConfig, StartupConfig
from toolrag.server.guard import HttpLimits
from toolrag.server.oauth import OAuthConfig
from toolrag.server.rate_limit import RateLimits

Role = Literal["admin", "agent", "reader"]


class TokenConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str | None = None
    token_env: str | None = None
    role: Role = "reader"
    user: str | None = None
    tenant: str | None = None
    scopes: list[str] = Field(default_factory=list)
    tools: list[str] | None = Field(default=None, description="globs of tools this token may use (default: all)")
    deny_tools: list[str] = Field(default_factory=list)

    def secret(self) -> str | None:
        return os.environ.get(self.token_env) or None if self.token_env else self.token

    def principal(self, name: str) -> Principal:
        return Principal(
            user=self.user or name,
            tenant=self.tenant,
            scopes=frozenset(self.scopes),
            allow_tools=None if self.tools is None else frozenset(self.tools),
            deny_tools=frozenset(self.deny_tools),
        )


class ApiConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str = "toolrag.db"
    embedder: str = "auto"
    mcp_config: str | None = None
    tokens: dict[str, TokenConfig] = Field(default_factory=dict)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)
    startup: StartupConfig = Field(default_factory=StartupConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    rate_limits: RateLimits = Field(default_factory=RateLimits)
    oauth: OAuthConfig | None = Field(default=None, description="JWT access tokens of an OAuth issuer")
    http: HttpLimits = Field(default_factory=HttpLimits)

    @model_validator(mode="after")
    def _distinct_tokens(self) -> ApiConfig:
        seen: dict[str, str] = {}
        for name, entry in self.tokens.items():
            secret = entry.secret()
            if secret is None:
                # A token that cannot be presented would leave its holders facing 401s from a server that started.
                if entry.token_env:
                    raise ValueError(f"token {name!r}: the environment variable {entry.token_env} is not set")
                raise ValueError(f"token {name!r} has neither `token` nor `token_env`")
            if len(secret) < 16:
                raise ValueError(f"token {name!r} is shorter than 16 characters")
            if secret in seen:
                raise ValueError(f"tokens {seen[secret]!r} and {name!r} are the same")
            seen[secret] = name
        return self


def load_api_config(path: str | Path) -> ApiConfig:
    """Read and validate an API configuration; relative paths in it are taken from the file's folder."""
    config = read_toml(path, ApiConfig, "API configuration")
    mcp_config = beside(path, config.mcp_config) if config.mcp_config else None
    return config.model_copy(update={"store": beside(path, config.store), "mcp_config": mcp_config})
