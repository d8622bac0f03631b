"""Example requests written by the operator's chat model, started from the API or the console (issue 53).

A run asks the model once per tool view: minutes for a catalog, far longer than a request may wait. So a run goes
to a thread of its own, and both the API and the console read its progress; a dry run only counts, and answers at
once. One run at a time across every instance serving the registry: a run is claimed in the store (the job lease
the scheduled jobs use, renewed as it goes, so an instance that dies mid-run frees it within LEASE), and its report
is kept there, as it starts and as it ends, where every instance reads the last one (its progress tool by tool
only on the instance running it). An admin cancels a run there, between two calls.

The model is the one the server's configuration names (`[chat_model]`): a request chooses languages and bounds,
never a model, an endpoint or a key. A server stopped mid-run loses nothing: each tool's examples are written whole,
and the next run asks only about the tools not yet asked.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from toolrag.catalog.review import Origin
from toolrag.errors import ToolragError
from toolrag.registry import ToolRegistry
from toolrag.runtime.chat import ChatModel
from toolrag.runtime.chat_models import chat_model
from toolrag.runtime.write_examples import RECORD, WritingRun, checked_order, languages_asked, write_examples
from toolrag.server.config import ChatModelConfig

log = logging.getLogger("toolrag.examples")

JOB = "write-examples"  # the run's lease and reports in the store, beside the scheduled jobs'
LEASE = timedelta(minutes=10)  # renewed after each tool; a call is bounded far below (runtime/chat_models.py)


class NoChatModelError(ToolragError):
    """The server's configuration names no chat model."""


class WritingBusyError(ToolragError):
    """A run is already writing examples."""


class WritingNotStartedError(ToolragError):
    """No run has written examples for this registry."""


class WritingOrderError(ToolragError, ValueError):
    """An order no run can take (its languages, numbers or bounds); the message names what."""


@dataclass(frozen=True)
class WritingOrder:
    """What an admin asks a run for: the users' languages, examples in each, and the run's bounds."""

    languages: Sequence[str]
    per_language: int = 2
    max_calls: int = 500
    max_tokens: int = 2_000_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "languages", tuple(languages_asked(self.languages)))

    def checked(self) -> None:
        """WritingOrderError naming what no run can take (the checks a run makes, without reading the tools)."""
        try:
            checked_order(self.languages, self.per_language, self.max_calls, self.max_tokens)
        except ValueError as exc:
            raise WritingOrderError(str(exc)) from exc


@dataclass(frozen=True)
class WritingJob:
    """A run started by `started_by`: its progress over the registry's tools, then what it wrote (`run`) or why
    it stopped (`error`). `cancelling`: an admin asked it to stop at its next call."""

    order: WritingOrder
    model: str
    started_by: str
    started_at: datetime
    done: int = 0
    total: int = 0
    run: WritingRun | None = None
    error: str | None = None
    cancelling: bool = False
    instance: str = ""  # the instance running it: host, process, a random tag

    @property
    def state(self) -> Literal["running", "done", "failed"]:
        if self.error is not None:
            return "failed"
        return "running" if self.run is None else "done"

    def report(self) -> dict[str, Any]:
        """As the store keeps it (`job_reports`), for every instance to read."""
        return asdict(self) | {"started_at": self.started_at.isoformat()}

    @classmethod
    def from_report(cls, body: dict[str, Any]) -> WritingJob:
        order = WritingOrder(**body["order"])
        run = WritingRun(**body["run"]) if body.get("run") else None
        known = ("model", "started_by", "done", "total", "error", "instance")
        fields = {key: body[key] for key in known if key in body}
        return cls(order=order, started_at=datetime.fromisoformat(body["started_at"]), run=run, **fields)


class ExampleWriting:
    """The served registry's runs: `plan` (a dry run), `start` (a run in its own thread), `cancel`, `latest`."""

    def __init__(self, registry: ToolRegistry, settings: ChatModelConfig | None) -> None:
        self._registry, self._settings = registry, settings
        self._holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._lock = threading.Lock()
        self._job: WritingJob | None = None

    @property
    def model_name(self) -> str | None:
        """The configured model as runs name it; None: the server's configuration names none."""
        return self._settings.name if self._settings else None

    def plan(self, order: WritingOrder) -> WritingRun:
        """What a run would ask, counted: calls, prompt tokens, views unchanged and left over. Asks nothing."""
        settings = self._configured()
        order.checked()
        return write_examples(self._registry, None, settings.name, order.languages, *_bounds(order), True)

    def start(self, order: WritingOrder, started_by: str, origin: Origin) -> WritingJob:
        """Start a run; refused while one runs, here or on another instance. Bad settings and a model that cannot
        be built (no SDK, no key) are refused here, before the thread."""
        settings = self._configured()
        order.checked()  # answered to the caller, before the thread
        model = chat_model(settings.provider, settings.model, settings.base_url, settings.api_key_env, RECORD)
        jobs, now = self._registry.store.jobs, datetime.now(UTC)
        with self._lock:
            if not jobs.claim_job(JOB, self._holder, now, now + LEASE, now + timedelta(seconds=1)):
                running = self._job if self._job is not None and self._job.state == "running" else None
                who = (
                    f"a run started by {running.started_by} ({running.done} of {running.total or '?'} tools)"
                    if running
                    else "a run on another instance"
                )
                raise WritingBusyError(f"{who} is writing examples; wait for it to end, or cancel it")
            job = WritingJob(order, settings.name, started_by, now, instance=self._holder)
            self._job = job
        jobs.report_job(JOB, self._holder, now, job.report())  # every instance sees it started
        try:
            thread = threading.Thread(
                target=self._run, args=(model, order, origin, started_by), name="toolrag-write-examples", daemon=True
            )
            thread.start()
        except RuntimeError as exc:  # no thread to be had: the run ends before it began, and frees its claim
            why = f"the run could not start: {exc}"
            self._end(lambda job: replace(job, error=why))
            raise
        return job

    def cancel(self, by: str) -> WritingJob:
        """Ask the running run to stop at its next call (what it wrote stays)."""
        with self._lock:
            job = self._job
            if job is None or job.state != "running":
                raise WritingNotStartedError("no run is writing examples on this instance")
            log.info("%s cancels the run writing examples", by)
            self._job = replace(job, cancelling=True)
            return self._job

    def latest(self) -> WritingJob:
        """The run going on here, or the last one any instance started (as it started, if it goes on there; as it
        ended otherwise)."""
        with self._lock:
            if self._job is not None and self._job.state == "running":
                return self._job
        jobs = self._registry.store.jobs
        reports = jobs.job_reports(JOB, 1)
        if not reports:
            raise WritingNotStartedError("no run has written examples for this registry yet")
        job = WritingJob.from_report(reports[0].body)
        if job.state == "running" and not jobs.job_leased(JOB, datetime.now(UTC)):
            return replace(job, error="the instance running it stopped before it ended")
        return job

    def _configured(self) -> ChatModelConfig:
        if self._settings is None:
            raise NoChatModelError(
                "no chat model is configured: add a [chat_model] section (provider, model) to the server's"
                " configuration"
            )
        return self._settings

    def _run(self, model: ChatModel, order: WritingOrder, origin: Origin, started_by: str) -> None:
        def progress(done: int, total: int) -> None:
            with self._lock:
                if self._job is not None:
                    self._job = replace(self._job, done=done, total=total)
            self._registry.store.jobs.extend_job(JOB, self._holder, datetime.now(UTC) + LEASE)

        def cancelled() -> bool:
            with self._lock:
                return self._job is not None and self._job.cancelling

        try:
            run = write_examples(
                self._registry,
                model,
                self._configured().name,
                order.languages,
                *_bounds(order),
                False,
                progress,
                origin,
                started_by,
                cancelled,
            )
        except Exception as exc:  # the run ends and says why; the server goes on
            log.warning("writing example requests stopped: %s", exc)
            why = str(exc) or type(exc).__name__
            self._end(lambda job: replace(job, error=why))
            return
        self._end(lambda job: replace(job, run=run))

    def _end(self, change: Callable[[WritingJob], WritingJob]) -> None:
        """The job's last state, kept in the store for every instance, and the claim released."""
        with self._lock:
            if self._job is None:
                return
            self._job = change(self._job)
            ended = self._job
        try:
            self._registry.store.jobs.finish_job(JOB, self._holder, datetime.now(UTC), ended.report())
        except ToolragError as exc:  # the store is gone: the lease runs out by itself
            log.warning("the end of the run writing examples was not recorded: %s", exc)


def _bounds(order: WritingOrder) -> tuple[int, int, int]:
    return order.per_language, order.max_calls, order.max_tokens
