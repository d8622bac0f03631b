"""Requests with several intents: "what is the weather in Kyiv and the dollar exchange rate?" needs two tools from
two domains, and one embedding of the whole request lands between them; "Check the stock. Then order more. Finally,
email the supplier." is a task of three steps, each with its own tool.

A request is split only at explicit markers (in several languages): a conjunction that starts a new clause (the
next word asks or commands), "then", a semicolon, or a sentence boundary. Parts shorter than three words are merged
back: they are rarely an intent of their own. Whether the parts really ask for different tools is for retrieval to
tell (search/steps.py): a request phrased in several sentences about one thing is searched whole.
"""

from __future__ import annotations

import re

MAX_INTENTS = 8  # steps searched at most: each costs one query embedding more

# Words that open a clause asking for something, per language (lower case).
_CLAUSE_OPENERS = (
    # English
    "can|could|would|will|what|what's|whats|how|is|are|do|does|did|please|tell|give|show|find|get|send|book|check"
    "|list|calculate|compute|convert|search|look|provide|recommend|let|fetch|translate|create|schedule|play|set"
    "|where|when|which|who|remind|add|open|order|buy|email|also"
    # German
    "|kannst|können|könntest|was|wie|wo|wann|welche|welcher|ist|sind|gib|zeig|zeige|finde|sag|sage|schick|buche"
    "|prüfe|berechne|suche|übersetze|erstelle"
    # Ukrainian and Russian
    "|яка|який|які|яке|що|як|де|коли|чи|скажи|покажи|знайди|дай|надішли|перевір|порахуй|переклади|створи"
    "|какая|какой|какие|что|как|где|когда|ли|покажи|найди|пришли|проверь|посчитай|переведи|создай"
    # Spanish, French
    "|puedes|qué|cómo|dónde|cuál|dime|muestra|busca|envía|peux|quel|quelle|comment|où|donne|montre|cherche|envoie"
)
_CONJUNCTION = r"(?:and|und|і|й|та|и|y|e|et|plus)"
_SPLITTERS = [
    # a conjunction opening a new clause: "... in Kyiv and what is the dollar rate"
    re.compile(rf"\s*,?\s+{_CONJUNCTION}\s+(?=(?:also\s+|then\s+)?(?:{_CLAUSE_OPENERS})\b)", re.IGNORECASE),
    # "then" / "after that" sequencing: "find the paper, then summarize it"
    re.compile(r"\s*,?\s+(?:and\s+)?(?:then|after that|afterwards|danach|dann|потім|затем|потом)\s+", re.IGNORECASE),
    re.compile(r"\s*;\s*"),
    # Chinese and Japanese sequencing and enumeration
    re.compile(r"[，,；;]?\s*(?:然后|并且|另外|还有|同时|再)\s*"),
]
# A sentence ends at ? or ! (or their CJK forms and 。), or at a full stop before a capital letter, unless the full
# stop closes an abbreviation ("e.g.", "Dr.", "ST.", "Corp.", "U.S.") or an initial ("J."); a word in capitals ends
# a sentence like any other ("order ABC. Then", "in ng/dL. Finally").
_SENTENCE_END = re.compile(
    r"(?<=[?？!！。])\s*"
    r"|(?<!\b[a-zA-Z])(?<!\.[a-zA-Z])(?<!\be\.g)(?<!\bi\.e)"
    r"(?<!\b(?i:dr|mr|ms|st|vs|no|co|jr|sr))(?<!\b(?i:mrs|inc|ltd|sra|fig|vol))(?<!\b(?i:prof|corp|dept))"
    r"\.\s+(?=[\"'“«(]?[A-ZÀ-ÖØ-ÞА-ЯЄІЇҐ])"
)


def split_intents(request: str) -> list[str]:
    """The parts of a request that ask for different things; one part when it asks for one."""
    parts = [request.strip()]
    for splitter in [_SENTENCE_END, *_SPLITTERS]:
        parts = [piece for part in parts for piece in splitter.split(part)]
    kept = _merge_short([p.strip(" ,.") for p in parts if p.strip(" ,.")])
    return kept[:MAX_INTENTS] if len(kept) > 1 else [request.strip()]


def _merge_short(parts: list[str]) -> list[str]:
    merged: list[str] = []
    for part in parts:
        if merged and (_words(part) < 3 or _words(merged[-1]) < 3):
            merged[-1] = f"{merged[-1]} {part}"
        else:
            merged.append(part)
    return merged


def _words(text: str) -> int:
    # CJK text has no spaces: count characters in pairs as words.
    if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text):
        return len(re.sub(r"\s", "", text)) // 2
    return len(text.split())
