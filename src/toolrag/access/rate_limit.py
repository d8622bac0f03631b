"""Rate limits per caller: token buckets for searches (`/search`, `find_tools`) and calls (`/execute`,
`call_tool`), keyed by the caller's identity (`Principal.caller`: a rule; an OAuth token's rule, issuer and subject),
never by its user's name alone. The API answers 429 with `Retry-After`; the MCP gateway a tool error saying how long
to wait.

The buckets live in each server process: with several instances behind a balancer, each allows the configured
rate, so a principal's total is the rate times the instances.

    [rate_limits]
    search = { per_minute = 120, burst = 20 }
    call = { per_minute = 60, burst = 10 }
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from toolrag.limits import TokenBucket
from toolrag.model import Principal

Kind = Literal["search", "call"]
MAX_BUCKETS = 100_000  # past this many, buckets that have refilled are forgotten


class Rate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    per_minute: float = Field(gt=0, description="the sustained rate")
    burst: int = Field(default=10, ge=1, description="how many may come at once after a quiet spell")


class RateLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    search: Rate | None = Field(default=None, description="searches per principal (None: unlimited)")
    call: Rate | None = Field(default=None, description="tool calls per principal (None: unlimited)")


class RateLimiter:
    """Token buckets keyed by caller (`Principal.caller`: its identity, not its user's name) and kind."""

    def __init__(self, limits: RateLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        self._buckets: dict[tuple[str, Kind], TokenBucket] = {}
        self._lock = threading.Lock()

    def wait(self, principal: Principal, kind: Kind) -> float:
        """0 when the request may go ahead (and is counted); else the seconds until it may."""
        rate = self._rate(kind)
        if rate is None:
            return 0.0
        key = (principal.caller, kind)
        refill = rate.per_minute / 60.0
        with self._lock:
            now = self.clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= MAX_BUCKETS:
                    self._forget_full(now)
                bucket = self._buckets[key] = TokenBucket(float(rate.burst), now)
            return bucket.take(now, refill, float(rate.burst))

    def _rate(self, kind: Kind) -> Rate | None:
        return self.limits.search if kind == "search" else self.limits.call

    def _forget_full(self, now: float) -> None:
        """Drop the buckets idle long enough to have refilled: a new one starts full, so nothing is lost."""
        for key, bucket in list(self._buckets.items()):
            rate = self._rate(key[1])
            if rate is None or now - bucket.at >= rate.burst * 60.0 / rate.per_minute:
                del self._buckets[key]


def retry_after(seconds: float) -> str:
    """The `Retry-After` value: whole seconds, at least one."""
    return str(max(1, math.ceil(seconds)))
