"""A bounded query cache: least recently used entries go first, entries expire after a time to live.

Keys include the snapshot's serial (search/index.py), so any registry change makes every older entry unreachable.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Value = TypeVar("Value")


class QueryCache(Generic[Value]):
    def __init__(
        self, max_entries: int = 1024, ttl_seconds: float = 300.0, clock: Callable[[], float] = time.monotonic
    ):
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, Value]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Value | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or self._clock() - entry[0] > self.ttl_seconds:
                if entry is not None:
                    del self._entries[key]
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def put(self, key: Hashable, value: Value) -> None:
        if self.max_entries <= 0:
            return
        with self._lock:
            self._entries[key] = (self._clock(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
