"""Does topology predict text? The analysis behind topology-aware RAG (Wang et al.).

* :func:`topology_text_correlation`: over node pairs (all, or a uniform sample for large
  graphs), the Pearson and Spearman correlation between the cosine of the node texts'
  embeddings and a topological similarity (proximity or role).
* :func:`text_similarity_by_distance`: mean text similarity of node pairs binned by their
  shortest-path (hop) distance, the curve of the paper's analysis figures.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse.csgraph as csgraph
from scipy.stats import rankdata

from .proximity import cosine_rows, graph_adjacency, proximity_embedding
from .role import role_embedding

UNREACHABLE = -1  # hop bin of pairs in different connected components


def sample_pairs(n: int, max_pairs: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Distinct node pairs ``(i, j)``, ``i < j``: all of them if there are at most
    ``max_pairs``, else ``max_pairs`` drawn uniformly without replacement.

    Pairs are numbered row by row over the upper triangle and the row of a number is
    recovered in closed form, so no ``N x N`` array is ever made.
    """
    total = n * (n - 1) // 2
    if total <= max_pairs:
        return np.triu_indices(n, k=1)
    lin = np.sort(np.random.default_rng(seed).choice(total, size=max_pairs, replace=False)).astype(np.int64)
    # row i starts at start(i) = i*n - i*(i+1)/2; invert with the quadratic formula, then fix rounding
    i = np.floor((2 * n - 1 - np.sqrt((2 * n - 1) ** 2 - 8.0 * lin)) / 2).astype(np.int64)
    start = i * n - i * (i + 1) // 2
    i = np.where(lin < start, i - 1, i)
    start = i * n - i * (i + 1) // 2
    nxt = (i + 1) * n - (i + 1) * (i + 2) // 2
    i = np.where(lin >= nxt, i + 1, i)
    start = i * n - i * (i + 1) // 2
    return i, lin - start + i + 1


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r, or ``nan`` when either side is constant (r is undefined there)."""
    if x.size < 2:
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    den = np.sqrt((x @ x) * (y @ y))
    return float(np.clip((x @ y) / den, -1.0, 1.0)) if den > 0 else float("nan")


def _check_text_emb(graph, text_emb: np.ndarray) -> np.ndarray:
    text_emb = np.asarray(text_emb, dtype=np.float64)
    if text_emb.ndim != 2 or text_emb.shape[0] != graph.num_nodes:
        raise ValueError(f"text_emb must have shape ({graph.num_nodes}, d), got {text_emb.shape}")
    return cosine_rows(text_emb)


def topology_text_correlation(graph, text_emb: np.ndarray, method: str = "proximity", max_pairs: int = 20000,
                              seed: int = 0, topo_emb: np.ndarray | None = None, return_pairs: bool = False,
                              **embed_kw) -> dict[str, Any]:
    """Correlation of text similarity with proximity or role similarity over node pairs.

    Args:
        graph: a :class:`TextualGraph` (its undirected simple skeleton is used).
        text_emb: ``(N, d)`` node text embeddings (any encoder; rows are normalised here).
        method: ``"proximity"`` (cosine of :func:`proximity_embedding`) or ``"role"``
            (GraphWave, :func:`role_embedding`).
        max_pairs: pairs used at most; graphs with more pairs are sampled uniformly.
        topo_emb: a precomputed topological embedding (skips recomputing it).
        return_pairs: also return the per-pair arrays (for a scatter plot).
        embed_kw: passed to the embedding function.

    Returns:
        ``{"method", "pearson_r", "spearman_r", "pairs", "sampled", "topo_measure"}``.
        For ``role`` the Pearson correlation is taken with the *negative L2 distance*:
        the retrieval score ``1/distance`` is monotone in it (so ``spearman_r`` is the
        same for both) but explodes to ``1/eps`` for automorphic nodes (every leaf of a
        hub), and a handful of such pairs would decide Pearson's r on their own.
        ``r`` is ``nan`` when one side is constant.
    """
    if method not in ("proximity", "role"):
        raise ValueError(f"method must be 'proximity' or 'role', got {method!r}")
    if max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
    text = _check_text_emb(graph, text_emb)
    if topo_emb is None:
        adj = graph_adjacency(graph)
        topo_emb = (proximity_embedding(adj, seed=seed, **embed_kw) if method == "proximity"
                    else role_embedding(adj, **embed_kw))
    topo_emb = np.asarray(topo_emb, dtype=np.float64)
    i, j = sample_pairs(graph.num_nodes, max_pairs, seed)
    text_sim = np.einsum("pd,pd->p", text[i], text[j])
    if method == "proximity":
        unit = cosine_rows(topo_emb)
        topo_sim = np.einsum("pd,pd->p", unit[i], unit[j])
        measure = "cosine of proximity embeddings"
    else:
        topo_sim = -np.linalg.norm(topo_emb[i] - topo_emb[j], axis=1)
        measure = "negative L2 distance of GraphWave embeddings"
    out: dict[str, Any] = {
        "method": method, "pearson_r": _pearson(text_sim, topo_sim),
        "spearman_r": _pearson(rankdata(text_sim), rankdata(topo_sim)), "pairs": int(i.size),
        "sampled": bool(i.size < graph.num_nodes * (graph.num_nodes - 1) // 2), "topo_measure": measure,
        "text_measure": "cosine of text embeddings"}
    if return_pairs:
        out.update(i=i, j=j, text_sim=text_sim, topo_sim=topo_sim)
    return out


def pair_hop_distances(graph, i: np.ndarray, j: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Hop distance of each pair ``(i[p], j[p])`` (``inf`` if unreachable).

    Breadth-first search only from the distinct sources, ``chunk`` at a time, so memory
    is ``O(chunk x N)`` however many pairs there are.
    """
    adj = graph_adjacency(graph)
    dist = np.full(i.size, np.inf)
    sources = np.unique(i)
    for start in range(0, sources.size, chunk):
        src = sources[start:start + chunk]
        d = csgraph.shortest_path(adj, directed=False, unweighted=True, indices=src)
        sel = np.flatnonzero(np.isin(i, src))
        dist[sel] = d[np.searchsorted(src, i[sel]), j[sel]]
    return dist


def text_similarity_by_distance(graph, text_emb: np.ndarray, max_pairs: int = 20000, max_hops: int = 6,
                                seed: int = 0) -> list[tuple[int, float, int]]:
    """Mean text cosine of node pairs binned by hop distance: ``[(hop, mean, count), ...]``.

    Bins ``1 .. max_hops``, then ``max_hops + 1`` for "``max_hops + 1`` or more hops", then
    :data:`UNREACHABLE` (``-1``) for pairs in different components; only non-empty bins are
    listed, and the counts add up to the number of pairs used (all pairs, or ``max_pairs``
    sampled uniformly as in :func:`sample_pairs`).
    """
    if max_hops < 1:
        raise ValueError(f"max_hops must be >= 1, got {max_hops}")
    if max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
    text = _check_text_emb(graph, text_emb)
    i, j = sample_pairs(graph.num_nodes, max_pairs, seed)
    if i.size == 0:
        return []
    sim = np.einsum("pd,pd->p", text[i], text[j])
    dist = pair_hop_distances(graph, i, j)
    hop = np.where(np.isinf(dist), UNREACHABLE, np.minimum(np.nan_to_num(dist, posinf=0), max_hops + 1)).astype(int)
    out = []
    for h in [*range(1, max_hops + 2), UNREACHABLE]:
        m = hop == h
        if m.any():
            out.append((h, float(sim[m].mean()), int(m.sum())))
    return out
