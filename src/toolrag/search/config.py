"""Settings of the retrieval pipeline, validated at the boundary (config files, CLI flags, API calls)."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolrag.limits import MAX_K, MAX_REQUEST_CHARS, MAX_SET_TOOLS

Mode = Literal["hybrid", "dense", "lexical"]
ReformulationStep = Literal["expand", "rewrite"]
DEFAULT_REFORMULATION: tuple[ReformulationStep, ...] = ("expand", "rewrite")
# About ten tools in full: a tool of the measured catalogs costs 106 prompt tokens at the median, 133 at the 75th
# percentile (benchmarks/catalog_tokens.py, docs/benchmarks.md).
INJECT_ALL_BELOW_TOKENS = 1500
# Where the exact scan (about 32 ms) is clearly slower than the graph searched wide enough for recall@10 0.98 at a
# million tools (18-20 ms at any size); at 120,000 the two cost the same (docs/benchmarks.md "Beyond 100k").
ANN_MIN_TOOLS = 200_000


# Settings of toolrag 0.1 that the relevance model replaced (search/confidence.py): accepted, warned about, ignored.
RETIRED = {
    "min_similarity": "small_talk_quantile",
    "calibrate": "small_talk_quantile",
    "calibration_quantile": "small_talk_quantile",
    "min_lead": "small_talk_quantile",
    "lead_min_similarity": "small_talk_quantile",
    "min_lexical_coverage": "small_talk_quantile",
    "max_drop": "min_confidence",
}


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        retired = sorted(key for key in data if key in RETIRED)
        for key in retired:
            warnings.warn(
                f"search setting {key!r} no longer exists (toolrag 0.2 decides with a relevance model): ignored;"
                f" see {RETIRED[key]!r}",
                stacklevel=2,
            )
        steps = data.get("reformulate")
        if isinstance(steps, list) and "relax" in steps:
            warnings.warn("the `relax` reformulation step no longer exists: ignored", stacklevel=2)
            data = {**data, "reformulate": [step for step in steps if step != "relax"]}
        return {key: value for key, value in data.items() if key not in RETIRED}

    max_request_chars: int = Field(
        default=MAX_REQUEST_CHARS,
        ge=100,
        le=100_000,
        description="search reads a request's first this many characters, data blobs left out (search/request.py)",
    )
    k: int = Field(
        default=3,
        ge=1,
        le=MAX_K,
        description="tools returned at most for one step (the adaptive cut may return fewer); a request"
        " of several steps, and the tools they require, get up to max_set_tools",
    )
    mode: Mode = "hybrid"
    dense_weight: float = Field(default=0.8, ge=0.0, le=1.0)
    small_talk_quantile: float = Field(
        default=0.96,
        gt=0.0,
        lt=1.0,
        description="a request gets tools when its best tool beats its nearest small talk by more than this share of"
        " the small-talk bank does against the registry (search/calibrate.py)",
    )
    min_confidence: float = Field(
        # Chosen on the tuning halves with the model fitted on present and absent requests (issue 49): the highest
        # of 0.01-0.03 that keeps every catalog's delivered hit at or above the earlier model's at 0.03.
        default=0.02,
        ge=0.0,
        le=1.0,
        description="tools less likely than this to be relevant are not returned (the likeliest one always is, when"
        " it reaches `no_tool_below`)",
    )
    no_tool_below: float = Field(
        default=0.1,  # chosen leaving each catalog out: the most that keeps every present delivered hit within 0.01
        ge=0.0,
        le=1.0,
        description="the likeliest tool is returned only when its probability of serving the request reaches this;"
        " below it the request gets no tool and is told no tool here serves it (search/confidence.py)",
    )
    absent_share: float = Field(
        default=0.5,
        ge=0.05,
        le=0.95,
        description="the share of requests for a tool this registry is expected not to hold, or to hide from who"
        " asks: the scores shown are probabilities at this share (search/confidence.py)",
    )
    inject_all_below_tokens: int = Field(
        default=INJECT_ALL_BELOW_TOKENS,
        ge=0,
        description="when every tool the principal may use costs fewer prompt tokens than this, search() returns"
        " them all, by relevance (strategy `all`); 0 always retrieves",
    )
    multi_intent: bool = Field(
        default=True, description="split requests with several intents and merge each intent's best tools in"
    )
    max_set_tools: int = Field(
        default=8,
        ge=1,
        le=MAX_SET_TOOLS,
        description="tools a request of several steps gets at most, every step's likeliest first (search/steps.py)",
    )
    set_budget_tokens: int = Field(
        default=INJECT_ALL_BELOW_TOKENS,
        ge=0,
        description="prompt tokens the full definitions a search adds to what it retrieved may cost: the required"
        " closure of the tool a request (or each step) is about comes first, up to limits.MAX_SET_TOOLS tools (the"
        " less likely tools retrieved come after it, beyond);"
        " other tools' closures and optional requirements only within max_set_tools. What does not fit is named"
        " in `also_needs`. The default is the catalog size below which every tool is injected; 0 counts no tokens",
    )
    accept_proposed_relations: bool = Field(
        default=False,
        description="search uses the requirements a chat model proposed (`toolrag relations propose`) without an"
        " admin's confirmation; off: a proposal is used only once an admin confirms it. Never under review",
    )
    infer_requirements: bool = Field(
        default=False,  # seal-tools held-out: +0.6 points of whole sets for 1.8x the tools (docs/benchmarks.md)
        description="a returned tool also brings the tools inferred to produce its required parameters (from their"
        " output schemas and descriptions, search/inferred.py), within max_set_tools; declared requirements win",
    )
    related_tools: bool = Field(
        default=False,  # not measured: no benchmark here has session logs (docs/architecture.md "Whole sets")
        description="a returned tool also brings the tools related to it (learned from the usage of the"
        " principal's tenant, or confirmed by an admin) that the request's ranking supports, within max_set_tools",
    )
    step_min_confidence: float = Field(
        default=0.2,  # chosen on seal-tools' tuning half: most whole sets for at most 1.5x the tools needed
        ge=0.0,
        le=1.0,
        description="in a request of several steps, a step's tools after its likeliest need this probability",
    )
    intent_min_similarity: float = Field(
        default=0.3, ge=-1.0, le=1.0, description="each intent's best tool needs this cosine for a split to count"
    )
    stem_english_only: bool = Field(
        default=True, description="stem request words only when the request looks English (search/text.py)"
    )
    reformulate: list[ReformulationStep] = Field(
        default_factory=lambda: list(DEFAULT_REFORMULATION),
        description="second chances, in order, for a request that got no tool (search/reformulate.py);"
        " `rewrite` needs a rewriter (a chat model)",
    )
    group_weight: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="how far a tool's score moves towards its group's (MCP server, category; search/groups.py)",
    )
    example_views: bool = Field(
        default=True,
        description="a tool's example requests (written or approved by a person) and its tenants' own descriptions"
        " count as views of it for their tenant (search/examples.py)",
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
        default=ANN_MIN_TOOLS,
        ge=0,
        description="from this many tools on, an approximate index (an in-process HNSW graph, search/ann.py) proposes"
        " the dense candidates instead of scanning every vector; None always scans exactly",
    )
    ann_candidates: int = Field(default=1000, ge=10, le=10_000, description="vectors the approximate index proposes")
    cache_entries: int = Field(default=1024, ge=0)
    save_snapshots_from: int | None = Field(
        default=100,
        ge=0,
        description="registries of at least this many tools keep their in-memory index in the cache folder, so the"
        " next process maps it instead of building it (snapshot/; from about 100 tools mapping costs less than"
        " building, docs/benchmarks.md); None never saves nor reads one",
    )
    cache_ttl_seconds: float = Field(default=300.0, gt=0)
