"""BM25 (Lucene variant) over an in-memory inverted index, scored only over the tools a principal can see.

Collection statistics (document count, document frequencies, mean length) are computed over the visible subset,
so a hidden tool changes neither which tools are found nor their scores: the ranking is the one the principal
would get from a registry holding only its visible tools. That is why this is not a global-statistics index such
as SQLite FTS5 or bm25s, whose IDF would let hidden tools shift visible scores.

The postings come in segments: a large base, then small segments of the documents added since (snapshot/ updates
the index a change at a time). A replaced or removed document stays in its segment and is left out by the mask the
caller passes (the visible and live tools), so scores equal those of an index built afresh.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

K1 = 1.5
B = 0.75

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]

_EMPTY_DOCS = np.zeros(0, dtype=np.int64)
_EMPTY_TFS = np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class Postings:
    """Postings per term of some documents: `docs[starts[t]:starts[t + 1]]` (snapshot positions, ascending) with
    term frequencies `tfs` aligned."""

    vocabulary: dict[str, int]
    starts: IntArray
    docs: IntArray
    tfs: FloatArray

    @classmethod
    def build(cls, documents: Sequence[list[str]], first: int = 0) -> Postings:
        """The postings of `documents`, which sit at positions `first`, `first + 1`, ..."""
        vocabulary: dict[str, int] = {}
        postings: list[list[tuple[int, int]]] = []
        for offset, tokens in enumerate(documents):
            for term, tf in Counter(tokens).items():
                term_id = vocabulary.setdefault(term, len(vocabulary))
                if term_id == len(postings):
                    postings.append([])
                postings[term_id].append((first + offset, tf))
        sizes = np.fromiter((len(p) for p in postings), dtype=np.int64, count=len(postings))
        starts = np.zeros(len(postings) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        flat = [pair for plist in postings for pair in plist]
        docs = np.fromiter((d for d, _ in flat), dtype=np.int64, count=len(flat))
        tfs = np.fromiter((tf for _, tf in flat), dtype=np.float32, count=len(flat))
        return cls(vocabulary, starts, docs, tfs)

    def lookup(self, term: str) -> tuple[IntArray, FloatArray]:
        term_id = self.vocabulary.get(term)
        if term_id is None:
            return _EMPTY_DOCS, _EMPTY_TFS
        span = slice(int(self.starts[term_id]), int(self.starts[term_id + 1]))
        return self.docs[span], self.tfs[span]

    def triples(self) -> tuple[list[str], IntArray, IntArray, FloatArray]:
        """(terms by id, term id of every posting, its document, its frequency)."""
        terms = [""] * len(self.vocabulary)
        for term, term_id in self.vocabulary.items():
            terms[term_id] = term
        term_ids = np.repeat(np.arange(len(terms), dtype=np.int64), np.diff(self.starts))
        return terms, term_ids, self.docs, self.tfs


def merge_postings(segments: Sequence[Postings], keep: BoolArray | None, renumber: IntArray | None) -> Postings:
    """One segment holding the postings of `segments` whose documents `keep` marks (all when None), documents moved
    to `renumber[old position]` when given. Vectorized: no document is tokenized again."""
    vocabulary: dict[str, int] = {}
    term_parts, doc_parts, tf_parts = [], [], []
    for segment in segments:
        terms, term_ids, docs, tfs = segment.triples()
        mapping = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in terms), np.int64, len(terms))
        term_parts.append(mapping[term_ids])
        doc_parts.append(docs)
        tf_parts.append(tfs)
    term_ids = np.concatenate(term_parts) if term_parts else _EMPTY_DOCS
    docs = np.concatenate(doc_parts) if doc_parts else _EMPTY_DOCS
    tfs = np.concatenate(tf_parts) if tf_parts else _EMPTY_TFS
    if keep is not None:
        kept = keep[docs]
        term_ids, docs, tfs = term_ids[kept], docs[kept], tfs[kept]
    if renumber is not None:
        docs = renumber[docs]
    # Terms no kept document holds leave the vocabulary, as they would in an index built afresh.
    used, term_ids = np.unique(term_ids, return_inverse=True)
    names = list(vocabulary)
    vocabulary = {names[int(old)]: new for new, old in enumerate(used)}
    order = np.lexsort((docs, term_ids))
    starts = np.zeros(len(used) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term_ids, minlength=len(used)), out=starts[1:])
    return Postings(vocabulary, starts, docs[order].astype(np.int64), tfs[order].astype(np.float32))


@dataclass(frozen=True)
class LexicalIndex:
    """Postings in segments (see the module's text) and every position's document length."""

    segments: tuple[Postings, ...]
    doc_lengths: FloatArray

    @classmethod
    def build(cls, documents: Sequence[list[str]]) -> LexicalIndex:
        lengths = np.fromiter((len(d) for d in documents), dtype=np.float32, count=len(documents))
        return cls((Postings.build(documents),), lengths)

    @property
    def size(self) -> int:
        return len(self.doc_lengths)

    def appended(self, documents: Sequence[list[str]], max_segments: int = 8) -> LexicalIndex:
        """This index with `documents` added at the next positions, as a segment of their own; the added segments
        are merged into one when there are more than `max_segments`."""
        lengths = np.fromiter((len(d) for d in documents), dtype=np.float32, count=len(documents))
        segments = (*self.segments, Postings.build(documents, first=self.size))
        if len(segments) > max_segments + 1:
            segments = (segments[0], merge_postings(segments[1:], None, None))
        return LexicalIndex(segments, np.concatenate([self.doc_lengths, lengths]))

    def compacted(self, keep: BoolArray, renumber: IntArray) -> LexicalIndex:
        """One segment of the kept documents, at their new positions (`renumber[old]`)."""
        postings = merge_postings(self.segments, keep, renumber)
        lengths = np.zeros(int(keep.sum()), dtype=np.float32)
        lengths[renumber[keep]] = self.doc_lengths[keep]
        return LexicalIndex((postings,), lengths)

    def lookup(self, term: str) -> tuple[IntArray, FloatArray]:
        """Every posting of `term`, over all segments."""
        found = [segment.lookup(term) for segment in self.segments]
        if len(found) == 1:
            return found[0]
        return np.concatenate([docs for docs, _ in found]), np.concatenate([tfs for _, tfs in found])

    def knows(self, term: str, visible: BoolArray | None) -> bool:
        """Whether some document inside `visible` holds the term."""
        docs, _ = self.lookup(term)
        return bool(len(docs)) if visible is None else bool(visible[docs].any())

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
            docs, tfs = self.lookup(term)
            if visible is not None and len(docs):
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
            docs, _ = self.lookup(term)
            df = len(docs) if visible is None else int(visible[docs].sum())
            if df:
                total += query_tf * float(np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)))
        return total
