"""What is derived from one snapshot, owned by it: created with the snapshot, dropped with it.

Every `SearchIndex` holds one `Derived` (search/index.py): visibility masks, the small-talk reference and levels,
the typo vocabulary, the tool relations, token counts. A new registry version is a new snapshot, so a new `Derived`
starts empty and nothing computed for an older version can be read for a newer one; two snapshots never share one
(`dataclasses.replace` of a snapshot makes a fresh one too). No cache keyed by `id()` or by a generation is needed.

The pattern, for any state derived from a snapshot and computed lazily once:

    REQUIREMENTS: Slot[Inferred] = Slot("inferred requirements")          # at module level, next to the code
    inferred = index.derived.get(REQUIREMENTS, None, lambda: infer(index))  # computed once per snapshot

A slot with keys (a principal's visibility key, a provider format) keeps at most `max_keys` of them, least
recently used first out. A `carried` slot's entries are handed to the snapshot that follows this one by a change
(`SearchIndex.changed`, followed in snapshot/: same lineage, the same positions hold the same tools) as a starting
point; copied, never shared. Compute functions run outside the lock: two threads may compute the same value once
each, and the first stored wins, so a value read is always the one kept. A `single_flight` slot, for a costly value,
is computed by the first thread that asks; the others wait for its value (if it fails, the next one tries).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

Value = TypeVar("Value")
DEFAULT_MAX_KEYS = 256  # principals (visibility keys) whose state is kept per snapshot


@dataclass(frozen=True, eq=False)
class Slot(Generic[Value]):
    """One kind of state derived from a snapshot. Slots compare by identity: declare each once, at module level."""

    name: str
    max_keys: int | None = DEFAULT_MAX_KEYS  # None: one entry per key the snapshot has (a tool's content hash)
    carried: bool = False  # handed on to the snapshot that follows this one by a change
    single_flight: bool = False  # computed by one thread at a time: the others wait for its value


@dataclass(eq=False)
class _Flight:
    """One thread computing a single-flight slot's value for a key; the others wait until it is done."""

    done: threading.Event = field(default_factory=threading.Event)


class Derived:
    """The state derived from one snapshot, by slot and key; thread-safe."""

    def __init__(self) -> None:
        self._slots: dict[Slot[Any], OrderedDict[Hashable, Any]] = {}
        self._flights: dict[tuple[Slot[Any], Hashable], _Flight] = {}
        self._lock = threading.Lock()

    def get(self, slot: Slot[Value], key: Hashable, compute: Callable[[], Value]) -> Value:
        """The value of `slot` for `key`, computed by `compute` the first time it is asked for."""
        found, value = self.peek(slot, key)
        if found:
            return value
        if not slot.single_flight:
            return self.put(slot, key, compute())
        while True:
            with self._lock:
                entries = self._slots.get(slot)
                if entries is not None and key in entries:
                    entries.move_to_end(key)
                    return cast(Value, entries[key])
                flight = self._flights.get((slot, key))
                leading = flight is None
                if flight is None:
                    flight = self._flights[(slot, key)] = _Flight()
            if not leading:
                flight.done.wait()
                continue  # its value is kept (or, if it failed, this thread tries)
            try:
                return self.put(slot, key, compute())
            finally:
                with self._lock:
                    del self._flights[(slot, key)]
                flight.done.set()

    def peek(self, slot: Slot[Value], key: Hashable) -> tuple[bool, Value]:
        """(whether `slot` holds a value for `key`, the value) without computing it."""
        with self._lock:
            entries = self._slots.get(slot)
            if entries is None or key not in entries:
                return False, cast(Value, None)
            entries.move_to_end(key)
            return True, cast(Value, entries[key])

    def put(self, slot: Slot[Value], key: Hashable, value: Value) -> Value:
        """Keep `value` unless another thread kept one first; returns the value kept."""
        with self._lock:
            entries = self._slots.setdefault(slot, OrderedDict())
            if key in entries:
                return cast(Value, entries[key])
            self._keep(slot, entries, key, value)
            return value

    def replace(self, slot: Slot[Value], key: Hashable, value: Value) -> None:
        """Keep `value` in place of what `slot` held for `key` (a carried slot's latest value)."""
        with self._lock:
            self._keep(slot, self._slots.setdefault(slot, OrderedDict()), key, value)

    @staticmethod
    def _keep(slot: Slot[Any], entries: OrderedDict[Hashable, Any], key: Hashable, value: Any) -> None:
        entries[key] = value
        entries.move_to_end(key)
        while slot.max_keys is not None and len(entries) > slot.max_keys:
            entries.popitem(last=False)

    def follow(self, previous: Derived) -> None:
        """Start from `previous`'s carried slots (the snapshot this one follows by a change): copies of them."""
        with previous._lock:
            carried = {slot: OrderedDict(entries) for slot, entries in previous._slots.items() if slot.carried}
        with self._lock:
            for slot, entries in carried.items():
                self._slots.setdefault(slot, entries)

    def __len__(self) -> int:
        """Entries held, over every slot."""
        with self._lock:
            return sum(len(entries) for entries in self._slots.values())
