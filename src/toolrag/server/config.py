"""The HTTP API's configuration (TOML): the registry, tokens with their role and principal, monitoring.

store = "toolrag.db"
mcp_config = "toolrag-mcp.toml"     # optional: execute MCP tools through their upstream servers

[tokens.ops]                        # an access rule (toolrag/access/policy.py)
token_env = "TOOLRAG_OPS_TOKEN"     # or token = "..."
role = "admin"                      # admin: everything; agent: search and execute; reader: read-only (default)
scopes = ["*"]

[tokens.support-agents]             # with [oauth]: access tokens whose claims match
claims = { scope = "support" }
role = "agent"
tools = ["tickets.*"]

[groups.support]                    # with [oauth] groups_claim: a token no rule matches, of group "support"
role = "agent"
tools = ["tickets.*", "kb.*"]

[monitor]
requests = "redacted"
retention_days = 30

[startup]
missing_embeddings = "repair"       # or "refuse": tools without embeddings stop the server from starting

[schedule]                          # the defaults: a daily consistency check, a weekly report
consistency = "daily"
report = "weekly"
webhook_url = "https://hooks.slack.com/services/..."   # optional: each run's summary, Slack-compatible

[rate_limits]                       # per caller (identity), per instance; unlimited when absent
search = { per_minute = 120, burst = 20 }
call = { per_minute = 60, burst = 10 }

[chat_model]                        # optional: the operator's model, asked to write example requests (admins)
provider = "openai"                 # or anthropic, gemini; openai with base_url: any OpenAI-compatible server
model = "gpt-4.1-mini"
base_url = "http://localhost:8080/v1"
api_key_env = "OPENAI_API_KEY"      # the default for the provider when absent
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolrag.access import AccessPolicy, Grant, GroupGrant, check_grants
from toolrag.access.guard import HttpLimits
from toolrag.access.oauth import OAuthConfig, access_policy, check_groups
from toolrag.access.rate_limit import RateLimits
from toolrag.config_files import beside, read_toml
from toolrag.monitor.config import ScheduleConfig, StartupConfig
from toolrag.runtime.chat_models import Provider
from toolrag.usagelog.config import MonitorConfig


class ChatModelConfig(BaseModel):
    """The operator's chat model, named only here: a request never names a model, an endpoint or a key."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider = "openai"
    model: str = Field(min_length=1, max_length=200)
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="the variable holding its key (the provider's default)")

    @property
    def name(self) -> str:
        """How runs name it, in the examples' basis: a changed model writes new examples."""
        return f"{self.provider}:{self.model}"


class ApiConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: str = "toolrag.db"
    embedder: str = "auto"
    mcp_config: str | None = None
    tokens: dict[str, Grant] = Field(
        default_factory=dict, description="the access rules (access/policy.py); a rule's role defaults to reader"
    )
    groups: dict[str, GroupGrant] = Field(
        default_factory=dict,
        description="what an access token no rule matches is granted by the groups its groups claim names"
        " (access/groups.py); a group's role defaults to reader",
    )
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)
    startup: StartupConfig = Field(default_factory=StartupConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    rate_limits: RateLimits = Field(default_factory=RateLimits)
    oauth: OAuthConfig | None = Field(default=None, description="JWT access tokens of an OAuth issuer")
    http: HttpLimits = Field(default_factory=HttpLimits)
    chat_model: ChatModelConfig | None = Field(default=None, description="the operator's model; none: nothing asks")

    @model_validator(mode="after")
    def _usable_rules(self) -> ApiConfig:
        for name, entry in self.tokens.items():
            if entry.claims is not None:
                if self.oauth is None:
                    raise ValueError(f"token {name!r} matches OAuth claims, but there is no [oauth] section")
                continue
            if entry.secret() is None:
                # A token that cannot be presented would leave its holders facing 401s from a server that started.
                if entry.token_env:
                    raise ValueError(f"token {name!r}: the environment variable {entry.token_env} is not set")
                raise ValueError(f"token {name!r} has neither `token`, `token_env` nor `claims`")
        check_groups(self.groups, self.oauth)
        check_grants(self.tokens, "token")
        return self

    def policy(self) -> AccessPolicy:
        """Every token and OAuth rule and every group of this configuration; a rule or group without a role grants
        reader."""
        return access_policy(self.tokens, "reader", None, self.oauth, self.groups)


def load_api_config(path: str | Path) -> ApiConfig:
    """Read and validate an API configuration; relative paths in it are taken from the file's folder."""
    config = read_toml(path, ApiConfig, "API configuration")
    mcp_config = beside(path, config.mcp_config) if config.mcp_config else None
    return config.model_copy(update={"store": beside(path, config.store), "mcp_config": mcp_config})
