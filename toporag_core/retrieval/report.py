"""Retrieval quality report on question/answer graphs (e.g. the WebQSP sample).

For every method and k: answer recall (share of questions with at least one gold answer
among the retrieved node texts, after normalisation), mean gold-answer coverage, and
mean cells per dimension (compare with TopoRAG's Table 6).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ..metrics import normalize
from .api import retrieve
from .registry import K_PARAMS, RetrievalSetting, get_method, method_names
from .result import EmbeddedComplex


@dataclass
class QAGraph:
    """One question over one embedded graph, with its gold answers."""

    ecx: EmbeddedComplex
    question: str
    answers: list[str]
    q_vec: np.ndarray | None = None


def answer_found(node_texts: Iterable[str], answers: Sequence[str]) -> tuple[bool, float]:
    """(any gold answer is a retrieved node, share of gold answers retrieved)."""
    got = {normalize(t) for t in node_texts}
    hits = [normalize(a) in got for a in answers if normalize(a)]
    return (any(hits), float(np.mean(hits)) if hits else 0.0)


def retrieval_report(items: Sequence[QAGraph], methods: Sequence[str] | None = None,
                     ks: Sequence[int] = (1, 2, 3), c2: float = 0.5) -> list[dict]:
    """One row per (method, k): recall, coverage, mean cells per dimension, mean ms.

    ``methods``: default every registered cell method that takes a k (``whole`` has none).
    """
    methods = list(methods) if methods is not None else \
        [m for m in method_names("cells") if set(get_method(m).param_names) & set(K_PARAMS)]
    rows = []
    for method in methods:
        for it in items:  # warm per-graph caches (e.g. triple embeddings) outside the timings
            retrieve(it.ecx, it.q_vec if it.q_vec is not None else it.question,
                     setting=RetrievalSetting.make(method, k=1))
        for k in ks:
            found, cover, counts, ms = [], [], [], []
            setting = RetrievalSetting.make(method, k=k, c2=c2)
            for it in items:
                q = it.q_vec if it.q_vec is not None else it.question
                sub = retrieve(it.ecx, q, setting=setting)
                f, c = answer_found(sub.node_texts(), it.answers)
                found.append(f)
                cover.append(c)
                counts.append(sub.counts)
                ms.append(sub.timings.get("total", 0.0) * 1000)
            cnt = np.array(counts, dtype=float).reshape(-1, 3)
            rows.append({"method": method, "k": k, "questions": len(items),
                         "answer_recall": float(np.mean(found)), "answer_coverage": float(np.mean(cover)),
                         "cells0": float(cnt[:, 0].mean()), "cells1": float(cnt[:, 1].mean()),
                         "cells2": float(cnt[:, 2].mean()), "median_ms": float(np.median(ms))})
    return rows


def format_table(rows: list[dict], columns: Sequence[str] | None = None) -> str:
    """A plain-text (Markdown) table."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())

    def fmt(v) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)
