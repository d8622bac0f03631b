"""The deterministic visibility filter: which tools of a snapshot a principal may see.

The result is a boolean mask over the snapshot, or None when every tool is visible. Nothing downstream scores,
ranks or counts a tool outside the mask.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolrag.model import SYNCED_SOURCE_PREFIX, Principal, Tool
from toolrag.search.derived import Slot
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray
from toolrag.store.switches import DisabledServer

# Per snapshot, by the principal's visibility key: principals that share tenant and scopes share a mask.
MASKS: Slot[BoolArray | None] = Slot("visibility masks")
# The latest mask of each visibility key in this lineage, with the size it was computed at: a snapshot that follows
# a change of the one before extends that mask, checking only the appended positions.
LATEST_MASKS: Slot[tuple[int, BoolArray | None]] = Slot("latest visibility masks", carried=True)


# The upstreams an operator switched off, read once per snapshot: every switch moves the generation.
SWITCHED_OFF: Slot[dict[str, DisabledServer]] = Slot("upstream servers switched off")


def switched_off(index: SearchIndex, read: Callable[[], list[DisabledServer]]) -> dict[str, DisabledServer]:
    """The switched-off upstreams by name, as of `index` (`read()`: the store's switches, read once for it)."""
    return index.derived.get(SWITCHED_OFF, None, lambda: {d.server: d for d in read()})


def served_as(principal: Principal, disabled: dict[str, DisabledServer]) -> Principal:
    """The principal with the tools of disabled servers denied: every search, listing and schema leaves them out
    before scoring (k fills with other tools), and no call resolves to them, whichever way in."""
    if not disabled:
        return principal
    denied = principal.deny_tools | {f"{server}.*" for server in disabled}
    return principal.model_copy(update={"deny_tools": frozenset(denied)})


def switches_seen(
    index: SearchIndex, principal: Principal, disabled: dict[str, DisabledServer], everything: bool
) -> dict[str, DisabledServer]:
    """The switched-off servers a principal may be told of: those with a tool it could use were they on, each
    without who switched it off or why; `everything` (admins): all of them, whole. Anyone else learns nothing of a
    switch (as a call refused for it says nothing, mcp/gateway.py)."""
    if everything or not disabled:
        return disabled
    usable = {tool.name.partition(".")[0] for tool in partition(index, principal)[0]}
    return {
        server: DisabledServer(server, disabled_at=d.disabled_at) for server, d in disabled.items() if server in usable
    }


def servers_seen(index: SearchIndex, principal: Principal) -> dict[str, int]:
    """The upstream servers a principal may be shown, each with how many of its tools it could use were it on: a
    server none of whose tools it could use is not even named to it (its tenants, its size, its errors)."""
    seen: dict[str, int] = {}
    for tool in partition(index, principal)[0]:
        if tool.source.startswith(SYNCED_SOURCE_PREFIX):
            server = tool.name.partition(".")[0]
            seen[server] = seen.get(server, 0) + 1
    return seen


def may_use_named(index: SearchIndex, principal: Principal, name: str) -> bool:
    """Whether the principal may use the live tool named exactly `name`: read from the snapshot alone, the same
    work for a tool it may not use as for a name no tool has."""
    position = index.position_of(name)
    mask = visibility_mask(index, principal)
    return position is not None and (mask is None or bool(mask[position]))


def visibility_mask(index: SearchIndex, principal: Principal) -> BoolArray | None:
    """The positions of `index` the principal may see (None: all), computed once per snapshot and visibility key."""
    key = principal.visibility_key
    return index.derived.get(MASKS, key, lambda: _mask(index, principal))


def partition(index: SearchIndex, principal: Principal) -> tuple[list[Tool], list[Tool]]:
    """(the live tools of `index` the principal may use, the live tools it may not), each as the principal's
    tenant is shown it (`Tool.for_tenant`: its description, if it has one; never another tenant's)."""
    mask = visibility_mask(index, principal)
    tenant = principal.tenant
    if mask is None:
        return [tool.for_tenant(tenant) for tool in index.tools], []
    hidden = ~mask if index.live is None else ~mask & index.live
    return [index.tools[i].for_tenant(tenant) for i in np.flatnonzero(mask).tolist()], [
        index.tools[i].for_tenant(tenant) for i in np.flatnonzero(hidden).tolist()
    ]


def _mask(index: SearchIndex, principal: Principal) -> BoolArray | None:
    found, latest = index.derived.peek(LATEST_MASKS, principal.visibility_key)
    if found and latest[0] <= index.size:
        mask = extended_mask(index, principal, latest[1], latest[0])
    else:
        mask = compute_mask(index, principal)
    index.derived.replace(LATEST_MASKS, principal.visibility_key, (index.size, mask))
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
