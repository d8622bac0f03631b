"""How usage is logged: what is kept of request texts, for how long and how much, how often entries are written."""

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
    max_rows_per_caller: int = Field(
        default=100_000,
        ge=1000,
        description="searches kept per caller, and calls apart (its oldest deleted first): retention bounds age only",
    )
    flush_seconds: float = Field(default=1.0, gt=0, description="how long entries wait to be written in a batch")
