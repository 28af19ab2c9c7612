"""Topology-aware subcomplex retrieval (TopoRAG, Algorithm 3).

1. Rank prizes: the top-``k0`` 0-cells and top-``k1`` 1-cells by cosine with the
   question get prizes ``k, k-1, ..., 1`` (all others 0).
2. 2-cell prizes: sum of the prizes of the boundary 0- and 1-cells minus
   ``c2 x |boundary edges|``; the top-``k2`` 2-cells with a positive prize are candidates.
3. One connected subcomplex from a prize-collecting Steiner tree (``pcst_fast``, GW
   pruning, one cluster), then closed under boundaries.

**Reduction of the complex to a PCST instance.**

* Every 0-cell is a PCST vertex with its prize.
* A 1-cell ``e = (u, v)`` with prize ``p1 <= edge_cost`` is an edge of cost
  ``edge_cost - p1``. A 1-cell whose prize exceeds the cost becomes a virtual vertex
  with prize ``p1 - edge_cost`` joined to ``u`` and ``v`` by zero-cost edges (as
  G-Retriever does), so the solver can collect an edge's prize.
* A candidate 2-cell ``f`` with boundary length ``L`` becomes a virtual vertex with
  prize ``p2(f)`` joined to each of *its own* boundary nodes by an edge of cost
  ``edge_cost x L / 2``. It can only ever connect nodes it bounds, and a path through
  it costs ``edge_cost x L``, the full price of its whole boundary, which is never less
  than walking the real boundary arc between the same two nodes; so the 2-cell is no
  free shortcut. Choosing it then brings its whole boundary by closure, which keeps
  the result connected (the boundary is a cycle through the node it was attached at).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .pcst import solve_pcst
from .result import EmbeddedComplex, Subcomplex, make_subcomplex


def rank_order(sim: np.ndarray, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """``(n,)`` indices of ``sim`` best first: higher ``sim``, then higher ``tiebreak``, then lower index."""
    return np.lexsort((-tiebreak, -sim)) if tiebreak is not None else np.argsort(-sim, kind="stable")


def rank_prizes(sim: np.ndarray, k: int, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Top-``k`` entries of ``sim`` get ``k, k-1, ..., 1``; the rest 0. ``(n,)`` float64.

    ``tiebreak`` orders entries whose ``sim`` is equal (higher first); without it ties go
    to the lower index.
    """
    p = np.zeros(sim.shape[0], dtype=np.float64)
    k = int(max(0, min(k, sim.shape[0])))
    if k:
        top = rank_order(sim, tiebreak)[:k]
        p[top] = np.arange(k, 0, -1, dtype=np.float64)
    return p


def cell2_prizes(ecx_or_cx, p0: np.ndarray, p1: np.ndarray, c2: float) -> np.ndarray:
    """``(F,)`` 2-cell prizes: boundary prize sum minus ``c2 x`` boundary length."""
    cx = getattr(ecx_or_cx, "complex", ecx_or_cx)
    if cx.num_cells2 == 0:
        return np.zeros(0, dtype=np.float64)
    seg = cx.cell2_index()
    total = np.bincount(seg, weights=p0[cx.cell_nodes] + p1[cx.cell_edges], minlength=cx.num_cells2)
    return total - c2 * cx.boundary_lengths()


def candidate_cells2(p2: np.ndarray, k2: int) -> np.ndarray:
    """The top-``k2`` 2-cells among those with a positive prize."""
    pos = np.flatnonzero(p2 > 0)
    if k2 <= 0 or pos.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = pos[np.argsort(-p2[pos], kind="stable")]
    return order[:k2]


@dataclass
class CellPrizes:
    """Every prize of one TopoRAG retrieval (step 1 and 2 of the module docstring).

    ``p0 (N,)``, ``p1 (M,)``, ``p2 (F,)`` float64 prizes; ``candidates (<= k2,)`` the 2-cells that
    enter the Steiner tree; ``edge_tiebreak (M,)`` the sum of the endpoint cosines that orders
    1-cells with equal cosine (``None`` without 1-cells).
    """

    p0: np.ndarray
    p1: np.ndarray
    p2: np.ndarray
    candidates: np.ndarray
    edge_tiebreak: np.ndarray | None


def edge_tiebreak(cx, s0: np.ndarray) -> np.ndarray | None:
    """``(M,)`` ``s0[u] + s0[v]`` of each 1-cell ``(u, v)``: orders 1-cells whose own cosine ties."""
    return s0[cx.edges].sum(1) if cx.num_edges else None


def cell_prizes(ecx_or_cx, s0: np.ndarray, s1: np.ndarray, k0: int, k1: int, k2: int, c2: float) -> CellPrizes:
    """The prizes :func:`retrieve_subcomplex` uses, from the cosines ``s0 (N,)``, ``s1 (M,)``.

    THE one prize computation: the retrieval and the Learn page both call it. 1-cells often
    tie (every "left of" edge has the same relation text): ties go to the 1-cells whose
    endpoints are closer to the question (:func:`edge_tiebreak`), then to the lower id.
    """
    cx = getattr(ecx_or_cx, "complex", ecx_or_cx)
    tb = edge_tiebreak(cx, s0)
    p0, p1 = rank_prizes(s0, k0), rank_prizes(s1, k1, tiebreak=tb)
    p2 = cell2_prizes(cx, p0, p1, c2)
    return CellPrizes(p0, p1, p2, candidate_cells2(p2, k2), tb)


def retrieve_subcomplex(ecx: EmbeddedComplex, question: str | np.ndarray, k0: int = 3, k1: int = 3,
                        k2: int = 3, c2: float = 0.5, edge_cost: float = 0.5) -> Subcomplex:
    """Retrieve one connected subcomplex for ``question`` (Algorithm 3 of TopoRAG).

    Args:
        ecx: the embedded complex.
        question: question text (encoded with ``ecx.encoder``, cached) or a ``(d,)`` vector.
        k0, k1, k2: how many 0-, 1- and 2-cells get prizes / are candidates.
        c2: per-edge penalty of a 2-cell's boundary length.
        edge_cost: base cost of a 1-cell in the Steiner tree.

    Returns:
        a :class:`Subcomplex` with prizes, roles and ``timings`` (seconds).
    """
    cx = ecx.complex
    if cx.num_nodes == 0:
        raise ValueError("cannot retrieve from an empty graph (no nodes)")
    t0 = time.perf_counter()
    s0, s1, s2 = ecx.similarities(question)
    t1 = time.perf_counter()
    prz = cell_prizes(cx, s0, s1, k0, k1, k2, c2)
    params = dict(k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost)
    return prized_subcomplex(cx, prz, edge_cost, "toporag", params, (s0, s1, s2), t0, t1)


def prized_subcomplex(cx, prz: CellPrizes, edge_cost: float, method: str, params: dict, similarities,
                      t0: float, t1: float) -> Subcomplex:
    """Steps 3 of the module docstring for given prizes: the PCST instance, its solution mapped back
    to cells, closed under boundaries. ``t0`` / ``t1``: when the retrieval and its prize step began
    (for ``timings``). Every prize-based cell method ends here."""
    p0, p1, p2_all, cand = prz.p0, prz.p1, prz.p2, prz.candidates
    # The stored 2-cell prize is the formula's value for every 2-cell (for display);
    # only candidates enter the Steiner tree.
    n = cx.num_nodes
    pcst_prizes = [p0]
    src, dst, cost = [cx.edges[:, 0]], [cx.edges[:, 1]], [np.maximum(edge_cost - p1, 0.0)]
    real_edge = p1 <= edge_cost
    src[0], dst[0], cost[0] = src[0][real_edge], dst[0][real_edge], cost[0][real_edge]
    real_edge_ids = np.flatnonzero(real_edge)
    virt_edge_ids = np.flatnonzero(~real_edge)
    nxt = n
    ve = np.arange(nxt, nxt + virt_edge_ids.size)
    nxt += virt_edge_ids.size
    pcst_prizes.append(p1[virt_edge_ids] - edge_cost)
    src += [cx.edges[virt_edge_ids, 0], ve]
    dst += [ve, cx.edges[virt_edge_ids, 1]]
    cost += [np.zeros(ve.size), np.zeros(ve.size)]
    if cand.size:
        # virtual vertex nxt + i stands for 2-cell cand[i]; slot[f] = i for candidates
        slot = np.full(cx.num_cells2, -1, dtype=np.int64)
        slot[cand] = np.arange(cand.size)
        pcst_prizes.append(p2_all[cand])
        owner = slot[cx.cell2_index()]
        mask = owner >= 0
        src.append(nxt + owner[mask])
        dst.append(cx.cell_nodes[mask])
        cost.append(edge_cost * cx.boundary_lengths()[cand][owner[mask]] / 2.0)
    prizes = np.concatenate(pcst_prizes)
    edges = np.stack([np.concatenate(src), np.concatenate(dst)], axis=1).astype(np.int64)
    costs = np.concatenate(cost).astype(np.float64)
    t2 = time.perf_counter()
    if prizes.sum() <= 0:
        sub_nodes = np.zeros(0, np.int64)
        sel_e = np.zeros(0, np.int64)
    else:
        sub_nodes, sel_e = solve_pcst(edges, prizes, costs)
    t3 = time.perf_counter()
    # map back: real nodes, real edges, virtual edge nodes, 2-cell nodes
    chosen_nodes = sub_nodes[sub_nodes < n]
    n_real_e = real_edge_ids.size
    chosen_edges = [real_edge_ids[sel_e[sel_e < n_real_e]]]
    in_ve = (sub_nodes >= n) & (sub_nodes < n + virt_edge_ids.size)
    chosen_edges.append(virt_edge_ids[sub_nodes[in_ve] - n])
    chosen_cells = np.zeros(0, np.int64)
    if cand.size:
        in_vf = sub_nodes >= n + virt_edge_ids.size
        chosen_cells = cand[sub_nodes[in_vf] - n - virt_edge_ids.size]  # virtual node i is cand[i]
    sub = make_subcomplex(cx, chosen_nodes, np.concatenate(chosen_edges), chosen_cells,
                          (p0, p1, p2_all), method, params, {}, similarities=similarities)
    t4 = time.perf_counter()
    sub.timings = {"similarity": t1 - t0, "prizes": t2 - t1, "pcst": t3 - t2, "closure": t4 - t3, "total": t4 - t0}
    sub.params["candidates2"] = np.sort(cand).tolist()
    return sub
