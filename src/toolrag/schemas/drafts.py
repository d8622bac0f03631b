"""JSON Schema as real servers write it: the draft a schema follows, and the 2020-12 form providers expect.

Tool schemas come from MCP servers and catalogs written against every draft since 04. A schema is checked and
its arguments validated under the draft it declares with `$schema`; without one, under 2020-12 when it is valid
there, else under the newest older draft it is valid in (draft-07, then draft-04: `definitions`, the boolean
`exclusiveMinimum` of draft-04). Providers read 2020-12, so rendering upgrades the forms whose meaning changed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from toolrag.schemas.equality import all_unique

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_OLDER_DRAFTS_URIS = ("draft-04", "draft-06", "draft-07")
# Keywords whose values are data, not subschemas: a boolean inside them is left alone.
DATA_KEYWORDS = {"enum", "const", "default", "examples", "example"}


MAX_DEPTH = 64  # of nested objects and arrays; real schemas stay far below, recursion limits far above


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON data nests objects and arrays deeper than `limit` (walked without recursion: a hostile
    schema nested thousands deep must be refused, not overflow the stack of every recursive reader after)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
    return False


def validator_class(schema: dict[str, Any]) -> type[Validator]:
    """The validator of the draft `schema` follows; raises `jsonschema.SchemaError` when it is valid in none."""
    from jsonschema import Draft4Validator, Draft7Validator, Draft202012Validator, SchemaError, validators

    declared_uri = schema.get("$schema", "")
    if not isinstance(declared_uri, str):
        # jsonschema looks the value up as a URI and raises TypeError on a list or a number
        raise SchemaError(f"{declared_uri!r} is not a string", path=["$schema"])
    # `default` comes back as given when `$schema` is missing or unknown; its stub types it as a validator class
    declared: type[Validator] | None = validators.validator_for(schema, default=None)  # type: ignore[arg-type]
    if declared is not None:
        check_schema(declared, schema)
        return declared
    first_error: SchemaError | None = None
    for candidate in (Draft202012Validator, Draft7Validator, Draft4Validator):
        try:
            check_schema(candidate, schema)
        except SchemaError as exc:
            first_error = first_error or exc
            continue
        return candidate
    assert first_error is not None
    raise first_error


def check_schema(draft: type[Validator], schema: dict[str, Any]) -> None:
    """`draft.check_schema(schema)` in linear time: draft-04's metaschema asks for unique `enum` values, which
    jsonschema compares pairwise when they are objects (quadratic in a schema's enum)."""
    from jsonschema import SchemaError, validators

    meta: Any = validators.validator_for(draft.META_SCHEMA, default=draft)
    checking = _metaschema_checker(meta)(draft.META_SCHEMA, format_checker=meta.FORMAT_CHECKER)
    for error in checking.iter_errors(schema):
        raise SchemaError.create_from(error)


@cache
def _metaschema_checker(meta: type[Validator]) -> Any:
    from jsonschema import ValidationError, validators

    def unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
        if unique and validator.is_type(instance, "array") and not all_unique(instance):
            yield ValidationError("the array has non-unique elements")

    checker: Any = validators.extend(meta, {"uniqueItems": unique_items})  # type: ignore[no-untyped-call]
    keep_on_evolve(checker, _metaschema_checker, meta)
    return checker


def keep_on_evolve(extended: Any, extend: Callable[[type[Validator]], Any], base: type[Validator]) -> None:
    """Make the validators of `extended` (jsonschema's `base`, extended) evolve into `extend(draft)` of the draft a
    subschema or a reference's target declares with `$schema`: jsonschema's own evolve gives that draft's plain
    class, dropping the extended keywords (a metaschema's root declares its draft; so may a tool's subschema)."""
    from jsonschema import validators

    def evolve(self: Any, **changes: Any) -> Any:
        import attrs

        schema = changes.setdefault("schema", self.schema)
        evolved = extend(validators.validator_for(schema, default=base))
        for attribute in attrs.fields(type(self)):
            if attribute.init and attribute.alias not in changes:
                changes[attribute.alias] = getattr(self, attribute.name)
        return evolved(**changes)

    extended.evolve = evolve


def to_2020_12(schema: Any) -> Any:
    """A copy of `schema` that means the same under draft 2020-12: draft-04's boolean `exclusiveMinimum`/
    `exclusiveMaximum` become the numeric bounds of later drafts, and a `$schema` naming an older draft goes."""
    if isinstance(schema, list):
        return [to_2020_12(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    upgraded = {key: value if key in DATA_KEYWORDS else to_2020_12(value) for key, value in schema.items()}
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = upgraded.get(exclusive)
        if not isinstance(flag, bool):
            continue
        del upgraded[exclusive]
        if flag and bound in upgraded:
            upgraded[exclusive] = upgraded.pop(bound)
    declared = upgraded.get("$schema")
    if isinstance(declared, str) and any(draft in declared for draft in _OLDER_DRAFTS_URIS):
        del upgraded["$schema"]
    return upgraded
