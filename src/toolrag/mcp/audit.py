"""What callers' requests write to the audit log, within a bound no caller sets.

A refused call (a principal asking for a tool it may not use) and a result flagged or read in part by the scan each
leave an audit row for the operator. Written one by one, a caller calling denied names in a loop wrote a row a call
(3,000 calls: 3,000 rows, 870 kB, kept for ever, each written on the caller's path). So rows of one kind (an action
and its principal, or an action and its tool when no principal is named) are written at most once a window; the
others are counted, and the count is written as one row once the window is over (at the next row of any kind).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from toolrag.model import utc_now
from toolrag.store.base import AuditEntry

WINDOW_SECONDS = 60.0
MAX_KINDS = 10_000  # kinds counted at once; past it, new kinds share one count per action


@dataclass
class _Window:
    started: float
    first: AuditEntry
    more: int = 0


class BoundedAudit:
    """An audit writer (`write`: the store's `audit`) that writes each kind of row at most once a window."""

    def __init__(self, write: Callable[[Sequence[AuditEntry]], None], clock: Callable[[], float] = time.monotonic):
        self.write = write
        self.clock = clock
        self._windows: dict[tuple[str, str | None, str | None], _Window] = {}
        self._swept = clock()
        self._lock = threading.Lock()

    def __call__(self, entries: Sequence[AuditEntry]) -> None:
        now = self.clock()
        with self._lock:
            written = self._sweep(now) if now - self._swept >= WINDOW_SECONDS else []
            for entry in entries:
                kind = (entry.action, entry.principal, None if entry.principal else entry.tool)
                if kind not in self._windows and len(self._windows) >= MAX_KINDS:
                    kind = (entry.action, None, None)
                window = self._windows.get(kind)
                if window is None:
                    self._windows[kind] = _Window(now, entry)
                    written.append(entry)
                else:
                    window.more += 1
        if written:
            self.write(written)

    def _sweep(self, now: float) -> list[AuditEntry]:
        """The counts of the windows that are over, as rows; those windows closed."""
        self._swept = now
        over = [kind for kind, window in self._windows.items() if now - window.started >= WINDOW_SECONDS]
        counted = [self._windows.pop(kind) for kind in over]
        return [
            replace(
                window.first,
                detail=f"{window.more:,} more like this in the last {WINDOW_SECONDS:.0f} s, not written one by one",
                tool=window.first.tool if window.first.principal is None else None,
                at=utc_now(),
            )
            for window in counted
            if window.more
        ]
