"""A cheap guess whether a request is English, for routing it to the right embedding model.

No model needed: a request whose letters are mostly outside the Latin script is not English; otherwise its
function words are counted against short lists for English and the other large Latin-script languages (with none
of them, letters beyond ASCII say another language: Polish, Turkish, Czech...).
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_FUNCTION_WORDS = {
    "en": """the is are was be to of and for with from by at my me i you your can could would should what how do
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
}
_WORDS = {lang: frozenset(words.split()) for lang, words in _FUNCTION_WORDS.items()}


def looks_english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return True
    if "¿" in text or "¡" in text:  # Spanish marks, in requests too short for function words ("¡Hasta luego!")
        return False
    if sum(1 for c in letters if ord(c) > 0x024F) > 0.2 * len(letters):
        return False
    words = [w.lower() for w in _WORD.findall(text)]
    counts = {lang: sum(w in vocabulary for w in words) for lang, vocabulary in _WORDS.items()}
    other = max(count for lang, count in counts.items() if lang != "en")
    if counts["en"] == 0 and other == 0:
        # No function word of any listed language: English has no letters beyond ASCII, Polish or Turkish do.
        return all(c.isascii() for c in letters)
    return counts["en"] >= other
