"""Tool poisoning checks: texts from MCP servers are untrusted, and the model reads them as if they were ours.

What is checked: a tool's description and every string of its input schema (titles, descriptions, examples,
defaults, enum values, property names), a server's handshake instructions, and, when configured, the results of
tool calls. A finding does not prove malice; a flagged tool is quarantined until a person approves it
(`toolrag mcp approve`), and each finding says why.

How, in order:
1. Hidden characters: Unicode tags (which smuggle ASCII text past a reviewer), bidi overrides, zero-width and
   invisible characters, soft hyphens, Hangul fillers and variation selectors outside the places they belong
   (an emoji sequence, a right-to-left text, a script that needs a joiner). The text is read again without them,
   and tag characters are decoded and read too.
2. Encodings: base64 and hex runs that decode to text, rot13, and leetspeak are decoded and read like the rest.
3. Rules, in English, German, Ukrainian, Russian, Chinese, French and Spanish: orders to ignore instructions,
   hiding things from the user, instruction blocks (`<IMPORTANT>`, `[INST]`, hidden HTML comments), asking for the
   system prompt, and paths of secret files (`~/.ssh`, `.aws/credentials`, `mcp.json`, ...).
4. Meaning: each sentence is embedded with the multilingual model and compared with reference sentences of what
   attacks ask a model to do and of what tool texts ordinarily say (`poisoning_bank.py`); a sentence nearer the
   attacks by a margin is flagged, with a lower margin when it also carries the marks of an order to the model
   (words like "always", "first", "instead"; private data such as the conversation, passwords or files; a flow
   into a parameter; another tool). This catches instructions without trigger words and in other languages.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.mcp.poisoning_bank import ATTACKS, TOOL_TEXTS

# -- 1. hidden characters ----------------------------------------------------------------------------------------

_TAGS = re.compile("[\U000e0000-\U000e007f]")
_ALWAYS_HIDDEN = re.compile(
    "[\u00ad\u034f\u115f\u1160\u180e\u200b\u202a-\u202e\u2060-\u2064\u2066-\u2069\u3164\ufeff\uffa0"
    "\U000e0100-\U000e01ef]"
)
_ZWJ, _ZWNJ, _LRM, _RLM = "\u200d", "\u200c", "\u200e", "\u200f"
_VARIATION = re.compile("[\ufe00-\ufe0f]")
_RTL = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufeff]")
_JOINING_SCRIPTS = re.compile("[\u0600-\u06ff\u0900-\u0dff]")  # Arabic, Persian, Indic: ZWNJ is spelling there


def _pictographic(char: str) -> bool:
    return unicodedata.category(char) == "So" or 0x1F000 <= ord(char) <= 0x1FAFF or 0x2600 <= ord(char) <= 0x27BF


def hidden_characters(text: str) -> list[str]:
    """Names of the invisible characters in `text` that are not where such characters belong."""
    found = [unicodedata.name(c, f"U+{ord(c):04X}") for c in _ALWAYS_HIDDEN.findall(text)]
    found.extend("TAG CHARACTER" for _ in _TAGS.findall(text))
    for i, char in enumerate(text):
        before, after = text[i - 1] if i else "", text[i + 1] if i + 1 < len(text) else ""
        if char == _ZWJ and not (_pictographic(before) or _VARIATION.match(before) or _pictographic(after)):
            found.append("ZERO WIDTH JOINER")
        elif char == _ZWNJ and not _JOINING_SCRIPTS.search(text):
            found.append("ZERO WIDTH NON-JOINER")
        elif char in (_LRM, _RLM) and not _RTL.search(text):
            found.append(unicodedata.name(char))
        elif _VARIATION.match(char) and (not before or before.isalnum()):
            found.append("VARIATION SELECTOR")
    return list(dict.fromkeys(found))


def visible_text(text: str) -> str:
    """What a reviewer sees: the text without invisible characters, in Unicode normal form."""
    text = _TAGS.sub("", _ALWAYS_HIDDEN.sub("", text))
    return unicodedata.normalize("NFKC", text.replace(_ZWJ, "").replace(_ZWNJ, "").replace(_LRM, "").replace(_RLM, ""))


def decoded_tags(text: str) -> str:
    """Unicode tag characters read as the ASCII they encode (how text is smuggled past a reviewer)."""
    return "".join(chr(ord(c) - 0xE0000) for c in _TAGS.findall(text) if 0x20 <= ord(c) - 0xE0000 < 0x7F)


# -- 2. encodings --------------------------------------------------------------------------------------------------

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
_HEX = re.compile(r"(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}){12,}(?![0-9a-fA-F])")
_BASE32 = re.compile(r"(?<![A-Z2-7=])[A-Z2-7]{24,}={0,6}(?![A-Z2-7=])")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})
_LEETISH = re.compile(r"\b(?=\w*[a-z])(?=\w*[013457])\w{3,}\b", re.I)


def encoded_variants(text: str) -> Iterator[tuple[str, str]]:
    """(how, decoded text) for every encoding `text` may hide instructions in."""
    for match in _BASE64.finditer(text):
        decoded = _printable(_try(lambda m=match: base64.b64decode(m.group(0) + "==", validate=False)))
        if decoded:
            yield "base64", decoded
    for match in _HEX.finditer(text):
        decoded = _printable(_try(lambda m=match: binascii.unhexlify(m.group(0))))
        if decoded:
            yield "hex", decoded
    for match in _BASE32.finditer(text):
        run = match.group(0).rstrip("=")
        decoded = _printable(_try(lambda run=run: base64.b32decode(run + "=" * (-len(run) % 8))))
        if decoded:
            yield "base32", decoded
    yield "rot13", codecs.decode(text, "rot13")
    if len(_LEETISH.findall(text)) >= 3:
        yield "leetspeak", text.translate(_LEET)


def _try(decode: Any) -> bytes:
    try:
        return bytes(decode())
    except (ValueError, binascii.Error):
        return b""


def _printable(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return text if len(text) >= 12 and letters >= 0.8 * len(text) else ""


# -- 3. rules -----------------------------------------------------------------------------------------------------

_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "asks the model to ignore its instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:[^.;:\n]{0,25}\s)?(?:all|any|the|your|previous|prior"
            r"|above|earlier|system|other|these|those)\s+(?:[^.;:\n]{0,25}\s)?(?:instructions?|rules|prompts?|guidelines"
            r"|directives|safety|user'?s? (?:request|question|wishes))\b"
            r"|\b(?:prior|previous|earlier) (?:rules|instructions) (?:are|is) (?:void|cancel)"
            r"|ignorier\w*\b.{0,30}\b(?:anweisung|regel|vorgabe|bitte|anfrage)|ігнор\w*.{0,30}(?:інструкці|вказівк"
            r"|правил|прохання|запит)|игнорир\w*.{0,30}(?:инструкци|указани|правил|просьб|запрос)"
            r"|忽略.{0,10}(?:指令|指示|说明|规则|要求|请求)|\bignor\w*[^.;:\n]{0,30}\b(?:consignes|instructions|règles"
            r"|demande)|\bignora\w*[^.;:\n]{0,30}\b(?:instrucciones|reglas|petición|solicitud)",
            re.I | re.S,
        ),
    ),
    (
        "hides something from the user",
        re.compile(
            r"\b(?:do not|don'?t|never|must not)\b.{0,25}\b(?:tell|mention|inform|reveal|show|notify|alert|let)\b"
            r".{0,40}\b(?:user|human|person)|\bwithout (?:telling|informing|notifying|alerting) (?:the )?user"
            r"|\b(?:keep|kept|stays?|remains?)\b.{0,20}\b(?:hidden|secret) from the user"
            r"|\bthe user (?:does not|doesn'?t) need to (?:know|be told)"
            r"|(?:erwähn|sag|verrat|inform)\w*.{0,40}\b(?:nicht|nichts)\b.{0,40}\b(?:nutzer|benutzer|anwender)"
            r"|\b(?:nutzer|benutzer)\w*.{0,30}\b(?:nicht|nichts)\b.{0,20}\b(?:erwähn|sag|verrat)"
            r"|не\s+(?:кажи|повідомляй|згадуй|говори|сообщай|упоминай)|нічого не повідомляй|不要(?:告诉|让|提及|通知)"
            r"|n'en parle pas|ne (?:le |lui )?(?:dis|mentionne|signale) (?:pas|rien)|no se lo (?:digas|menciones)",
            re.I | re.S,
        ),
    ),
    (
        "carries a block of instructions for the model",
        re.compile(
            r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|wichtig|важливо|важно|重要|指令)\s*>"
            r"|\[/?INST\]|#{2,}\s*system|<!--.{0,400}?[a-z]{3}.{0,400}?-->|\bsystem\s*(?:note|override)\s*[:#]",
            re.I | re.S,
        ),
    ),
    (
        "speaks to the model",
        re.compile(
            r"\b(?:note|message|instructions?|reminder|notice)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?"
            r"(?:ai|assistants?|models?|llms?|agents?)\b|\b(?:the|an?)\s+(?:ai\s+)?(?:assistant|model|llm|agent)\s+"
            r"(?:(?:also|then|now|always|first|therefore)\s+)?(?:must|should|needs? to|has to|is required to|shall"
            r"|will always)\b|\bas an ai\b|(?:^|[.!?]\s+)assistant\s*[:,]"
            r"|\b(?:hinweis|nachricht|anweisung)\w*\s+(?:an|für)\s+(?:den\s+|die\s+)?(?:ki|assistent)"
            r"|\b(?:der\s+)?assistent\w*(?:\s+\w+)?\s+(?:muss|soll|darf)|(?:примітка|вказівка|інструкці\w+"
            r"|повідомлення)\s+для\s+(?:ші|асистент\w*|моделі)|асистент\w*(?:\s+\w+)?\s+(?:повин\w*|мус\w*|ма[єю]\s)"
            r"|(?:заметка|указание)"
            r"\s+для\s+(?:ии|ассистент\w*)|ассистент\w*\s+(?:должен|обязан)|给\s*(?:ai|人工智能)?\s*助手|助手(?:必须|应该|需要)"
            r"|\b(?:note|message|instruction)s?\s+pour\s+l'assistant|l'assistant\s+doit|nota\s+para\s+el\s+asistente"
            r"|el\s+asistente\s+debe",
            re.I | re.M,
        ),
    ),
    (
        "asks for the model's system prompt",
        re.compile(
            r"\b(?:reveal|disclose|leak|print|output|include|pass|send|repeat)\b.{0,30}\bsystem prompt"
            r"|系统提示|системн\w* (?:промпт|подсказк)",
            re.I | re.S,
        ),
    ),
    (
        "changes how other tools behave",
        re.compile(
            r"\b(?:when|whenever|if|each time|every time|after)\b[^.;]{0,60}\b(?:other\s+|another\s+|any\s+)?"
            r"[\w.-]+\s+(?:tools?|functions?)\b[^.;]{0,100}\b(?:also|instead|always|must|never|first|change|replace)\b"
            r"|\binstead of (?:calling|using) (?:the\s+)?(?:\w+\s+){0,2}(?:tool|function)\b"
            r"|\b(?:wenn|sobald)\b[^.;]{0,60}\bwerkzeug\w*\b[^.;]{0,80}\b(?:auch|stattdessen|immer|muss|zusätzlich)\b"
            r"|(?:коли|щоразу)[^.;]{0,60}інструмент\w*[^.;]{0,80}(?:також|замість|завжди|треба|заміни)"
            r"|当[^。；]{0,30}工具[^。；]{0,60}(?:也|同时|必须|总是|改为|把)"
            r"|\b(?:quand|chaque fois)\b[^.;]{0,60}\boutil\b[^.;]{0,80}\b(?:aussi|au lieu|toujours|doit|remplace)",
            re.I | re.S,
        ),
    ),
    (
        "names a file of secrets",
        re.compile(
            r"~/\.ssh|id_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|\bmcp\.json\b|/etc/(?:passwd|shadow)"
            r"|\.bash_history|\.zsh_history|\.git-credentials|\.npmrc\b|\.pypirc|\.netrc\b|\.kube/config"
            r"|\.docker/config\.json|\bwallet\.dat\b|\.gnupg|gh/hosts\.yml|\bprintenv\b|\bLogin Data\b",
            re.I,
        ),
    ),
]

# -- 4. the marks of an order to the model, for the meaning check ------------------------------------------------

_ORDER_MARKS: list[tuple[str, re.Pattern[str]]] = [
    (
        "behaviour",
        re.compile(
            r"\b(?:always|first|instead|silently|secretly|quietly|whenever|every time|each time|from now on"
            r"|regardless|without asking|even if|every (?:answer|response|call|message)|on each call|immer|zuerst"
            r"|stattdessen|heimlich|jedes mal|завжди|спочатку"
            r"|замість|щоразу|всегда|сначала|toujours|d'abord|au lieu|chaque fois|siempre|primero)\b"
            r"|总是|首先|每当|而不是|先",
            re.I,
        ),
    ),
    (
        "private data",
        re.compile(
            r"\b(?:conversation|chat history|(?:whole|entire|full) chat|previous messages|messages of|system prompt"
            r"|passwords?|credentials?|api keys?|tokens?|cookies?|contacts?|clipboard|emails?|home (?:directory|folder)"
            r"|documents folder|environment variables?|ssh|private key|bank login|account numbers?|secrets?"
            r"|phone numbers?|card numbers?|cvv|authorization headers?)\b|\.env\b"
            r"|(?:gesprächsverlauf|passw[oö]rt|schlüssel|home-verzeichnis|nachrichten|історі\w+ розмови|парол\w*"
            r"|каталоз\w*"
            r"|токен\w*|повідомлен\w*|листи|домашн\w+ каталог\w*|rahunk\w*|对话记录|密码|密钥|邮件|主目录|消息"
            r"|historique|mots? de passe|jetons?|répertoire personnel|historial|contraseñas?)",
            re.I,
        ),
    ),
    (
        "flow into a parameter",
        re.compile(
            r"\b(?:in|into|as|to)\s+(?:the\s+)?[`'\"]?\w+[`'\"]?\s+(?:parameter|field|argument|arg)\b"
            r"|\b(?:in|into|as)\s+(?:the\s+)?`\w+`"
            r"|\b(?:parameter|field|argument|feld|parameter|поле|параметр\w*|champ|campo)\s+[`'\"]\w+[`'\"]"
            r"|[`'\"][a-z_]+[`'\"]\s*(?:field|parameter|字段|参数|поле|поля)|(?:字段|参数)",
            re.I,
        ),
    ),
    (
        "another tool",
        re.compile(
            r"\b(?:other|another|any|all|the)\s+(?:\w+\s+){0,2}tools?\b|\b[a-z]+_[a-z_]+\s+(?:tool|function|werkzeug)\b"
            r"|інструмент\w*|工具|outil|herramienta|werkzeug",
            re.I,
        ),
    ),
    (
        "the model",
        re.compile(
            r"\b(?:assistant|ai|llm|model|agent)\b|\bki\b|assistent|асистент|ші\b|ассистент|助手|l'assistant|asistente",
            re.I,
        ),
    ),
    (
        "an outside address",
        re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+|https?://|\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b|\+\d{7,}"),
    ),
]

_SENTENCES = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+|(?=<\s*/?\s*[A-Za-zА-Яа-я\u4e00-\u9fff]+\s*>)")
# A sentence is flagged when (its cosine with the nearest attack) - (with the nearest ordinary tool text)
# + MARK_WEIGHT x (marks of an order it carries) reaches THRESHOLD (chosen on the dev half of tests/data's corpus).
MARK_WEIGHT = 0.1
THRESHOLD = 0.18
MIN_ATTACK_SIMILARITY = 0.2


@dataclass(frozen=True)
class Finding:
    """Why a text was flagged: where in the tool, what was seen, and the words that showed it."""

    where: str
    reason: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason} ({self.excerpt!r})"


class PoisoningScanner:
    """Checks texts from MCP servers. Thread-safe; the multilingual model is loaded on the first meaning check."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder
        self._bank: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None = None
        self._lock = threading.Lock()

    def scan_tool(self, description: str, schema: Any = None, others: dict[str, Any] | None = None) -> list[Finding]:
        """Findings for a tool's description and every string (and property name) of its input schema and of the
        other parts the model is shown (`others`: output schema, annotations)."""
        texts = texts_of(description, schema, others)
        return [finding for where, text in texts for finding in self.scan_text(text, where)]

    def scan_text(self, text: str, where: str) -> list[Finding]:
        findings: list[Finding] = []
        hidden = hidden_characters(text)
        if hidden:
            findings.append(Finding(where, "hidden Unicode characters", ", ".join(hidden[:3])))
        readings = [("", visible_text(text))]
        if decoded_tags(text):
            readings.append(("hidden in Unicode tags: ", decoded_tags(text)))
        for how, decoded in encoded_variants(visible_text(text)):
            readings.append((f"encoded as {how}: ", decoded))
        for prefix, reading in readings:
            for finding in self._read(reading, where):
                findings.append(Finding(finding.where, prefix + finding.reason, finding.excerpt))
            if prefix.startswith("encoded") and findings:
                break
        return list(dict.fromkeys(findings))

    def _read(self, text: str, where: str) -> list[Finding]:
        findings = [
            Finding(where, reason, _excerpt(match.group(0)))
            for reason, pattern in _RULES
            if (match := pattern.search(text))
        ]
        sentences = [s.strip() for s in _SENTENCES.split(text) if len(s.strip()) >= 12]
        if sentences:
            findings.extend(self._meaning(sentences, where))
        return findings

    def _meaning(self, sentences: list[str], where: str) -> list[Finding]:
        attacks, ordinary = self._references()
        vectors = self._model().embed_documents([sentence.replace("_", " ") for sentence in sentences])
        nearest_attack = (vectors @ attacks.T).max(axis=1)
        nearest_ordinary = (vectors @ ordinary.T).max(axis=1)
        findings = []
        for sentence, attack, usual in zip(sentences, nearest_attack, nearest_ordinary, strict=True):
            marks = order_marks(sentence)
            if attack >= MIN_ATTACK_SIMILARITY and attack - usual + MARK_WEIGHT * len(marks) >= THRESHOLD:
                reason = "reads as an order to the model" + (f" ({', '.join(marks)})" if marks else "")
                findings.append(Finding(where, reason, _excerpt(sentence)))
        return findings

    def _model(self) -> Embedder:
        if self._embedder is None:
            from toolrag.embed import make_embedder

            self._embedder = make_embedder("use")
        return self._embedder

    def _references(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        with self._lock:
            if self._bank is None:
                model = self._model()
                self._bank = (model.embed_documents(ATTACKS), model.embed_documents(ordinary_tool_texts()))
            return self._bank


def ordinary_tool_texts() -> list[str]:
    """What tool texts ordinarily say: the reference sentences, and every sentence of the bundled example catalog's
    220 tools (descriptions and parameter texts), the widest sample of ordinary tool language at hand."""
    from importlib import resources

    import yaml

    catalog = yaml.safe_load((resources.files("toolrag") / "data" / "example_catalog.yaml").read_text("utf-8"))
    sentences = list(TOOL_TEXTS)
    for tool in catalog["tools"]:
        for where, text in texts_of(tool["description"], tool.get("input_schema")):
            if not where.endswith(" key"):
                sentences.extend(s.strip() for s in _SENTENCES.split(text) if len(s.strip()) >= 12)
    return list(dict.fromkeys(sentences))


def order_marks(sentence: str) -> list[str]:
    """Which marks of an order to the model a sentence carries (see `_ORDER_MARKS`)."""
    return [name for name, pattern in _ORDER_MARKS if pattern.search(sentence)]


def texts_of(description: str, schema: Any, others: dict[str, Any] | None = None) -> Iterator[tuple[str, str]]:
    """(where, text) for the description and every string inside the input schema and `others`, property names
    included."""
    yield "description", description
    stack: list[tuple[str, Any]] = [("schema", schema), *(others or {}).items()]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            yield where, value
        elif isinstance(value, dict):
            stack.extend((f"{where}.{key}", item) for key, item in value.items())
            stack.extend((f"{where} key", key) for key in value if isinstance(key, str))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))


_SHARED = PoisoningScanner()


def scan(description: str, schema: Any = None, others: dict[str, Any] | None = None) -> list[str]:
    """Why a tool's text looks aimed at the model: one line per finding, empty when nothing is found."""
    return [str(finding) for finding in _SHARED.scan_tool(description, schema, others)]


def scan_texts(texts: Iterable[tuple[str, str]]) -> list[Finding]:
    """Findings for (where, text) pairs, such as a tool result's text parts."""
    return [finding for where, text in texts for finding in _SHARED.scan_text(text, where)]


def _excerpt(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def strip_instructions(text: str, where: str = "result") -> tuple[str, list[Finding]]:
    """The text without the sentences that read as orders to the model (and without hidden characters), and the
    findings that removed them. For tool results, which reach the model as data."""
    kept: list[str] = []
    findings: list[Finding] = []
    for line in visible_text(text).split("\n"):
        sentences = [s for s in re.split(r"(?<=[.!?。！？])\s+", line) if s]
        for sentence in sentences:
            flagged = _SHARED.scan_text(sentence, where)
            findings.extend(flagged)
            if not flagged:
                kept.append(sentence)
        kept.append("\n")
    hidden = hidden_characters(text)
    if hidden:
        findings.insert(0, Finding(where, "hidden Unicode characters", ", ".join(hidden[:3])))
    return " ".join(kept).replace(" \n ", "\n").strip(), findings
