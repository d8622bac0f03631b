"""Compare a doc's shown output with what its block really prints, within the tolerances a reader expects.

Timings (`125.0 ms`, `7.6 s`) and rates (`56 texts/s`) match any timing; percentages match within `percentages`
points, decimal numbers within `scores`; an estimated count (`~106`, a token count without the `tokens` extra)
matches an integer within 10%; integers and words match exactly; box-drawing rules match whatever their
length (a table's columns widen with its content); a line `...` stands for any number of lines. A marker may change
a tolerance, `<!-- output of the block above, scores ±0.1 -->`, or name a command the page tells the reader to run,
`<!-- output of `toolrag quickstart` -->`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache

MARKER = re.compile(r"output of (?:the block above|`([^`]+)`)((?:,\s*\w+\s*±\s*[\d.]+)*)")
TOLERANCE = re.compile(r"(\w+)\s*±\s*([\d.]+)")
TOKEN = re.compile(
    r"(?P<timing>\d+(?:\.\d+)?\s?(?:ms|s|[a-z]+/s)\b)"
    r"|(?P<percentage>-?\d+(?:\.\d+)?%)"
    r"|(?P<decimal>-?\d+\.\d+)"
    r"|(?P<estimate>~\d+)"
    r"|(?P<integer>-?\d+)"
    r"|(?P<rule>[─━═]+)"
    r"|(?P<word>[^\s\d─━═]+)"
)
ELISION = "..."


@dataclass(frozen=True)
class Tolerances:
    scores: float = 0.05
    percentages: float = 1.0


def tolerances_of(marker: str) -> Tolerances | None:
    """The tolerances a marker states, or None when the comment is no output marker."""
    found = MARKER.search(marker)
    if found is None:
        return None
    stated = {name: float(value) for name, value in TOLERANCE.findall(found.group(2))}
    unknown = set(stated) - {"scores", "percentages"}
    assert not unknown, f"unknown tolerance {unknown} in marker {marker!r}: scores or percentages"
    return Tolerances(**stated)


def command_of(marker: str) -> str | None:
    """The command an output marker names (`output of `toolrag quickstart``), None for the block above."""
    found = MARKER.search(marker)
    return found.group(1) if found else None


def _tokens(line: str) -> list[tuple[str, str]]:
    return [(found.lastgroup or "word", found.group()) for found in TOKEN.finditer(line)]


def _number(text: str) -> float:
    return float(text.rstrip("%"))


def lines_match(expected: str, actual: str, tolerances: Tolerances) -> bool:
    want, got = _tokens(expected), _tokens(actual)
    if len(want) != len(got):
        return False
    for (kind, text), (actual_kind, actual_text) in zip(want, got, strict=True):
        if {kind, actual_kind} == {"integer", "estimate"}:
            exact, estimate = (text, actual_text) if kind == "integer" else (actual_text, text)
            if abs(int(estimate[1:]) - int(exact)) > 0.1 * abs(int(exact)):
                return False
            continue
        if kind != actual_kind:
            return False
        if kind == "decimal":
            if abs(_number(text) - _number(actual_text)) > tolerances.scores + 1e-9:
                return False
        elif kind == "percentage":
            if abs(_number(text) - _number(actual_text)) > tolerances.percentages + 1e-9:
                return False
        elif kind not in ("timing", "rule") and text != actual_text:
            return False
    return True


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.rstrip() for line in text.rstrip().splitlines())


def mismatch(expected: str, actual: str, tolerances: Tolerances = Tolerances()) -> str | None:
    """None when `actual` is what `expected` shows, else a diff to read."""
    want, got = _lines(expected), _lines(actual)

    @cache
    def matches(i: int, j: int) -> bool:  # want[i:] matches got[j:]
        if i == len(want):
            return j == len(got)
        if want[i] == ELISION:
            return any(matches(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and lines_match(want[i], got[j], tolerances) and matches(i + 1, j + 1)

    if matches(0, 0):
        return None
    diff = difflib.unified_diff(want, got, "shown in the doc", "printed now", lineterm="")
    return "\n".join(diff)
