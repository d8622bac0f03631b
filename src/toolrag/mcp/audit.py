"""What callers' requests write to the audit log, within a bound no caller sets.

A refused call (a principal asking for a tool it may not use) and a result flagged or read in part by the scan each
leave an audit row for the operator. Written one by one, a caller calling denied names in a loop wrote a row a call
(3,000 calls: 3,000 rows, 870 kB, kept for ever, each written on the caller's path). So rows of one kind (an action
and its principal, or an action and its tool when no principal is named) are written at most once a window; the
others are counted, with what they were about (the first few tools, or principals), and written as one row when the
window is over (by a timer, and when the gateway stops).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from toolrag.model import utc_now
from toolrag.store.base import AuditEntry

WINDOW_SECONDS = 60.0
MAX_KINDS = 10_000  # kinds counted at once; past it, the rows of new kinds share one count per action
NAMED = 8  # what a count row names of the rows it stands for, at most


@dataclass
class _Window:
    started: float
    first: AuditEntry
    more: Counter[str] = field(default_factory=Counter)  # what the rows not written were about, and how many


Kind = tuple[str, str | None, str | None]


class BoundedAudit:
    """An audit writer (`write`: the store's `audit`) that writes each kind of row at most once a window."""

    def __init__(self, write: Callable[[Sequence[AuditEntry]], None], clock: Callable[[], float] = time.monotonic):
        self.write = write
        self.clock = clock
        self._windows: dict[Kind, _Window] = {}
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def __call__(self, entries: Sequence[AuditEntry]) -> None:
        now = self.clock()
        with self._lock:
            written = self._over(now)
            for entry in entries:
                kind, about = self._kind(entry)
                window = self._windows.get(kind)
                if window is None:
                    self._windows[kind] = _Window(now, entry)
                    written.append(entry)
                    continue
                if len(window.more) < NAMED or about in window.more:
                    window.more[about] += 1
                else:
                    window.more["others"] += 1
                self._wake_at(window.started + WINDOW_SECONDS - now)
        if written:
            self.write(written)

    def flush(self) -> None:
        """Write every count now (the gateway stops)."""
        with self._lock:
            written = self._over(float("inf"))
        if written:
            self.write(written)

    def _kind(self, entry: AuditEntry) -> tuple[Kind, str]:
        """Which count `entry` goes to, and what it says it was about."""
        kind: Kind = (entry.action, entry.principal, None if entry.principal else entry.tool)
        if kind in self._windows or len(self._windows) < MAX_KINDS:
            return kind, (entry.tool or "") if entry.principal else entry.detail[:120]
        return (entry.action, None, None), f"{entry.principal}: {entry.tool}"  # never under another's name

    def _over(self, now: float) -> list[AuditEntry]:
        """The counts of the windows that are over, as rows; those windows closed."""
        over = [kind for kind, window in self._windows.items() if now - window.started >= WINDOW_SECONDS]
        counted = [(kind, self._windows.pop(kind)) for kind in over]
        return [_count_row(kind, window) for kind, window in counted if window.more]

    def _wake_at(self, delay: float) -> None:
        """Have a timer write the counts once `delay` has passed (one timer at a time)."""
        if self._timer is not None and self._timer.is_alive():
            return
        self._timer = threading.Timer(max(delay, 0.0), self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        now = self.clock()
        with self._lock:
            written = self._over(now)
            pending = [w.started + WINDOW_SECONDS - now for w in self._windows.values() if w.more]
            self._timer = None
            if pending:
                self._wake_at(min(pending))
        if written:
            self.write(written)


def _count_row(kind: Kind, window: _Window) -> AuditEntry:
    """One row for the rows a window did not write: the kind's own principal or tool, never another's."""
    _, principal, tool = kind
    total = sum(window.more.values())
    named = ", ".join(f"{about or '-'} ({count:,})" for about, count in window.more.most_common())
    detail = f"{total:,} more like this in the last {WINDOW_SECONDS:.0f} s, not written one by one: {named}"
    server = window.first.server if tool is not None else None
    return replace(window.first, detail=detail, tool=tool, server=server, principal=principal, at=utc_now())
