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
   Where a text sits is weighed too: a property name written as a phrase, or one that asks for private data
   ("aws_credentials_file_contents"), a default that sends somewhere. An order to set the model's instructions aside,
   or a precedence claim over the user made for the tool's own text, is a finding whatever the rest weighs.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import json
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolrag.catalog.poisoning_bank import ATTACKS, TOOL_TEXTS
from toolrag.catalog.poisoning_signs import (
    DESCRIPTIONS,
    MARKS,
    NAMES,
    WEAK_SIGNS,
    claims_precedence_for_itself,
    signed_window,
    signs_of,
)
from toolrag.embed.base import Embedder
from toolrag.embed.cache import cached_vectors
from toolrag.model import SYNCED_SOURCE_PREFIX, Tool
from toolrag.schemas.drafts import to_2020_12
from toolrag.schemas.providers import provider_problems
from toolrag.search.text import split_identifier

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


# -- 3. reading a tool: its sentences, each with the signs of an order to the model -------------------------------

_SENTENCES = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+|(?=<\s*/?\s*[A-Za-zА-Яа-я\u4e00-\u9fff]+\s*>)")
MIN_SENTENCE_CHARS = 8
MAX_EMBEDDED = 24  # sentences of one tool compared by meaning at most (those with the most signs): a bounded cost
# In results (documents, pages, tickets) links, passwords and orders to a reader are ordinary: these weigh apart.
RESULT_SIGNS = ("outside", "private", "imperative", "obligation", "conversation")
FEATURES = [
    *NAMES,
    *(f"result+{name}" for name in RESULT_SIGNS),
    "key_signs",
    "key_asks",
    "data_signs",
    "data_address",
    "instructions",
    "result",
    "near_attacks",
    "nearest_attack",
    "attack_likeness",
    "signs",
    "hidden",
    "encoded",
]


@dataclass(frozen=True)
class Sentence:
    where: str
    text: str
    signs: frozenset[str]


@dataclass
class Reading:
    """A tool (or a server's instructions, or a result) as the model reads it, encodings decoded."""

    sentences: list[Sentence]
    hidden: list[tuple[str, list[str]]]  # (where, names of the hidden characters)
    encoded: bool  # a base64, base32 or hex run decoded to text
    key_signs: bool  # a property name carries signs (an instruction written as a name)
    kinds: set[str]  # "result", "instructions": where the text was met
    data_signs: bool = False  # a default, enum value or example carries a strong sign (a hidden recipient, a path)
    data_address: bool = False  # a default sends somewhere: an e-mail address, IBAN or account, a destination's URL
    key_asks: bool = False  # a property name is a phrase asking for private data ("aws_credentials_file_contents")


_COMMON = re.compile(r"(?i)\b(?:the|and|to|of|you|your|is|in|this|that|for|with|before|all|it|any|then|user|file)\b")
# Cyrillic and Greek letters that look like Latin ones: "before" spelt with a Cyrillic e and o reads as "before"
_LOOK_ALIKE = str.maketrans(
    "аеорсхуіјѕԁһӏԛԝАВЕЗІЈКМНОРСТУХЅΑΒΕΖΗΙΚΜΝΟΡΤΥΧαοιν",
    "aeopcxyijsdhlqwABE3IJKMHOPCTYXSABEZHIKMNOPTYXaoiv",
)
# A Latin letter beside a Cyrillic or Greek one (searched, never matched whole: no `\w*` around it, which made a
# search of one long word quadratic)
_MIXED = re.compile(r"[a-zA-Z][а-яА-ЯіІјЈѕЅԁһӏԛԝΑ-Ωα-ω]|[а-яА-ЯіІјЈѕЅԁһӏԛԝΑ-Ωα-ω][a-zA-Z]")


_DATA = re.compile(r"\.(?:default|enum|examples?|const)(?:\[\d+\])?$")
# A fixed value the model sends without being told: a default's or constant's e-mail address, IBAN or account number
# (a sender's own address aside), or a URL when the property is where something goes
_FIXED = re.compile(r"\.([^.\[]+)\.(?:default|const)$")
_SENDER = re.compile(r"(?i)^(?:from|sender|reply_?to|author|committer)")
_DESTINATION = re.compile(
    r"(?i)(?:^|_)(?:to|recipients?|bcc|cc|dest\w*|target|payee|beneficiar\w*|iban|account|conto|cuenta|konto"
    r"|webhook|callback|forward\w*|remote|mirror|share\w*|empf\w*|destinat\w*|reviewers?|upload)(?:_|$)"
)
# An e-mail address is tried only where a run of its characters starts (the lookbehind): tried at every
# character of a long run, the search was quadratic
_ADDRESS = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+\.[\w.-]+|\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}|\b\d{10,}\b")
_URL = re.compile(r"(?i)\bhttps?://|\bgit@")
# What a property name asks to be given: private data, the conversation, a secret file or its contents, in a name of
# three words or more (or a long name in a script without spaces); a name that ends in a reference to the thing (its
# path, name, id) asks for no contents ("ssh_key_path", "env_file_name")
_ASKED = frozenset({"private", "conversation", "secret_file", "contents", "asks_for"})
_REFERENCE = re.compile(
    r"(?i)(?:path|paths|file ?name|name|names|id|ids|dir|directory|folder|url|uri|location|ref|profile|alias|count"
    r"|length|size|format|type|mode|enabled|flag|ruta|chemin|pfad|percorso|caminho|путь|шлях|路径|パス|경로)$"
)


def _name_signs(name: str, signs: frozenset[str]) -> frozenset[str]:
    """A property name's signs: no imperative (a name is no sentence: "output_type", "read_only" give no order); a
    name of four words or more (or a long one in a script without spaces) is a phrase, weighed and compared by meaning
    even without an alarming word ("everything_the_user_told_you_so_far")."""
    signs -= {"imperative"}
    if len(name.split()) >= 4 or (not name.isascii() and len(name) >= 8 and " " not in name):
        signs |= {"phrase_name"}
    return signs


def _asks_in_a_name(name: str, signs: frozenset[str]) -> bool:
    long_enough = len(name.split()) >= 3 or (not name.isascii() and len(name) >= 8 and " " not in name)
    return long_enough and bool(signs & _ASKED) and _REFERENCE.search(name.strip()) is None


# Files named in words in a property name ("contents_of_the_users_dot_env_file")
_DOT_WORD = re.compile(r"(?i)\bdot (env|ssh|aws|kube|npmrc|netrc|pypirc|docker|gnupg|git-credentials)\b")


def _sends_somewhere(where: str, value: str) -> bool:
    fixed = _FIXED.search(where)
    if fixed is None or _SENDER.search(fixed.group(1)):
        return False
    return bool(_ADDRESS.search(value)) or (bool(_URL.search(value)) and bool(_DESTINATION.search(fixed.group(1))))


def _common_words(text: str) -> int:
    return len(_COMMON.findall(text))


def _unmixed(text: str) -> list[str]:
    """The text with its look-alike letters read as Latin, when some word mixes Latin with another script."""
    return [text.translate(_LOOK_ALIKE)] if _MIXED.search(text) else []


def _reversed_runs(text: str) -> list[str]:
    """What follows each right-to-left override, as a reviewer's screen shows it: reversed."""
    return [part.split("\u202c", 1)[0][::-1] for part in text.split("\u202e")[1:]]


def read(texts: Iterable[tuple[str, str]]) -> Reading:
    """Every sentence of the texts, of what their hidden characters and encodings hold too, with its signs."""
    reading = Reading([], [], False, False, set())
    for where, text in texts:
        hidden = hidden_characters(text)
        if hidden:
            reading.hidden.append((where, hidden))
        reading.kinds.update(kind for kind in ("result", "instructions") if where.startswith(kind))
        # JSON in a result escapes its line breaks; a right-to-left override shows a reversed text as written; a
        # property name is words joined by underscores; look-alike letters of other scripts read as Latin ones
        visible = visible_text(text).replace("\\n", "\n")
        if where.endswith(" key"):
            visible = _DOT_WORD.sub(r".\1", split_identifier(visible).replace("_", " "))
        reading.data_address = reading.data_address or _sends_somewhere(where, visible)
        variants = [visible, decoded_tags(text), *_reversed_runs(text), *_unmixed(visible)]
        for how, decoded in encoded_variants(visible):
            # rot13 and leetspeak read every text anew: kept only when that makes it read more like language
            readable = how in ("base64", "base32", "hex") or _common_words(decoded) >= _common_words(visible) + 3
            if readable and signs_of(decoded) - WEAK_SIGNS:
                variants.append(decoded)
                reading.encoded = reading.encoded or how in ("base64", "base32", "hex")
        for variant in variants:
            for part in _SENTENCES.split(variant):
                sentence = part.strip()
                if len(sentence) >= MIN_SENTENCE_CHARS:
                    signs = signs_of(sentence)
                    if where.endswith(" key"):
                        signs = _name_signs(sentence, signs)
                    reading.sentences.append(Sentence(where, sentence, signs))
                    # a name that points outside ("webhook_url", "callback") is a field like any other
                    strong = bool(signs - WEAK_SIGNS - ({"outside"} if where.endswith(" key") else set()))
                    # a property name that names something alarming, or is a phrase with a sign (honest names are
                    # a word or two: "password", "api_key")
                    phrase = len(sentence.split()) >= 4 and bool(signs - MARKS)
                    reading.key_signs = reading.key_signs or (where.endswith(" key") and (strong or phrase))
                    reading.key_asks = reading.key_asks or (where.endswith(" key") and _asks_in_a_name(sentence, signs))
                    # a fixed value's URL is no sign by itself (a `base_url` defaults to the service's own API):
                    # data_address weighs where a default sends
                    data = signs - WEAK_SIGNS - ({"outside"} if _FIXED.search(where) else set())
                    reading.data_signs = reading.data_signs or (bool(data) and _DATA.search(where) is not None)
    return reading


# -- 4. weighing the signs: a logistic model fitted on the tuning half of the corpus ----------------------------------


@dataclass(frozen=True)
class PoisoningModel:
    """The weights of FEATURES, the threshold, the attack sentences compared by meaning, and a linear reading of a
    sentence's vector as an attack's (`likeness`); fitted by `benchmarks/poisoning.py fit` on the corpora's tuning
    halves and kept in data/poisoning_model.json."""

    weights: np.ndarray[Any, Any]
    bias: float
    threshold: float
    attacks: list[str]
    likeness: np.ndarray[Any, Any]  # weights over a sentence's vector
    likeness_bias: float

    @classmethod
    def bundled(cls) -> PoisoningModel:
        from importlib import resources

        data = json.loads((resources.files("toolrag") / "data" / "poisoning_model.json").read_text("utf-8"))
        if data["features"] != FEATURES:
            raise ValueError("data/poisoning_model.json was fitted on other features: fit it again")
        return cls(
            np.asarray(data["weights"], dtype=np.float64),
            data["bias"],
            data["threshold"],
            data["attacks"],
            np.asarray(data["likeness"], dtype=np.float32),
            data["likeness_bias"],
        )

    def probability(self, features: np.ndarray[Any, Any]) -> float:
        return sigmoid(float(features @ self.weights + self.bias))


def sigmoid(value: float) -> float:
    return float(1.0 / (1.0 + np.exp(-value)))


Nearness = dict[str, tuple[float, float, float]]


def embedded_sentences(reading: Reading) -> list[str]:
    """The sentences compared by meaning: those with signs, the most signed first, at most MAX_EMBEDDED."""
    signed = sorted(
        {s.text: s for s in reading.sentences if s.signs - MARKS}.values(), key=lambda s: -len(s.signs - MARKS)
    )
    return [s.text for s in signed[:MAX_EMBEDDED]]


def features_of(reading: Reading, nearness: Nearness) -> np.ndarray[Any, Any]:
    """The model's features of a reading; `nearness`: per embedded sentence, its margin towards the nearest attack
    and towards its three nearest (against ordinary tool texts), and how much it reads like an attack."""
    vector = np.zeros(len(FEATURES), dtype=np.float64)
    position = {name: i for i, name in enumerate(FEATURES)}
    result = "result" in reading.kinds
    for sentence in reading.sentences:
        for name in sentence.signs:
            vector[position[name]] = 1.0
            if result and name in RESULT_SIGNS:
                vector[position[f"result+{name}"]] = 1.0
    vector[position["key_signs"]] = reading.key_signs
    vector[position["key_asks"]] = reading.key_asks
    vector[position["data_signs"]] = reading.data_signs
    vector[position["data_address"]] = reading.data_address
    vector[position["instructions"]] = "instructions" in reading.kinds
    vector[position["result"]] = "result" in reading.kinds
    if nearness:
        vector[position["nearest_attack"]] = max(near for near, _, _ in nearness.values())
        vector[position["near_attacks"]] = max(near3 for _, near3, _ in nearness.values())
        vector[position["attack_likeness"]] = max(likeness for _, _, likeness in nearness.values())
    vector[position["signs"]] = max((len(s.signs - MARKS) for s in reading.sentences), default=0) / 5
    vector[position["hidden"]] = bool(reading.hidden)
    vector[position["encoded"]] = reading.encoded
    return vector


@dataclass(frozen=True)
class Finding:
    """Why a text was flagged: where in the tool, what was seen, and the words that showed it."""

    where: str
    reason: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason} ({self.excerpt!r})"


class PoisoningScanner:
    """Checks texts from MCP servers. Thread-safe; the multilingual model is loaded on the first meaning check.
    A tool's verdict is kept by the hash of its texts, so a text seen before costs nothing."""

    def __init__(self, embedder: Embedder | None = None, model: PoisoningModel | None = None) -> None:
        self._embedder = embedder
        self._weights = model
        self._bank: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None = None
        self._lock = threading.Lock()
        self._verdicts: OrderedDict[str, list[Finding]] = OrderedDict()

    @property
    def model(self) -> PoisoningModel:
        if self._weights is None:
            self._weights = PoisoningModel.bundled()
        return self._weights

    def scan_tool(self, description: str, schema: Any = None, others: dict[str, Any] | None = None) -> list[Finding]:
        """Findings for a tool's description and every string (and property name) of its input schema and of the
        other parts the model is shown (`others`: output schema, annotations)."""
        return self.scan_texts(texts_of(description, schema, others))

    def scan_text(self, text: str, where: str) -> list[Finding]:
        return self.scan_texts([(where, text)])

    def scan_texts(self, texts: Iterable[tuple[str, str]]) -> list[Finding]:
        """Findings for (where, text) pairs read together, as the parts of one tool (or one result)."""
        texts = list(texts)
        key = hashlib.sha256(json.dumps(texts, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            if key in self._verdicts:
                self._verdicts.move_to_end(key)
                return list(self._verdicts[key])
        findings = self._assess(read(texts))
        with self._lock:
            self._verdicts[key] = findings
            while len(self._verdicts) > _VERDICTS:
                self._verdicts.popitem(last=False)
        return list(findings)

    def _assess(self, reading: Reading) -> list[Finding]:
        """Hidden characters always; then, when the model weighs the whole past its threshold (or a sentence orders
        the model to set its instructions aside, or claims precedence over the user for this text), every sentence
        that weighs past it on its own (or else that order, or the one that weighs most), with the signs it
        carries."""
        findings = [
            Finding(where, "hidden Unicode characters", ", ".join(names[:3])) for where, names in reading.hidden
        ]
        nearness = self._nearness(reading)
        model = self.model
        # an order to set the model's instructions aside, given to the model, or a claim that this text outranks the
        # user (neither quoted nor about attacks), is a finding whatever the rest weighs: the rules the model may not
        # outweigh
        overrides = [
            s
            for s in reading.sentences
            if ((s.signs >= _OVERRIDE and s.signs & _ADDRESSED) or claims_precedence_for_itself(s.text, s.signs))
            and not s.signs & _CITED
        ]
        if model.probability(features_of(reading, nearness)) < model.threshold and not overrides:
            return findings
        unique = {sentence.text: sentence for sentence in reading.sentences}.values()
        weighed = sorted(((self._weight(s, reading, nearness), s) for s in unique), key=lambda pair: -pair[0])
        flagged = [s for weight, s in weighed if weight >= model.threshold] or overrides[:1] or [weighed[0][1]]
        for sentence in flagged:
            signs = (
                ", ".join(DESCRIPTIONS[name] for name in NAMES if name in sentence.signs - MARKS)
                or "means what attacks say"
            )
            findings.append(
                Finding(sentence.where, f"reads as an order to the model: {signs}", _excerpt(sentence.text))
            )
        return findings or [Finding("(tool)", "reads as an order to the model", "")]

    def _weight(self, sentence: Sentence, reading: Reading, nearness: Nearness) -> float:
        alone = Reading(
            [sentence], [], False, False, reading.kinds, reading.data_signs, reading.data_address, reading.key_asks
        )
        near = {sentence.text: nearness[sentence.text]} if sentence.text in nearness else {}
        return self.model.probability(features_of(alone, near))

    def _nearness(self, reading: Reading) -> Nearness:
        """For the sentences that carry signs (the most signed first, at most MAX_EMBEDDED), by meaning: how much
        nearer the attacks they are than ordinary tool texts, and how much they read like one."""
        chosen = embedded_sentences(reading)
        if not chosen:
            return {}
        attacks, ordinary = self._references()
        vectors = self.embed(chosen)
        likeness = np.einsum("ij,j->i", vectors, self.model.likeness, optimize=False) + self.model.likeness_bias
        near = margins(vectors, attacks, ordinary)
        return {text: (a, b, sigmoid(c)) for text, (a, b), c in zip(chosen, near, likeness, strict=True)}

    def embed(self, sentences: list[str]) -> np.ndarray[Any, Any]:
        """Each sentence's meaning, of its most signed window when it is long (`signed_window`)."""
        texts = [signed_window(text).replace("_", " ") for text in sentences]
        return np.asarray(self._model().embed_documents(texts))

    def _model(self) -> Embedder:
        if self._embedder is None:
            from toolrag.embed import make_embedder

            self._embedder = make_embedder("use")
        return self._embedder

    def _references(self) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The attack sentences (hand-written, and the tuning half's) and ordinary tool texts, embedded once per
        machine (embed/cache.py)."""
        with self._lock:
            if self._bank is None:
                model = self._model()
                attacks = [*ATTACKS, *self.model.attacks]
                ordinary = ordinary_tool_texts()
                self._bank = (
                    cached_vectors(
                        model.model_id, model.dimension, "documents", attacks, lambda: model.embed_documents(attacks)
                    ),
                    cached_vectors(
                        model.model_id, model.dimension, "documents", ordinary, lambda: model.embed_documents(ordinary)
                    ),
                )
            return self._bank


_VERDICTS = 4096  # tools whose verdicts are kept
_OVERRIDE, _ADDRESSED, _CITED = (
    frozenset({"override"}),
    frozenset({"imperative", "model"}),
    frozenset({"quoted", "meta"}),
)


def _top3(similarities: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The mean of each row's three largest values (a partition, not a sort: linear in the row)."""
    top: np.ndarray[Any, Any] = np.partition(similarities, -3, axis=1)[:, -3:].mean(axis=1)
    return top


def margins(
    vectors: np.ndarray[Any, Any],
    attacks: np.ndarray[Any, Any],
    ordinary: np.ndarray[Any, Any],
    skip_self: bool = False,
) -> list[tuple[float, float]]:
    """Per sentence vector: how much nearer the attacks it is than ordinary tool texts, to the nearest one and to
    the mean of the three nearest. `skip_self` (when fitting) ignores a sentence's own copy among the references."""
    # einsum, not BLAS: for a handful of sentences a BLAS call that wakes its threads (just after the embedder held
    # them at one) cost 19 ms against 0.2 ms
    to_attacks = np.einsum("ij,kj->ik", vectors, attacks, optimize=False)
    to_ordinary = np.einsum("ij,kj->ik", vectors, ordinary, optimize=False)
    if skip_self:
        to_attacks = np.where(to_attacks > 0.9999, -1.0, to_attacks)
        to_ordinary = np.where(to_ordinary > 0.9999, -1.0, to_ordinary)
    nearest = to_attacks.max(axis=1) - to_ordinary.max(axis=1)
    three = _top3(to_attacks) - _top3(to_ordinary)
    return [(float(a), float(b)) for a, b in zip(nearest, three, strict=True)]


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


def tool_findings(tool: Tool) -> tuple[str, ...]:
    """What the checks find in every text of the tool that reaches a model, and what in its input schema model
    providers would refuse (one such schema fails every request it is sent in): an MCP tool's new text
    (mcp/importer.py) and a catalog tool's text change waiting for review (catalog/review.py) alike."""
    shown = {"output_schema": tool.output_schema, "annotations": tool.annotations}
    poisoning = scan(tool.description, tool.input_schema, {k: v for k, v in shown.items() if v is not None})
    poisoning += name_findings(tool.name, namespaced=tool.source.startswith(SYNCED_SOURCE_PREFIX))
    refused = [
        f"input schema providers refuse: {problem}" for problem in provider_problems(to_2020_12(tool.input_schema))
    ]
    return (*poisoning, *refused)


NAME_PHRASE_WORDS = 6  # a name (or a part of one) of this many words with a sign is a phrase, not a name
_NAME_ORDERS = frozenset({"override", "precedence"})


def name_findings(name: str, namespaced: bool = False) -> list[str]:
    """Why a tool's name looks aimed at the model. A server chooses it and the model reads it
    ("before_using_any_other_tool_read_the_ssh_key"): what follows its first dot is read as words, whole, and each
    dotted part by itself, the first too unless it is an MCP server's name (`namespaced`: an operator chose it).
    Honest names are a few words that name an action ("post_webhook", "copy_clipboard_contents"): a name of under
    NAME_PHRASE_WORDS words is flagged only when the model weighs it past its threshold and it is four words long or
    sets instructions aside ("ignore_previous_instructions"). Of 6,159 benchmark and MCP tools' names, 3 flagged."""
    parts = name.split(".")
    after = parts[1:] or parts  # after the first dot: what a namespace is followed by
    readings = dict.fromkeys([" ".join(after), *(after if namespaced else parts)])
    for reading in readings:
        words = " ".join(split_identifier(reading).replace("_", " ").replace("-", " ").split())
        count, signs = len(words.split()), signs_of(words)
        if count >= NAME_PHRASE_WORDS and signs - WEAK_SIGNS and reading in parts:
            return [f"name: a phrase, not a name ({_excerpt(words)!r})"]
        found = _SHARED.scan_text(words, "name")
        if found and (count >= 4 or signs & _NAME_ORDERS):
            return [str(finding) for finding in found]
    return []


def scan_texts(texts: Iterable[tuple[str, str]]) -> list[Finding]:
    """Findings for (where, text) pairs, such as a tool result's text parts."""
    return [finding for where, text in texts for finding in _SHARED.scan_text(text, where)]


def scanner() -> PoisoningScanner:
    """The scanner every import shares (its verdicts are kept by the texts' hash)."""
    return _SHARED


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
