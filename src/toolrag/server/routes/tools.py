"""`/tools`: read tools as the token may see them; register, edit, (de)activate them, their examples and their
tenants' descriptions, and judge their inferred and learned relations (admins).

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response

from toolrag.catalog.review import TextChange
from toolrag.errors import ToolNotFoundError
from toolrag.mcp.review import described, pending_review
from toolrag.model import Tool, ToolRelation
from toolrag.server.models import (
    ExampleIn,
    LiftedOut,
    OverridesIn,
    PastTaskOut,
    PendingOut,
    RollbackIn,
    TaskIn,
    TenantDescriptionDropIn,
    TenantDescriptionIn,
    TenantDescriptionOut,
    TextChangeOut,
    TextDecisionIn,
    TextRejectedOut,
    TextReviewSetting,
    ToolIn,
    ToolOut,
    ToolPatch,
    UpsertOut,
    VerdictOut,
)
from toolrag.server.principals import relations_shown, served, visible_tool
from toolrag.server.routes.deps import Admin, Api, Reader
from toolrag.server.served import Served
from toolrag.store.relations import RelationKind, RelationVerdict

router = APIRouter(tags=["tools"])


@router.get("/tools", response_model=list[ToolOut])
def list_tools(who: Reader, api: Api, include_inactive: bool = False) -> list[ToolOut]:
    """Every tool for admin tokens; the tools its principal may use for any other token."""
    who = served(who, api.registry)
    return [_tool_out(t) for t in api.registry.tools(include_inactive) if who.sees(t)]


@router.get("/tools/{name}", response_model=Tool)
def get_tool(name: str, who: Reader, api: Api) -> Tool:
    """A tool as the token may read it: other tenants' example requests (their users' words) left out."""
    return visible_tool(who, api.registry, name)


@router.get("/tools/{name}/pending", response_model=PendingOut)
def pending_tool(name: str, who: Admin, api: Api) -> PendingOut:
    """A quarantined MCP tool whole, for review before `approve`: the text its server lists now (never shown to a
    model while it waits), every finding, and the diff against the approved version. Admin tokens only."""
    review = pending_review(api.registry, name)
    if review is None:
        raise ToolNotFoundError(f"no quarantined tool named {name!r}", name=name)
    return PendingOut(tool=review.tool, findings=list(review.findings), diff=review.diff())


@router.get("/tools/{name}/history", response_model=list[Tool])
def tool_history(name: str, who: Reader, api: Api) -> list[Tool]:
    """Every version of a tool; for tokens other than admin, only versions their principal may see (an earlier
    version restricted to another tenant stays that tenant's)."""
    get_tool(name, who, api)
    return [who.view(v) for v in api.registry.history(name) if who.sees_version(v)]


@router.post("/tools/{name}/rollback", response_model=Tool)
def rollback_tool(name: str, body: RollbackIn, who: Admin, api: Api) -> Tool:
    """A new version with the content of version `to` (history only grows), audited with the token's name;
    compare-and-set on `expected_version` when given: 409, nothing written, when the tool is at another version
    (someone changed it after the caller chose). 404 for a version the tool never had."""
    return api.registry.rollback(name, body.to, expected_version=body.expected_version, edited_by=who.actor)


@router.post("/tools", response_model=UpsertOut)
def register_tools(tools: list[ToolIn], who: Admin, api: Api) -> UpsertOut:
    """Add or update tools, all in one transaction: the fields a tool is posted with replace the current ones,
    those it leaves out (an operator's tenants, examples, ...) are kept; compare-and-set on the versions read.
    While the registry's text review is on, an existing tool's text change waits for review (`held`)."""
    parsed = [Tool.parse({**t.model_dump(exclude_unset=True), "source": "api"}) for t in tools]
    report = api.registry.register_over(parsed, origin="api", proposed_by=who.actor)
    return UpsertOut(
        added=report.added,
        updated=report.updated,
        unchanged=report.unchanged,
        held=report.held,
        rejected=report.rejected,
    )


@router.patch(
    "/tools/{name}",
    response_model=Tool,
    responses={202: {"model": Tool, "description": "the live tool: the text change waits for review"}},
)
def update_tool(name: str, patch: ToolPatch, who: Admin, api: Api, response: Response) -> Tool:
    """Replace some fields (a new version), compare-and-set on `version` when given, else on the version the
    server read: 409 when another writer changed the tool in between (nothing is written; reload and redo).
    202 with the live tool when the registry's text review holds the description or schema change for an admin
    (GET /text-changes/{name}; its other fields were written), or when it is the text an admin rejected."""
    changes = patch.model_dump(exclude_unset=True)
    expected = changes.pop("version", None)
    if not changes:
        raise HTTPException(422, "nothing to change")
    edited = api.registry.update_reviewed(name, edited_by=who.actor, expected_version=expected, origin="api", **changes)
    if edited.held or edited.rejected:
        response.status_code = 202
    return edited.tool


@router.get("/text-review", response_model=TextReviewSetting, tags=["review"])
def text_review(who: Admin, api: Api) -> TextReviewSetting:
    """Whether text changes of existing tools wait for review, and for another admin than their proposer. Admin
    tokens only."""
    return _review_setting(api)


@router.put("/text-review", response_model=TextReviewSetting, tags=["review"])
def set_text_review(body: TextReviewSetting, who: Admin, api: Api, response: Response) -> TextReviewSetting:
    """Turn text review on or off for every process on this registry, audited with the token's name. Changes
    already waiting keep waiting when it is turned off. `two_person`: the token that proposed a change cannot
    approve it; lowering it then takes two admins asking for the same (the first one's answer is 202 with the
    setting unchanged)."""
    if body.two_person and not body.required:
        raise HTTPException(422, "two_person needs required: true (it is a kind of review)")
    if not api.registry.reviews.require(body.required, who.actor, body.two_person):
        response.status_code = 202
    return _review_setting(api)


def _review_setting(api: Served) -> TextReviewSetting:
    reviews = api.registry.reviews
    return TextReviewSetting(required=reviews.required, two_person=reviews.two_person)


@router.get("/text-changes", response_model=list[TextChangeOut], tags=["review"])
def text_changes(who: Admin, api: Api) -> list[TextChangeOut]:
    """Every text change waiting for review, by tool name. Admin tokens only."""
    return [_change_out(change) for change in api.registry.reviews.waiting()]


@router.get("/text-changes/{name}", response_model=TextChangeOut, tags=["review"])
def text_change(name: str, who: Admin, api: Api) -> TextChangeOut:
    """One text change with its diff against the live text; 404 when none waits for the tool."""
    return _change_out(api.registry.reviews.change(name))


@router.post("/text-changes/{name}/approve", response_model=Tool, tags=["review"])
def approve_text_change(name: str, body: TextDecisionIn, who: Admin, api: Api) -> Tool:
    """Make the waiting text live: a new version, audited with the token's name. Compare-and-set on `text_hash`:
    409, nothing approved, when another text waits now (review it again); 404 when none waits."""
    return api.registry.reviews.approve(name, body.text_hash, who.actor)


@router.post("/text-changes/{name}/reject", response_model=TextRejectedOut, tags=["review"])
def reject_text_change(name: str, body: TextDecisionIn, who: Admin, api: Api) -> TextRejectedOut:
    """Drop the waiting text (the live text stays), audited and remembered: posting or importing the same text
    again leaves it out until the rejection is lifted. 409 as approving."""
    rejected = api.registry.reviews.reject(name, body.text_hash, who.actor)
    return TextRejectedOut(tool=name, rejected_hash=rejected)


@router.post("/text-changes/{name}/lift", status_code=204, tags=["review"])
def lift_text_rejection(name: str, who: Admin, api: Api) -> None:
    """Forget the rejected text of the tool: proposing it again waits for review again. 404 when none."""
    api.registry.reviews.lift(name, who.actor)


@router.post("/tools/{name}/deactivate", response_model=Tool)
def deactivate(name: str, who: Admin, api: Api) -> Tool:
    return api.registry.set_active(name, False, edited_by=who.actor, origin="api")


@router.post(
    "/tools/{name}/reactivate",
    response_model=Tool,
    responses={202: {"model": Tool, "description": "the tool, still inactive: its reactivation waits for review"}},
)
def reactivate(name: str, who: Admin, api: Api, response: Response) -> Tool:
    tool = api.registry.set_active(name, True, edited_by=who.actor, origin="api")
    if not tool.active:
        response.status_code = 202
    return tool


@router.post("/tools/{name}/overrides/remove", response_model=Tool)
def remove_overrides(name: str, body: OverridesIn, who: Admin, api: Api) -> Tool:
    """Return fields of an MCP server's tool that an operator replaced (`overrides`) to the server's value (a new
    version): syncs keep them current again. 422 for a field that is not overridden."""
    return api.registry.drop_overrides(name, body.fields, edited_by=who.actor, origin="api").tool


@router.post("/tools/{name}/examples", response_model=Tool)
def add_example(name: str, body: ExampleIn, who: Admin, api: Api) -> Tool:
    """One more example request (a new version): searches like it, of that tenant, find the tool. Made on the
    tool as it is at the write: concurrent additions all stay."""
    return api.registry.examples.add(name, body.text, body.tenant, body.source, edited_by=who.actor, origin="api")


@router.post("/tools/{name}/examples/remove", response_model=Tool)
def remove_example(name: str, body: ExampleIn, who: Admin, api: Api) -> Tool:
    return api.registry.examples.remove(name, body.text, body.tenant, edited_by=who.actor, origin="api")


@router.get("/past-tasks", response_model=list[PastTaskOut])
def past_tasks(
    who: Admin,
    api: Api,
    days: Annotated[int, Query(ge=1, le=3650)] = 90,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[PastTaskOut]:
    """Logged requests after which an agent's session called two or more tools, with those tools, the most
    frequent first: candidates to promote as past tasks."""
    tasks = api.registry.examples.past_tasks(days, limit)
    return [PastTaskOut(request=t.request, tenant=t.tenant, tools=list(t.tools), sessions=t.sessions) for t in tasks]


@router.post("/past-tasks", response_model=list[Tool])
def add_task(body: TaskIn, who: Admin, api: Api) -> list[Tool]:
    """A past task: the request becomes an example of each of its tools (new versions, one transaction), so a
    request like it retrieves the whole set."""
    return api.registry.examples.add_task(
        body.text, body.tools, body.tenant, body.source, edited_by=who.actor, origin="api"
    )


@router.post("/tools/{name}/tenant-descriptions", response_model=TenantDescriptionOut)
def set_tenant_description(name: str, body: TenantDescriptionIn, who: Admin, api: Api) -> TenantDescriptionOut:
    """Describe the tool in other words for one tenant's principals (a new version): what they are shown and
    injected, and one more view of it for their searches; syncs and re-imports keep it. The text is scanned like an
    MCP server's and the findings returned. Compare-and-set on `expected_version`: 409 when the tool moved on."""
    done = described(api.registry, name, body.tenant, body.text, body.expected_version, who.actor, "api")
    return TenantDescriptionOut(tool=done.tool, findings=list(done.findings), held=done.held)


@router.post("/tools/{name}/tenant-descriptions/remove", response_model=Tool)
def remove_tenant_description(name: str, body: TenantDescriptionDropIn, who: Admin, api: Api) -> Tool:
    """The tenant's principals get the source's description again (a new version); 409 as above, 422 when the tool
    has no description for that tenant."""
    return api.registry.descriptions.drop(
        name, body.tenant, expected_version=body.expected_version, edited_by=who.actor, origin="api"
    ).tool


@router.get("/tools/{name}/relations", response_model=list[ToolRelation])
def tool_relations(name: str, who: Reader, api: Api) -> list[ToolRelation]:
    """The tool's relations with their source and strength: declared, confirmed, inferred from schemas, learned
    from usage (for tokens other than admin, only what their own tenant's sessions taught), and rejected; only
    relations to tools the token sees. A verdict names who gave it to admins only (others read "an admin")."""
    get_tool(name, who, api)
    return relations_shown(who, api.registry, name)


# A pair can have both an inferred requirement and a learned relation: `kind` says which one is judged.
KindQuery = Annotated[
    RelationKind | None, Query(description="requires or related; default: the inferred requirement if any")
]


@router.post("/tools/{name}/relations/{other}/confirm", response_model=VerdictOut)
def confirm_relation(name: str, other: str, who: Admin, api: Api, kind: KindQuery = None) -> VerdictOut:
    """Confirm an inferred or learned relation: as strong as a declared one, kept whatever inference finds next.
    422 when the registry found no such relation, or the catalog declares it."""
    return _verdict_out(api.registry.relations.decide(name, other, "confirmed", who.actor, kind))


@router.post("/tools/{name}/relations/{other}/reject", response_model=VerdictOut)
def reject_relation(name: str, other: str, who: Admin, api: Api, kind: KindQuery = None) -> VerdictOut:
    """Reject an inferred or learned relation: never inferred nor learned again for the pair until lifted."""
    return _verdict_out(api.registry.relations.decide(name, other, "rejected", who.actor, kind))


@router.post("/tools/{name}/relations/{other}/lift", response_model=LiftedOut)
def lift_relation(name: str, other: str, who: Admin, api: Api, kind: KindQuery = None) -> LiftedOut:
    """Drop a confirmation or rejection of the pair (of `kind`, if given)."""
    return LiftedOut(lifted=api.registry.relations.lift(name, other, who.actor, kind))


def _verdict_out(verdict: RelationVerdict) -> VerdictOut:
    return VerdictOut(
        tool=verdict.tool, other=verdict.other, kind=verdict.kind, verdict=verdict.verdict, parameter=verdict.parameter
    )


def _change_out(change: TextChange) -> TextChangeOut:
    review = change.review
    return TextChangeOut(
        tool=review.tool,
        text_hash=change.shown_hash,
        proposed_by=review.proposed_by,
        proposers=list(review.proposers),
        origin=str(review.origin),
        proposed_at=review.proposed_at,
        findings=list(review.findings),
        proposed=change.proposed,
        diff=change.diff(),
    )


def _tool_out(tool: Tool) -> ToolOut:
    return ToolOut(
        name=tool.name,
        version=tool.version,
        active=tool.active,
        category=tool.category,
        scopes=tool.scopes,
        card=tool.card().text(),
    )
