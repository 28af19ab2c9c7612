"""Semantic neighbours of paragraphs across documents, from blocked ``X_b X^T`` products.

For each query row the ``k`` rows with the highest cosine whose document differs: ``(rows (q, k)
int64, cos (q, k) float32)``, best first, ``-1`` / ``0`` where fewer. ``O(P^2 d)`` once at index
time, never per question; a temporary of ``block x P`` at a time. When documents were only added,
the stored lists are extended in ``O(new x P)`` (:func:`merge_neighbours` keeps the ``k`` best of
the old list and the new candidates) instead of recomputed.
"""
from __future__ import annotations

import numpy as np

from .build import PARAGRAPH
from .index_store import DocGraphIndex


def top_neighbours(xq: np.ndarray, dq: np.ndarray, xa: np.ndarray, da: np.ndarray, k: int,
                   block: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the ``k`` rows of ``xa`` with the highest cosine whose document differs:
    ``(rows (q, k) int64, cos (q, k) float32)``, best first, ``-1`` / ``0`` where fewer. Blocked so the
    temporary is ``block x len(xa)``."""
    q = xq.shape[0]
    rows, sims = np.full((q, k), -1, np.int64), np.zeros((q, k), np.float32)
    if k == 0 or q == 0 or xa.shape[0] == 0:
        return rows, sims
    kk = min(k, xa.shape[0])
    for s in range(0, q, block):
        e = min(s + block, q)
        sim = xq[s:e] @ xa.T
        sim[dq[s:e, None] == da[None, :]] = -np.inf
        part = np.argpartition(-sim, kk - 1, axis=1)[:, :kk]
        ps = np.take_along_axis(sim, part, 1)
        order = np.argsort(-ps, axis=1, kind="stable")
        part, ps = np.take_along_axis(part, order, 1), np.take_along_axis(ps, order, 1)
        ok = np.isfinite(ps)
        rows[s:e, :kk] = np.where(ok, part, -1)
        sims[s:e, :kk] = np.where(ok, ps, 0.0)
    return rows, sims


def merge_neighbours(r1: np.ndarray, s1: np.ndarray, r2: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the ``k`` best of two neighbour lists per row (``-1`` entries last)."""
    k = r1.shape[1]
    r, s = np.concatenate([r1, r2], 1), np.concatenate([s1, s2], 1)
    key = np.where(r >= 0, s, -np.inf)
    order = np.argsort(-key, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(r, order, 1), np.take_along_axis(s, order, 1)


def paragraph_neighbours(x: np.ndarray, level: np.ndarray, doc: np.ndarray, k: int, old: DocGraphIndex | None,
                         old_row_map: np.ndarray | None, n: int,
                         only_added: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(knn rows, cosines, paragraph rows)``: extended in ``O(new x P)`` when documents were only added
    (old rows first, in their order), else recomputed."""
    paras = np.flatnonzero(level == PARAGRAPH)
    xp, dp = x[paras], doc[paras]
    if only_added and k and old is not None and old.knn.shape[1] == k:
        n_old_p = int((old.level == PARAGRAPH).sum())
        pos = np.full(n, -1, np.int64)
        pos[paras] = np.arange(paras.size)
        okn = np.where(old.knn >= 0, pos[old_row_map[np.maximum(old.knn, 0)]], -1)
        new_r, new_s = top_neighbours(xp[n_old_p:], dp[n_old_p:], xp, dp, k)
        add_r, add_s = top_neighbours(xp[:n_old_p], dp[:n_old_p], xp[n_old_p:], dp[n_old_p:], k)
        add_r = np.where(add_r >= 0, add_r + n_old_p, -1)
        old_r, old_s = merge_neighbours(okn, old.knn_sim, add_r, add_s)
        knn_pos, knn_sim = np.concatenate([old_r, new_r]), np.concatenate([old_s, new_s])
    else:
        knn_pos, knn_sim = top_neighbours(xp, dp, xp, dp, k)
    return np.where(knn_pos >= 0, paras[np.maximum(knn_pos, 0)], -1), knn_sim.astype(np.float32), paras
