"""The lexical route: BM25 over unit texts, indexed by ``bm25s`` and scored from stored arrays.

``bm25s`` (Lucene variant, ``k1 = 1.5``, ``b = 0.75``) precomputes the BM25 weight of every
(term, unit) pair::

    w(t, u) = idf(t) * tf(t, u) * (k1 + 1) / (tf(t, u) + k1 * (1 - b + b * |u| / avgdl))
    idf(t)  = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

and keeps them as a CSC matrix (``indptr`` over terms, ``indices`` = unit ids, ``data`` = weights).
The score of a query is the sum of its distinct terms' columns, ``s(u) = sum_t w(t, u)``. The three
arrays and the vocabulary are stored in the hybrid index, so a later process scores with a numpy
``bincount`` (what ``bm25s.BM25.get_scores`` computes; tested equal) without re-indexing.

Tokens: lower-cased words and numbers (``1,568.6``, ``2019``, ``10%`` keep their digits together),
English stop words removed (``bm25s``'s list, stored with the index).
"""
from __future__ import annotations

import re

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")


class Lexical:
    """BM25 weights ``(terms x units)`` in CSC arrays plus the vocabulary."""

    def __init__(self, vocab: dict[str, int], data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                 num_docs: int, stopwords: list[str]) -> None:
        self.vocab = dict(vocab)
        self.data = np.asarray(data, np.float32)
        self.indices = np.asarray(indices, np.int64)
        self.indptr = np.asarray(indptr, np.int64)
        self.num_docs = int(num_docs)
        self.stopwords = frozenset(stopwords)

    def tokenize(self, text: str) -> list[str]:
        return [w for w in _TOKEN.findall(text.lower()) if w not in self.stopwords]

    @classmethod
    def build(cls, texts: list[str]) -> "Lexical":
        """Index ``texts`` with ``bm25s`` (every text one unit)."""
        import bm25s
        from bm25s.stopwords import STOPWORDS_EN

        stop = sorted(STOPWORDS_EN)
        tmp = cls({}, np.zeros(0), np.zeros(0), np.zeros(1), 0, stop)
        retriever = bm25s.BM25()
        retriever.index([tmp.tokenize(t) for t in texts], show_progress=False)
        s = retriever.scores
        return cls(retriever.vocab_dict, s["data"], s["indices"], s["indptr"], s["num_docs"], stop)

    def scores(self, query: str) -> np.ndarray:
        """``(U,)`` BM25 score of every unit (0 where no query term occurs)."""
        ids = [self.vocab[t] for t in dict.fromkeys(self.tokenize(query)) if t in self.vocab]
        if not ids:
            return np.zeros(self.num_docs)
        sel = np.concatenate([np.arange(self.indptr[i], self.indptr[i + 1]) for i in ids])
        return np.bincount(self.indices[sel], weights=self.data[sel].astype(np.float64), minlength=self.num_docs)

    # -- persistence -------------------------------------------------------------------
    def arrays(self, prefix: str = "bm25.") -> dict[str, np.ndarray]:
        return {f"{prefix}data": self.data, f"{prefix}indices": self.indices, f"{prefix}indptr": self.indptr}

    def meta(self) -> dict:
        return {"vocab": self.vocab, "num_docs": self.num_docs, "stopwords": sorted(self.stopwords)}

    @classmethod
    def from_arrays(cls, arrays: dict, meta: dict, prefix: str = "bm25.") -> "Lexical":
        return cls(meta["vocab"], arrays[f"{prefix}data"], arrays[f"{prefix}indices"], arrays[f"{prefix}indptr"],
                   meta["num_docs"], meta["stopwords"])
