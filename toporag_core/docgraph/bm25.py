"""BM25 over the documents of a corpus index: ``bm25s`` (Lucene variant, English stop words).

A document's BM25 text is ``title + "\\n" + text`` (its paragraphs). The fitted model is stored
without pickle: its sparse score matrix (CSC ``data``, ``indices``, ``indptr``) as tensors and its
vocabulary as JSON (:meth:`BM25Index.tensors`, :meth:`BM25Index.meta`, :meth:`BM25Index.restore`).
"""
from __future__ import annotations

from typing import Any

import numpy as np


def doc_bm25_text(title: str, text: str) -> str:
    return f"{title}\n{text}"


class BM25Index:
    """BM25 (``bm25s``, Lucene variant, English stop words) over the documents' ``title + text``."""

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        import bm25s

        self.k1, self.b = float(k1), float(b)
        self.model = bm25s.BM25(k1=self.k1, b=self.b)
        self.num_docs = 0

    @staticmethod
    def tokenize(texts: list[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)

    def fit(self, texts: list[str]) -> BM25Index:
        self.model.index(self.tokenize(texts), show_progress=False)
        self.num_docs = len(texts)
        return self

    def scores(self, query: str) -> np.ndarray:
        """``(D,)`` BM25 scores of every document (zeros when no query word is in the vocabulary)."""
        toks = [t for t in self.tokenize([query])[0] if t in self.model.vocab_dict]
        if not toks:
            return np.zeros(self.num_docs, np.float32)
        return np.asarray(self.model.get_scores(toks), np.float32)

    def tensors(self) -> dict[str, np.ndarray]:
        s = self.model.scores
        return {"bm25_data": np.asarray(s["data"]), "bm25_indices": np.asarray(s["indices"]),
                "bm25_indptr": np.asarray(s["indptr"])}

    def meta(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "num_docs": self.num_docs, "vocab": self.model.vocab_dict}

    @classmethod
    def restore(cls, meta: dict, tensors: dict[str, np.ndarray]) -> BM25Index:
        out = cls(meta["k1"], meta["b"])
        out.num_docs = int(meta["num_docs"])
        out.model.scores = {"data": tensors["bm25_data"], "indices": tensors["bm25_indices"],
                            "indptr": tensors["bm25_indptr"], "num_docs": out.num_docs}
        out.model.vocab_dict = {str(k): int(v) for k, v in meta["vocab"].items()}
        out.model.unique_token_ids_set = set(out.model.vocab_dict.values())
        out.model.nonoccurrence_array = None  # the Lucene variant has none (bm25s' own load does the same)
        return out
