"""Untrusted text made safe to handle: JSON whose nesting cannot crash a caller (Python's parser raises
RecursionError on `[[[[...`, reported here as the JSONDecodeError callers already handle), and text every encoder and
database can store (`only_text`)."""

from __future__ import annotations

import json
import re
from typing import Any

# A lone surrogate no encoder can write and no model can read; NUL no PostgreSQL text column holds.
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def loads(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        document = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", document, 0) from None


def only_text(text: str) -> str:
    """`text` with each lone surrogate (half an emoji in JSON, which no encoder can write) and each NUL (which
    PostgreSQL's text refuses) as U+FFFD."""
    return _NOT_TEXT.sub("\ufffd", text)
