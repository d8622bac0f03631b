"""Masking what a usage log must not keep: secrets, e-mail addresses and long numbers in request texts.

Request texts are untrusted and can be long, so every pattern here runs in linear time: no pattern can start a
match inside a run it already failed on (runs are anchored at their left edge by a look-behind, and repeats are
bounded), and anything past `MAX_CHARS` is cut before matching. Secrets are found by shape (keys with a known
prefix, JWTs, private-key blocks, credentials in URLs), by what precedes them ("password: ..." in several
languages), and by entropy (long strings mixing letters and digits that read like no word).
"""

from __future__ import annotations

import math
import re
from collections import Counter

MAX_CHARS = 8000

_SECRET_PREFIXES = re.compile(
    r"(?<![\w-])(?:"
    r"(?:sk|rk|pk)[-_](?:live|test|proj|ant|api)[-_][\w-]{8,200}"  # Stripe, OpenAI project, Anthropic keys
    r"|sk-[\w-]{16,200}"  # OpenAI-style keys
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{20,200}|github_pat_\w{20,200}"  # GitHub tokens
    r"|xox[abprs]-[\w-]{10,200}"  # Slack tokens
    r"|AIza[\w-]{30,60}"  # Google API keys
    r"|glpat-[\w-]{16,100}"  # GitLab tokens
    r"|eyJ[\w-]{8,2000}\.[\w-]{8,4000}\.[\w-]{8,2000}"  # JWTs
    r")"
)
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----[\s\S]{0,8000}?(?:-----END [A-Z ]{0,40}-----|$)")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^\s:/@]{1,200}:[^\s/@]{1,200}(?=@)")
_SEPARATOR = r"(?:\s{0,3}(?:is|ist|est|es|є|це|was|=|:|是|为)){0,2}[\s:=]{0,3}"
_VALUE = r"(?P<value>\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|[^\s,;\"'<>]{3,200})"
# After these words, the next word is the secret ("my password hunter2", "Bearer abc...").
_AFTER_PASSWORD = re.compile(
    r"(?i)(?<!\w)(?:password|passwd|passphrase|pwd|passwort|kennwort|mot de passe|contraseña|senha|пароль"
    r"|密码|口令|bearer)" + _SEPARATOR + _VALUE
)
# After these, only when a separator says a value follows ("token: ...", "the api key is ..."): they are
# common words in requests about them ("count the tokens", "pin the message").
_AFTER_NAMED_SECRET = re.compile(
    r"(?i)(?<!\w)(?:secret|client[ _-]?secret|api[ _-]?key|access[ _-]?key|private[ _-]?key|token|pin|cvv|cvc)s?"
    r"(?:\s{0,3}(?:is|ist|est|es|=|:|是|为))[\s:=]{0,3}" + _VALUE
)
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}")
_NUMBER = re.compile(r"(?<![\d])\d(?:[\d\s.,/-]{0,40}\d)?")
_TOKEN = re.compile(r"(?<![\w+/=-])[\w+/=-]{20,4000}")


def redact(text: str) -> str:
    """The text with secrets, e-mail addresses and long numbers (cards, phones, accounts) masked."""
    text = text[:MAX_CHARS]
    text = _PRIVATE_KEY.sub("<secret>", text)
    text = _URL_CREDENTIALS.sub("<secret>", text)
    text = _SECRET_PREFIXES.sub("<secret>", text)
    text = _AFTER_PASSWORD.sub(_mask_value, text)
    text = _AFTER_NAMED_SECRET.sub(_mask_value, text)
    text = _EMAIL.sub("<email>", text)
    text = _TOKEN.sub(_mask_random, text)
    return _NUMBER.sub(_mask_long_number, text)


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.startswith("<") or value.lower() in _NOT_SECRETS:
        return match.group(0)
    return match.group(0)[: match.start("value") - match.start()] + "<secret>"


# Words that follow "password", "token", ... in requests about them rather than in them.
_NOT_SECRET_TEXT = """
    reset change forgot forgotten expired expiry manager policy for of to the a an my your please again field rotation
    rotate generator strength length
"""
_NOT_SECRETS = frozenset(_NOT_SECRET_TEXT.split())


def _mask_random(match: re.Match[str]) -> str:
    token = match.group(0)
    return "<secret>" if looks_random(token) else token


def looks_random(token: str) -> bool:
    """A long string that mixes letters with digits or symbols and spreads over many characters: a key, not a word."""
    has_letter = any(c.isalpha() for c in token)
    has_other = any(c.isdigit() or c in "+/=_-" for c in token)
    return has_letter and has_other and _entropy(token) >= 3.5


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _mask_long_number(match: re.Match[str]) -> str:
    digits = sum(c.isdigit() for c in match.group(0))
    return "<number>" if digits >= 3 else match.group(0)
