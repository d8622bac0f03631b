"""Checking a call's arguments against its tool's schema, with work bounded whatever the arguments or the schema.

Both are untrusted: arguments come from a model or a client, schemas from MCP servers and catalogs. Before anything
recursive reads them, the arguments are measured without recursion (values, nesting depth, text that is not text)
and refused past the limits. Every check then counts steps (validation.Budget). A check is run in a thread of the
serving process only when its worst case is small: at most INLINE_STEPS, by the schema's cost per value (cost.py)
times the arguments' values, so that it holds the interpreter serving other clients for milliseconds at most. Every
other check, and one that runs out of those steps, goes to a separate process (schemas/worker.py) with a budget of
steps and of time; a check that outruns it refuses the call. At most `MAX_ERRORS` errors are reported, each
rendered in bounded size (validation.py), never the whole argument.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import TYPE_CHECKING, Any

from toolrag.schemas.cost import MAX_ARGUMENT_DEPTH, expansion
from toolrag.schemas.patterns import UnsafePattern
from toolrag.schemas.refs import BadReference, check_references
from toolrag.schemas.validation import OverBudget, budget, safe_validator, schema_objects, short

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

MAX_DEPTH = MAX_ARGUMENT_DEPTH  # of nested objects and arrays; validating recursion stays far from Python's limit
MAX_VALUES = 200_000  # JSON values in one call's arguments (a 1 MB body of small numbers holds about that many)
INLINE_VALUES = 2_000  # up to this many values (and INLINE_CHARS of JSON) may be checked in the serving process
INLINE_CHARS = 65_536
# Steps of a check in the serving process: ~10 us each, up to ~50 us in anyOfs whose branches all fail (measured),
# so ~10-50 ms of the interpreter at most. Real calls take tens (one value: at most 32 in the benchmarks' schemas).
INLINE_STEPS = 1_000
INLINE_SECONDS = 0.25  # and of its time, waiting for the interpreter included (past it: finished in the worker)
MAX_ERRORS = 5
MAX_MESSAGE_CHARS = 240


class ArgumentsRefused(ValueError):
    """Arguments that are not checked at all: too deep, too many values, or holding text that is not text."""


@dataclass(frozen=True)
class Measure:
    values: int
    depth: int

    @property
    def small(self) -> bool:
        return self.values <= INLINE_VALUES


def measure(arguments: Any) -> Measure:
    """Count the values and depth of parsed JSON without recursion, refusing (ArgumentsRefused) as soon as a limit
    is passed or a string holds a lone surrogate (which no tool, log or upstream can encode)."""
    values = depth = 0
    pending: list[tuple[Any, int]] = [(arguments, 1)]
    while pending:
        item, level = pending.pop()
        values += 1
        depth = max(depth, level)
        if depth > MAX_DEPTH:
            raise ArgumentsRefused(f"the arguments nest deeper than {MAX_DEPTH} levels")
        if values > MAX_VALUES:
            raise ArgumentsRefused(f"the arguments hold more than {MAX_VALUES:,} values")
        if isinstance(item, dict):
            for key, value in item.items():
                _text(key)
                pending.append((value, level + 1))
        elif isinstance(item, list):
            pending.extend((value, level + 1) for value in item)
        elif isinstance(item, str):
            _text(item)
    return Measure(values, depth)


def _text(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ArgumentsRefused(f"the arguments hold {short(value)}, which is not text (a lone surrogate)") from None


def bounded_errors(validator: Validator, arguments: Any) -> list[str]:
    """The first MAX_ERRORS errors, ordered by where they are, each message bounded in size."""
    from referencing.exceptions import Unresolvable

    try:
        found = list(islice(validator.iter_errors(arguments), MAX_ERRORS))
    except RecursionError:
        return ["(root): nested too deeply to check"]
    except UnsafePattern as exc:  # schemas registered before patterns were checked
        return [f"(schema): {exc}"]
    except Unresolvable as exc:  # the same: a remote or dangling reference, never fetched
        return [f"(schema): a reference of the tool's schema does not resolve inside it ({short(str(exc))})"]
    found.sort(key=lambda error: [str(part) for part in error.absolute_path])
    return [_rendered(error) for error in found]


def _rendered(error: Any) -> str:
    """`where: message`, bounded: jsonschema's messages start with the whole failing value, which is shortened."""
    where = "/".join(str(part) for part in error.absolute_path)[: MAX_MESSAGE_CHARS // 2] or "(root)"
    message: str = error.message
    if len(message) > MAX_MESSAGE_CHARS:
        whole = repr(error.instance)
        if message.startswith(whole):
            message = short(error.instance) + message[len(whole) :]
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + "..."
    return f"{where}: {message}"


@dataclass
class ArgumentChecker:
    """One tool's input schema, ready to check arguments (its validator built on first use)."""

    schema: dict[str, Any]
    _validator: Validator | None = field(default=None, init=False, repr=False)

    def errors(self, arguments: Any) -> list[str]:
        """Errors of arguments checked here, spending the budget of the running check (validation.budget)."""
        if self._validator is None:
            self._validator = safe_validator(self.schema)
        return bounded_errors(self._validator, arguments)

    def inline_errors(self, arguments: Any, size: Measure) -> list[str] | None:
        """Errors of arguments `measure` found small, checked within INLINE_STEPS; None when the check may take
        more (it is for the worker process then)."""
        if size.values * self.steps_per_value > INLINE_STEPS:
            return None
        try:
            with budget(INLINE_STEPS, INLINE_SECONDS):
                return self.errors(arguments)
        except OverBudget:
            return None

    @cached_property
    def steps_per_value(self) -> int:
        """The most steps one value can cost under the schema (cost.py), worked out again here for schemas stored
        before registration bounded it. A schema that fails the reference checks is left to the worker to report,
        and so is one using unevaluatedProperties/Items: jsonschema works out what is evaluated by walking the
        subschemas applied in place without applying keywords, so the walk spends no steps and only the worker's
        deadline bounds it."""
        if _uses_unevaluated(self.schema):
            return INLINE_STEPS + 1
        try:
            graph = check_references(self.schema)
        except BadReference:
            return INLINE_STEPS + 1
        return expansion(self.schema, graph, INLINE_STEPS).steps

    @cached_property
    def schema_text(self) -> str:
        """The schema as the worker process receives it, and the key it caches the schema's validator under."""
        return json.dumps(self.schema, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _uses_unevaluated(schema: dict[str, Any]) -> bool:
    return any("unevaluatedProperties" in node or "unevaluatedItems" in node for _, node in schema_objects(schema))
