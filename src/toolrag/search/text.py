"""Text for retrieval: the words of a tool that the lexical and the dense index see, and query tokenization.

Tool names are code identifiers (`getCurrentWeather`, `github.create_issue`), so they are split into words before
they are matched against requests written in prose. CJK text has no spaces: it is indexed as character unigrams
and bigrams. Latin-script words are stemmed (Snowball English) so "payments" meets "payment".
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from itertools import pairwise
from typing import Any

import Stemmer

from toolrag.model import Tool

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_IDENTIFIER_SEPARATORS = re.compile(r"[_.\-/:]+")
_WORD = re.compile(r"\w+", re.UNICODE)
# English contractions: "can't" keeps its "not"; the rest ("it's", "I'm", "we'll", "user's") are cut, or their
# letters would match any tool text holding a stray "s" or "m".
_NEGATION = re.compile(r"\b(?:can|won)['’]t\b|(?<=\w)n['’]t\b")  # can't and won't whole: "can"/"will" are stopwords
_CONTRACTION = re.compile(r"(?<=\w)['’](?:s|m|re|ve|ll|d)\b")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

# Changes whenever the same text would give other tokens: an index built by another tokenization is rebuilt.
TOKENIZATION = 2
# Function words that carry no intent in tool requests. Short on purpose: a word like "not" or "all" can matter.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "also",
        "am",
        "an",
        "and",
        "any",
        "anything",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "may",
        "me",
        "might",
        "must",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "she",
        "should",
        "so",
        "some",
        "something",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "us",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "whether",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    ]
)

_stemmer = Stemmer.Stemmer("english")


def split_identifier(name: str) -> str:
    """`getCurrentWeather` -> `get Current Weather`; `github.create_issue` -> `github create issue`."""
    spaced = _IDENTIFIER_SEPARATORS.sub(" ", name)
    return _CAMEL_BOUNDARY.sub(" ", spaced).strip()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


def _cjk_grams(run: str) -> list[str]:
    chars = [c for c in run if CJK.match(c)]
    return chars + [a + b for a, b in pairwise(chars)]


def _unchanged(word: str) -> str:
    return word


def tokenize(text: str, stem: bool = True) -> list[str]:
    """Lowercased word tokens without stopwords, stemmed unless `stem` is off; CJK as unigrams and bigrams.

    Requests that are not English are tokenized with `stem=False`: the English stemmer turns German "suche" into
    "such" and so invents matches; unstemmed, only words the tool text shares as they are (names, brands) match."""
    normal = _stem if stem else _unchanged
    text = unicodedata.normalize("NFKC", split_identifier(text)).lower()
    text = _CONTRACTION.sub("", _NEGATION.sub(" not", text))
    tokens: list[str] = []
    for word in _WORD.findall(text):
        if CJK.search(word):
            latin = CJK.sub(" ", word).split()
            tokens.extend(normal(w) for w in latin if w not in STOPWORDS)
            tokens.extend(_cjk_grams(word))
        elif word not in STOPWORDS and not word.isdigit():
            tokens.append(normal(word))
    return tokens


def parameter_words(schema: dict[str, Any]) -> list[str]:
    """Top-level parameter names of an input schema, split into words."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    return [split_identifier(str(name)) for name in properties]


def lexical_text(tool: Tool) -> str:
    """What BM25 indexes: the name twice (identifiers are the strongest evidence), description, aliases, category."""
    name_words = split_identifier(tool.name)
    parts = [name_words, name_words, tool.description, *tool.aliases]
    if tool.category:
        parts.append(split_identifier(tool.category))
    parts.extend(parameter_words(tool.input_schema))
    return "\n".join(parts)


def dense_text(tool: Tool, description: str | None = None) -> str:
    """What the embedding model reads for the tool's main vector (with `description`: for a tenant's view)."""
    text = f"{split_identifier(tool.name)}: {description or tool.description}"
    params = parameter_words(tool.input_schema)
    if params:
        text += f" Parameters: {', '.join(params)}."
    return text


def dense_texts(tool: Tool) -> list[str]:
    """The main text, then one text per alias: a tool scores the best of its vectors."""
    return [dense_text(tool), *tool.aliases]


def tenant_views(tool: Tool) -> list[tuple[str | None, str]]:
    """(tenant, text) of the tool's views for one tenant's searches (search/examples.py): its example requests
    (None: every tenant's), then its main text with each tenant's own description."""
    examples = [(example.tenant, example.text) for example in tool.examples]
    described = [(tenant, dense_text(tool, text)) for tenant, text in tool.tenant_descriptions.items()]
    return [*examples, *described]


def embedded_texts(tool: Tool) -> list[str]:
    """Every text of the tool the model embeds: its dense texts, then its tenant views."""
    return [*dense_texts(tool), *(text for _, text in tenant_views(tool))]
