"""The HTTP API's request and response bodies (pydantic: they are the OpenAPI description's schemas)."""

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolrag.limits import MAX_MESSAGE_CHARS, MAX_SET_TOOLS
from toolrag.model import (
    MAX_DESCRIPTION_CHARS,
    MAX_EXAMPLE_CHARS,
    ExampleRequest,
    Principal,
    Requirement,
    SearchResult,
    Strategy,
    Tool,
)
from toolrag.runtime.write_examples import MAX_LANGUAGES, MAX_PER_LANGUAGE, WritingRun

Format = Literal["openai", "openai-responses", "anthropic", "mcp", "gemini"]


class ToolIn(BaseModel):
    """A tool to register (the same fields as a catalog entry)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    category: str | None = None
    aliases: list[str] = Field(default_factory=list)
    not_for: str | None = None
    scopes: list[str] = Field(default_factory=list)
    tenants: list[str] = Field(default_factory=list)
    requires: list[Requirement] = Field(default_factory=list, description="tools this one needs")
    return_direct: bool = False


class ToolPatch(BaseModel):
    """Fields to change; each change is a new version."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    input_schema: dict[str, Any] | None = None
    category: str | None = None
    aliases: list[str] | None = None
    not_for: str | None = None
    examples: list[ExampleRequest] | None = None
    scopes: list[str] | None = None
    tenants: list[str] | None = None
    requires: list[Requirement] | None = None
    active: bool | None = None
    version: int | None = Field(
        default=None,
        ge=1,
        description="the version this edit was made from: 409, nothing written, when the tool has moved on since",
    )


class UpsertOut(BaseModel):
    added: list[str]
    updated: list[str]
    unchanged: list[str]
    held: list[str] = Field(
        default_factory=list,
        description="tools whose text change waits for review (the registry's text review is on): their live text"
        " keeps serving, their other fields were written; GET /text-changes/{name}",
    )
    rejected: list[str] = Field(
        default_factory=list, description="tools posted with the text an admin rejected: left out again"
    )


class TextChangeOut(BaseModel):
    """A catalog tool's text change waiting for review: the live text serves until an admin approves it."""

    tool: str
    text_hash: str = Field(description="the hash of the text waiting: state it when approving or rejecting")
    proposed_by: str | None = Field(description="the latest writer of what waits")
    proposers: list[str] = Field(
        description="everyone whose proposed part still waits: under two-person review none of them approves it"
    )
    origin: str = Field(description="import, api, console, cli or python")
    proposed_at: datetime
    findings: list[str] = Field(description="what the poisoning checks found in the proposed text")
    proposed: Tool = Field(description="the tool as approving would make it (the live tool with the new text)")
    diff: list[str] = Field(description="a unified diff of the live text against the proposed one")


class TextDecisionIn(BaseModel):
    """The text an admin reviewed, compare-and-set: 409, nothing decided, when another text waits now."""

    model_config = ConfigDict(extra="forbid")

    text_hash: str = Field(
        min_length=1, description="`text_hash` as GET /text-changes/{name} (or /group-changes) showed it"
    )


class TextRejectedOut(BaseModel):
    tool: str
    rejected_hash: str = Field(description="posting or importing this text again leaves it out until lifted")


class GroupChangeOut(BaseModel):
    """A group's description waiting for review: the live one (None: a model reads a summary of the group's tools)
    serves until an admin approves it."""

    group: str
    text_hash: str = Field(description="the SHA-256 of the description waiting: state it when approving or rejecting")
    live: str | None
    proposed: str
    proposed_by: str | None
    origin: str = Field(description="import, cli or python (unknown: restored from a backup without it)")
    proposed_at: datetime


class GroupDescriptionOut(BaseModel):
    group: str
    description: str | None


class GroupRejectedOut(BaseModel):
    group: str
    rejected_hash: str = Field(description="proposing this description again leaves it out until lifted")


class TextReviewSetting(BaseModel):
    """Whether text changes of existing tools wait for an admin (kept in the registry: every process honours it),
    and whether that admin must be another than the change's proposer (`two_person`)."""

    model_config = ConfigDict(extra="forbid")

    required: bool
    two_person: bool = False


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=MAX_MESSAGE_CHARS,
        description="the request; search reads a bounded view of a long one (data blobs left out), and says so",
    )
    k: int | None = Field(default=None, ge=1, le=5)
    session: str | None = Field(default=None, max_length=200)
    format: Format = "openai"


class SearchOut(BaseModel):
    strategy: Strategy = Field(
        description="`all`: the principal's whole catalog fit the token budget and is returned whole, by relevance;"
        " `retrieval`: the best tools were retrieved"
    )
    results: list[SearchResult]
    tools: list[dict[str, Any]] = Field(description="the chosen tools' full definitions in the requested format")
    injected_tokens: int
    catalog_tokens: int
    request_note: str | None = Field(
        default=None, description="what search left out of a long request (none when it read the whole request)"
    )


class PrincipalIn(BaseModel):
    """Whom an operator explains a search for (admin tokens only; others explain for their own principal)."""

    model_config = ConfigDict(extra="forbid")

    user: str | None = Field(default=None, max_length=200)
    tenant: str | None = Field(default=None, max_length=200)
    scopes: list[str] = Field(default_factory=list, max_length=100)

    def principal(self) -> Principal:
        return Principal(user=self.user, tenant=self.tenant, scopes=frozenset(self.scopes))


class ExplainIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    k: int | None = Field(default=None, ge=1, le=5)
    format: Format = "openai"
    principal: PrincipalIn | None = Field(
        default=None, description="explain for this principal instead of the token's own (admin tokens only)"
    )


class ExampleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_EXAMPLE_CHARS)
    tenant: str | None = Field(default=None, max_length=200, description="whose searches it serves; none: all")
    source: Literal["operator", "usage"] = "operator"


class TaskIn(ExampleIn):
    """A past task: a request and every tool its task needed; the request becomes an example of each."""

    tools: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=2, max_length=MAX_SET_TOOLS, description="every tool the task needed (a set delivers this many)"
    )


class PastTaskOut(BaseModel):
    request: str
    tenant: str | None
    tools: list[str]
    sessions: int = Field(description="sessions that asked this and called exactly these tools")


class TenantDescriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(min_length=1, max_length=200, description="the tenant whose principals get the text")
    # Bounded here as a body; the registry refuses a text over MAX_DESCRIPTION_CHARS once stripped, saying so.
    text: str = Field(max_length=2 * MAX_DESCRIPTION_CHARS, description="the description they get instead")
    expected_version: int | None = Field(
        default=None, ge=1, description="the version the edit was made from: 409, nothing written, if it moved on"
    )


class TenantDescriptionDropIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(min_length=1, max_length=200)
    expected_version: int | None = Field(default=None, ge=1)


class TenantDescriptionOut(BaseModel):
    tool: Tool
    findings: list[str] = Field(description="what the poisoning check found in the text (shown, not refused)")
    held: bool = Field(default=False, description="the text waits for review (the registry asks for it)")


class VerdictOut(BaseModel):
    """An admin's verdict on a relation the registry inferred or learned."""

    tool: str
    other: str
    kind: Literal["requires", "related"]
    verdict: Literal["confirmed", "rejected"]
    parameter: str | None = None


class LiftedOut(BaseModel):
    lifted: int = Field(description="verdicts dropped: inference and learning decide again")


class SwitchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500, description="why the server is switched off (kept)")


class SwitchOut(BaseModel):
    """An upstream MCP server's switch after a request to turn it off or on."""

    server: str
    disabled: bool = Field(description="whether the server is switched off now: its tools hidden, calls refused")
    changed: bool = Field(description="false when the server was in that state already (nothing written)")
    disabled_by: str | None = None
    disabled_at: datetime | None = None
    reason: str | None = None


class OverridesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fields: list[Literal["description", "input_schema", "output_schema", "annotations"]] = Field(
        min_length=1, max_length=4, description="fields an operator replaced, to return to their source's value"
    )


class ExecuteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)
    session: str | None = Field(default=None, max_length=200)


class ExecuteOut(BaseModel):
    outcome: str
    is_error: bool
    content: str


class ToolOut(BaseModel):
    name: str
    version: int
    active: bool
    category: str | None
    scopes: list[str]
    card: str


Executor = Callable[[str, dict[str, Any], Principal, str], Awaitable[ExecuteOut]]


class ResolveIn(BaseModel):
    """An access token's claims, to see whom the server's access policy makes of them (admin tokens only)."""

    model_config = ConfigDict(extra="forbid")

    claims: dict[str, Any] = Field(
        max_length=100, description="the claims as the issuer would sign them (not verified here: nothing runs)"
    )
    tool: str | None = Field(default=None, max_length=200, description="also say whether it sees this tool, and why")


class ToolAccessOut(BaseModel):
    name: str
    visible: bool
    hidden_by: str | None = Field(default=None, description="why the principal does not see it (None when it does)")


class AccessOut(BaseModel):
    """What one principal may use, resolved through the server's access policy exactly as its requests are."""

    granted: bool = Field(description="false: its requests are refused (403), for the reason in `refused`")
    refused: str | None = None
    caller: str | None = Field(default=None, description="the rule that matched, or the groups (`groups a+b`)")
    role: Literal["admin", "agent", "reader"] | None = None
    user: str | None = None
    tenant: str | None = None
    scopes: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list, description="the active tools it sees, as GET /tools lists them")
    tool: ToolAccessOut | None = Field(default=None, description="the tool asked about")


class PendingOut(BaseModel):
    """A quarantined MCP tool as an admin reviews it before approving."""

    tool: Tool = Field(description="the version its server lists now, whole")
    findings: list[str] = Field(description="why it waits: each finding with the text that triggered it")
    diff: list[str] = Field(description="a unified diff against the approved version ([] for a new tool)")


class RollbackIn(BaseModel):
    """Which earlier version's content to restore, compare-and-set on the version the caller saw."""

    model_config = ConfigDict(extra="forbid")

    to: int = Field(ge=1, description="the version whose content to restore (as a new version)")
    expected_version: int | None = Field(
        default=None,
        ge=1,
        description="the tool's current version as the caller saw it: 409, nothing written, when it has moved on",
    )


class WaitingToolOut(BaseModel):
    """One quarantined tool of an MCP server, as `POST /mcp/servers/{server}/approve` approves it."""

    tool: str
    kind: Literal["new", "changed"] = Field(description="never approved, or an approved tool whose text changed")
    text_hash: str = Field(description="the hash of the text waiting: state it when approving")
    findings: list[str]
    description: str = Field(description="the description waiting (GET /tools/{name}/pending: the whole tool)")


class ServerPendingOut(BaseModel):
    """What of one MCP server waits for approval."""

    server: str
    pending: dict[str, str] = Field(description="tool -> text hash: the body `approve` takes, as read now")
    tools: list[WaitingToolOut]


class ServerApproveIn(BaseModel):
    """The quarantined tools of one server, each with the text hash the approver reviewed."""

    model_config = ConfigDict(extra="forbid")

    pending: dict[str, str] = Field(
        description="tool -> text hash as reviewed: 409, nothing approved, unless these are exactly the tools"
        " waiting, with these texts"
    )


class ServerApprovedOut(BaseModel):
    server: str
    approved: list[str]


class StartupOut(BaseModel):
    checked_at: datetime
    ok: bool = Field(description="every tool was searchable when the server started (after repairs)")
    missing_embeddings: int = Field(description="tools that had no embedding for the index's model")
    repaired: bool = Field(description="those tools were embedded before the server started")
    orphans: list[str] = Field(description="tools whose function or MCP server is gone, with why (admin tokens only)")


class ScheduleOut(BaseModel):
    ok: bool = Field(description="the scheduler's latest tick worked (it reads and writes the store)")
    failures: int = Field(description="failed ticks in a row")
    failing_since: datetime | None
    error: str | None = Field(description="what the latest failed tick raised (admin tokens only)")
    retry_in_seconds: float | None = Field(description="while failing: the back-off before the next try")


class Health(BaseModel):
    status: Literal["ok"]
    tools: int = Field(description="active tools (for tokens other than admin: those its principal may use)")
    generation: int | None = Field(description="the registry's change counter (admin tokens only)")
    model: str | None
    startup: StartupOut | None = Field(default=None, description="what the check before serving found and did")
    schedule: ScheduleOut | None = Field(default=None, description="how the scheduled jobs' ticks are going")


class WritingIn(BaseModel):
    """An order for the operator's chat model (the server's `[chat_model]`): example requests for every tool."""

    model_config = ConfigDict(extra="forbid")

    languages: list[Annotated[str, Field(pattern="^[a-z]{2,3}$")]] = Field(
        min_length=1, max_length=MAX_LANGUAGES, description="the users' languages: ISO 639 codes (en, de, uk)"
    )
    per_language: int = Field(default=2, ge=1, le=MAX_PER_LANGUAGE, description="examples written in each language")
    max_calls: int = Field(default=500, ge=0, le=100_000, description="model calls at most")
    max_tokens: int = Field(default=2_000_000, ge=0, le=10**9, description="prompt tokens at most")


class WritingJobOut(BaseModel):
    """A run of the operator's model writing example requests: its progress over the tools, then what it wrote."""

    state: Literal["running", "done", "failed"]
    model: str
    languages: list[str]
    per_language: int
    started_by: str
    started_at: datetime
    done: int = Field(description="tools gone through")
    total: int = Field(description="tools to go through")
    run: WritingRun | None = Field(description="what the run asked and wrote, once it ended")
    error: str | None = Field(description="why it stopped, if it failed")
    cancelling: bool = Field(default=False, description="an admin asked it to stop at its next call")
    instance: str = Field(default="", description="the instance running it (its progress is read there)")
