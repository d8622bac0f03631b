"""How usage is logged: what is kept of request texts, for how long, how often entries are written."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class MonitorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: Literal["full", "redacted", "hash"] = Field(
        default="full",
        description="keep request texts as they are, with e-mail addresses and numbers masked, or only a hash",
    )
    retention_days: int = Field(default=90, ge=1, description="log entries older than this are deleted")
    flush_seconds: float = Field(default=1.0, gt=0, description="how long entries wait to be written in a batch")
