"""Name resolution: the tool a model meant, among the tools the principal may use.

Models re-case and re-separate names (`github__create_issue` for `github.create_issue`), make typos and drop
trailing words (`get_current_weather` for `get_current_weather_in_city`). Resolution tries, in order:

1. the exact registry name, or the exact provider name it was rendered as (`inject.provider_name`);
2. the same name with case, `-` and `_` ignored inside each namespace segment (`.` and `__` separate segments);
3. a typo-level fuzzy match (as many words, nearly the same letters), or a unique tool whose name only adds words
   that change nothing (no action verb) to the requested ones, clearly ahead of any other candidate.

A name resolves only within the namespace it names: `srv_b.payroll_run` can never reach a tool of another server,
such as `evil.srv_b.payroll_run`, whatever the principal may or may not see of `srv_b`. A bare name is not completed
with a namespace (`create_issue` does not silently become `github.create_issue`): the error lists the closest names
instead, and the model calls again with the full one; a look-alike (a name that nests another server's namespace
inside its own, `evil.srv_b.payroll_run`) is never suggested before a name that does not. Ambiguous or unknown
names are errors listing the closest visible names, so a model can correct itself without being shown anything it
may not use.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz, process

from toolrag.errors import ToolragError
from toolrag.inject.formats import provider_name
from toolrag.model import name_key, normalize_name
from toolrag.search.text import split_identifier

Method = Literal["exact", "provider", "normalized", "fuzzy"]
_WORDS = re.compile(r"[a-z0-9]+")
MAX_SUGGESTIONS = 3
# A registry name has at most 128 characters, a provider's rendering of one fewer: a longer request names no tool,
# and is neither compared with every name (its cost grew with its length, on the event loop) nor echoed whole.
MAX_REQUESTED_CHARS = 256

# Words that make a tool do something the request did not ask for: a near miss never silently gains one of these
# (`notes` must not quietly become `notes_write`).
_ACTION_VERB_TEXT = """
    write delete del remove rm drop destroy purge erase wipe clear update upsert set put patch modify edit change
    replace rename move create add insert new post send email mail message publish push deploy release run exec
    execute invoke kill stop restart reboot shutdown terminate reset revoke grant assign transfer pay refund charge
    cancel approve reject merge commit upload overwrite truncate disable enable lock unlock archive import sync
    apply submit close open start launch trigger
"""
ACTION_VERBS = frozenset(_ACTION_VERB_TEXT.split())


def segment_key(name: str) -> tuple[str, ...]:
    """`GitHub__Create-Issue` -> ('github', 'createissue'): case and separators ignored within each segment, the
    key deny rules read names by too (`model.name_key`)."""
    return name_key(name)


def words(name: str) -> list[str]:
    return _WORDS.findall(split_identifier(name).lower())


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
        self._known = set(self.names)
        self.fuzzy_cutoff = fuzzy_cutoff
        self.fuzzy_margin = fuzzy_margin
        self._provider = {provider_name(name): name for name in self.names}
        self._by_key: dict[tuple[str, ...], list[str]] = defaultdict(list)
        self._by_namespace: dict[str, list[str]] = defaultdict(list)
        for name in self.names:
            key = segment_key(name)
            self._by_key[key].append(name)
            self._by_namespace[key[0] if len(key) > 1 else ""].append(name)

    def unknown(self, requested: str) -> UnresolvedName:
        """The answer to a name no tool has: the closest names the principal may use."""
        readable = len(requested) <= MAX_REQUESTED_CHARS
        return UnresolvedName(shown_name(requested), self._closest(requested) if readable else [], False)

    def resolve(self, requested: str) -> Resolution:
        if len(requested) > MAX_REQUESTED_CHARS:
            raise self.unknown(requested)
        rendered = self._provider.get(requested)
        if requested in self._known:
            if rendered not in (None, requested):  # `a__b` is a tool's name and how `a.b` was rendered
                raise UnresolvedName(requested, [requested, str(rendered)], ambiguous=True)
            return Resolution(requested, "exact")
        if rendered is not None:
            return Resolution(rendered, "provider")
        key = segment_key(requested)
        if not key:
            raise UnresolvedName(requested, [], ambiguous=False)
        same = self._by_key.get(key, [])
        if len(same) == 1:
            return Resolution(same[0], "normalized")
        if len(same) > 1:
            raise UnresolvedName(requested, same, ambiguous=True)
        return self._near_miss(requested, key)

    def _in_namespace(self, key: tuple[str, ...]) -> list[str]:
        """The names a request may resolve to: those of the namespace it names, or names without one."""
        return self._by_namespace.get(key[0] if len(key) > 1 else "", [])

    def _near_miss(self, requested: str, key: tuple[str, ...]) -> Resolution:
        candidates = self._in_namespace(key)
        wanted = words(requested)
        suggestions = self._closest(requested)
        extensions = [name for name in candidates if _extends(words(name), wanted)]
        if len(extensions) > 1:
            raise UnresolvedName(requested, extensions[:MAX_SUGGESTIONS], ambiguous=True)
        # A typo keeps the words: only names of as many words are typo candidates (`lookup_order_v2` is not a typo of
        # `lookup_order`, nor `get_file` of `get_file_set`).
        flat = {normalize_name(name): name for name in candidates if len(words(name)) == len(wanted)}
        scored = process.extract(normalize_name(requested), list(flat), scorer=fuzz.ratio, limit=5)
        close = [flat[choice] for choice, score, _ in scored if score >= self.fuzzy_cutoff]
        if extensions:
            others = [name for name in close if name != extensions[0]]
            if _adds_action(words(extensions[0]), wanted):
                raise UnresolvedName(requested, _first(extensions + suggestions), ambiguous=False)
            if others:
                raise UnresolvedName(requested, _first(extensions + others), ambiguous=True)
            return Resolution(extensions[0], "fuzzy")
        if not close or _adds_action(words(close[0]), wanted):
            raise UnresolvedName(requested, suggestions, ambiguous=False)
        rivals = [flat[choice] for choice, score, _ in scored[1:] if score > scored[0][1] - self.fuzzy_margin]
        if rivals:
            raise UnresolvedName(requested, _first([close[0], *rivals]), ambiguous=True)
        return Resolution(close[0], "fuzzy")

    def _closest(self, requested: str) -> list[str]:
        """The visible names most like the request: suggestions only, never resolved to. A name that names a
        namespace gets suggestions from that namespace only, never a look-alike of another server's
        (`evil.srv_b.payroll_run` for `srv_b.payroll_run`); a bare name, from any."""
        key = segment_key(requested)
        flat: dict[str, list[str]] = defaultdict(list)
        for name in self._in_namespace(key) if len(key) > 1 else self.names:
            flat[normalize_name(name)].append(name)
        scored = process.extract(normalize_name(requested), list(flat), scorer=fuzz.WRatio, limit=None)
        close = [name for choice, score, _ in scored if score >= 50 for name in flat[choice]]
        return _first(sorted(close, key=_looks_alike))  # stable: by score within each kind


def shown_name(requested: str) -> str:
    """A requested name as answers and logs repeat it: whole up to MAX_REQUESTED_CHARS, else its start and length."""
    if len(requested) <= MAX_REQUESTED_CHARS:
        return requested
    return f"{requested[:64]}... ({len(requested):,} characters)"


def _looks_alike(name: str) -> bool:
    """The name nests another namespace inside its own (`evil.srv_b.payroll_run`): an upstream's tool named like
    another server's."""
    key = segment_key(name)
    return len(key) > 2 and key[1] != key[0]


def _first(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))[:MAX_SUGGESTIONS]


def _extends(candidate: list[str], wanted: list[str]) -> bool:
    """The candidate's words start with the requested ones and add at least one."""
    return len(candidate) > len(wanted) > 0 and candidate[: len(wanted)] == wanted


def _adds_action(candidate: list[str], wanted: list[str]) -> bool:
    return any(word in ACTION_VERBS for word in set(candidate) - set(wanted))
