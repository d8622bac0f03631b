"""Settings of the retrieval pipeline, validated at the boundary (config files, CLI flags, API calls)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from toolrag.limits import MAX_K, MAX_REQUEST_CHARS

Mode = Literal["hybrid", "dense", "lexical"]
ReformulationStep = Literal["expand", "relax", "rewrite"]
DEFAULT_REFORMULATION: tuple[ReformulationStep, ...] = ("expand", "rewrite")


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_request_chars: int = Field(
        default=MAX_REQUEST_CHARS, ge=1, le=100_000, description="longer requests are refused (RequestTooLongError)"
    )
    k: int = Field(default=3, ge=1, le=MAX_K, description="tools returned at most (the adaptive cut may return fewer)")
    mode: Mode = "hybrid"
    dense_weight: float = Field(default=0.8, ge=0.0, le=1.0)
    min_similarity: float = Field(
        default=0.45, ge=-1.0, le=1.0, description="a tool passes when its cosine with the request reaches this"
    )
    calibrate: bool = Field(
        default=True,
        description="replace min_similarity by a threshold calibrated on this registry and model (calibrate.py)",
    )
    calibration_quantile: float = Field(default=0.9, gt=0.0, lt=1.0)
    min_lead: float = Field(
        default=0.15, ge=0.0, le=2.0, description="... or, for the best tool, when its cosine leads the next by this"
    )
    lead_min_similarity: float = Field(default=0.25, ge=-1.0, le=1.0, description="floor for the lead rule")
    min_lexical_coverage: float = Field(
        default=0.5, ge=0.0, le=1.0, description="... or when it matches this share of the request's word weight"
    )
    max_drop: float = Field(
        default=0.45, ge=0.0, le=1.0, description="adaptive cut: drop tools scoring this much below the best one"
    )
    multi_intent: bool = Field(
        default=True, description="split requests with several intents and merge each intent's best tools in"
    )
    intent_min_similarity: float = Field(
        default=0.3, ge=-1.0, le=1.0, description="each intent's best tool needs this cosine for a split to count"
    )
    stem_english_only: bool = Field(
        default=True, description="stem request words only when the request looks English (search/text.py)"
    )
    reformulate: list[ReformulationStep] = Field(
        default_factory=lambda: list(DEFAULT_REFORMULATION),
        description="second chances, in order, for a request nothing passed for (search/reformulate.py);"
        " `rewrite` needs a rewriter (a chat model); `relax` is off by default: most tools it found were wrong"
        " (docs/benchmarks.md)",
    )
    group_weight: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="how far a tool's score moves towards its group's (MCP server, category; search/groups.py)",
    )
    usage_weight: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="how much tools called after similar past requests gain (search/feedback.py; off by default)",
    )
    usage_min_similarity: float = Field(
        default=0.6, ge=0.0, lt=1.0, description="a past request counts from this cosine with the request on"
    )
    always_include: list[str] = Field(default_factory=list)
    routes: dict[str, list[str]] = Field(default_factory=dict, description="category -> keywords")
    route_mode: Literal["boost", "filter"] = "boost"
    route_boost: float = Field(default=0.15, ge=0.0, le=1.0)
    ann_min_tools: int | None = Field(
        default=None,
        ge=0,
        description="from this many tools on, a store with a vector index (PostgreSQL) proposes the dense candidates;"
        " None (the default) always scans exactly, which measured faster up to 100k tools (docs/benchmarks.md)",
    )
    ann_candidates: int = Field(default=400, ge=10, le=10_000, description="vectors the store's index proposes")
    cache_entries: int = Field(default=1024, ge=0)
    cache_ttl_seconds: float = Field(default=300.0, gt=0)
