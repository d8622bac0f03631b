"""Where synchronous tools run: threads of their own, never asyncio's default pool, and never in a queue.

A thread cannot be stopped. A sync tool that outlives its timeout keeps its thread until it returns, and on asyncio's
default pool (cpu + 4 threads, shared with the argument checks and every `to_thread` of the process) a few calls to a
hanging tool (a tarpit URL, a dead upstream) left every later call of every caller waiting for ever, and
`asyncio.run` (`Toolbox.call_sync`) waited for the hanging tool itself.

Here a call holds a thread of its own (a daemon: a tool that never returns does not keep the process from exiting)
from the moment it starts until its function returns, however its caller stopped waiting (a timeout, a cancelled
task, a client gone). Calls are counted while they hold a thread: one caller holds at most `max_calls_in_flight`, one
tenant three quarters of `THREADS` (callers of no tenant count as one tenant: a few OAuth subjects cannot take them
all), and a call that would pass either, or find all taken, is refused at once. A call never waits for a thread: a
queued call would run later than its permission was checked, and its wait would count against its timeout. Only a
caller's own calls are named in a refusal: others' load is theirs.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

THREADS = 64  # sync tool calls running at once in one process
TAKEN = "the threads for sync tools are taken; try again later"


class Busy(Exception):
    """A call refused because the calls of its caller, or of its tenant, or of everyone, hold the threads."""


class SyncTools:
    def __init__(self, threads: int = THREADS) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._holding: Counter[tuple[str, str]] = Counter()  # ("caller" | "tenant" | "all", key): threads held

    def holding(self, caller: str, tenant: str | None = None) -> tuple[int, int, int]:
        """Threads held now by the caller's calls, by its tenant's, and by all."""
        with self._lock:
            return self._holding["caller", caller], self._holding["tenant", tenant or ""], self._holding["all", ""]

    async def run(
        self, function: Callable[[], Any], caller: str, tenant: str | None, timeout: float, max_calls: int
    ) -> Any:
        """`function()` in a thread of its own, awaited at most `timeout` seconds (TimeoutError past it)."""
        keys = [("caller", caller), ("tenant", tenant or ""), ("all", "")]
        with self._lock:
            refusal = self._refusal(caller, tenant, max_calls)
            if refusal is None:
                self._holding.update(keys)
        if refusal is not None:
            raise Busy(refusal)
        future: Future[Any] = Future()
        future.add_done_callback(lambda _: self._release(keys))  # when the function returns, whoever still waits
        context = contextvars.copy_context()  # as asyncio.to_thread does: tracing and the call's origin go along
        try:
            threading.Thread(target=_work, args=(future, context, function), name="toolrag-tool", daemon=True).start()
        except BaseException as exc:  # no thread could be started: the call fails, its count is given back
            future.set_exception(exc)
            raise
        # At the timeout wait_for cancels the wrapped future: one not started yet never starts, one running goes on
        # holding its thread (and its count) until it returns.
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

    def _refusal(self, caller: str, tenant: str | None, max_calls: int) -> str | None:
        if self._holding["caller", caller] >= max_calls:
            return f"{max_calls} of your calls to sync tools are still running; try again when one ends"
        if self._holding["tenant", tenant or ""] >= self.threads * 3 // 4 or self._holding["all", ""] >= self.threads:
            return TAKEN
        return None

    def _release(self, keys: list[tuple[str, str]]) -> None:
        with self._lock:
            self._holding.subtract(keys)
            for key in keys:
                if self._holding[key] <= 0:
                    del self._holding[key]


def _work(future: Future[Any], context: contextvars.Context, function: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():  # cancelled before it started: it never runs
        return
    try:
        result = context.run(function)
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(result)
