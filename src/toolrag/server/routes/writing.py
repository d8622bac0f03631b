"""`/written-examples`: the operator's chat model writes example requests for every tool in the users' languages
(server/writing.py): count a run's cost, start one, follow it, cancel it. Admins only.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from fastapi import APIRouter

from toolrag.runtime.write_examples import WritingRun
from toolrag.server.models import WritingIn, WritingJobOut
from toolrag.server.routes.deps import Admin, Api
from toolrag.server.writing import WritingJob, WritingOrder

router = APIRouter(tags=["examples"])


@router.post("/written-examples/plan", response_model=WritingRun)
def plan_writing(order: WritingIn, who: Admin, api: Api) -> WritingRun:
    """What a run would ask (calls, prompt tokens; tools unchanged or left over by the bounds): a dry run."""
    return api.writing.plan(_order(order))


@router.post("/written-examples", response_model=WritingJobOut, status_code=202)
def start_writing(order: WritingIn, who: Admin, api: Api) -> WritingJobOut:
    """Start a run in the background; only tools whose text changed since their examples were written are asked.
    409 while another runs."""
    return job_out(api.writing.start(_order(order), who.actor, "api"))


@router.get("/written-examples", response_model=WritingJobOut)
def latest_writing(who: Admin, api: Api) -> WritingJobOut:
    """The run going on here, or the last one any instance finished (404: none yet)."""
    return job_out(api.writing.latest())


@router.post("/written-examples/cancel", response_model=WritingJobOut)
def cancel_writing(who: Admin, api: Api) -> WritingJobOut:
    """Stop the run going on here at its next call; what it wrote stays (404: none runs here)."""
    return job_out(api.writing.cancel(who.actor))


def _order(order: WritingIn) -> WritingOrder:
    return WritingOrder(order.languages, order.per_language, order.max_calls, order.max_tokens)


def job_out(job: WritingJob) -> WritingJobOut:
    return WritingJobOut(
        state=job.state,
        model=job.model,
        languages=list(job.order.languages),
        per_language=job.order.per_language,
        started_by=job.started_by,
        started_at=job.started_at,
        done=job.done,
        total=job.total,
        run=job.run,
        error=job.error,
        cancelling=job.cancelling,
        instance=job.instance,
    )
