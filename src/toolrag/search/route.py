"""Category routing: keyword rules per category, in any language, used as a pre-filter or a boost.

Rules come from configuration, e.g. `{"billing": ["invoice", "refund", "Rechnung", "退款"]}`. A rule matches when
one of its keywords occurs in the request as a word (after the same tokenization as the index) or, for keywords
in scripts without spaces, as a substring.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolrag.search.text import CJK, tokenize


@dataclass(frozen=True)
class CategoryRouter:
    rules: dict[str, list[list[str]]]  # category -> keywords, each as its token sequence
    raw: dict[str, list[str]]

    @classmethod
    def from_config(cls, routes: dict[str, list[str]]) -> CategoryRouter:
        return cls({category: [tokenize(k) for k in keywords] for category, keywords in routes.items()}, routes)

    def categories_for(self, query: str) -> set[str]:
        tokens = tokenize(query)
        lowered = query.lower()
        hits = set()
        for category, keyword_tokens in self.rules.items():
            for keyword, raw in zip(keyword_tokens, self.raw[category], strict=True):
                spaceless = bool(CJK.search(raw)) or not keyword
                if (spaceless and raw.lower() in lowered) or (not spaceless and _contains(tokens, keyword)):
                    hits.add(category)
                    break
        return hits


def _contains(tokens: list[str], phrase: list[str]) -> bool:
    width = len(phrase)
    return any(tokens[i : i + width] == phrase for i in range(len(tokens) - width + 1))
