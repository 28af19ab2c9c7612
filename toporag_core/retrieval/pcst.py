"""Thin, safe wrapper over ``pcst_fast`` (from the ``pcst-fast2`` distribution)."""
from __future__ import annotations

import numpy as np


def solve_pcst(edges: np.ndarray, prizes: np.ndarray, costs: np.ndarray,
               pruning: str = "gw") -> tuple[np.ndarray, np.ndarray]:
    """Unrooted prize-collecting Steiner tree, one cluster.

    Args:
        edges: ``(E, 2)`` int64 vertex pairs.
        prizes: ``(V,)`` non-negative vertex prizes.
        costs: ``(E,)`` non-negative edge costs.

    Returns:
        ``(vertices, edge_ids)`` of the chosen tree, both sorted int64 arrays.
    """
    import pcst_fast

    prizes = np.asarray(prizes, dtype=np.float64)
    if prizes.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    costs = np.asarray(costs, dtype=np.float64)
    if edges.shape[0] == 0:
        return np.array([int(np.argmax(prizes))], np.int64), np.zeros(0, np.int64)
    v, e = pcst_fast.pcst_fast(edges, prizes, costs, -1, 1, pruning, 0)
    return np.sort(np.asarray(v, np.int64)), np.sort(np.asarray(e, np.int64))
