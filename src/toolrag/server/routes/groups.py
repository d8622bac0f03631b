"""`/group-changes`: the group descriptions waiting for review while the registry asks for it (what a model reads as
the namespace of a group's deferred tools), and the admins' decisions on them, compare-and-set on the hash shown
(catalog/decisions.py). Admin tokens only; each decision is audited with the caller's actor. A group's name may hold
'/', so the routes take it as a path.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from fastapi import APIRouter

from toolrag.catalog.decisions import GroupChange
from toolrag.server.models import GroupChangeOut, GroupDescriptionOut, GroupRejectedOut, TextDecisionIn
from toolrag.server.routes.deps import Admin, Api

router = APIRouter(tags=["review"])


@router.get("/group-changes", response_model=list[GroupChangeOut])
def group_changes(who: Admin, api: Api) -> list[GroupChangeOut]:
    """Every group description waiting for review, by group name, beside the live one."""
    return [_change_out(change) for change in api.registry.reviews.waiting_groups()]


@router.post("/group-changes/{name:path}/approve", response_model=GroupDescriptionOut)
def approve_group_change(name: str, body: TextDecisionIn, who: Admin, api: Api) -> GroupDescriptionOut:
    """Make the waiting description live. 409, nothing approved, when another description waits now, when the
    poisoning checks find text aimed at the model in it (reject it), or under two-person review when the caller
    proposed it or nobody named did; 404 when none waits. A group's name may hold '/' (a category's)."""
    api.registry.reviews.approve_group(name, body.text_hash, who.actor)
    return GroupDescriptionOut(group=name, description=api.registry.group_descriptions().get(name))


@router.post("/group-changes/{name:path}/reject", response_model=GroupRejectedOut)
def reject_group_change(name: str, body: TextDecisionIn, who: Admin, api: Api) -> GroupRejectedOut:
    """Drop the waiting description (the live one stays), remembered: proposing it again (a sync of the server's
    configured description too) leaves it out until the rejection is lifted. 409 as approving."""
    rejected = api.registry.reviews.reject_group(name, body.text_hash, who.actor)
    return GroupRejectedOut(group=name, rejected_hash=rejected)


@router.post("/group-changes/{name:path}/lift", status_code=204)
def lift_group_rejection(name: str, who: Admin, api: Api) -> None:
    """Forget the rejected description of the group: proposing it again waits for review again. 404 when none."""
    api.registry.reviews.lift_group(name, who.actor)


def _change_out(change: GroupChange) -> GroupChangeOut:
    review = change.review
    return GroupChangeOut(
        group=review.name,
        text_hash=change.text_hash,
        live=change.live,
        proposed=change.proposed,
        proposed_by=review.proposed_by,
        origin=review.origin or "unknown",
        proposed_at=review.proposed_at,
    )
