"""Optional: cluster questions by how they deform one document graph.

Each question's traversal leaves a deformed graph ``G_q`` (its fused nodes and grafted edges).
The distance of two questions is ``FGW(G_a, G_b)`` (same settings as the traversal; the
solver starts from the composed natural coupling ``T_a^T diag(1 / mu) T_b`` when both graphs
hold the original nodes in the ``"fused"`` mass mode, else from ``mu nu^T``); the ``(Q, Q)``
matrix is clustered by average-linkage agglomeration (``scipy.cluster.hierarchy``).
"""
from __future__ import annotations

import numpy as np

from .fgw import FGWConfig, GraphState, feature_cost, fgw, natural_coupling, structure_matrix
from .traverse import TraversalResult


def question_distances(results: list[TraversalResult], config: FGWConfig | None = None) -> np.ndarray:
    """``(Q, Q)`` symmetric FGW distances between the questions' deformed graphs."""
    cfg = config or FGWConfig()
    if not results:
        return np.zeros((0, 0))
    base: GraphState = results[0].base
    _, scale = structure_matrix(base, cfg)
    mats = [structure_matrix(r.state, cfg, scale)[0] for r in results]
    mu0 = base.masses(cfg.node_mass)
    q = len(results)
    out = np.zeros((q, q))
    for a in range(q):
        for b in range(a + 1, q):
            sa, sb = results[a].state, results[b].state
            ma, mb = sa.masses(cfg.node_mass), sb.masses(cfg.node_mass)
            t0 = None
            if cfg.node_mass == "fused":
                ta = natural_coupling(sa.assign, mu0, sa.num_nodes)
                tb = natural_coupling(sb.assign, mu0, sb.num_nodes)
                t0 = ta.T @ (tb / mu0[:, None])
            val, _ = fgw(feature_cost(sa.x, sb.x), mats[a], mats[b], ma, mb, cfg.feature_weight, t0, cfg.max_iter)
            out[a, b] = out[b, a] = val
    return out


def cluster_questions(results: list[TraversalResult], n_clusters: int = 2,
                      config: FGWConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(labels (Q,), distances (Q, Q))``: average-linkage clusters of the questions."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if n_clusters < 1:
        raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
    d = question_distances(results, config)
    if len(results) < 2:
        return np.zeros(len(results), np.int64), d
    z = linkage(squareform(np.maximum(d, 0.0), checks=False), method="average")
    return fcluster(z, t=min(n_clusters, len(results)), criterion="maxclust").astype(np.int64) - 1, d
