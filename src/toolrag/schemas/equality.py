"""JSON equality in linear time: `enum` membership and `uniqueItems` by hashing canonical forms.

jsonschema compares an instance with each enum value in turn, and the items of an array pairwise when they are not
sortable (objects): a 20,000-value enum took 5 s to check valid input, uniqueItems over 999 objects 1.6 s. A
canonical form is hashable and equal exactly when JSON Schema calls two values equal: numbers by value (1 == 1.0),
booleans apart from numbers (true != 1), arrays in order, objects whatever their keys' order.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

_CACHED = 1024


def canonical(value: Any) -> Hashable:
    """The canonical form of a JSON value (depth bounded by the callers: 32 levels of arguments, 64 of schemas)."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", _decimal(value))
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list | tuple):
        return ("array", tuple(canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, canonical(item)) for key, item in value.items()))
    return ("null", None) if value is None else ("other", repr(value))


def _decimal(number: int | float) -> str:
    """A number as text, equal for equal values (1 and 1.0 alike). Text, not the number: Python hashes numbers
    without a seed, so an enum of 5,000 integers of one hash built its set in 0.41 s; strings' hashes are seeded."""
    if isinstance(number, float) and number.is_integer():
        return str(int(number))
    return str(number) if isinstance(number, int) else repr(number)


def all_unique(items: Iterable[Any]) -> bool:
    seen: set[Hashable] = set()
    for item in items:
        form = canonical(item)
        if form in seen:
            return False
        seen.add(form)
    return True


_members: OrderedDict[int, tuple[list[Any], frozenset[Hashable]]] = OrderedDict()
_lock = threading.Lock()


def is_member(value: Any, values: list[Any]) -> bool:
    """Whether `value` equals one of `values` (an enum of a schema: its canonical set is built once, cached)."""
    return canonical(value) in _canonical_set(values)


def _canonical_set(values: list[Any]) -> frozenset[Hashable]:
    # Keyed by identity: the cache holds the list, so its id cannot be reused while the entry lives.
    with _lock:
        found = _members.get(id(values))
        if found is not None and found[0] is values:
            _members.move_to_end(id(values))
            return found[1]
    forms = frozenset(canonical(item) for item in values)
    with _lock:
        _members[id(values)] = (values, forms)
        while len(_members) > _CACHED:
            _members.popitem(last=False)
    return forms
