"""Validating values against untrusted schemas with bounded work.

jsonschema's validators, extended so that no schema can make a check slow or reach out: `pattern`,
`patternProperties` and `additionalProperties` match with RE2 (schemas/patterns.py), references resolve inside the
schema only (an empty `referencing` registry: nothing is ever retrieved), and a schema is registered only when its
patterns compile and its references are local and acyclic (`check_safety`).
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

from toolrag.schemas.drafts import DATA_KEYWORDS, validator_class
from toolrag.schemas.patterns import UnsafePattern, compile_pattern, search
from toolrag.schemas.refs import BadReference, check_references

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxlevel = 60, 60, 4, 4, 2


class UnsafeSchema(ValueError):
    """A schema that cannot be checked with bounded work: a pattern RE2 refuses, or a reference that is remote,
    unresolvable or cyclic."""


def check_safety(schema: dict[str, Any]) -> None:
    """Raise UnsafeSchema, saying where and why, unless every pattern runs on RE2 and every reference is local."""
    uses_unevaluated = False
    patterns: list[tuple[str, str]] = []
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, list):
            stack.extend((f"{where}/{i}", item) for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("pattern"), str):
            patterns.append((f"{where}/pattern", node["pattern"]))
        if isinstance(node.get("patternProperties"), dict):
            patterns.extend((f"{where}/patternProperties", key) for key in node["patternProperties"])
        uses_unevaluated = uses_unevaluated or "unevaluatedProperties" in node
        stack.extend((f"{where}/{key}", value) for key, value in node.items() if key not in DATA_KEYWORDS)
    for where, pattern in patterns:
        try:
            compile_pattern(pattern)
        except UnsafePattern as exc:
            raise UnsafeSchema(f"{where.lstrip('/') or '(root)'}: {exc}") from None
    if uses_unevaluated and any(where.endswith("patternProperties") for where, _ in patterns):
        # jsonschema matches patternProperties with Python's backtracking `re` when it works out unevaluated keys
        raise UnsafeSchema("unevaluatedProperties beside patternProperties cannot be checked in linear time")
    try:
        check_references(schema)
    except BadReference as exc:
        raise UnsafeSchema(str(exc)) from None


def safe_validator(schema: dict[str, Any]) -> Validator:
    """A validator of `schema` under its draft, matching patterns with RE2 and resolving no remote reference."""
    from referencing import Registry

    return _safe_class(validator_class(schema))(schema, registry=Registry())


@cache
def _safe_class(base: type[Validator]) -> type[Validator]:
    from jsonschema import validators

    keywords = {"pattern": _pattern, "patternProperties": _pattern_properties}
    keywords["additionalProperties"] = _additional_properties
    return validators.extend(base, keywords)  # type: ignore[no-any-return,no-untyped-call]


def short(value: Any) -> str:
    """A bounded rendering of a value for a message: a huge argument costs no more to report than a small one."""
    return _SHORT.repr(value)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{short(instance)} does not match {short(pattern)}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in known and not any(search(p, key) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        named = ", ".join(short(extra) for extra in extras[:5]) + (", ..." if len(extras) > 5 else "")
        yield ValidationError(f"additional properties are not allowed ({named} unexpected)")
