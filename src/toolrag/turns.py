"""Turns at one shared piece of work (the argument checker's process, the upstream messages' checker), taken one at
a time and fairly among the callers waiting for it.

First come, first served let one caller who kept costly work queued make every other caller wait behind all of it,
or be refused once the queue was full. Here each caller may have only `per_caller` turns waiting (past them, its own
next request is refused, not anyone else's) and at most `overall` wait in all; the next turn goes to the waiting
caller served least recently, so another caller's work runs right after the work running now, however much one
caller queued. Waiting holds no thread: a turn is a future, awaited on the caller's event loop (any loop: the
futures are thread-safe). Stdlib only: the stdio relay imports mcp/bounds.py, which uses this, at every upstream's
start.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from itertools import count


class Crowded(Exception):
    """No turn can wait: the caller's own share, or every caller's, is taken. `own` says which."""

    def __init__(self, own: bool) -> None:
        super().__init__("the caller's share of waiting turns is taken" if own else "every waiting turn is taken")
        self.own = own


class Turns:
    """One turn at a time, the next to the waiting caller served least recently. Thread-safe."""

    def __init__(self, per_caller: int, overall: int) -> None:
        self.per_caller = per_caller
        self.overall = overall
        self._lock = threading.Lock()
        self._waiting: dict[str, deque[Future[None]]] = {}  # in the order callers first waited
        self._served: dict[str, int] = {}  # when each waiting or running caller last had a turn
        self._clock = count()
        self._busy = False

    @asynccontextmanager
    async def turn(self, caller: str) -> AsyncIterator[None]:
        """Wait for `caller`'s turn and hold it for the block; raises Crowded at once when it cannot wait."""
        ticket = self._admit(caller)
        try:
            await asyncio.wrap_future(ticket)
        except BaseException:  # cancelled while waiting: its place, or the turn it was just given, is passed on
            self._withdraw(caller, ticket)
            raise
        try:
            yield
        finally:
            self._pass()

    def _admit(self, caller: str) -> Future[None]:
        ticket: Future[None] = Future()
        with self._lock:
            if not self._busy:
                self._start(caller, ticket)
                return ticket
            mine = self._waiting.get(caller)
            if mine is not None and len(mine) >= self.per_caller:
                raise Crowded(own=True)
            if sum(map(len, self._waiting.values())) >= self.overall:
                raise Crowded(own=False)
            self._waiting.setdefault(caller, deque()).append(ticket)
        return ticket

    def _withdraw(self, caller: str, ticket: Future[None]) -> None:
        with self._lock:
            mine = self._waiting.get(caller)
            if mine is not None and ticket in mine:
                mine.remove(ticket)
                if not mine:
                    del self._waiting[caller]
                return
        if not ticket.cancelled():  # it had been given the turn
            self._pass()

    def _pass(self) -> None:
        """The running turn ended: the waiting caller served least recently (one never served first) gets the next."""
        with self._lock:
            while self._waiting:
                caller = min(self._waiting, key=lambda waiting: self._served.get(waiting, -1))
                mine = self._waiting[caller]
                ticket = mine.popleft()
                if not mine:
                    del self._waiting[caller]
                if ticket.set_running_or_notify_cancel():
                    self._start(caller, ticket)
                    return
            self._busy = False
            self._served.clear()

    def _start(self, caller: str, ticket: Future[None]) -> None:
        self._busy = True
        self._served[caller] = next(self._clock)
        for known in [known for known in self._served if known != caller and known not in self._waiting]:
            del self._served[known]  # only the callers still waiting need their place in the round
        ticket.set_result(None)
