"""Name resolution: the tool a model meant, among the tools the principal may use.

Models truncate, re-case and re-separate names (`get_current_weather` for `get_current_weather_in_city`,
`github__create_issue` for `github.create_issue`). Resolution tries, in order: the exact name; the name with case
and separators ignored; a unique tool whose trailing namespace segments match; a fuzzy match above a confidence
bound that clearly beats the runner-up. Anything else is an error that lists the closest names.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz, process

from toolrag.errors import ToolragError

Method = Literal["exact", "normalized", "suffix", "fuzzy"]
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def normalize_name(name: str) -> str:
    """`Github__Create-Issue` -> `githubcreateissue`."""
    return _SEPARATORS.sub("", name.lower())


def _segments(name: str) -> list[str]:
    return [s for s in re.split(r"\.|__", name) if s]


@dataclass(frozen=True)
class Resolution:
    name: str
    method: Method


class UnresolvedName(ToolragError):
    """The model named no tool it may use, or several equally well."""

    def __init__(self, requested: str, candidates: list[str], ambiguous: bool) -> None:
        self.requested = requested
        self.candidates = candidates
        self.ambiguous = ambiguous
        if ambiguous:
            message = f"tool name {requested!r} is ambiguous: it could be {', '.join(candidates)}"
        else:
            message = f"no tool named {requested!r} is available"
            if candidates:
                message += f"; the closest are: {', '.join(candidates)}"
        super().__init__(message)


class NameResolver:
    def __init__(self, names: Iterable[str], fuzzy_cutoff: float = 85.0, fuzzy_margin: float = 4.0) -> None:
        self.names = sorted(set(names))
        self.fuzzy_cutoff = fuzzy_cutoff
        self.fuzzy_margin = fuzzy_margin
        self._normalized: dict[str, list[str]] = defaultdict(list)
        for name in self.names:
            self._normalized[normalize_name(name)].append(name)
        self._keys = list(self._normalized)

    def resolve(self, requested: str) -> Resolution:
        if requested in self.names:
            return Resolution(requested, "exact")
        key = normalize_name(requested)
        if not key:
            raise UnresolvedName(requested, [], ambiguous=False)
        same = self._normalized.get(key, [])
        if len(same) == 1:
            return Resolution(same[0], "normalized")
        if len(same) > 1:
            raise UnresolvedName(requested, same, ambiguous=True)
        return self._by_suffix(requested) or self._fuzzy(requested, key)

    def _by_suffix(self, requested: str) -> Resolution | None:
        wanted = [normalize_name(s) for s in _segments(requested)]
        matches = [
            name
            for name in self.names
            if len(_segments(name)) > len(wanted)
            and [normalize_name(s) for s in _segments(name)[-len(wanted) :]] == wanted
        ]
        if len(matches) > 1:
            raise UnresolvedName(requested, matches, ambiguous=True)
        return Resolution(matches[0], "suffix") if matches else None

    def _fuzzy(self, requested: str, key: str) -> Resolution:
        scored = process.extract(key, self._keys, scorer=fuzz.WRatio, limit=5)
        closest = [name for choice, _score, _ in scored for name in self._normalized[choice]][:3]
        if not scored or scored[0][1] < self.fuzzy_cutoff:
            raise UnresolvedName(requested, closest, ambiguous=False)
        best_key, best_score, _ = scored[0]
        rivals = [choice for choice, score, _ in scored[1:] if score > best_score - self.fuzzy_margin]
        if rivals or len(self._normalized[best_key]) > 1:
            tied = self._normalized[best_key] + [n for r in rivals for n in self._normalized[r]]
            raise UnresolvedName(requested, tied, ambiguous=True)
        return Resolution(self._normalized[best_key][0], "fuzzy")
