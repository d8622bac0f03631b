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

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

ENCODING = "o200k_base"
_PIECES = re.compile(r"[A-Za-z]+|\d{1,3}|[^\sA-Za-z\d]+|\s+")
# Tokens per unit of each feature of `_features`: least squares on o200k_base counts of half of the example
# catalog's, bfcl's and metatool's definitions (OpenAI, Anthropic and MCP formats); a line break counts as one.
_WEIGHTS = (0.992, 0.138, 1.604, 0.655, 0.112, 0.846, 1.0)


@lru_cache(maxsize=1)
def _encoding() -> Any:
    try:
        import bpe_openai
    except ImportError:
        return None
    return bpe_openai.get_encoding(ENCODING)


def exact() -> bool:
    """Whether counts are exact (the `tokens` extra is installed) rather than estimated."""
    return _encoding() is not None


def count_tokens(text: str) -> int:
    encoding = _encoding()
    if encoding is not None:
        return len(encoding.encode(text))
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
