"""Tool poisoning checks: upstream descriptions and schemas are untrusted text that the model will read.

A finding does not prove malice; it quarantines the tool until a person approves it (`toolrag mcp approve`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "asks the model to ignore its instructions",
        re.compile(
            r"\b(ignore|disregard|forget|override)\b.{0,30}\b(previous|prior|above|earlier|all|system|other)\b"
            r".{0,20}\b(instructions?|prompts?|rules|messages?|guidelines)",
            re.I | re.S,
        ),
    ),
    (
        "hides something from the user",
        re.compile(
            r"\b(do not|don.t|never)\b.{0,20}\b(tell|mention|inform|reveal|show|notify)\b.{0,80}\b(the )?user",
            re.I | re.S,
        ),
    ),
    (
        "carries a block of instructions for the model",
        re.compile(r"<\s*/?\s*(important|system|instructions?|secret|hidden|admin)\s*>|\[/?INST\]", re.I),
    ),
    (
        "speaks to the model rather than describing the tool",
        re.compile(
            r"\b(you must|you should always|before (using|calling) (this|any) tool|"
            r"as an ai|assistant must|the (model|assistant|ai) (must|should))\b",
            re.I,
        ),
    ),
    (
        "mentions secrets or credentials",
        re.compile(
            r"(~/\.ssh|id_rsa|id_ed25519|\.env\b|\.aws/credentials|mcp\.json|\bprivate[ _-]key\b|"
            r"\b(api[ _-]?key|access[ _-]?token|password|passwd|secret[ _-]?key|credentials?)\b.{0,40}"
            r"\b(read|send|include|pass|upload|attach|copy|forward)\b|"
            r"\b(read|send|include|pass|upload|attach|copy|forward)\b.{0,40}"
            r"\b(api[ _-]?key|access[ _-]?token|password|passwd|secret[ _-]?key|credentials?)\b)",
            re.I | re.S,
        ),
    ),
    (
        "changes how other tools behave",
        re.compile(
            r"\b(when|whenever|if)\b.{0,30}\b(other|another|any) tools?\b.{0,60}\b(instead|always|must|also)\b",
            re.I | re.S,
        ),
    ),
]

# Zero-width characters, bidirectional overrides and Unicode tag characters render as nothing (or reorder text)
# for a person reviewing a description, while the model still reads them.
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")


def texts_of(description: str, schema: Any) -> Iterator[tuple[str, str]]:
    """(where, text) for the description and every string inside the input schema."""
    yield "description", description
    stack: list[tuple[str, Any]] = [("schema", schema)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            yield where, value
        elif isinstance(value, dict):
            stack.extend((f"{where}.{key}", item) for key, item in value.items())
            stack.extend((f"{where} key", key) for key in value if isinstance(key, str))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))


def scan(description: str, schema: Any) -> list[str]:
    """Why a tool's text looks aimed at the model: one finding per rule and place, empty when nothing is found."""
    findings: list[str] = []
    for where, text in texts_of(description, schema):
        if _INVISIBLE.search(text):
            findings.append(f"{where}: hidden Unicode characters")
        visible = unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))
        for reason, pattern in _RULES:
            match = pattern.search(visible)
            if match:
                findings.append(f"{where}: {reason} ({_excerpt(match.group(0))!r})")
    return list(dict.fromkeys(findings))


def _excerpt(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
