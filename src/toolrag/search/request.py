"""What search reads of a request: a bounded, cleaned view of it.

Users paste documents, logs and images into requests ("what does this image mean?" and 18,000 characters of base64).
Refusing such a request leaves the agent with an error instead of tools; reading all of it costs time in proportion
to its length and buries the words that matter. So search reads a view: data URIs and long base64 or hex runs are
left out, text that is not text (a lone surrogate, a NUL) becomes U+FFFD, and the rest is cut at a word boundary to
`limit` characters, more than the embedding models read. The size cap against abuse is the edges' (the HTTP body,
the MCP message: `limits.MAX_MESSAGE_CHARS`). Every pattern here starts only at the beginning of a run, so the
work is linear in the request's length.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from toolrag.jsontext import only_text

_DATA_URI = re.compile(r"(?<![\w-])data:[\w.+-]{1,80}/[\w.+-]{1,80}(?:;[\w=.+-]{1,80}){0,5},[\w+/=%.-]{1,}")
_BASE64 = re.compile(r"(?<![\w+/=])[A-Za-z0-9+/]{120,}={0,2}(?![\w+/=])")
_HEX = re.compile(r"(?<![0-9A-Fa-fx])(?:0x)?[0-9A-Fa-f]{96,}(?![0-9A-Fa-f])")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class SearchedText:
    text: str  # what retrieval reads
    note: str | None  # what was left out, to say so in the answer; None when the request is read whole


def searched_text(request: str, limit: int) -> SearchedText:
    """The view of `request` that search reads, and a note saying what it left out."""
    notes: list[str] = []
    text = only_text(request)
    if text != request:
        notes.append("characters that are not text were replaced")
    for pattern, what in ((_DATA_URI, "data URI"), (_BASE64, "base64 run"), (_HEX, "hex run")):
        text, dropped = pattern.subn(" ", text)
        if dropped:
            notes.append(f"{dropped} {what}{'s' if dropped > 1 else ''} left out")
    text = _SPACES.sub(" ", text).strip()
    if len(text) > limit:
        text = _cut(text, limit)
        notes.append(f"cut to its first {len(text):,} characters")
    # The models read a character as its compatibility form (U+FDFA as 18 letters): a request of such characters
    # costs what its letters cost, so it is read as its letters, cut to the limit.
    letters = unicodedata.normalize("NFKC", text)
    if len(letters) > limit:
        text = _cut(letters, limit)
        notes.append(f"cut to its first {len(text):,} characters as the models read them")
    note = f"the request ({len(request):,} characters) was searched in part: {'; '.join(notes)}" if notes else None
    return SearchedText(text, note)


def _cut(text: str, limit: int) -> str:
    """`text`'s start of at most `limit` characters, at a word boundary when there is one in its second half."""
    cut = text.rfind(" ", limit // 2, limit + 1)
    return text[: cut if cut > 0 else limit]
