"""Bounds on one upstream message beyond its size: how deep it nests and how many parts it holds.

A result under the byte cap can still be costly: 120,000 content parts of one character each took the MCP SDK's
parsing and the gateway's size check seconds of the gateway's event loop. Each message an upstream sends is checked
here before the SDK parses it, in linear time, by the stdio relay (its own process, mcp/relay.py) or off the event
loop (the HTTP transport, mcp/upstream.py, in fair turns among upstreams: BoundsChecker): nesting is counted on the
message's brackets outside strings; only a message within the nesting bound is parsed, to count the content parts of
a result and the tools of a listing's page. A message past a bound is replaced by a JSON-RPC error answering its
request, saying which bound and what to ask for instead. Stdlib only: the relay imports this module at every
upstream's start.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from toolrag.turns import Crowded, Turns

PER_UPSTREAM = 2  # messages of one upstream waiting for the checker
MAX_WAITING = 8  # messages waiting in all
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')  # one JSON string, possessive: linear time
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
EDGE = 512  # bytes of each end of a message searched for its id, where serializers write it
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')
REFUSED = -32001  # the JSON-RPC error code of an answer the gateway refused to read


@dataclass(frozen=True)
class MessageBounds:
    """How deep one message may nest, how many content parts a result and how many tools a listing's page may hold."""

    max_depth: int
    max_parts: int
    max_tools: int

    def refusal(self, message: bytes) -> bytes | None:
        """None when `message` is within the bounds; else the JSON-RPC error that answers its request instead, or
        b"" when it answers none (a notification or a request of the server's own: dropped)."""
        if self.plainly_within(message):
            return None
        depth = nesting(message)
        if depth > self.max_depth:
            why = f"nests {depth:,} levels deep, over the gateway's limit of {self.max_depth:,} (max_result_depth)"
            return _answer(message, why)
        try:
            parsed = json.loads(message)
        except ValueError:  # fail closed: what the gateway cannot read as one message is not passed on
            return _answer(message, "is not one JSON-RPC message the gateway can check")
        too_many = self._too_many(parsed)
        if too_many is None:
            return None
        answers = isinstance(parsed, dict) and "id" in parsed and "method" not in parsed
        return _error(parsed["id"], too_many) if answers else b""

    def plainly_within(self, message: bytes) -> bool:
        """Whether a count of its opening brackets (strings included: an upper bound) already keeps the message
        within every bound: true of most messages, checked at memchr speed."""
        opening = message.count(b"{") + message.count(b"[")
        return opening <= min(self.max_depth, self.max_parts, self.max_tools)

    def _too_many(self, message: Any) -> str | None:
        result = message.get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict):
            return None
        for key, limit, setting, what in (
            ("content", self.max_parts, "max_result_parts", "content parts"),
            ("tools", self.max_tools, "max_tools_per_server", "tools in one page"),
        ):
            items = result.get(key)
            if isinstance(items, list) and len(items) > limit:
                return f"holds {len(items):,} {what}, over the gateway's limit of {limit:,} ({setting})"
        return None


def nesting(message: bytes) -> int:
    """How deep the JSON text nests (its brackets outside strings), in linear time and without recursion."""
    brackets = _STRING.sub(b"", message).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def request_id(head: bytes, tail: bytes) -> Any:
    """The id of the message whose first and last bytes these are (serializers write it at one end), or None."""
    found = _ID.search(head[:EDGE]) or _ID.search(tail[-EDGE:])
    return json.loads(found.group(1)) if found else None


def _answer(message: bytes, why: str) -> bytes:
    """The error answering `message` without parsing it (it may be too deep to), or b"" when it has no id."""
    found = request_id(message[:EDGE], message[-EDGE:])
    return _error(found, why) if found is not None else b""


def _error(request_id: Any, why: str) -> bytes:
    message = f"the MCP server's answer {why}: ask for less (a filter, a page, a range)"
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": REFUSED, "message": message}}).encode()


class BoundsChecker:
    """Checks messages off the event loop and outside the interpreter serving requests: a message that is not
    plainly within its bounds goes to a worker process (started on first use), so a costly one holds no one.

    One worker serves every upstream, so messages take turns fairly among upstreams (turns.py): an upstream may have
    `PER_UPSTREAM` messages waiting (past them its next one is refused, answering its request with an error) and
    `MAX_WAITING` wait in all; however many costly answers one upstream sends, another's is checked right after the
    one being checked."""

    def __init__(self) -> None:
        self._workers: ProcessPoolExecutor | None = None
        self._turns = Turns(PER_UPSTREAM, MAX_WAITING)

    async def refusal(self, upstream: str, bounds: MessageBounds, message: bytes) -> bytes | None:
        """`bounds.refusal(message)`, worked out in the turn of `upstream` (the name of the server that sent it)."""
        if bounds.plainly_within(message):
            return None
        try:
            async with self._turns.turn(upstream):
                return await asyncio.wrap_future(self._pool().submit(bounds.refusal, message))
        except Crowded:
            return _answer(message, "could not be checked against the gateway's limits (too many are waiting); retry")
        except BrokenProcessPool:
            self._workers = None  # the next message starts another worker; this one is refused
            return _answer(message, "could not be checked against the gateway's limits (its checker stopped); retry")

    def _pool(self) -> ProcessPoolExecutor:
        if self._workers is None:
            self._workers = ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"), initializer=_exit_with, initargs=(os.getpid(),)
            )
        return self._workers


def _exit_with(parent: int) -> None:
    """Make the worker end when the gateway does, however it ends: a worker holds both ends of its task queue, so
    it never reads an end of file, and an orphan kept its parent's stdout and stderr open (a caller waiting for
    the gateway's output waited forever)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


CHECKER = BoundsChecker()
