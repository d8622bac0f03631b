"""A separate process that checks large arguments, so a costly check never holds the interpreter serving others.

The server sends one request per line on the worker's stdin (`{"schema": "<JSON>", "arguments": "<JSON>",
"seconds": <budget>}`) and waits for the line of errors on its stdout. The worker checks within WORKER_STEPS steps
and the budget's seconds and answers that it ran out when it does (validation.Budget); one that has not answered
shortly after the budget (a single step too long to stop) is killed and another started, within the turn of the
caller whose check overran, so the next caller does not wait for its start. Either way the call is refused.

One process serves the whole server, so checks take turns fairly among callers (turns.py): each caller may have
`PER_CALLER` checks waiting (past them its own next call is refused at once), `MAX_WAITING` in all, and the next
check is the waiting caller's served least recently: however many checks one caller keeps queued, another caller's
runs right after the one running. A caller is a principal (`Principal.caller`).

    python -m toolrag.schemas.worker     # what the server starts; it reads requests until stdin closes
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections import OrderedDict
from typing import IO, Any

from toolrag.turns import Crowded, Turns

PER_CALLER = 2  # checks one caller may have waiting
MAX_WAITING = 8  # checks waiting in all
WORKER_STEPS = 2_000_000  # ~15 s of ordinary checking, past any time budget; it stops before huge RE2 matches
_GRACE_SECONDS = 1.0  # beyond the budget, for the answer of a worker that stopped at it
_START_SECONDS = 30.0  # for a worker to import what it checks with, on a loaded machine
_READY = b'{"ready": true}\n'
_CACHED_VALIDATORS = 64


class CheckRefused(Exception):
    """The check did not finish: over budget, too many waiting, or the worker failed."""


class CheckingProcess:
    """The worker process, started on first use and restarted after a kill. One check at a time, in fair turns."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._answers: queue.Queue[bytes] = queue.Queue()
        self._lock = threading.Lock()  # a cancelled caller's exchange may still be running in its thread
        self._turns = Turns(PER_CALLER, MAX_WAITING)

    async def check(self, caller: str, schema_text: str, arguments_text: str, budget: float) -> list[str]:
        """The errors of the arguments (both as JSON text) against the schema, checked in `caller`'s turn; raises
        CheckRefused."""
        try:
            async with self._turns.turn(caller):
                return await asyncio.to_thread(self._locked_exchange, schema_text, arguments_text, budget)
        except Crowded as exc:
            if exc.own:
                raise CheckRefused(
                    f"{PER_CALLER} of your large arguments are waiting to be checked already: wait for their answers"
                ) from None
            raise CheckRefused("too many large arguments are being checked: retry in a moment") from None

    def _locked_exchange(self, schema_text: str, arguments_text: str, budget: float) -> list[str]:
        with self._lock:
            return self._exchange(schema_text, arguments_text, budget)

    def _exchange(self, schema_text: str, arguments_text: str, budget: float) -> list[str]:
        process = self._running()
        assert process.stdin is not None and process.stdout is not None
        request = json.dumps(
            {"schema": schema_text, "arguments": arguments_text, "seconds": budget}, ensure_ascii=False
        )
        try:
            process.stdin.write(request.encode("utf-8") + b"\n")
            process.stdin.flush()
        except OSError:
            self._stop()
            raise CheckRefused("the argument checker stopped; retry") from None
        try:
            line = self._answers.get(timeout=budget + _GRACE_SECONDS)
        except queue.Empty:
            self._stop()
            with contextlib.suppress(CheckRefused):  # started in this turn, not the next caller's; else next time
                self._running()
            raise CheckRefused(
                f"checking the arguments took longer than {budget:g} s: send smaller arguments"
            ) from None
        if not line:
            self._stop()
            raise CheckRefused("the argument checker stopped; retry")
        answer = json.loads(line)
        if "refused" in answer:
            raise CheckRefused(f"{answer['refused']}: send smaller arguments")
        errors: list[str] = answer["errors"]
        return errors

    def _running(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "toolrag.schemas.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            # Answers are read by a thread of their own, so waiting for one can time out on every platform.
            self._answers = queue.Queue()
            threading.Thread(target=_read_lines, args=(self._process.stdout, self._answers), daemon=True).start()
            try:
                started = self._answers.get(timeout=_START_SECONDS) == _READY
            except queue.Empty:
                started = False
            if not started:
                self._stop()
                raise CheckRefused("the argument checker did not start; retry")
        return self._process

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def close(self) -> None:
        with self._lock:
            self._stop()


def _read_lines(stream: IO[bytes] | None, answers: queue.Queue[bytes]) -> None:
    assert stream is not None
    for line in stream:
        answers.put(line)
    answers.put(b"")  # the worker ended


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The worker's loop: one request line in, one answer line out, until the input closes."""
    from toolrag.schemas.arguments import bounded_errors
    from toolrag.schemas.validation import OverBudget, budget, safe_validator

    validators: OrderedDict[str, Any] = OrderedDict()
    answers.write(_READY)  # what checking needs is imported: the server's wait for the start is over
    answers.flush()
    for line in requests:
        request = json.loads(line)
        schema_text = request["schema"]
        validator = validators.get(schema_text)
        if validator is None:
            validator = validators[schema_text] = safe_validator(json.loads(schema_text))
            while len(validators) > _CACHED_VALIDATORS:
                validators.popitem(last=False)
        answer: dict[str, Any]
        try:
            with budget(WORKER_STEPS, float(request["seconds"])):
                answer = {"errors": bounded_errors(validator, json.loads(request["arguments"]))}
        except OverBudget as exc:
            answer = {"refused": str(exc)}
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
