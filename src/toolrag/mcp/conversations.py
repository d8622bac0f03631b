"""What `find_tools` offered in each conversation, bounded in memory and never shared across callers.

MCP 2026-07-28 has no protocol sessions: every request stands alone, so the gateway cannot key a conversation on a
session object. A conversation is named by the client (`_meta["toolrag/conversation"]`, or the
`X-Conversation-Id` header over HTTP) or, when it names none, is the caller's default conversation, which lasts
while the caller keeps asking (it ends `idle_seconds` after its last request).

Every id is bound to its caller (`Caller.session`): another caller naming the same id gets another conversation,
so a guessed id reveals nothing. Memory is bounded three ways: conversations per caller (a caller's least recently
used one goes first, never another caller's), callers in all (the least recently active caller goes first), and
names remembered per conversation.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CONVERSATION_META_KEY = "toolrag/conversation"
CONVERSATION_HEADER = "x-conversation-id"
MAX_CONVERSATION_ID_CHARS = 200
MAX_NAMES_PER_CONVERSATION = 256


@dataclass
class _Offered:
    names: OrderedDict[str, None] = field(default_factory=OrderedDict)
    last_used: float = 0.0


@dataclass
class _CallerConversations:
    by_id: OrderedDict[str, _Offered] = field(default_factory=OrderedDict)  # least recently used first
    default: str | None = None  # the id of the conversation of requests that name none


class Conversations:
    """The tools offered per conversation of each caller (`Principal.caller`), by conversation id."""

    def __init__(
        self, idle_seconds: float, per_caller: int, callers: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle_seconds, self.per_caller, self.callers, self.clock = idle_seconds, per_caller, callers, clock
        self._callers: OrderedDict[str, _CallerConversations] = OrderedDict()  # least recently active first
        self._lock = threading.Lock()  # find_tools runs in worker threads, calls on the event loop

    def default_id(self, caller: str) -> str:
        """The caller's default conversation: the one it had, while not idle too long, else a new one."""
        with self._lock:
            own = self._callers.get(caller)
            if own is not None and own.default is not None and self._live(own.by_id.get(own.default)):
                return own.default
            fresh = uuid.uuid4().hex
            self._offer(caller, fresh, ())
            self._callers[caller].default = fresh
            return fresh

    def offered(self, caller: str, conversation: str) -> set[str]:
        """The names offered in this conversation so far (none once it has been idle too long)."""
        with self._lock:
            own = self._callers.get(caller)
            found = own.by_id.get(conversation) if own is not None else None
            return set(found.names) if found is not None and self._live(found) else set()

    def offer(self, caller: str, conversation: str, names: Iterable[str]) -> None:
        """Remember that these names were shown in the conversation; its least recent names go past the cap, and
        past the caller's cap its least recently used conversation, past the callers' cap the least active caller."""
        with self._lock:
            self._offer(caller, conversation, names)

    def _offer(self, caller: str, conversation: str, names: Iterable[str]) -> None:
        now = self.clock()
        own = self._callers.pop(caller, None) or _CallerConversations()
        self._callers[caller] = own
        while own.by_id and not self._live(next(iter(own.by_id.values()))):
            own.by_id.popitem(last=False)  # idle ones are the least recently used: they are first
        current = own.by_id.pop(conversation, None) or _Offered()
        own.by_id[conversation] = current
        current.last_used = now
        for name in names:
            current.names.pop(name, None)
            current.names[name] = None
        while len(current.names) > MAX_NAMES_PER_CONVERSATION:
            current.names.popitem(last=False)
        while len(own.by_id) > self.per_caller:
            own.by_id.popitem(last=False)
        while len(self._callers) > self.callers:
            self._callers.popitem(last=False)

    def _live(self, offered: _Offered | None) -> bool:
        return offered is not None and self.clock() - offered.last_used <= self.idle_seconds

    def sizes(self) -> tuple[int, int, int]:
        """(callers, conversations, names) held now: what the memory bound is about."""
        with self._lock:
            held = [offered for own in self._callers.values() for offered in own.by_id.values()]
        return len(self._callers), len(held), sum(len(offered.names) for offered in held)


def given_conversation(meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> str | None:
    """The conversation id a request names: its `_meta` key first, then the HTTP header; None when it names none
    or names one that is not a short string."""
    given = meta.get(CONVERSATION_META_KEY) if meta else None
    if given is None and headers is not None:
        given = headers.get(CONVERSATION_HEADER)
    if isinstance(given, str) and 0 < len(given) <= MAX_CONVERSATION_ID_CHARS:
        return given
    return None
