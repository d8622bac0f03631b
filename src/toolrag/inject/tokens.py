"""Prompt-token counts of tool definitions, offline.

With the `tokens` extra (`pip install "toolrag[tokens]"`, 75 MB: the `bpe-openai` tables), counts are exact for
OpenAI's o200k_base tokenizer (the GPT-4o and GPT-5 family). Without it they are estimated from the text's shape
(words by length, digit groups, punctuation, other scripts) with weights fitted to o200k_base counts of real tool
definitions: on the other halves, within 2-3% per tool and 1-2% over a catalog with full descriptions (bfcl, the
example catalog), 5-9% under on one-line tools (metatool) (docs/benchmarks.md).
Other providers' tokenizers differ from o200k_base by a similar margin, so the estimate serves them as well.
Tool definitions are counted as the compact JSON a provider receives; providers add a small fixed framing per
request that is not counted here.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from pathlib import Path
from typing import Any, Protocol, cast

ENCODING = "o200k_base"
_BINDINGS = "_bindings"  # bpe-openai's Rust extension module
_PIECES = re.compile(r"[A-Za-z]+|\d{1,3}|[^\sA-Za-z\d]+|\s+")
# Tokens per unit of each feature of `_features`: least squares on o200k_base counts of half of the example
# catalog's, bfcl's and metatool's definitions (OpenAI, Anthropic and MCP formats); a line break counts as one.
_WEIGHTS = (0.992, 0.138, 1.604, 0.655, 0.112, 0.846, 1.0)


class Counter(Protocol):
    def count(self, text: str) -> int: ...


@lru_cache(maxsize=1)
def _encoding() -> Counter | None:
    """o200k_base's counter, loaded the first time a count is needed; None without the `tokens` extra.

    Taken from bpe-openai's Rust extension module alone: importing the `bpe_openai` package parses the tables of
    all three of its encodings in Python for its model registry (about 0.8 s of CPU, two thirds of a cold
    `toolrag search`), where the extension loads the one encoding counted here in 0.05 s. The module's place is
    the pinned release's (pyproject.toml); `tests/test_first_hour.py` checks that counts are exact."""
    package = importlib.util.find_spec("bpe_openai")
    folders = package.submodule_search_locations if package is not None else None
    if not folders:
        return None
    candidates = (Path(folder) / f"{_BINDINGS}{suffix}" for folder in folders for suffix in EXTENSION_SUFFIXES)
    path = next((candidate for candidate in candidates if candidate.exists()), None)
    if path is None:
        return None
    loader = ExtensionFileLoader(f"bpe_openai.{_BINDINGS}", str(path))
    bindings = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))  # type: ignore[arg-type]
    loader.exec_module(bindings)
    return cast(Counter, bindings.tokenizer_for_encoding(ENCODING))


def exact() -> bool:
    """Whether counts are exact (the `tokens` extra is installed) rather than estimated."""
    return _encoding() is not None


def count_text(count: float) -> str:
    """A count as people read it: `~106` when estimated (without the `tokens` extra), `102` when exact."""
    return f"{count:.0f}" if exact() else f"~{count:.0f}"


def count_tokens(text: str) -> int:
    encoding = _encoding()
    if encoding is not None:
        return encoding.count(text)
    return max(1, round(sum(weight * value for weight, value in zip(_WEIGHTS, _features(text), strict=True))))


def _features(text: str) -> list[float]:
    """Short ASCII words, letters of long ones, digit groups, runs of ASCII punctuation and their characters,
    other characters, line breaks."""
    short_words = long_letters = digit_groups = punctuation_runs = punctuation = other = breaks = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isspace():
            breaks += piece != " "
        elif first.isascii() and first.isalpha():
            if len(piece) <= 7:
                short_words += 1
            else:
                long_letters += len(piece)
        elif first.isdigit():
            digit_groups += 1
        elif piece.isascii():
            punctuation_runs += 1
            punctuation += len(piece)
        else:
            other += len(piece)
    return [short_words, long_letters, digit_groups, punctuation_runs, punctuation, other, breaks]


def tools_tokens(rendered: Sequence[dict[str, Any]]) -> int:
    """Tokens of a list of rendered tool definitions."""
    return sum(count_tokens(json.dumps(item, ensure_ascii=False, separators=(",", ":"))) for item in rendered)
