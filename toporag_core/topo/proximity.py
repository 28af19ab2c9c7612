"""Proximity embeddings: random projections of multi-hop random-walk distributions.

Wang et al. ("Topology-aware Retrieval-augmented Generation for text generation") score
two nodes as *proximal* when their multi-hop neighbourhoods overlap. The exact measure
would compare rows of ``sum_k alpha_k Ahat^k`` (``N x N`` dense); as in FastRP, a seeded
Gaussian projection ``R`` (``N x d``) replaces the identity so the rows shrink to ``d``
numbers while cosines are kept up to ``O(1/sqrt(d))`` (Johnson-Lindenstrauss):

    P = sum_{k=1..K} alpha_k * Ahat^k @ R,     Ahat = D^-1 A,

computed right to left (``X <- Ahat @ X``), so only ``K`` sparse-dense products of
``O(|E| d)`` are needed and ``Ahat^k`` is never formed.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp


def graph_adjacency(graph) -> sp.csr_matrix:
    """Undirected simple ``(N, N)`` 0/1 CSR adjacency of a :class:`TextualGraph`.

    Edge directions are dropped, parallel edges merged and self-loops removed: proximity
    and role are properties of the simple skeleton (the same one the lifting uses).
    """
    n = graph.num_nodes
    src, dst = graph.edge_index
    keep = src != dst
    src, dst = src[keep], dst[keep]
    a = sp.coo_matrix((np.ones(2 * src.size), (np.concatenate([src, dst]), np.concatenate([dst, src]))),
                      shape=(n, n)).tocsr()
    a.data[:] = 1.0  # duplicates were summed by tocsr(); a simple graph has weight 1
    return a


def row_normalized(adj: sp.spmatrix) -> sp.csr_matrix:
    """``Ahat = D^-1 A``; rows of isolated nodes stay zero (no division by zero)."""
    adj = sp.csr_matrix(adj, dtype=np.float64)
    deg = np.asarray(adj.sum(axis=1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    return sp.diags(inv) @ adj


def default_alpha(K: int) -> np.ndarray:
    """``alpha_k = 2^-(k-1)``: 1, 1/2, 1/4, ... (nearer hops weigh more)."""
    return 0.5 ** np.arange(K, dtype=np.float64)


def proximity_embedding(adj: sp.spmatrix, K: int = 3, alpha: Sequence[float] | None = None, d: int = 64,
                        seed: int = 0) -> np.ndarray:
    """``(N, d)`` proximity embedding ``P = sum_{k=1..K} alpha_k Ahat^k R``.

    Args:
        adj: ``(N, N)`` symmetric adjacency (scipy sparse; weights allowed).
        K: number of hops. Default 3: a node's 1-3 hop neighbourhood is where
            knowledge-graph facts about it live (WebQSP answers are within 2 hops of the
            topic entity); past that the walk distribution tends to the stationary one
            (degree-proportional), which is the same for every start node and only blurs
            the ranking.
        alpha: ``K`` hop weights. Default ``1, 1/2, 1/4`` (geometric decay, a truncated
            personalised-PageRank flavour): direct neighbours count most, but 2-3 hop
            overlap still separates a node's neighbourhood from the rest of the graph.
        d: projection dimension. Default 64: cosines are preserved to about
            ``1/sqrt(d) ~ 0.13``, enough to rank the top handful of nodes among a few
            thousand, while ``K`` products cost ``O(K |E| d)`` and ``P`` stays tiny.
        seed: seed of the Gaussian projection ``R`` (same seed, same ``P``).

    Returns:
        ``(N, d)`` float64. Similarity of nodes ``i, j`` is ``cosine(P_i, P_j)``
        (:func:`cosine_rows`); an isolated node has a zero row (similarity 0).
    """
    if K < 1:
        raise ValueError(f"K must be >= 1, got {K}")
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    w = default_alpha(K) if alpha is None else np.asarray(alpha, dtype=np.float64).reshape(-1)
    if w.size != K:
        raise ValueError(f"alpha has {w.size} weights but K={K}")
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise ValueError(f"adjacency must be square, got {adj.shape}")
    ahat = row_normalized(adj)
    # R / sqrt(d): unit-variance projections keep norms comparable across d (cosine does not care).
    x = np.random.default_rng(seed).standard_normal((n, d)) / np.sqrt(d)
    out = np.zeros((n, d))
    for k in range(K):
        x = ahat @ x  # Ahat^(k+1) R, one sparse-dense product per hop
        out += w[k] * x
    return out


def cosine_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), so ``x @ x.T`` is the cosine matrix."""
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm == 0, 1.0, norm)
