"""Where synchronous tools run: threads of their own, never asyncio's default pool.

A thread cannot be stopped. A sync tool that outlives its timeout keeps its thread until it returns, and on asyncio's
default pool (cpu + 4 threads, shared with the argument checks and every `to_thread` of the process) a few calls to a
hanging tool (a tarpit URL, a dead upstream) left every later call of every caller waiting for ever, and
`asyncio.run` (`Toolbox.call_sync`) waited for the hanging tool itself. Here sync tools run on a pool of their own,
and the calls still running past their timeout ("overdue") are counted per tool and per caller: past
`max_overdue_calls` of one tool, or twice that of one caller, a new call is refused at once, saying why, instead of
queueing behind them. A call that waits for a free thread past its timeout is cancelled before it starts.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

THREADS = 32  # sync tool calls running at once in one process


class Overdue(Exception):
    """A call refused because earlier calls of its tool, or of its caller, still hold threads past their timeout."""


class SyncTools:
    def __init__(self, threads: int = THREADS) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="toolrag-tool")
        self._lock = threading.Lock()
        self._overdue: Counter[tuple[str, str]] = Counter()

    def overdue(self, tool: str, caller: str) -> tuple[int, int]:
        """Calls of the tool, and of the caller, still running past their timeout."""
        with self._lock:
            return self._overdue["tool", tool], self._overdue["caller", caller]

    async def run(self, function: Callable[[], Any], tool: str, caller: str, timeout: float, max_overdue: int) -> Any:
        """`function()` in a thread of the pool, awaited at most `timeout` seconds (TimeoutError past it)."""
        of_tool, of_caller = self.overdue(tool, caller)
        if of_tool >= max_overdue:
            raise Overdue(f"{of_tool} earlier calls of {tool} are still running past their timeout; try again later")
        if of_caller >= 2 * max_overdue:
            raise Overdue(f"{of_caller} of your earlier calls are still running past their timeout; try again later")
        context = contextvars.copy_context()  # as asyncio.to_thread does: tracing and the call's origin go along
        future: Future[Any] = self._pool.submit(context.run, function)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            # wait_for cancelled the future: one still queued never starts; one running keeps its thread
            if not future.cancelled() and not future.done():
                self._hold(future, tool, caller)
            raise

    def _hold(self, future: Future[Any], tool: str, caller: str) -> None:
        with self._lock:
            self._overdue["tool", tool] += 1
            self._overdue["caller", caller] += 1

        def released(_: Future[Any]) -> None:
            with self._lock:
                self._overdue -= Counter({("tool", tool): 1, ("caller", caller): 1})

        future.add_done_callback(released)  # runs at once when the call ended in between
