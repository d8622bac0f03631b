"""The console's text review pages (admins): the text changes of catalog tools waiting while the registry's text
review is on (catalog/review.py), one change whole with its findings and its diff against the live text, and the
decision on it; the group descriptions waiting (a model reads one as the namespace of a group's deferred tools),
each beside the live one, decided on the list. A decision is made on the text the page showed (its hash travels
with the form): a proposal that landed since is a conflict on the page, nothing decided. Anyone else gets the page
a missing one gets.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from toolrag.errors import ToolNotFoundError
from toolrag.server.console.common import Console, ConsoleState, DecisionForm, Who, asked_then_decided, this_page
from toolrag.server.console.session import PREFIX

router = APIRouter()
LIST = f"{PREFIX}text-changes"


@router.get("/text-changes")
def text_changes_page(request: Request, console: Console, who: Who) -> HTMLResponse:
    if not who.is_admin:
        return console.error(request, 404, f"no page {LIST}")
    return _list_view(request, console)


def _list_view(request: Request, console: ConsoleState, status: int = 200, error: str | None = None) -> HTMLResponse:
    """Every change waiting; `error`: why the admin's last decision on a group's description was not made."""
    reviews = console.registry.reviews
    return console.page(
        request,
        "text_changes.html",
        status,
        changes=reviews.waiting(),
        groups=reviews.waiting_groups(),
        required=reviews.required,
        two_person=reviews.two_person,
        error=error,
    )


@router.get("/text-changes/{name}")
def text_change_page(request: Request, console: Console, who: Who, name: str) -> Response:
    """One waiting change whole, for an admin to decide on: who proposed it, through what, the findings, the
    diff of the live text against the proposed one."""
    if not who.is_admin:
        return console.error(request, 404, f"no text change of {name!r} waits for review")
    return _change_view(request, console, name)


@router.post("/text-changes/{name}")
def decide_text_change(request: Request, console: Console, name: str, form: DecisionForm) -> Response:
    """Approve (a new version) or reject (remembered by hash) the text the page showed, asked first; audited with
    the admin's name by the registry."""
    reviews = console.registry.reviews
    approving = form.decision == "approve"
    return asked_then_decided(
        console,
        request,
        form,
        f"the text change of {name}",
        "the proposed text becomes a new version, served and searched"
        if approving
        else "the proposed text is dropped and remembered: proposing it again leaves it out",
        partial(reviews.approve if approving else reviews.reject, name),
        lambda why: _change_view(request, console, name, 409, why),
        this_page(request),
        LIST,
    )


def _change_view(
    request: Request, console: ConsoleState, name: str, status: int = 200, error: str | None = None
) -> Response:
    """The change of `name` as it waits now; `error`: why the admin's last decision on it was not made."""
    try:
        change = console.registry.reviews.change(name)
    except ToolNotFoundError as missing:
        return console.error(request, 404, str(missing))
    return console.page(request, "text_change.html", status, change=change, diff=change.diff(), error=error)


@router.post("/group-changes/{name:path}")
def decide_group_change(request: Request, console: Console, name: str, form: DecisionForm) -> Response:
    """Approve or reject the description the list showed for group `name` (a name may hold '/'), asked first;
    audited with the admin's name by the registry."""
    reviews = console.registry.reviews
    approving = form.decision == "approve"
    return asked_then_decided(
        console,
        request,
        form,
        f"the description of group {name}",
        "the proposed description becomes the one models read for this group's deferred tools"
        if approving
        else "the proposed description is dropped and remembered: proposing it again leaves it out",
        partial(reviews.approve_group if approving else reviews.reject_group, name),
        lambda why: _list_view(request, console, 409, why),
        LIST,
        LIST,
    )
