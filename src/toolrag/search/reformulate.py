"""Second chances for requests that got no tool, tried in order until one finds tools:

- `expand`: words of the request that no tool contains but that nearly match a word of a tool's name, alias or
  category (a typo, another form of the word) are added in the registry's spelling, and the request is searched
  again with the usual decision (search/confidence.py).
- `rewrite`: with a rewriter configured (`toolrag.runtime.rewrite.ChatRewriter` asks a chat model), a few short
  alternative phrasings (cached per request), each searched with the usual rules.

The step that found the tools is returned with them, shown in `SignalScores.reformulation` and logged with the
retrieval so monitoring can show which requests needed it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Protocol

from rapidfuzz import fuzz, process

from toolrag.search.text import STOPWORDS, tokenize

_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)


class Rewriter(Protocol):
    """Alternative phrasings of a request (may be empty); must not raise for a bad or unavailable model."""

    def rewrite(self, request: str) -> list[str]: ...


class Vocabulary:
    """The surface words of the tools a principal may use (names, aliases, categories, descriptions), for
    typo-tolerant expansion: a hidden tool's words are no more a request's expansion than an absent tool's."""

    def __init__(self, words: Iterable[str]) -> None:
        self.words = sorted(set(words) - STOPWORDS)
        self._known = set(self.words)
        self._by_initial: dict[str, list[str]] = {}
        for word in self.words:
            self._by_initial.setdefault(word[0], []).append(word)

    def expansions(self, request: str, known_term: Callable[[str], bool], min_ratio: float = 85.0) -> list[str]:
        """Registry words that nearly match a request word no tool contains (`known_term`: whether the lexical
        index holds a term), with the same first letter: typos ("wether"), not other words ("looking" is not
        "booking")."""
        found: list[str] = []
        for word in dict.fromkeys(w.lower() for w in _WORD.findall(request)):
            if word in self._known or word in STOPWORDS or all(known_term(term) for term in tokenize(word)):
                continue
            candidates = self._by_initial.get(word[0], [])
            match = process.extractOne(word, candidates, scorer=fuzz.ratio, score_cutoff=min_ratio)
            if match is not None and match[0] not in found:
                found.append(match[0])
        return found
