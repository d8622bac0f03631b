"""What servers check at startup, and the jobs they run on a schedule (the usage log's own settings: usagelog/)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class StartupConfig(BaseModel):
    """What a server does about its registry before it accepts requests (monitor/startup.py)."""

    model_config = ConfigDict(extra="forbid")

    missing_embeddings: Literal["repair", "refuse"] = Field(
        default="repair", description="embed tools that have no vector for the index's model, or refuse to start"
    )


class ScheduleConfig(BaseModel):
    """Jobs a server runs on a schedule (monitor/schedule.py). Intervals: `30m`, `6h`, `daily`, `weekly`, `7d`;
    `off` disables a job."""

    model_config = ConfigDict(extra="forbid")

    consistency: str = Field(default="daily", description="check the registry and embed what lacks embeddings")
    report: str = Field(default="weekly", description="the health report over `report_days`, kept in the store")
    relations: str = Field(
        default="daily",
        description="learn which tools each tenant's sessions call one after another (catalog/relations.py), for"
        " admins to judge and, with `related_tools`, for search",
    )
    report_days: int = Field(default=7, ge=1, le=3650)
    webhook_url: str | None = Field(default=None, description="each run's summary is POSTed here (Slack-compatible)")
    check_every_seconds: float = Field(default=60.0, gt=0, description="how often due jobs are looked for")
    lease_seconds: float = Field(default=3600.0, gt=0, description="how long a claimed run may take")
    retry_max_seconds: float = Field(
        default=900.0, gt=0, description="the longest wait after failed ticks (the wait doubles from check_every)"
    )

    @field_validator("consistency", "report", "relations")
    @classmethod
    def _known_interval(cls, value: str) -> str:
        parse_interval(value)
        return value


_NAMED = {"hourly": timedelta(hours=1), "daily": timedelta(days=1), "weekly": timedelta(weeks=1)}
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_interval(text: str) -> timedelta | None:
    """`30m`, `6h`, `2d`, `1w`, `hourly`, `daily`, `weekly` -> the interval; `off` -> None."""
    value = text.strip().lower()
    if value == "off":
        return None
    if value in _NAMED:
        return _NAMED[value]
    number, unit = value[:-1], value[-1:]
    if unit in _UNITS and number.isdigit() and int(number) > 0:
        return timedelta(**{_UNITS[unit]: int(number)})
    raise ValueError(f"unknown interval {text!r}: use e.g. 30m, 6h, 2d, 1w, hourly, daily, weekly or off")
