"""Baseline retrievers with the same result type as TopoRAG.

* ``g_retriever``: G-Retriever's PCST on the graph's original (directed) edges, with its
  prize rules (rank prizes on nodes; tie-aware, slightly decaying rank prizes on edges),
  its edge-cost rule (cost lowered to just under the largest edge prize) and virtual
  nodes for edges whose prize exceeds the cost. No 2-cells.
* ``shortest_path``: the paper's "w/o TSR" ablation: the top-k 0-cells and the endpoints
  of the top-k 1-cells are terminals; the union of shortest paths from the best terminal
  of each component to every other terminal of that component (one piece per component
  that holds a terminal). As in the paper's ablation, 2-cells are removed: no 2-cell is
  retrieved, even one whose whole boundary was selected (it is a graph method).
* ``topk_triples``: KAPING-style: the top-k original triples by cosine between the
  question and the triple ``(head, relation, tail)``, embedded as the mean of its cells'
  embeddings (head and tail 0-cells, the edge's 1-cell: no new encoding on first use);
  not necessarily connected.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..embed import single_thread_blas
from .pcst import solve_pcst
from .result import EmbeddedComplex, Subcomplex, make_subcomplex
from .toporag import rank_prizes


def _check(ecx: EmbeddedComplex) -> None:
    if ecx.complex.num_nodes == 0:
        raise ValueError("cannot retrieve from an empty graph (no nodes)")


def g_retriever(ecx: EmbeddedComplex, question: str | np.ndarray, k0: int = 3, k1: int = 3,
                edge_cost: float = 0.5, decay: float = 0.01) -> Subcomplex:
    """G-Retriever's PCST subgraph retrieval on the original directed edges."""
    _check(ecx)
    cx = ecx.complex
    g = cx.graph
    t0 = time.perf_counter()
    s0, s1_cells, s2 = ecx.similarities(question)
    q = ecx.question_vector(question)
    # G-Retriever scores each original edge by its own relation text (not the 1-cell mean);
    # parallel edges with the same relation text tie and share a prize level. Self-loops are
    # PCST edges too, as in PyG's retrieval_via_pcst: they take part in the prize levels and
    # in the cost rule, so dropping them changes the result (they map to no 1-cell).
    keep = np.arange(g.num_edges)
    rel_vecs = _relation_vectors(ecx)
    with single_thread_blas():
        s_e = (rel_vecs @ q) if keep.size else np.zeros(0)
    p0 = rank_prizes(s0, k0)
    pe = np.zeros(keep.size)
    uniq = np.unique(s_e)[::-1]
    ke = int(min(k1, uniq.size))
    if ke > 0:
        last = float(ke)
        for r in range(ke):  # loop over <= k prize levels, not over edges
            tie = s_e == uniq[r]
            value = min((ke - r) / tie.sum(), last - decay)
            pe[tie] = value
            last = value * (1 - decay)
    # lower the cost just under the best edge prize so that at least one edge can be chosen
    cost = min(edge_cost, pe.max() * (1 - decay / 2)) if pe.size and pe.max() > 0 else edge_cost
    src, dst = g.edge_index[0, keep], g.edge_index[1, keep]
    n = cx.num_nodes
    low = pe <= cost
    virt = np.flatnonzero(~low)
    vn = np.arange(n, n + virt.size)
    edges = np.concatenate([np.stack([src[low], dst[low]], 1), np.stack([src[virt], vn], 1),
                            np.stack([vn, dst[virt]], 1)]).astype(np.int64)
    costs = np.concatenate([cost - pe[low], np.zeros(2 * virt.size)])
    prizes = np.concatenate([p0, pe[virt] - cost])
    t1 = time.perf_counter()
    if prizes.sum() <= 0:
        vs, es = np.zeros(0, np.int64), np.zeros(0, np.int64)
    else:
        vs, es = solve_pcst(edges, prizes, costs)
    t2 = time.perf_counter()
    low_ids = keep[low]
    chosen_orig = np.concatenate([low_ids[es[es < low_ids.size]], keep[virt[vs[vs >= n] - n]]])
    cells1 = cx.edge_of_orig[chosen_orig]
    chosen_edges = np.unique(cells1[cells1 >= 0])  # a chosen self-loop is no 1-cell
    # prizes per 1-cell for display: the best prize among its original edges
    p1 = np.zeros(cx.num_edges)
    real = cx.edge_of_orig >= 0
    np.maximum.at(p1, cx.edge_of_orig[real], pe[real])
    sub = make_subcomplex(cx, vs[vs < n], chosen_edges, np.zeros(0, np.int64),
                          (p0, p1, np.zeros(cx.num_cells2)), "g-retriever",
                          dict(k0=k0, k1=k1, edge_cost=edge_cost, effective_edge_cost=float(cost)), {},
                          similarities=(s0, s1_cells, s2))
    t3 = time.perf_counter()
    sub.timings = {"prizes": t1 - t0, "pcst": t2 - t1, "closure": t3 - t2, "total": t3 - t0}
    note = tie_warning(int(np.count_nonzero(pe > 0)), ke, k0, k1, *sub.counts[:2])
    if note:
        sub.warnings.append(note)
    return sub


#: A G-Retriever result is "much larger than k asks" past this many times k0 + k1 cells.
TIE_WARN_FACTOR = 5


def tie_warning(prized_edges: int, levels: int, k0: int, k1: int, nodes: int, edges: int) -> str | None:
    """The warning for a result that ties made much larger than ``k0``/``k1`` ask, else ``None``.

    G-Retriever gives every edge tied at one of the top ``k1`` relation scores the same share of that
    level's prize (PyG's ``retrieval_via_pcst``; kept for parity), so when many relation texts are equal
    (one relation for the whole graph) all of them carry prizes and the PCST can keep them all.
    """
    asked = max(k0 + k1, 1)
    if prized_edges <= levels or nodes + edges <= TIE_WARN_FACTOR * asked:
        return None
    return (f"ties: {prized_edges:,} edges share the top {levels} relation-score level(s), so G-Retriever's tie rule "
            f"(kept for parity with PyG) returned {nodes:,} nodes and {edges:,} edges where k0={k0}, k1={k1} ask "
            f"for about {asked}; use a method without this rule (toporag, topk-triples) for a small context")


def _relation_vectors(ecx: EmbeddedComplex) -> np.ndarray:
    """``(E, d)`` embedding of every original edge's relation text (cached on the object). Each
    distinct relation text is encoded once (a graph has far fewer relations than edges)."""
    cache = ecx.cache
    if "rel" not in cache:
        g = ecx.complex.graph
        if ecx.encoder is None:
            # no encoder: fall back to the 1-cell embedding of each original edge
            idx = np.maximum(ecx.complex.edge_of_orig, 0)
            cache["rel"] = ecx.emb.x1[idx] if ecx.emb.x1.shape[0] else np.zeros((g.num_edges, ecx.emb.dim), np.float32)
        elif g.num_edges:
            uniq, inv = np.unique(np.asarray(list(g.edge_text), dtype=object), return_inverse=True)
            cache["rel"] = np.asarray(ecx.encoder.encode([str(t) for t in uniq]), np.float32)[inv.reshape(-1)]
        else:
            cache["rel"] = np.zeros((0, ecx.emb.dim), np.float32)
    return cache["rel"]


def _triple_vectors(ecx: EmbeddedComplex) -> np.ndarray:
    """``(E, d)`` unit embedding of every original edge's triple ``(head, relation, tail)``: the mean of
    its head's and tail's 0-cell embeddings and its 1-cell's embedding (the relation texts of the
    edge's 1-cell), all already computed with the complex - so the first use of ``topk-triples``
    encodes nothing (encoding ``"head relation tail"`` for every edge took minutes on a WebQSP
    graph). A self-loop (a node fact, no 1-cell) is its node's embedding. Cached."""
    cache = ecx.cache
    if "triples" not in cache:
        cx, emb = ecx.complex, ecx.emb
        g = cx.graph
        if g.num_edges == 0:
            cache["triples"] = np.zeros((0, emb.dim), np.float32)
            return cache["triples"]
        if emb.x0.shape[0] != cx.num_nodes or emb.x1.shape[0] != cx.num_edges:
            raise ValueError("topk-triples needs the embedded complex (its 0- and 1-cell embeddings)")
        s, t = g.edge_index
        cell = cx.edge_of_orig
        rel = np.zeros((g.num_edges, emb.dim), np.float32)
        rel[cell >= 0] = emb.x1[cell[cell >= 0]]
        tv = (emb.x0[s] + rel + emb.x0[t]) / 3.0
        norm = np.linalg.norm(tv, axis=1, keepdims=True)
        cache["triples"] = np.divide(tv, norm, out=np.zeros_like(tv), where=norm > 0).astype(np.float32)
    return cache["triples"]


def shortest_path(ecx: EmbeddedComplex, question: str | np.ndarray, k0: int = 3, k1: int = 3) -> Subcomplex:
    """Shortest paths joining the top-k cells ("w/o TSR"); no 2-cells."""
    _check(ecx)
    cx = ecx.complex
    t0 = time.perf_counter()
    s0, s1, s2 = ecx.similarities(question)
    p0, p1 = rank_prizes(s0, k0), rank_prizes(s1, k1)
    terminals = np.union1d(np.flatnonzero(p0 > 0), cx.edges[p1 > 0].reshape(-1))
    n = cx.num_nodes
    nodes, edges = np.zeros(0, np.int64), np.flatnonzero(p1 > 0)
    if terminals.size:
        # the best terminal of every component that holds terminals is a root; a super-node
        # tied to the roots lets one BFS serve all components (as in lifting)
        score = np.maximum(p0[terminals], 0) + 1e-9 * s0[terminals]
        order = terminals[np.argsort(-score, kind="stable")]
        _, first = np.unique(cx.component[order], return_index=True)
        roots = order[first]
        rows = np.concatenate([cx.edges.reshape(-1), cx.edges[:, ::-1].reshape(-1), np.full(roots.size, n)])
        cols = np.concatenate([cx.edges[:, ::-1].reshape(-1), cx.edges.reshape(-1), roots])
        adj = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n + 1, n + 1))
        _, pred = csgraph.breadth_first_order(adj, n, directed=True, return_predecessors=True)
        # walk every terminal back to its root, all terminals together (vectorised)
        path_nodes = [terminals]
        cur = terminals.copy()
        pairs = []
        while True:
            cur = cur[pred[cur] != n]
            if cur.size == 0:
                break
            nxt = pred[cur]
            pairs.append(np.stack([np.minimum(cur, nxt), np.maximum(cur, nxt)], 1))
            path_nodes.append(nxt)
            cur = np.unique(nxt)
        nodes = np.unique(np.concatenate(path_nodes))
        if pairs:
            pk = np.concatenate(pairs)
            keys = cx.edges[:, 0] * n + cx.edges[:, 1]
            edges = np.union1d(edges, np.searchsorted(keys, pk[:, 0] * n + pk[:, 1]))
    sub = make_subcomplex(cx, nodes, edges, np.zeros(0, np.int64), (p0, p1, np.zeros(cx.num_cells2)),
                          "shortest-path", dict(k0=k0, k1=k1), {},
                          similarities=(s0, s1, s2))
    sub.timings = {"total": time.perf_counter() - t0}
    return sub


def topk_triples(ecx: EmbeddedComplex, question: str | np.ndarray, k: int = 3) -> Subcomplex:
    """KAPING-style top-k triples by triple-text cosine (no connectivity guarantee)."""
    _check(ecx)
    cx = ecx.complex
    t0 = time.perf_counter()
    q = ecx.question_vector(question)
    s0, s1, s2 = ecx.similarities(q)
    tv = _triple_vectors(ecx)
    keep = np.flatnonzero(cx.edge_of_orig >= 0)
    with single_thread_blas():
        st = tv[keep] @ q if keep.size else np.zeros(0)
    pt = rank_prizes(st, k)
    chosen = keep[pt > 0]
    edges = np.unique(cx.edge_of_orig[chosen])
    p1 = np.zeros(cx.num_edges)
    np.maximum.at(p1, cx.edge_of_orig[keep], pt)
    sub = make_subcomplex(cx, np.zeros(0, np.int64), edges, np.zeros(0, np.int64),
                          (np.zeros(cx.num_nodes), p1, np.zeros(cx.num_cells2)), "topk-triples", dict(k=k), {},
                          similarities=(s0, s1, s2))
    sub.timings = {"total": time.perf_counter() - t0}
    return sub
