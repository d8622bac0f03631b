"""What is derived from a snapshot belongs to it (search/derived.py): computed once per snapshot, dropped with it, never
shared between two snapshots."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace
from pathlib import Path
from typing import Any

from toolrag import Principal, ToolRegistry
from toolrag.inject.budget import CATALOG_TOKENS, TOOL_TOKENS
from toolrag.search.decide import SMALL_TALK_LEVELS, SMALL_TALK_REFERENCE
from toolrag.search.derived import Derived, Slot
from toolrag.search.filter import LATEST_MASKS, MASKS, visibility_mask
from toolrag.search.relations import REQUIREMENTS
from toolrag.store.sqlite import SQLiteStore

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder, make_tool

ACME = Principal(scopes=frozenset({"*"}), tenant="acme")


def _searched(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    registry = ToolRegistry(SQLiteStore(tmp_path / "tools.db"), embedder, RETRIEVAL)
    registry.register_many(SAMPLE_TOOLS)
    registry.select("will it rain tomorrow in Lviv", ACME)
    return registry


def test_a_new_registry_version_starts_with_no_derived_state_and_builds_it_again(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    registry = _searched(tmp_path, embedder)
    before = registry.snapshot()
    assert all(before.derived.peek(slot, key)[0] for slot, key in _keys(ACME))
    assert before.derived.peek(REQUIREMENTS, before.position_of("weather.forecast"))[0]

    registry.register(make_tool("notes.add", "Add a note to the notebook."))
    after = registry.snapshot()
    assert after is not before and after.derived is not before.derived
    # Nothing computed for the old version is read for the new one; only the carried starting points came over.
    assert not any(after.derived.peek(slot, key)[0] for slot, key in _keys(ACME) if not slot.carried)

    registry.select("will it rain tomorrow in Lviv", ACME)
    assert all(after.derived.peek(slot, key)[0] for slot, key in _keys(ACME))
    assert registry.catalog_tokens(ACME) > before.derived.get(CATALOG_TOKENS, (ACME.visibility_key, "openai"), int)


def test_two_snapshots_never_share_derived_state(tmp_path: Path, embedder: CountingEmbedder) -> None:
    registry = _searched(tmp_path, embedder)
    first = registry.snapshot()
    copy = replace(first)  # the same data, another snapshot (as `embed_missing` opens one at the same generation)
    assert copy.derived is not first.derived and len(copy.derived) == 0

    registry.register(make_tool("notes.add", "Add a note to the notebook."))
    following = registry.snapshot()
    mask = visibility_mask(following, ACME)
    assert mask is not None and len(mask) == following.size > first.size
    # A carried slot is copied into the following snapshot, not shared: what one keeps the other does not see.
    following.derived.replace(TOOL_TOKENS, ("only here", "openai"), 1)
    assert not first.derived.peek(TOOL_TOKENS, ("only here", "openai"))[0]
    assert following.derived.peek(LATEST_MASKS, ACME.visibility_key)[1][0] == following.size


def test_a_slot_keeps_its_latest_keys_and_computes_each_once() -> None:
    derived, calls = Derived(), []
    slot: Slot[int] = Slot("squares", max_keys=2)
    for key in (1, 2, 1, 3, 1):
        derived.get(slot, key, lambda key=key: calls.append(key) or key * key)
    assert calls == [1, 2, 3]  # 1 stays (used last), 2 goes first
    assert derived.peek(slot, 1) == (True, 1) and not derived.peek(slot, 2)[0]


def _keys(principal: Principal) -> list[tuple[Slot[Any], Hashable]]:
    """(slot, key) of what a search and a selection derive for `principal`, one per kind."""
    visibility = principal.visibility_key
    return [
        (MASKS, visibility),
        (SMALL_TALK_REFERENCE, None),
        (SMALL_TALK_LEVELS, (visibility, RETRIEVAL.small_talk_quantile)),
        (CATALOG_TOKENS, (visibility, "openai")),
    ]
