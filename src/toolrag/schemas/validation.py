"""Validating values against untrusted schemas with bounded work.

jsonschema's validators, extended so that no schema can make a check slow or reach out: `pattern`,
`patternProperties` and `additionalProperties` match with RE2 (schemas/patterns.py), `enum` and `uniqueItems`
compare by hash (equality.py), references resolve inside the schema only (an empty `referencing` registry: nothing
is ever retrieved), and every keyword spends steps of the check's `Budget`, so a check stops (`OverBudget`) however
the schema and the value multiply. A schema is registered only when its patterns compile to small programs, its
references are local and acyclic, its enums are bounded and one value costs a bounded number of steps when
references and in-place applicators are expanded (`check_safety`, cost.py).
"""

from __future__ import annotations

import reprlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from toolrag.schemas.cost import expansion, keyword_steps
from toolrag.schemas.drafts import DATA_KEYWORDS, keep_on_evolve, validator_class
from toolrag.schemas.equality import all_unique, is_member
from toolrag.schemas.patterns import UnsafePattern, compile_pattern, search
from toolrag.schemas.refs import BadReference, check_references

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxlevel = 60, 60, 4, 4, 2


# What a schema may cost, checked when it is registered. The real schemas of the benchmarks and tests (6,797) reach
# 32 steps per value, enums of 35 values (73 in one schema) and RE2 programs of 12 instructions: the limits leave
# room for far larger real ones (country, currency or time-zone lists) and refuse what only an attack needs.
MAX_STEPS_PER_VALUE = 10_000
MAX_ENUM_VALUES = 5_000
MAX_ENUM_VALUES_IN_ALL = 20_000
MAX_PATTERN_PROGRAM = 2_000  # RE2 instructions: past a few thousand its DFA runs out of memory and matching slows
# A match costs a step per this many characters times instructions: RE2 without its DFA (out of memory) takes
# ~11 ns per character and instruction, an ordinary step ~10 us (measured on the review's pattern and schemas).
_PATTERN_WORK_PER_STEP = 1_000


class UnsafeSchema(ValueError):
    """A schema that cannot be checked with bounded work: a pattern RE2 refuses or whose program is too large, a
    reference that is remote, unresolvable or cyclic, an enum too long, or one value costing too many steps."""


class OverBudget(Exception):
    """A check that ran out of its steps or its time."""


@dataclass
class Budget:
    """The steps and the time a check may take; every keyword applied spends steps (cost.keyword_steps)."""

    steps: int
    seconds: float
    spent: int = 0
    deadline: float = field(init=False)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def spend(self, steps: int) -> None:
        self.spent += steps
        if self.spent > self.steps:
            raise OverBudget(f"checking the arguments took more than {self.steps:,} steps")
        if time.monotonic() > self.deadline:
            raise OverBudget(f"checking the arguments took longer than {self.seconds:g} s")


_current = threading.local()  # the Budget of the check running in this thread, if any


@contextmanager
def budget(steps: int, seconds: float) -> Iterator[Budget]:
    """Checks run in this block (in this thread) spend `steps` and stop after `seconds` (OverBudget)."""
    given = Budget(steps, seconds)
    previous = getattr(_current, "budget", None)
    _current.budget = given
    try:
        yield given
    finally:
        _current.budget = previous


def _spend(steps: int) -> None:
    current: Budget | None = getattr(_current, "budget", None)
    if current is not None:
        current.spend(steps)


def schema_objects(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of `schema` with where it is, walked without recursion; the values of data keywords (enum,
    const, default, ...) are data, not schemas, and are not entered."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, list):
            stack.extend((f"{where}/{i}", item) for i, item in enumerate(node))
        elif isinstance(node, dict):
            yield where, node
            stack.extend((f"{where}/{key}", value) for key, value in node.items() if key not in DATA_KEYWORDS)


def check_enums(schema: dict[str, Any]) -> None:
    """Raise UnsafeSchema unless every enum of `schema` is bounded, and all of them together (checked before the
    draft's metaschema reads them: draft-04's asks for unique enum values, which jsonschema compares pairwise)."""
    total = 0
    for where, node in schema_objects(schema):
        values = node.get("enum")
        if isinstance(values, list):
            if len(values) > MAX_ENUM_VALUES:
                raise UnsafeSchema(
                    f"{where.lstrip('/') or '(root)'}: an enum of {len(values):,} values (at most {MAX_ENUM_VALUES:,})"
                )
            total += len(values)
    if total > MAX_ENUM_VALUES_IN_ALL:
        raise UnsafeSchema(f"the schema's enums hold {total:,} values in all (at most {MAX_ENUM_VALUES_IN_ALL:,})")


def check_safety(schema: dict[str, Any]) -> None:
    """Raise UnsafeSchema, saying where and why, unless every pattern runs on RE2 in a small program, every
    reference is local and one value costs at most MAX_STEPS_PER_VALUE steps (enums: check_enums, first)."""
    uses_unevaluated = False
    patterns: list[tuple[str, str]] = []
    for where, node in schema_objects(schema):
        if isinstance(node.get("pattern"), str):
            patterns.append((f"{where}/pattern", node["pattern"]))
        if isinstance(node.get("patternProperties"), dict):
            patterns.extend((f"{where}/patternProperties", key) for key in node["patternProperties"])
        uses_unevaluated = uses_unevaluated or "unevaluatedProperties" in node
    for where, pattern in patterns:
        try:
            program = compile_pattern(pattern).programsize
        except UnsafePattern as exc:
            raise UnsafeSchema(f"{where.lstrip('/') or '(root)'}: {exc}") from None
        if program > MAX_PATTERN_PROGRAM:
            raise UnsafeSchema(
                f"{where.lstrip('/') or '(root)'}: pattern {pattern[:80]!r} compiles to {program:,} RE2 instructions"
                f" (at most {MAX_PATTERN_PROGRAM:,}): write smaller repetition counts"
            )
    if uses_unevaluated and any(where.endswith("patternProperties") for where, _ in patterns):
        # jsonschema matches patternProperties with Python's backtracking `re` when it works out unevaluated keys
        raise UnsafeSchema("unevaluatedProperties beside patternProperties cannot be checked in linear time")
    try:
        graph = check_references(schema)
    except BadReference as exc:
        raise UnsafeSchema(str(exc)) from None
    costliest = expansion(schema, graph, MAX_STEPS_PER_VALUE)
    if costliest.steps > MAX_STEPS_PER_VALUE:
        where = "/".join(str(part) for part in costliest.where) or "(root)"
        raise UnsafeSchema(
            f"{where}: checking one value there (depth {costliest.level} of the arguments) would take"
            f" {costliest.steps:,} steps (at most {MAX_STEPS_PER_VALUE:,}): references and in-place applicators"
            " (anyOf, allOf, oneOf, ...) multiply"
        )


def safe_validator(schema: dict[str, Any]) -> Validator:
    """A validator of `schema` under its draft, matching patterns with RE2 and resolving no remote reference."""
    from referencing import Registry

    return _safe_class(validator_class(schema))(schema, registry=Registry())


@cache
def _safe_class(base: type[Validator]) -> type[Validator]:
    """`base` with linear-time keywords, every keyword spending steps of the thread's Budget, and subschemas that
    declare a draft of their own (`$schema`) checked by the safe class of that draft, not jsonschema's own."""
    from jsonschema import validators

    own = {"pattern": _pattern, "patternProperties": _pattern_properties}
    own |= {"additionalProperties": _additional_properties, "enum": _enum, "uniqueItems": _unique_items}
    keywords = {key: _counted(key, own.get(key, function)) for key, function in base.VALIDATORS.items()}
    safe: Any = validators.extend(base, keywords)  # type: ignore[no-untyped-call]
    keep_on_evolve(safe, _safe_class, base)
    return safe  # type: ignore[no-any-return]


def _counted(keyword: str, function: Any) -> Any:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _spend(keyword_steps(keyword, value))
        return function(validator, value, instance, schema)

    return counted


def short(value: Any) -> str:
    """A bounded rendering of a value for a message: a huge argument costs no more to report than a small one."""
    return _SHORT.repr(value)


def _matches(pattern: str, text: str) -> bool:
    """search(), after spending steps in proportion to the text and to the pattern's program (RE2's time)."""
    program = compile_pattern(pattern).programsize
    _spend(1 + len(text) * program // _PATTERN_WORK_PER_STEP)
    return search(pattern, text)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{short(instance)} does not match {short(pattern)}")


def _enum(validator: Any, values: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    _spend(len(instance) if isinstance(instance, list | dict) else 0)  # building its canonical form
    if not is_member(instance, values):
        yield ValidationError(f"{short(instance)} is not one of {short(values)}")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    if unique and validator.is_type(instance, "array"):
        _spend(len(instance))
        if not all_unique(instance):
            yield ValidationError(f"{short(instance)} has non-unique elements")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in known and not any(_matches(p, key) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        named = ", ".join(short(extra) for extra in extras[:5]) + (", ..." if len(extras) > 5 else "")
        yield ValidationError(f"additional properties are not allowed ({named} unexpected)")
