"""Vectorised ranking metrics over whole score matrices (binary relevance, one gold unit = one item).

For scores ``S (Q, U)`` and gold ``G (Q, U)`` (bool), the top ``k`` units of each row (ties: lower
unit index first), ``rel_i = G[q, top_i]``::

    nDCG@k = sum_i rel_i / log2(i + 1)  /  sum_{i <= min(|G_q|, k)} 1 / log2(i + 1)
    Recall@k = sum_i rel_i / |G_q|

(the same numbers as :func:`toporag_core.hybrid.evaluate.ndcg_recall` when every gold item is one
unit, as in TAT-QA: tested).
"""
from __future__ import annotations

import numpy as np


def top_k_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """``(Q, min(k, U))`` unit indices, best first (equal scores: lower index first; a tie across the
    k-th place may keep either unit); non-finite scores rank last. ``argpartition``, then a sort of k."""
    s = np.where(np.isfinite(scores), scores, -np.inf)
    k = min(k, s.shape[1])
    if k < s.shape[1]:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(s.shape[1]), s.shape).copy()
    sub = np.take_along_axis(s, part, axis=1)
    order = np.lexsort((part, -sub), axis=1)
    return np.take_along_axis(part, order, axis=1)


def ndcg_at_k(scores: np.ndarray, gold: np.ndarray, k: int = 10) -> np.ndarray:
    """``(Q,)`` nDCG@k (module docstring); rows without gold give 0."""
    top = top_k_rows(scores, k)
    disc = 1.0 / np.log2(np.arange(2, top.shape[1] + 2))
    rel = np.take_along_axis(gold, top, axis=1)
    n_gold = np.minimum(gold.sum(1), top.shape[1])
    ideal = np.concatenate([[0.0], np.cumsum(disc)])[n_gold]
    return np.where(ideal > 0, (rel * disc).sum(1) / np.where(ideal > 0, ideal, 1), 0.0)


def recall_at_k(scores: np.ndarray, gold: np.ndarray, k: int = 10) -> np.ndarray:
    """``(Q,)`` Recall@k."""
    rel = np.take_along_axis(gold, top_k_rows(scores, k), axis=1)
    return rel.sum(1) / np.maximum(gold.sum(1), 1)


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n: int = 10000, seed: int = 0) -> dict:
    """Mean of ``a - b`` (per question), its 95 % bootstrap interval, the one-sided bootstrap p-value
    ``P(mean diff <= 0)`` and the two-sided Wilcoxon signed-rank p-value (scipy)."""
    from scipy.stats import wilcoxon

    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n, d.size))].mean(1)
    nz = d[d != 0]
    w = float(wilcoxon(nz).pvalue) if nz.size else 1.0
    return {"mean_diff": float(d.mean()), "ci95": [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))],
            "p_boot": float((means <= 0).mean()), "p_wilcoxon": w, "n": int(d.size)}
