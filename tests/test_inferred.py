"""Requirements inferred from schemas (search/inferred.py): matched by name, type and meaning inside blocks of
parameter-name tokens, scored again only where the catalog changed, and walked by search like declared ones, where a
declared requirement wins and a producer the principal may not use is never proposed."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from toolrag import Principal, SearchConfig, Tool, ToolRegistry
from toolrag.search import complete, inferred
from toolrag.search.derived import Derived
from toolrag.search.inferred import InferredRelations, infer

from .conftest import RETRIEVAL, CountingEmbedder

ANYONE = Principal(scopes=frozenset({"*"}))


def needs(tool_name: str, description: str, /, **parameters: tuple[str, str]) -> Tool:
    properties = {p: {"type": kind, "description": text} for p, (kind, text) in parameters.items()}
    schema = {"type": "object", "properties": properties, "required": list(parameters)}
    return Tool(name=tool_name, description=description, input_schema=schema)


def returns(tool: Tool, **fields: tuple[str, str]) -> Tool:
    properties = {f: {"type": kind, "description": text} for f, (kind, text) in fields.items()}
    return tool.model_copy(update={"output_schema": {"type": "object", "properties": properties}})


def catalog() -> list[Tool]:
    find = returns(
        needs("find_playlists", "Search playlists by their title.", title=("string", "words of the playlist title")),
        playlist_id=("string", "the unique identifier of the playlist found"),
    )
    play = needs("play_playlist", "Play a playlist.", playlistId=("string", "the identifier of the playlist to play"))
    count = returns(
        needs("count_playlists", "How many playlists a user has.", user=("string", "the user's name")),
        playlist_id=("integer", "the number of playlists"),
    )
    described = needs(
        "create_playlist", "Create an empty playlist and return the playlist ID.", label=("string", "what to call it")
    )
    weather = needs("get_weather", "The weather at a place.", city=("string", "the city to report on"))
    return [find, play, count, described, weather]


def edges(relations: InferredRelations, consumer: str) -> list[tuple[str, str, str]]:
    return [(e.producer, e.parameter, e.output) for e in relations.of(consumer)]


def test_a_required_parameter_is_matched_to_what_other_tools_return_by_name_type_and_meaning() -> None:
    relations = infer(catalog())
    found = edges(relations, "play_playlist")
    # camelCase and snake_case, the output schema and the description ("return the playlist ID") all match ...
    assert ("find_playlists", "playlistId", "playlist_id") in found
    assert ("create_playlist", "playlistId", "playlist_id") in found
    # ... but an integer count of playlists never fills a string id, and nothing fills an unrelated city.
    assert all(producer != "count_playlists" for producer, _, _ in found)
    assert relations.of("get_weather") == ()
    best = relations.of("play_playlist")[0]
    assert best.producer == "find_playlists" and 0 < best.confidence <= 1  # the one whose meaning matches too
    assert best.requirement().tool == "find_playlists" and best.requirement().parameter == "playlistId"


def test_blocking_scores_only_pairs_that_share_a_name_token(monkeypatch: Any) -> None:
    tools = catalog() + [
        returns(
            needs(f"tool_{n}", f"Tool number {n}.", **{f"thing_{n}": ("string", "a thing")}),
            **{f"other_{n}": ("string", "x")},
        )
        for n in range(200)
    ]
    scored: list[tuple[str, str]] = []
    real = inferred.match

    def counting(parameter: inferred.Slot, produced: inferred.Slot) -> float:
        scored.append((parameter.tool, produced.tool))
        return real(parameter, produced)

    monkeypatch.setattr(inferred, "match", counting)
    relations = infer(tools)
    assert relations.compared == len(scored)
    # 205 consumers and 204 producers: all pairs would be ~40,000; the 200 unrelated tools share no block.
    assert len(scored) < 20
    assert all(a.startswith(("play", "find", "count", "create")) for a, _ in scored)


def anyone(name: str) -> bool:
    return True


def test_declared_requirements_win_and_strong_edges_are_required() -> None:
    tools = catalog()
    play = Tool(**(tools[1].model_dump() | {"requires": [{"tool": "create_playlist", "parameter": "playlistId"}]}))
    relations = infer(tools)
    wanted = relations.seen_by(anyone).requirements(play, anyone)
    assert [(r.tool, r.parameter, r.optional) for r in wanted] == [("create_playlist", "playlistId", False)]
    undeclared = relations.seen_by(anyone).requirements(tools[1], anyone)
    assert [r.tool for r in undeclared] == ["find_playlists"]
    assert undeclared[0].optional is (relations.of("play_playlist")[0].confidence < inferred.STRONG)


def test_a_hidden_producer_is_passed_over_for_the_next_as_if_it_did_not_exist() -> None:
    tools = catalog()
    relations = infer(tools)
    hidden = {"find_playlists"}

    def shown(name: str) -> bool:
        return name not in hidden

    unusable = relations.seen_by(anyone).requirements(tools[1], shown)  # seen, but not to be used (rejected)
    unseen = relations.seen_by(shown).requirements(tools[1], anyone)
    without = infer([t for t in tools if t.name not in hidden]).seen_by(anyone).requirements(tools[1], anyone)
    assert [r.tool for r in unusable] == [r.tool for r in unseen] == [r.tool for r in without] == ["create_playlist"]
    assert relations.seen_by(anyone).requirements(tools[1], lambda name: False) == []


def test_only_what_changed_is_scored_again_and_gives_what_a_fresh_inference_gives() -> None:
    tools = catalog()
    first = infer(tools)
    assert infer(tools, previous=first).compared == 0  # nothing changed, nothing scored
    weather = needs("get_weather", "The weather at a place, now with forecasts.", city=("string", "the city"))
    update = infer([*tools[:4], weather], previous=first)
    assert update.compared == 0  # its blocks hold no producer: nothing to score
    reworded = returns(tools[2], playlist_id=("string", "the identifier of the playlist counted"))
    changed = [tools[0], tools[1], reworded, tools[3], tools[4]]
    update = infer(changed, previous=first)
    fresh = infer(changed)
    assert update.edges == fresh.edges
    assert 0 < update.compared < fresh.compared  # play_playlist is scored against count_playlists only
    removed = infer([t for t in changed if t.name != "find_playlists"], previous=update)
    assert removed.edges == infer([t for t in changed if t.name != "find_playlists"]).edges


def test_search_brings_an_inferred_producer_but_never_one_the_principal_may_not_use(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    tools = catalog()
    tools[0] = tools[0].model_copy(update={"tenants": ["globex"]})  # find_playlists: globex only
    registry = ToolRegistry(
        tmp_path / "i.db", embedder, RETRIEVAL.model_copy(update={"k": 1, "infer_requirements": True})
    )
    registry.register_many(tools)
    request = "play my playlist"
    globex = registry.search(request, Principal(tenant="globex"))
    assert [r.name for r in globex][-1] == "play_playlist"
    assert "find_playlists" in [r.name for r in globex]
    assert (
        next(r for r in globex if r.name == "find_playlists").needed_as() == "needed by play_playlist for `playlistId`"
    )
    acme = registry.search(request, Principal(tenant="acme"))
    assert all("find_playlists" not in r.model_dump_json() for r in acme)
    off = ToolRegistry(registry.store, embedder, RETRIEVAL.model_copy(update={"k": 1, "infer_requirements": False}))
    assert [r.name for r in off.search(request, Principal(tenant="globex"))] == ["play_playlist"]
    assert SearchConfig().infer_requirements is False  # off by default: docs/benchmarks.md


def test_issue48_inference_work_is_bounded_by_the_tools_not_by_their_schemas(monkeypatch: Any) -> None:
    """R4-3: 20 producers of 256 output fields and 2 consumers of 150 required parameters whose names hold every
    producer's word: each parameter met every field, 1.5 million pairs, each tokenizing both descriptions."""
    marks = [f"mark{chr(97 + n)}x" for n in range(20)]
    tools = [
        returns(
            needs(f"producer_{n}", "Produces many values."),
            **{f"{mark}_field{chr(97 + f // 26)}{chr(97 + f % 26)}x": ("string", f"value {f}") for f in range(256)},
        )
        for n, mark in enumerate(marks)
    ]
    tools += [
        needs(
            f"consumer_{c}",
            "Needs many values.",
            **{
                f"{'_'.join(marks)}_input{chr(97 + p // 26)}{chr(97 + p % 26)}x": ("string", "a value")
                for p in range(150)
            },
        )
        for c in range(2)
    ]
    compared: list[int] = []
    real = inferred.word_overlap

    def counting(first: Any, second: Any) -> float:
        compared.append(1)
        return real(first, second)

    monkeypatch.setattr(inferred, "word_overlap", counting)
    relations = infer(tools)
    # At most 32 parameters a consumer, 6 words of each name, 256 fields a block: 2 * 32 * 6 * 256 = 98,304 pairs.
    assert relations.compared <= 100_000
    assert len(compared) <= relations.compared  # descriptions are compared only for names that could reach the floor
    assert infer(tools, previous=relations).compared == 0


def test_issue48_another_tenants_hidden_tools_do_not_change_a_tenants_inferred_relations(
    tmp_path: Path, embedder: CountingEmbedder, monkeypatch: Any
) -> None:
    """R4-6: a block crowded by globex's tools took acme's inferred relation away, which told acme they existed.
    Crowding is counted over the tools the principal sees: acme gets what a registry of its tools alone gives."""
    monkeypatch.setattr(inferred, "MAX_BLOCK", 2)  # globex needs 2 producers, not 256, to crowd `playlist`
    find, play = catalog()[:2]
    globex = [
        returns(needs(f"globex_export_{n}", "Export a playlist."), playlist_id=("string", "the exported playlist"))
        for n in range(2)
    ]
    globex = [tool.model_copy(update={"tenants": ["globex"]}) for tool in globex]
    acme = Principal(tenant="acme")
    config = RETRIEVAL.model_copy(update={"k": 1, "infer_requirements": True})
    registry = ToolRegistry(tmp_path / "i.db", embedder, config)
    registry.register_many([find, play])

    def seen() -> tuple[list[tuple[str, str]], list[str]]:
        relations = registry.relations.of("play_playlist", acme.can_use)
        searched = registry.search("play my playlist", acme)
        return [(r.other, r.source) for r in relations], [r.name for r in searched]

    alone = seen()
    assert alone == ([("find_playlists", "inferred")], ["find_playlists", "play_playlist"])
    registry.register_many(globex)
    assert seen() == alone
    # Crowded for a principal who sees globex's tools too: none of the three producers is proposed to it.
    both = Principal(tenant="globex")
    assert registry.relations.of("play_playlist", both.can_use) == []
    assert [r.name for r in registry.search("play my playlist", both)] == ["play_playlist"]


def test_relations_seen_by_a_principal_are_those_a_registry_of_its_tools_alone_infers(monkeypatch: Any) -> None:
    monkeypatch.setattr(inferred, "MAX_BLOCK", 3)
    kinds = ["playlist", "track", "album"]
    tools = catalog() + [
        returns(
            needs(f"{kind}_tool_{n}", f"Work on a {kind}.", **{f"{kind}_id": ("string", f"the {kind} to work on")}),
            **{f"{kind}_id": ("string", f"the {kind} made"), "status": ("string", "how it went")},
        )
        for n in range(4)
        for kind in kinds
    ]
    everything = infer(tools)
    assert {"playlist", "track", "album", "status"} <= everything.crowded
    for seed in range(20):
        rng = random.Random(seed)
        mine = [tool for tool in tools if rng.random() < 0.5]
        names = {tool.name for tool in mine}
        alone, seen = infer(mine), everything.seen_by(names.__contains__)
        assert {tool.name: seen.of(tool.name) for tool in mine} == {tool.name: alone.of(tool.name) for tool in mine}


def test_issue48_concurrent_readers_share_one_inference(
    tmp_path: Path, embedder: CountingEmbedder, monkeypatch: Any
) -> None:
    """R4-3: two concurrent GETs ran two inferences. Now the first computes, the others wait for its result."""
    registry = ToolRegistry(tmp_path / "i.db", embedder, RETRIEVAL)
    registry.register_many(catalog())
    index = registry.snapshot()
    callers = 8
    calls: list[int] = []
    missed: list[int] = []  # callers that found no inference kept and went on to get one
    state = threading.Condition()
    real_infer, real_peek = complete.infer, Derived.peek

    def peek(self: Derived, slot: Any, key: Any) -> Any:
        found = real_peek(self, slot, key)
        if slot is complete.INFERRED and not found[0]:
            with state:
                missed.append(1)
                state.notify_all()
        return found

    def slow_infer(*args: Any, **kwargs: Any) -> InferredRelations:
        with state:
            calls.append(1)
            state.notify_all()
            # The first inference ends once every caller has looked and found none (or another one started).
            everyone = state.wait_for(lambda: len(missed) == callers or len(calls) > 1, timeout=30)
            assert everyone, "a caller never asked"
        return real_infer(*args, **kwargs)

    monkeypatch.setattr(Derived, "peek", peek)
    monkeypatch.setattr(complete, "infer", slow_infer)
    with ThreadPoolExecutor(callers) as pool:
        listed = list(pool.map(lambda _: registry.relations.of("play_playlist", lambda tool: True), range(callers)))
    assert len(calls) == 1
    assert all(found == listed[0] for found in listed) and listed[0]
    assert registry.snapshot() is index


def test_issue48_a_new_snapshot_is_inferred_in_the_background_only_when_search_uses_it(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    for used in (False, True):
        config = RETRIEVAL.model_copy(update={"infer_requirements": used})
        registry = ToolRegistry(tmp_path / f"{used}.db", embedder, config)
        registry.register_many(catalog())
        index = registry.snapshot()  # the new snapshot, read by no search
        for thread in [t for t in threading.enumerate() if t.name == "toolrag-inference"]:
            thread.join(30)
        assert index.derived.peek(complete.INFERRED, None)[0] is used
