"""Regular expressions of tool schemas (`pattern`, `patternProperties`), run in linear time.

A schema's patterns come from MCP servers and catalogs, and arguments from models and clients: with a backtracking
engine, `{"pattern": "^(a+)+$"}` and a 28-character argument held a call for 14 s. Patterns run on RE2, whose time
grows linearly with the text whatever the pattern. JSON Schema patterns are ECMA-262 regular expressions; RE2 reads
the same syntax but for `\\uXXXX` escapes (rewritten to RE2's `\\x{XXXX}`) and the features that need backtracking
(lookaround, backreferences), which it refuses: a schema using them is refused when it is registered.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

import re2

MAX_PATTERN_CHARS = 2000  # no real schema's pattern comes near; compiling costs time and memory in proportion
_CACHED = 2048
_UNICODE_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|u\{([0-9a-fA-F]{1,6})\})|\\.", re.S)


class UnsafePattern(ValueError):
    """A pattern RE2 cannot run (it needs backtracking), or one too long to compile."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is reported to the caller, not printed on the server's stderr
    return options


_OPTIONS = _options()
_compiled: OrderedDict[str, Any] = OrderedDict()
_lock = threading.Lock()


def compile_pattern(pattern: str) -> Any:
    """The RE2 form of a JSON Schema pattern (cached); raises UnsafePattern saying why it cannot be run."""
    with _lock:
        found = _compiled.get(pattern)
        if found is not None:
            _compiled.move_to_end(pattern)
            return found
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsafePattern(f"pattern of {len(pattern):,} characters (at most {MAX_PATTERN_CHARS:,})")
    try:
        compiled = re2.compile(_as_re2(pattern), _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise UnsafePattern(f"pattern {pattern[:80]!r} cannot run in linear time ({reason})") from None
    with _lock:
        _compiled[pattern] = compiled
        while len(_compiled) > _CACHED:
            _compiled.popitem(last=False)
    return compiled


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (JSON Schema's `pattern` is not anchored)."""
    return compile_pattern(pattern).search(text) is not None


def _as_re2(pattern: str) -> str:
    def rewrite(match: re.Match[str]) -> str:
        code = match.group(1) or match.group(2)
        return f"\\x{{{code}}}" if code else match.group(0)

    return _UNICODE_ESCAPE.sub(rewrite, pattern)
