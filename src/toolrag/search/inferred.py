"""Requirements inferred from schemas: a required parameter of one tool that another tool produces (a field of its
`output_schema`, or "returns the playlist id" in its description) makes the producer a prerequisite of the consumer.

Pairs are matched by name, type and meaning, never all against all: parameters and produced fields are put in
blocks by their normalized name tokens (`playlist_id`, `playlistId` and "playlist ID" share the block `playlist`),
and only a parameter and a field of one block are scored. Each edge has a confidence; a strong one is required, the
others optional. Inference is incremental: a tool's producers are scored again only when it, or a tool producing
into one of its blocks, changed (content hashes of what inference reads).

Its work is bounded by the number of tools, not by what their schemas hold (issue 48, R4-3): a tool's first
MAX_PARAMETERS required parameters are matched, a name's first MAX_NAME_WORDS words read, a block of more than
MAX_BLOCK fields is not scored, and each description is read once, its first MAX_WORDS content words; so one tool's
parameters are scored against MAX_PARAMETERS * MAX_NAME_WORDS * MAX_BLOCK fields at most.

Which blocks are crowded depends on who looks (issue 48, R4-6): counted over every tool, another tenant's hidden
tools would crowd out a principal's relation, and its absence would tell the principal they exist. `infer` scores
the blocks crowded for nobody; `seen_by` adds, for one principal's tools, those its tools alone do not crowd.

This module only computes; search/relations.py walks the result, where a declared requirement wins over an inferred
one and a tool hidden from the principal is passed over for the next producer of the same parameter.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolrag.model import Requirement, Tool
from toolrag.search.text import split_identifier

MIN_CONFIDENCE = 0.55  # below it an edge is not kept (chosen on seal-tools' tuning half, docs/benchmarks.md)
STRONG = 0.9  # from it an inferred edge is a required one, not optional
# A block of more produced fields than this is not scored: a token that many tools return ("success", "status")
# says little about which one a parameter needs, and scoring it would grow with the square of the catalog.
MAX_BLOCK = 256
# Real catalogs stay far below these (seal-tools and bfcl: 9 required parameters a tool, 5 words a name, 47 content
# words a description at most); they bound what one tool's schema can make inference do.
MAX_PARAMETERS = 32
MAX_NAME_WORDS = 6
MAX_WORDS = 64
NAME_WEIGHT = 0.6  # confidence = NAME_WEIGHT * name overlap + (1 - NAME_WEIGHT) * meaning overlap
# Tokens that say what kind of value a name holds, not of what: they never make a block by themselves (every `*_id`
# would share one) but they still count in the name overlap once a block put two names together.
GENERIC = frozenset(
    re.findall(
        r"\w+",
        "id ids identifier name type data info information list value number num code key detail details result"
        " results status new current given specified the of a an to for by path url uri file token",
    )
)
_STOP = frozenset(
    re.findall(r"\w+", "the a an of to for by in on at and or with from is are be that this which e g eg etc")
)
_WORD = re.compile(r"[a-z0-9]+")
_RETURNS = re.compile(
    r"\breturns?\s+(?:the|a|an|its)\s+((?:[a-z]+\s+){0,2}?(?:id|identifier|url|token|key|path|code|name|number))\b",
    re.IGNORECASE,
)
_COMPATIBLE = {("integer", "number"), ("number", "integer")}


@dataclass(frozen=True)
class Slot:
    """A parameter a tool needs, or a field it produces: what matching reads of it."""

    tool: str
    name: str
    tokens: frozenset[str]
    kind: str | None  # JSON type; None: not said
    words: frozenset[str]  # the description's content words, read once: every pair the slot is in compares them


@dataclass(frozen=True)
class InferredEdge:
    """`producer`'s `output` can fill `consumer`'s required `parameter`, with this confidence (0 to 1)."""

    producer: str
    consumer: str
    parameter: str
    output: str
    confidence: float

    @property
    def strong(self) -> bool:
        return self.confidence >= STRONG

    def requirement(self) -> Requirement:
        return Requirement(tool=self.producer, parameter=self.parameter, optional=not self.strong)


@dataclass(frozen=True)
class InferredRelations:
    """Inferred producers of each consumer (lowercased name), best first per parameter, with what made them."""

    edges: dict[str, tuple[InferredEdge, ...]] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)  # what inference reads of each tool, hashed
    blocks: dict[str, frozenset[str]] = field(default_factory=dict)  # each tool's block keys, consumed or produced
    crowded: frozenset[str] = frozenset()  # blocks of more than MAX_BLOCK produced fields: not scored here
    compared: int = 0  # pairs scored by the run that made these relations (blocking: far fewer than all pairs)
    # What `seen_by` scores for a principal: the fields of each crowded block, and the parameters of the consumers
    # that have a crowded block (all of them, in order: edges are ranked by the consumer's parameters).
    crowded_fields: dict[str, tuple[Slot, ...]] = field(default_factory=dict)
    crowded_consumers: dict[str, tuple[Slot, ...]] = field(default_factory=dict)

    def of(self, consumer: str) -> tuple[InferredEdge, ...]:
        """Every producer found for `consumer`, whoever may see it, in blocks crowded for nobody."""
        return self.edges.get(consumer.lower(), ())

    def seen_by(self, visible: Callable[[str], bool]) -> SeenRelations:
        """The relations as a principal who sees (and may use) the tools `visible` accepts would find them in a
        registry of those tools alone."""
        return SeenRelations(self, visible)


class SeenRelations:
    """Inferred relations as one principal finds them: only producers it sees, and, in the blocks crowded over every
    tool, the fields of its visible tools scored when they are few enough. Computed lazily, per block and consumer;
    thread-safe (two threads may compute one consumer's edges once each, the same)."""

    def __init__(self, relations: InferredRelations, visible: Callable[[str], bool]) -> None:
        self._relations = relations
        self._visible = visible
        self._opened: dict[str, tuple[Slot, ...] | None] = {}  # crowded block: its visible fields (None: crowded)
        self._edges: dict[str, tuple[InferredEdge, ...]] = {}

    def of(self, consumer: str) -> tuple[InferredEdge, ...]:
        name = consumer.lower()
        found = self._edges.get(name)
        if found is None:
            found = self._edges[name] = self._found(name)
        return found

    def requirements(self, tool: Tool, usable: Callable[[str], bool]) -> list[Requirement]:
        """`tool`'s declared requirements, then per parameter it declares nothing for, its best inferred producer
        that is `usable` and not declared already: one that is not is passed over for the next, as if absent."""
        declared = {r.tool.lower() for r in tool.requires}
        covered = {r.parameter for r in tool.requires if r.parameter}
        inferred: dict[str, Requirement] = {}
        for edge in self.of(tool.name):
            if edge.parameter in covered or edge.parameter in inferred or edge.producer.lower() in declared:
                continue
            if usable(edge.producer):
                inferred[edge.parameter] = edge.requirement()
        ordered = sorted(inferred.values(), key=lambda r: r.optional)  # required before optional
        return [*tool.requires, *ordered]

    def _found(self, consumer: str) -> tuple[InferredEdge, ...]:
        edges = [edge for edge in self._relations.of(consumer) if self._visible(edge.producer)]
        parameters = self._relations.crowded_consumers.get(consumer)
        if not parameters:
            return tuple(edges)
        opened: dict[str, list[Slot]] = {}
        for key in _keys(parameters) & self._relations.crowded:
            fields = self._fields(key)
            if fields is not None:
                opened[key] = list(fields)
        if not opened:
            return tuple(edges)
        found, _ = _producers(list(parameters), opened)
        best: dict[tuple[str, str], InferredEdge] = {}
        for edge in [*edges, *found]:  # a producer's best field for a parameter, whichever block it came through
            kept = best.get((edge.parameter, edge.producer))
            if kept is None or edge.confidence > kept.confidence:
                best[(edge.parameter, edge.producer)] = edge
        return _ranked(list(best.values()), list(parameters))

    def _fields(self, key: str) -> tuple[Slot, ...] | None:
        """The visible fields of crowded block `key`, or None when they crowd it too."""
        if key not in self._opened:
            visible = tuple(s for s in self._relations.crowded_fields.get(key, ()) if self._visible(s.tool))
            self._opened[key] = visible if len(visible) <= MAX_BLOCK else None
        return self._opened[key]


def infer(
    tools: Sequence[Tool],
    previous: InferredRelations | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> InferredRelations:
    """The inferred requirements of `tools`. With `previous` (of an earlier version of the catalog) only pairs with
    a changed tool are scored: a consumer that changed against its blocks, any other against the changed producers
    of its blocks. `progress(done, total)` is called as consumers are scored."""
    consumed = {tool.name.lower(): consumed_slots(tool) for tool in tools}
    produced = {tool.name.lower(): produced_slots(tool) for tool in tools}
    hashes = {tool.name.lower(): relation_hash(tool) for tool in tools}
    blocks = {name: _keys(consumed[name]) | _keys(produced[name]) for name in hashes}
    consumers = sorted(name for name, slots in consumed.items() if slots)
    if previous is None:
        changed, touched = set(hashes), frozenset[str]()
    else:
        changed = {name for name, digest in hashes.items() if previous.hashes.get(name) != digest}
        changed |= previous.hashes.keys() - hashes.keys()
        touched = frozenset().union(
            *(blocks.get(n, frozenset()) | previous.blocks.get(n, frozenset()) for n in changed)
        )
    everyone = _by_key(slot for slots in produced.values() for slot in slots)
    crowded = frozenset(key for key, slots in everyone.items() if len(slots) > MAX_BLOCK)
    crowded_fields = {key: tuple(everyone.pop(key)) for key in crowded}
    crowded_consumers = {c: tuple(consumed[c]) for c in consumers if _keys(consumed[c]) & crowded}
    changed_only = {k: v for k, v in _by_key(s for n in changed for s in produced.get(n, [])).items() if k in everyone}
    # A block that became crowded, or no longer is, changes which pairs count: its consumers are scored afresh.
    regrouped = crowded ^ previous.crowded if previous else frozenset()
    stale = [c for c in consumers if c in changed or _keys(consumed[c]) & (touched | regrouped)]
    edges = {c: e for c, e in (previous.edges.items() if previous else ()) if c in hashes and c not in stale}
    compared = 0
    for done, consumer in enumerate(stale, 1):
        kept: list[InferredEdge] = []
        if previous is None or consumer in changed or _keys(consumed[consumer]) & regrouped:
            found, scored = _producers(consumed[consumer], everyone)
        else:  # unchanged: its edges from unchanged producers stand
            kept = [e for e in previous.edges.get(consumer, ()) if e.producer.lower() not in changed]
            found, scored = _producers(consumed[consumer], changed_only)
        compared += scored
        if kept or found:
            edges[consumer] = _ranked([*kept, *found], consumed[consumer])
        if progress is not None:
            progress(done, len(stale))
    return InferredRelations(edges, hashes, blocks, crowded, compared, crowded_fields, crowded_consumers)


def _producers(parameters: list[Slot], producers_by_key: dict[str, list[Slot]]) -> tuple[list[InferredEdge], int]:
    """The producers of each parameter among the fields of its blocks (a producer's best field for it), and how
    many pairs were scored."""
    edges: list[InferredEdge] = []
    scored = 0
    for parameter in parameters:
        candidates = {
            (slot.tool, slot.name): slot
            for key in _slot_keys(parameter)
            for slot in producers_by_key.get(key, [])
            if slot.tool != parameter.tool
        }
        best: dict[str, InferredEdge] = {}
        for slot in candidates.values():
            scored += 1
            confidence = match(parameter, slot)
            if confidence >= MIN_CONFIDENCE and confidence > getattr(best.get(slot.tool), "confidence", 0.0):
                best[slot.tool] = InferredEdge(slot.tool, parameter.tool, parameter.name, slot.name, confidence)
        edges += best.values()
    return edges, scored


def _ranked(edges: list[InferredEdge], parameters: list[Slot]) -> tuple[InferredEdge, ...]:
    """Edges in the order of the consumer's parameters, each parameter's best producer first."""
    order = {slot.name: n for n, slot in enumerate(parameters)}
    return tuple(sorted(edges, key=lambda e: (order.get(e.parameter, len(order)), -e.confidence, e.producer)))


def match(parameter: Slot, produced: Slot) -> float:
    """How surely `produced` fills `parameter`: 0 when their types differ, else their names' and descriptions'
    overlap, weighted. Below MIN_CONFIDENCE even with the same description, the names' share alone: the
    descriptions are not compared."""
    kinds = (parameter.kind, produced.kind)
    if all(kinds) and kinds[0] != kinds[1] and kinds not in _COMPATIBLE:
        return 0.0
    names = len(parameter.tokens & produced.tokens) / len(parameter.tokens | produced.tokens)
    if not parameter.tokens - GENERIC:  # `key` meets `key`: the name alone says little, the meaning must say more
        names /= 2
    if NAME_WEIGHT * names + (1 - NAME_WEIGHT) < MIN_CONFIDENCE:
        return round(NAME_WEIGHT * names, 4)
    return round(NAME_WEIGHT * names + (1 - NAME_WEIGHT) * word_overlap(parameter.words, produced.words), 4)


def word_overlap(first: frozenset[str], second: frozenset[str]) -> float:
    """Dice overlap of two texts' content words (0 when either says nothing)."""
    return 2 * len(first & second) / (len(first) + len(second)) if first and second else 0.0


def consumed_slots(tool: Tool) -> list[Slot]:
    """The tool's required top-level parameters, the first MAX_PARAMETERS of them."""
    schema = tool.input_schema
    properties = schema.get("properties") or {}
    required = [name for name in schema.get("required") or [] if isinstance(properties.get(name), dict)]
    return [_slot(tool.name, name, properties[name]) for name in required[:MAX_PARAMETERS]]


def produced_slots(tool: Tool) -> list[Slot]:
    """What the tool returns: its output schema's fields (of an object, or of an array's items) and what its
    description says it returns ("Returns the playlist ID")."""
    slots = [_slot(tool.name, name, spec) for name, spec in _output_fields(tool.output_schema or {})]
    known = {slot.tokens for slot in slots}
    described = _content_words(tool.description)
    for phrase in _RETURNS.findall(tool.description):
        slot = Slot(tool.name, "_".join(_tokens(phrase)), frozenset(_tokens(phrase)), None, described)
        if slot.tokens and slot.tokens not in known:
            slots.append(slot)
            known.add(slot.tokens)
    return slots


def relation_hash(tool: Tool) -> str:
    """A hash of what inference reads of a tool: a change elsewhere (aliases, examples, scopes) scores nothing."""
    read = [tool.description, tool.input_schema, tool.output_schema]
    return hashlib.sha256(json.dumps(read, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _output_fields(schema: dict[str, Any]) -> list[tuple[str, Any]]:
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, dict):
        schema = items
    properties = schema.get("properties")
    return [(n, s) for n, s in properties.items() if isinstance(s, dict)] if isinstance(properties, dict) else []


def _slot(tool: str, name: str, spec: dict[str, Any]) -> Slot:
    kind, description = spec.get("type"), spec.get("description")
    words = _content_words(description) if isinstance(description, str) else frozenset[str]()
    return Slot(tool, name, frozenset(_tokens(name)), kind if isinstance(kind, str) else None, words)


def _tokens(name: str) -> list[str]:
    """Lowercased words of an identifier or phrase, singular (`playlistIDs` -> playlist, id), the first
    MAX_NAME_WORDS of them."""
    words = _WORD.findall(split_identifier(name).lower())[:MAX_NAME_WORDS]
    return [_singular(w) for w in words]


def _singular(word: str) -> str:
    if word == "identifier":
        return "id"
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _slot_keys(slot: Slot) -> frozenset[str]:
    """A slot's blocks: its specific tokens, or, when it has none (`id`, `name`), its whole name."""
    specific = slot.tokens - GENERIC
    return frozenset(specific) if specific else frozenset({" ".join(sorted(slot.tokens))})


def _keys(slots: Iterable[Slot]) -> frozenset[str]:
    return frozenset().union(*(_slot_keys(slot) for slot in slots))


def _by_key(slots: Iterable[Slot]) -> dict[str, list[Slot]]:
    blocks: dict[str, list[Slot]] = {}
    for slot in slots:
        for key in _slot_keys(slot):
            blocks.setdefault(key, []).append(slot)
    return blocks


def _content_words(text: str) -> frozenset[str]:
    """The text's first MAX_WORDS content words, singular; read no further than they are."""
    words: set[str] = set()
    for found in _WORD.finditer(text.lower()):
        word = found.group()
        if word not in _STOP and len(word) > 2:
            words.add(_singular(word))
            if len(words) == MAX_WORDS:
                break
    return frozenset(words)
