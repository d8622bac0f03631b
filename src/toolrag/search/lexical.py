"""BM25 (Lucene variant) over an in-memory inverted index, scored only over the tools a principal can see.

Collection statistics (document count, document frequencies, mean length) are computed over the visible subset,
so a hidden tool changes neither which tools are found nor their scores: the ranking is the one the principal
would get from a registry holding only its visible tools. That is why this is not a global-statistics index such
as SQLite FTS5 or bm25s, whose IDF would let hidden tools shift visible scores.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

K1 = 1.5
B = 0.75

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class LexicalIndex:
    """Postings per term: `docs[starts[t]:starts[t + 1]]` with term frequencies `tfs` aligned."""

    vocabulary: dict[str, int]
    starts: IntArray
    docs: IntArray
    tfs: FloatArray
    doc_lengths: FloatArray

    @classmethod
    def build(cls, documents: list[list[str]]) -> LexicalIndex:
        vocabulary: dict[str, int] = {}
        postings: list[list[tuple[int, int]]] = []
        for doc_id, tokens in enumerate(documents):
            for term, tf in Counter(tokens).items():
                term_id = vocabulary.setdefault(term, len(vocabulary))
                if term_id == len(postings):
                    postings.append([])
                postings[term_id].append((doc_id, tf))
        sizes = np.fromiter((len(p) for p in postings), dtype=np.int64, count=len(postings))
        starts = np.zeros(len(postings) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        flat = [pair for plist in postings for pair in plist]
        docs = np.fromiter((d for d, _ in flat), dtype=np.int64, count=len(flat))
        tfs = np.fromiter((tf for _, tf in flat), dtype=np.float32, count=len(flat))
        lengths = np.fromiter((len(d) for d in documents), dtype=np.float32, count=len(documents))
        return cls(vocabulary, starts, docs, tfs, lengths)

    @property
    def size(self) -> int:
        return len(self.doc_lengths)

    def scores(self, query_tokens: list[str], visible: BoolArray | None) -> tuple[FloatArray, IntArray]:
        """BM25 score of every document, and how many distinct query terms each matches. Documents outside
        `visible` get 0 and contribute to no statistic."""
        out = np.zeros(self.size, dtype=np.float32)
        matched = np.zeros(self.size, dtype=np.int64)
        if visible is None:
            n_docs = self.size
            mean_length = float(self.doc_lengths.mean()) if n_docs else 0.0
        else:
            n_docs = int(visible.sum())
            mean_length = float(self.doc_lengths[visible].mean()) if n_docs else 0.0
        if n_docs == 0:
            return out, matched
        for term, query_tf in Counter(query_tokens).items():
            term_id = self.vocabulary.get(term)
            if term_id is None:
                continue
            docs = self.docs[self.starts[term_id] : self.starts[term_id + 1]]
            tfs = self.tfs[self.starts[term_id] : self.starts[term_id + 1]]
            if visible is not None:
                keep = visible[docs]
                docs, tfs = docs[keep], tfs[keep]
            if len(docs) == 0:
                continue
            idf = np.log(1.0 + (n_docs - len(docs) + 0.5) / (len(docs) + 0.5))
            norm = tfs + K1 * (1.0 - B + B * self.doc_lengths[docs] / mean_length)
            out[docs] += np.float32(query_tf * idf) * tfs * (K1 + 1.0) / norm
            matched[docs] += 1
        return out, matched

    def max_score(self, query_tokens: list[str], visible: BoolArray | None) -> float:
        """The score of a document of mean length matching every known query term once: BM25's scale for this
        request. Terms no visible tool contains are left out: they are mostly argument values (places, dates)."""
        n_docs = self.size if visible is None else int(visible.sum())
        total = 0.0
        for term, query_tf in Counter(query_tokens).items():
            term_id = self.vocabulary.get(term)
            if term_id is None:
                continue
            docs = self.docs[self.starts[term_id] : self.starts[term_id + 1]]
            df = len(docs) if visible is None else int(visible[docs].sum())
            if df:
                total += query_tf * float(np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)))
        return total
