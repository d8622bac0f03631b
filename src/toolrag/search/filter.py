"""The deterministic visibility filter: which tools of a snapshot a principal may see.

The result is a boolean mask over the snapshot, or None when every tool is visible. Nothing downstream scores,
ranks or counts a tool outside the mask.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from toolrag.model import Principal
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray

_MAX_CACHED_PRINCIPALS = 256


class VisibilityFilter:
    """Masks per (snapshot, tenant, scopes), cached: principals that share tenant and scopes share a mask. A
    snapshot that follows a change of the one before (same lineage) extends that one's mask: only the appended
    positions are checked."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[object, ...], BoolArray | None] = OrderedDict()
        self._latest: OrderedDict[tuple[object, ...], tuple[int, int, BoolArray | None]] = OrderedDict()
        self._lock = threading.Lock()

    def mask(self, index: SearchIndex, principal: Principal) -> BoolArray | None:
        key = (index.serial, principal.visibility_key)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
            latest = self._latest.get(principal.visibility_key)
        if latest is not None and latest[0] == index.lineage and latest[1] <= index.size:
            mask = extended_mask(index, principal, latest[2], latest[1])
        else:
            mask = compute_mask(index, principal)
        with self._lock:
            self._cache[key] = mask
            self._latest[principal.visibility_key] = (index.lineage, index.size, mask)
            self._latest.move_to_end(principal.visibility_key)
            for cache in (self._cache, self._latest):
                while len(cache) > _MAX_CACHED_PRINCIPALS:
                    cache.popitem(last=False)
        return mask


def compute_mask(index: SearchIndex, principal: Principal) -> BoolArray | None:
    """Without name rules only restricted tools need a check: a tool without scopes or tenants is visible to all.
    Positions whose tool was replaced or removed since the snapshot was built (`index.live`) are never visible."""
    return extended_mask(index, principal, None, 0)


def extended_mask(
    index: SearchIndex, principal: Principal, earlier: BoolArray | None, checked: int
) -> BoolArray | None:
    """The mask of `index`, given `earlier`, the mask of the first `checked` positions in a snapshot of the same
    lineage (positions there hold the same tools; only `index.live` may have dropped some since)."""
    first_restricted = int(np.searchsorted(index.restricted, checked))
    hidden = [
        int(position)
        for position, restriction in zip(
            index.restricted[first_restricted:].tolist(), index.restrictions[first_restricted:], strict=True
        )
        if not principal.meets(restriction.scopes, restriction.tenants)
    ]
    if principal.has_name_rules:
        hidden.extend(p for p in range(checked, index.size) if not principal.may_name(index.names[p]))
    if not hidden and earlier is None and index.live is None:
        return None
    mask = np.ones(index.size, dtype=np.bool_)
    if earlier is not None:
        mask[:checked] = earlier[:checked]
    if index.live is not None:
        mask &= index.live
    mask[hidden] = False
    return mask
