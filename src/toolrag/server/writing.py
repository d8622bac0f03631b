"""Example requests written by the operator's chat model, started from the API or the console (issue 53).

A run asks the model once per tool view: minutes for a catalog, far longer than a request may wait. So a run goes
to a thread of its own, one at a time per server, and both the API and the console read its progress; a dry run
only counts, and answers at once. The model is the one the server's configuration names (`[chat_model]`): a request
chooses languages and bounds, never a model, an endpoint or a key. A server stopped mid-run loses nothing: each
tool's examples are written whole, and the next run asks only about the tools not yet written for.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from toolrag.catalog.review import Origin
from toolrag.errors import ToolragError
from toolrag.model import Tool
from toolrag.registry import ToolRegistry
from toolrag.runtime.chat import ChatModel
from toolrag.runtime.chat_models import chat_model
from toolrag.runtime.messages import Message
from toolrag.runtime.write_examples import RECORD, WritingRun, write_examples
from toolrag.server.config import ChatModelConfig

log = logging.getLogger("toolrag.examples")


class NoChatModelError(ToolragError):
    """The server's configuration names no chat model."""


class WritingBusyError(ToolragError):
    """A run is already writing examples."""


class WritingNotStartedError(ToolragError):
    """No run has started since the server did."""


class WritingOrderError(ToolragError, ValueError):
    """An order no run can take (its languages, numbers or bounds); the message names what."""


@dataclass(frozen=True)
class WritingOrder:
    """What an admin asks a run for: the users' languages, examples in each, and the run's bounds."""

    languages: Sequence[str]
    per_language: int = 2
    max_calls: int = 500
    max_tokens: int = 2_000_000


@dataclass(frozen=True)
class WritingJob:
    """A run started by `started_by`: its progress over the registry's tools, then what it wrote (`run`) or why
    it stopped (`error`)."""

    order: WritingOrder
    model: str
    started_by: str
    started_at: datetime
    done: int = 0
    total: int = 0
    run: WritingRun | None = None
    error: str | None = None

    @property
    def state(self) -> Literal["running", "done", "failed"]:
        if self.error is not None:
            return "failed"
        return "running" if self.run is None else "done"


class ExampleWriting:
    """The served registry's runs: `plan` (a dry run), `start` (a run in its own thread), `latest`."""

    def __init__(self, registry: ToolRegistry, settings: ChatModelConfig | None) -> None:
        self._registry, self._settings = registry, settings
        self._lock = threading.Lock()
        self._job: WritingJob | None = None

    @property
    def model_name(self) -> str | None:
        """The configured model as runs name it; None: the server's configuration names none."""
        return self._settings.name if self._settings else None

    def plan(self, order: WritingOrder) -> WritingRun:
        """What a run would ask, counted: calls, prompt tokens, views unchanged and left over. Asks nothing."""
        settings = self._configured()
        try:
            return write_examples(self._registry, _Unasked(), settings.name, order.languages, *_bounds(order), True)
        except ValueError as exc:
            raise WritingOrderError(str(exc)) from exc

    def start(self, order: WritingOrder, started_by: str, origin: Origin) -> WritingJob:
        """Start a run; a second while one runs is refused. Bad settings are refused here, before the thread."""
        settings = self._configured()
        self.plan(order)  # the same checks a run makes (languages, numbers), answered to the caller
        model = chat_model(settings.provider, settings.model, settings.base_url, settings.api_key_env, RECORD)
        with self._lock:
            if self._job is not None and self._job.state == "running":
                job = self._job
                raise WritingBusyError(
                    f"a run started by {job.started_by} is writing examples ({job.done} of {job.total} tools);"
                    " wait for it to end"
                )
            self._job = WritingJob(order, settings.name, started_by, datetime.now(UTC))
            job = self._job
        thread = threading.Thread(
            target=self._run, args=(model, order, origin), name="toolrag-write-examples", daemon=True
        )
        thread.start()
        return job

    def latest(self) -> WritingJob | None:
        """The running run, or the last one this server started (none since it started: None)."""
        with self._lock:
            return self._job

    def _configured(self) -> ChatModelConfig:
        if self._settings is None:
            raise NoChatModelError(
                "no chat model is configured: add a [chat_model] section (provider, model) to the server's"
                " configuration"
            )
        return self._settings

    def _run(self, model: ChatModel, order: WritingOrder, origin: Origin) -> None:
        def progress(done: int, total: int) -> None:
            self._update(lambda job: replace(job, done=done, total=total))

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
            )
        except Exception as exc:  # the run ends and says why; the server goes on
            log.warning("writing example requests stopped: %s", exc)
            why = str(exc) or type(exc).__name__
            self._update(lambda job: replace(job, error=why))
            return
        self._update(lambda job: replace(job, run=run))

    def _update(self, change: Callable[[WritingJob], WritingJob]) -> None:
        with self._lock:
            if self._job is not None:
                self._job = change(self._job)


class _Unasked:
    """The model of a dry run: never asked."""

    def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        raise AssertionError("a dry run asks no model")


def _bounds(order: WritingOrder) -> tuple[int, int, int]:
    return order.per_language, order.max_calls, order.max_tokens
