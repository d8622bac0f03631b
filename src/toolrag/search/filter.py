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
    """Masks per (snapshot, tenant, scopes), cached: principals that share tenant and scopes share a mask."""

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[object, ...], BoolArray | None] = OrderedDict()
        self._lock = threading.Lock()

    def mask(self, index: SearchIndex, principal: Principal) -> BoolArray | None:
        key = (index.generation, id(index), principal.visibility_key)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        mask = compute_mask(index, principal)
        with self._lock:
            self._cache[key] = mask
            while len(self._cache) > _MAX_CACHED_PRINCIPALS:
                self._cache.popitem(last=False)
        return mask


def compute_mask(index: SearchIndex, principal: Principal) -> BoolArray | None:
    """Without name rules only restricted tools need a check: a tool without scopes or tenants is visible to all."""
    checked = range(index.size) if principal.has_name_rules else (int(p) for p in index.restricted)
    hidden = [p for p in checked if not principal.can_use(index.tools[p])]
    if not hidden:
        return None
    mask = np.ones(index.size, dtype=np.bool_)
    mask[hidden] = False
    return mask
