"""Masking what a usage log must not keep: secrets, e-mail addresses and long numbers in request texts.

Request texts are untrusted and can be long, so every pattern here runs in linear time: no pattern can start a
match inside a run it already failed on (runs are anchored at their left edge by a look-behind, and repeats are
bounded), each secret's name is read forward a bounded distance, and anything past `MAX_CHARS` is cut before
matching. Secrets are found by shape (keys with a known prefix, JWTs, private-key blocks, credentials in URLs), by
what precedes them (a secret's name, as written or spelled out letter by letter ("p a s s w o r d", "p.a.s.s"), in
English, German, Ukrainian, Russian, Chinese, French, Spanish, Portuguese,
Italian, Polish, Dutch, Japanese, Turkish, Swedish, Korean or Czech, then a quoted value, a `user / password` pair,
a passphrase after "is", "lautet", ":" up to the end of its clause, or one word that looks like a secret; after a
name that only ever names a secret's value, such as "password" or "api_key", the words that follow it up to a word
of ordinary grammar or of the request around it, such as "with", "mit", "via" or "gets": one word when it looks like
a key), and by entropy (long strings mixing letters and digits). A name followed by a word about how secrets are
kept or sent ("password hashing", "verification code delivery") names no secret. Text is read, and kept, in its
compatibility form (NFKC) without invisible formatting characters: the full-width letters of CJK keyboards, a soft
hyphen or a zero-width space inside a name hid it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

MAX_CHARS = 8000
# Characters that show nothing, typed inside a secret's name to keep it from being read: every format character
# (Unicode's Cf: soft hyphen, zero-width spaces and joiners, direction marks, tags, ...), and the invisible ones of
# other categories: variation selectors, Mongolian free variation selectors, Hangul fillers, the grapheme joiner.
_INVISIBLE_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x180B, 0x180F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)  # fmt: skip


def _shows_nothing(character: str) -> bool:
    point = ord(character)
    return unicodedata.category(character) == "Cf" or any(low <= point <= high for low, high in _INVISIBLE_RANGES)


def _readable(text: str) -> str:
    """The text in its compatibility form (NFKC: full-width letters are letters) without the characters that show
    nothing, at most MAX_CHARS long."""
    normal = unicodedata.normalize("NFKC", text[:MAX_CHARS])[:MAX_CHARS]  # a character may stand for 18
    return "".join(character for character in normal if not _shows_nothing(character))


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
# Names of secrets; after one, what follows is the secret (see `_mask_named`). Words that are also ordinary words
# ("key", "pass", "pin", "login") count only before an explicit separator or a value that looks like a secret.
_SECRET_NAME = re.compile(
    r"(?i)(?<![\w-])(?:"
    r"pass(?:word|phrase|code)s?|passwd|pwd|pw|pass|pin(?: code)?|secrets?|client[ _-]?secrets?|secret[ _-]?keys?"
    r"|api[ _-]?keys?|apikey|access[ _-]?keys?|private[ _-]?keys?|keys?|access[ _-]?tokens?|tokens?|credentials"
    r"|creds|login|cvv|cvc|bearer"
    r"|passw[oö]rt|kennwort|zugangsdaten|geheimnis|schlüssel|mot de passe|cl[ée]|contraseña|clave|senha|chave"
    r"|пароль|паролі|ключ|токен|секрет|облікові дані|учётные данные|учетные данные"
    r"|(?:wi-?fi|wlan|access|security|door|alarm|gate|entry|unlock|safe|garage|verification|backup|recovery) codes?"
    r"|parola d'ordine|has[łl]o|wachtwoord|[şs]ifre(?:m|n|niz|miz|si)?|l[öo]senord(?:et)?|heslo"
    r")(?![\w-])"
    # No spaces around words in Chinese and Japanese (nor before Korean particles): no boundaries to look for.
    r"|密码|密碼|口令|密钥|密鑰|金鑰|令牌|凭据|憑據|憑證|通行碼|パスワード|暗証番号|合言葉|비밀번호|패스워드"
)
# Names that only ever name a secret's value: whatever words follow them (up to a word of ordinary grammar) are the
# secret, separator or not ("with password correct horse battery staple", "api_key abcdefghij").
_VALUE_NAME = re.compile(
    r"(?i)(?:pass(?:word|phrase|code)s?|passwd|pwd|api[ _-]?keys?|apikey|secret[ _-]?keys?|client[ _-]?secrets?"
    r"|private[ _-]?keys?|\w+ codes?|passw[oö]rt|kennwort|mot de passe|contraseña|senha|пароль|паролі"
    r"|parola d'ordine|has[łl]o|wachtwoord|[şs]ifre\w*|l[öo]senord\w*|heslo)"
)
# A run of single letters with spaces, dots, dashes or underscores between them ("p a s s w o r d", "p.a.s.s.w.o.r.d"):
# a name spelled out. Letters and separators share no character, so a run is read once; it starts at a letter that
# follows none, and the run as long as a request may be.
_SPELLED = re.compile(r"(?<![^\W_])[^\W_](?:[\s._-]{1,3}[^\W_]){2,4000}(?![^\W_])")
_SPELLED_SEPARATORS = re.compile(r"[\s._-]{1,3}")
_LONGEST_SPELLED = 24  # letters of the longest name in `_SECRET_NAME` written without spaces, and then some
_WEAK_NAMES = frozenset({"key", "keys", "pass", "pin", "pin code", "login", "token", "tokens", "secret", "secrets"})
# Between a name and its secret: "for the server", "від пошти", "für den Server" (a short phrase naming its use).
_FOR = re.compile(r"(?i)\s{1,3}(?:for|für|from|to|of|від|для|до|к|от|pour|para|dla|per|zu)(?=\s)")
_PHRASE_WORDS = 3  # the words of such a phrase at most
# What says "the secret comes next": a colon, an equals sign, "is" and its siblings in other languages.
_SEPARATOR = re.compile(
    r"(?i)\s{0,3}(?:[:=：]|->|=>)\s{0,3}|\s{1,3}(?:is|was|are|=|ist|lautet|heißt|lautete|est|c'est|es|é|era"
    r"|є|це|це є|был|была|есть|это|—|–|-|è|jest|luidt|är|je)(?:\s{0,3}[:：]\s{0,3}|\s{1,3})"
    r"|\s{0,2}(?:是|为|は)\s{0,2}|(?<=[비밀번호패스워드])(?:는|은)\s{1,3}"
)
_POLISH_TO = re.compile(r"(?i)\s{1,3}to\s{1,3}")  # "hasło to kotek"; in English "to" starts a phrase (`_FOR`)
_EXPLICIT = frozenset(":=：")
_QUOTED = re.compile(r"\s{0,3}(\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|«[^»\n]{1,200}»|“[^”\n]{1,200}”)")
_WORD = re.compile(r"\s{0,3}([^\s,;，；]{1,200})")
_TRAILING = ".!?。！？:"  # sentence punctuation after a word is not part of it
_COPULA = re.compile(r"(?:です|でした|だ|입니다|이에요|예요|이다)$")  # attached to the word before it
_PAIR = re.compile(r"\s{0,3}([^\s,;]{1,100})\s{0,2}(?:/|:)\s{0,2}([^\s,;]{1,100})")  # user / password
# Words that end a passphrase, or that follow a secret's name in a request about it rather than in it.
_CLAUSE_END_TEXT = (
    "and or but und oder aber et ou mais y o pero e mas і й та або але и или но 和 或 但 then so also please"
    " ma i a ale lub albo en maar of och men eller nebo ve ama veya"
)
_CLAUSE_END = frozenset(_CLAUSE_END_TEXT.split())
_NOT_SECRET_TEXT = """
    reset change forgot forgotten expired expiry manager policy policies for of to the a an my your our please again
    field rotation rotate generator strength length requirements required rules vergessen ändern zurücksetzen
    oublié changer olvidé cambiar esqueci mudar забув забула змінити скинути забыл забыла сменить сбросить
    не не працює не приходить doesn't does didn't isn't wasn't not no none missing wrong incorrect invalid
    expires expire points point findings finding features feature idea ideas question questions issue issues
    to hours minutes days count counts limit limits usage budget
    manager managers field fields box prompt dialog hint hash page screen form input link links email mail file
    files vault storage stored protected protection check validation complexity history update updates request
    requests error errors settings setting section tab button documentation docs list format parameter parameters
    argument variable value changed updated sent stolen leaked compromised works work worked working fails failed
    protect share shared sharing für від для до к от pour para dla per zu
    i you he she it we they me him her us them this that these those which who what when where why how
    has have had will would should shall can could must may might do did does done be been being
    in on at by with from into about as if while after before because since until than so yet still just only
    too very all any each every some here there now never always already like out up down off over under
    dimenticato dimenticata sbagliata sbagliato errata zapomniałem zapomniałam błędne błędny złe vergeten onjuist
    fout glömt glömde fel unuttum yanlış nasıl zapomněl zapomněla špatně špatné 어떻게 무엇 뭐 왜 何 どう
"""
# Words of requests about how a secret is kept or sent ("store the password hashed", "password reuse across sites",
# "verification code delivery"): after a secret's name, one of them says the request is about it, not giving it.
_HANDLING_TEXT = """
    hash hashed hashing hashes salt salted salting encrypt encrypted encrypting encryption encrypts decrypt decrypted
    store stores storing save saved saving securely secure plaintext plain reuse reused reusing generation generated
    generate generating delivery delivered sending arrives arrived needed needs using via strength meter sync synced
    hint hints sicher sicherer speichern gespeichert verschlüsselt verschlüsseln generieren зберігати
    зберегти зашифрувати зашифрований хранить хранение сохранить зашифровать зашифрованный chiffré chiffrer stocker
    cifrado cifrar guardar almacenar criptografada armazenar salvar cifrata salvare szyfrowane zaszyfrowane
    versleuteld opslaan krypterad spara şifreli saklamak zašifrované uložit
"""
_NOT_SECRETS = frozenset(_NOT_SECRET_TEXT.split()) | frozenset(_HANDLING_TEXT.split())
# Words a passphrase typed after a secret's name never goes on with: prepositions, copulas, auxiliaries and the verbs
# of requests, in the languages of `_SECRET_NAME` ("password letmein via ssh", "Passwort Geheim123 mit bcrypt").
# Without a separator nothing says where the secret ends, so its end is the first word of the sentence around it.
_CLAUSE_WORDS_TEXT = """
    using via with without within through per by on in at into onto from for to of as then is are was were be gets
    got get opens open works worked fails failed expires expired arrives needs stops stopped isn't doesn't does
    mit ohne für von zu zum zur bei im auf ist sind war über durch
    з із зі в у на для від до через це є не с со от это есть через
    avec sans pour dans sur par est en con sin para por es com sem em é senza su è
    z ze bez dla w przez jest met zonder voor op med utan för på är s se pro v je ile için
"""
_CLAUSE_WORDS = frozenset(_CLAUSE_WORDS_TEXT.split())
MAX_PASSPHRASE_WORDS = 6
_PAIRED_NAMES = frozenset(
    {"credentials", "creds", "login", "zugangsdaten", "облікові дані", "учётные данные", "учетные данные"}
)
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}")
_NUMBER = re.compile(r"(?<![\d])\d(?:[\d\s.,/-]{0,40}\d)?")
_TOKEN = re.compile(r"(?<![\w+/=-])[\w+/=-]{20,4000}")


def redact(text: str) -> str:
    """The text with secrets, e-mail addresses and long numbers (cards, phones, accounts) masked."""
    text = _readable(text)
    text = _PRIVATE_KEY.sub("<secret>", text)
    text = _URL_CREDENTIALS.sub("<secret>", text)
    text = _SECRET_PREFIXES.sub("<secret>", text)
    text = _mask_named(text)
    text = _EMAIL.sub("<email>", text)
    text = _TOKEN.sub(_mask_random, text)
    return _NUMBER.sub(_mask_long_number, text)


def _mask_named(text: str) -> str:
    """The text with what follows each secret's name masked: a quoted value, a `user / password` pair, a passphrase
    after an explicit separator (up to the end of its clause), or one word that looks like a secret. Each name is
    read forward a bounded distance, so the work is linear in the text."""
    spans: list[tuple[int, int]] = []
    for end, name in _names(text):
        span = _secret_after(text, end, name)
        if span is not None and (not spans or span[0] >= spans[-1][1]):
            spans.append(span)
    for start, end in reversed(spans):
        text = text[:start] + "<secret>" + text[end:]
    return text


def _names(text: str) -> list[tuple[int, str]]:
    """Where each secret's name ends, and the name (lower case), in the text's order: names as written, and names
    spelled out letter by letter at the end of a run of single letters ("x p a s s w o r d" ends with "password")."""
    found = [(name.end(), name.group(0).lower()) for name in _SECRET_NAME.finditer(text)]
    for run in _SPELLED.finditer(text):
        letters = _SPELLED_SEPARATORS.sub("", run.group(0))[-_LONGEST_SPELLED:].lower()
        # the longest name the run ends with: "xpassword" is "password", never "word"
        name = next((letters[i:] for i in range(len(letters) - 2) if _SECRET_NAME.fullmatch(letters[i:])), None)
        if name is not None:
            found.append((run.end(), name))
    return sorted(found)


def _secret_after(text: str, at: int, name: str) -> tuple[int, int] | None:
    """Where the secret named just before `at` is, if one follows."""
    if (phrase := _FOR.match(text, at)) is not None:
        if (target := _set_to(text, phrase, name)) is not None:
            return target
        position = phrase.end()
        for _ in range(_PHRASE_WORDS):  # "password for the mail server: ...", "пароль від пошти qwerty123"
            word = _WORD.match(text, position)
            if word is None:
                break
            position = word.end()
            after = _WORD.match(text, position)
            if _SEPARATOR.match(text, position) or (after is not None and _looks_secret(_word(after))):
                at = position
                break
    separator = _SEPARATOR.match(text, at) or (_POLISH_TO.match(text, at) if name.startswith("has") else None)
    start = separator.end() if separator else at
    if (quoted := _QUOTED.match(text, start)) is not None:
        return quoted.start(1), quoted.end(1)
    pair = _PAIR.match(text, start) if name in _PAIRED_NAMES else None
    if pair is not None:
        return pair.start(1), pair.end(2)
    first = _WORD.match(text, start)
    if first is None or _word(first).lower() in _NOT_SECRETS or first.group(1).startswith("<") or not _word(first):
        return None
    if separator is None or not separator.group(0).strip():
        if _VALUE_NAME.fullmatch(name) and text[at : at + 1].isspace():
            # a name that only names a value, then words: they are the secret, up to a word of ordinary grammar; a
            # word that looks like a key is a secret of one word, and what follows it is the request's
            if _looks_secret(_word(first)):
                return first.start(1), first.start(1) + len(_word(first))
            return start_of(text, start), _passphrase_end(text, first, _NOT_SECRETS | _CLAUSE_END | _CLAUSE_WORDS)
        # no separator: only a word that looks like a secret, right after the name ("my password hunter2!")
        return (first.start(1), first.start(1) + len(_word(first))) if _looks_secret(_word(first)) else None
    explicit = any(c in _EXPLICIT for c in separator.group(0))
    if name in _WEAK_NAMES and not _looks_secret(_word(first)) and not explicit:
        return None  # "the key is understanding the user": not a secret's value
    return start_of(text, start), _passphrase_end(text, first, _CLAUSE_END)


def _set_to(text: str, phrase: re.Match[str], name: str) -> tuple[int, int] | None:
    """ "set my password to hunter2", "change the password to sunshine.": after a value's name, "to" and one word
    that ends the clause (or looks like a secret) is the new value."""
    if phrase.group(0).strip().lower() != "to" or not _VALUE_NAME.fullmatch(name):
        return None
    target = _WORD.match(text, phrase.end())
    if target is None or not _word(target) or _word(target).lower() in _NOT_SECRETS:
        return None
    after = _WORD.match(text, target.end())
    ends = _word(target) != target.group(1) or after is None or _word(after).lower() in _CLAUSE_END
    if not ends and not _looks_secret(_word(target)):
        return None
    return target.start(1), target.start(1) + len(_word(target))


def _passphrase_end(text: str, first: re.Match[str], stops: frozenset[str]) -> int:
    """Where a passphrase that begins with the word `first` ends: at a word of `stops`, at punctuation, or after
    `MAX_PASSPHRASE_WORDS` words."""
    end, words, position = first.start(1) + len(_word(first)), 1, first.end()
    while words < MAX_PASSPHRASE_WORDS and _word(first) == first.group(1):
        more = _WORD.match(text, position)
        if more is None or more.start(1) == position or _word(more).lower() in stops or not _word(more):
            break
        first, words, position = more, words + 1, more.end()
        end = more.start(1) + len(_word(more))
    return end


def start_of(text: str, at: int) -> int:
    """Where the value after a separator begins (past its spaces)."""
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _word(match: re.Match[str]) -> str:
    """The matched word without the sentence punctuation that may follow it (which also ends a passphrase), nor a
    Japanese or Korean copula attached to it ("hunter2です")."""
    return _COPULA.sub("", match.group(1).rstrip(_TRAILING))


def _looks_secret(word: str) -> bool:
    """Letters with digits or symbols, or mixed case past the first letter: not a plain word."""
    has_letter = any(c.isalpha() for c in word)
    mixed = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
    other = any(c.isdigit() or not c.isalnum() for c in word)
    return len(word) >= 4 and (other or mixed) and (has_letter or len(word) >= 6)


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
