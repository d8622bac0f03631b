"""A cheap guess whether a request is English, for routing it to the right embedding model.

No model needed: a request whose letters are mostly outside the Latin script is not English; otherwise its
function words are counted against short lists for English and the other large Latin-script languages (with none
of them, letters beyond ASCII say another language: Polish, Turkish, Czech...).
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_FUNCTION_WORDS = {
    "en": """a an the is are was be to of and for with from by at my me i you your can could would should what how do
        does did please this that it its there which who when where why any some get find show give tell make need
        want let us our we will""",
    "de": """der die das und ist sind ich du sie wir ihr mein meine mir mich dich nicht ein eine einen zu mit von
        für auf ist wie was wo wann warum bitte kannst können kann wird werden es dieses diese morgen heute""",
    "fr": """le la les et est sont je tu il elle nous vous mon ma mes pour avec sur dans une des du que qui quoi
        comment où quand pourquoi peux pouvez est-ce ce cette""",
    "es": """el la los las y es son yo tú él ella nosotros mi mis para con por una unos que qué cómo dónde cuándo
        puedes puede del al esta este""",
    "it": """il lo la gli le e è sono io tu lui lei noi mio mia per con una che cosa come dove quando puoi può del
        della questo questa""",
    "pt": """o a os as e é são eu você ele ela nós meu minha para com uma que como onde quando pode posso do da
        este esta""",
    "nl": """de het een en is zijn ik jij je hij zij wij mijn voor met op van dat wat hoe waar wanneer kun kunt
        kan deze dit""",
    "pl": """jest są ja ty ona mój moja moje dla że jak gdzie kiedy czy proszę możesz może się nie ten ta
        jestem mi mnie ci się już bardzo dzięki""",
}
_WORDS = {lang: frozenset(words.split()) for lang, words in _FUNCTION_WORDS.items()}
_LETTERS = {  # letters that only one of the listed languages writes
    "pl": frozenset("ąćęłńśźż"),
    "de": frozenset("äöüß"),
    "es": frozenset("ñ¿¡"),
    "fr": frozenset("èëîïûœù"),  # not â ç ê ô à, which Portuguese writes too
    "pt": frozenset("ãõ"),
}


def looks_english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return True
    if "¿" in text or "¡" in text:  # Spanish marks, in requests too short for function words ("¡Hasta luego!")
        return False
    if sum(1 for c in letters if ord(c) > 0x024F) > 0.2 * len(letters):
        return False
    counts = _latin_scores(text)
    other = max(count for lang, count in counts.items() if lang != "en")
    if counts["en"] == 0 and other == 0:
        # No function word of any listed language: English has no letters beyond ASCII, Polish or Turkish do.
        return all(c.isascii() for c in letters)
    return counts["en"] >= other


def _latin_scores(text: str) -> dict[str, int]:
    """Each Latin-script language's evidence: its function words, and three for a letter only it writes."""
    words = [w.lower() for w in _WORD.findall(text)]
    lowered = text.lower()
    return {
        lang: sum(w in vocabulary for w in words) + 3 * any(c in _LETTERS.get(lang, ()) for c in lowered)
        for lang, vocabulary in _WORDS.items()
    }


_SCRIPTS = (  # (first, last code point, language) for scripts that name their language on their own
    (0x0900, 0x097F, "hi"),
    (0x0600, 0x06FF, "ar"),
    (0x0590, 0x05FF, "he"),
    (0x0370, 0x03FF, "el"),
    (0x0E00, 0x0E7F, "th"),
    (0xAC00, 0xD7AF, "ko"),
    (0x3040, 0x30FF, "ja"),  # kana: Japanese even among Chinese characters
)
_UKRAINIAN_LETTERS = frozenset("іїєґІЇЄҐ")
_UKRAINIAN_WORDS = frozenset(
    ["це", "дякую", "ласка", "мені", "тобі", "щось", "або", "але", "чи", "вже", "він", "вона", "вони", "добре"]
)


def guess_language(text: str) -> str:
    """The language a request is most likely in, as an ISO 639-1 code, or "und" when nothing tells: the script first
    (kana, Hangul, Cyrillic...), then the function words of the Latin-script languages. For reports, not routing."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "und"
    for first, last, lang in _SCRIPTS:
        if any(first <= ord(c) <= last for c in letters):
            return lang
    if any(0x4E00 <= ord(c) <= 0x9FFF for c in letters):
        return "zh"
    if sum(0x0400 <= ord(c) <= 0x04FF for c in letters) > len(letters) / 2:
        ukrainian = any(c in _UKRAINIAN_LETTERS for c in letters) or any(
            w.lower() in _UKRAINIAN_WORDS for w in _WORD.findall(text)
        )
        return "uk" if ukrainian else "ru"
    counts = _latin_scores(text)
    best = max(counts, key=lambda lang: counts[lang])
    if counts[best]:
        return best
    return "en" if all(c.isascii() for c in letters) else "und"
