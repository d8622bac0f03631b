"""JSON from untrusted text: Python's parser raises RecursionError on deeply nested input (`[[[[...`), which is
reported here as the JSONDecodeError callers already handle, so no input can crash a caller."""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        document = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", document, 0) from None
