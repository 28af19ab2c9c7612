"""Retrieval that does not scan everything: TopoRAG on large complexes (``toporag-local``).

Exact TopoRAG (:func:`~.toporag.retrieve_subcomplex`) scores every cell of the complex
(``(N + M + F) x d`` products), sums prizes over every boundary entry and solves one PCST on
the whole complex; all three grow linearly with the graph. Here the same prizes and the same
Steiner tree come from work that grows with the *answer*:

1. **0-cells** ``top-k0`` from a vector index over the unit node vectors ``U0 (N, d)``:
   ``index="flat"`` = exact inner-product k-NN (``faiss.knn``, SIMD, no copy of ``U0``),
   ``index="ivf"`` = ``faiss.IndexIVFFlat`` (``nlist ~ 4 sqrt(N)`` lists, ``nprobe`` probed:
   approximate). The ``k0 + margin`` candidates are re-scored with numpy exactly as the exact
   path scores them (rounded to 5 decimals, ties to the lower index); with ``flat`` a
   certificate (the k0-th score strictly above the index's last returned score) proves no
   other node ties or beats them, else the search widens, finally to a full scan.
2. **1-cells**: 1-cells with identical embeddings (one relation text, typically) form classes;
   ``(G, d)`` class vectors are scored (``G`` = number of distinct 1-cell embeddings: ~50 on a
   3M-edge KG with 50 relations), classes are taken best first until ``k1`` 1-cells, and only
   their 1-cells get the exact tie-break (``s0(u) + s0(v)``, from ``U0`` rows).
3. **2-cells**: a 2-cell's prize ``sum(boundary prizes) - c2 L`` is positive only if its
   boundary touches a prized cell, so candidates are the cofaces of the <= ``k0 + k1``
   prized cells (node -> 2-cell and 1-cell -> 2-cell CSR, built once); the others keep the
   formula's value ``-c2 L`` (shown, never candidates).
4. **PCST** on the ``r``-hop neighbourhood of the terminals (prized nodes, prized 1-cells'
   endpoints, candidate 2-cells' boundary nodes) in the 1-skeleton, built exactly as the exact
   path builds the whole instance (same reduction, same relative vertex and edge order), then
   closed under boundaries with ``cell_ptr`` ranges. ``r`` starts at ``hops`` and grows by one
   until two consecutive radii give the same subcomplex (or ``max_hops``): the
   Goemans-Williamson growth of ``pcst_fast`` may wander a hop or two past the final tree and
   change its pruning, so "the tree fits in the neighbourhood" alone is not enough.

**Exactness.** Steps 1 (``flat``), 2 and 3 give bit-identical prizes to the exact path. Step 4
equals the exact Steiner tree whenever the exact tree lies inside the neighbourhood and the
Goemans-Williamson growth did not leave it (it only grows from prized vertices, each cluster by at
most its prize sum, over edges of cost ``edge_cost``); the stability rule above is the practical
test of that. The tests check equality on random graphs wherever the final neighbourhood holds
the exact answer's support. ``hops`` / ``max_hops`` trade speed for margin (defaults 2 / 3).

Below ``LOCAL_MIN_NODES`` nodes (``index="auto"``) the exact path runs unchanged: small graphs
(the WebQSP and ExplaGraphs ones) get exactly ``toporag``'s answer. ``similarities`` of the
result is ``None`` on the local path (no full scan happens to fill it).

Everything built once per complex lives in ``ecx.cache[("scale-index", kind)]``
(:func:`cell_index`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .pcst import solve_pcst
from .result import CLOSURE, STEINER, TERMINAL, EmbeddedComplex, Subcomplex
from .toporag import retrieve_subcomplex

INDEX_KINDS = ("auto", "exact", "flat", "ivf")
LOCAL_MIN_NODES = 20_000  # "auto": below this many nodes the exact path runs
ROUND = 5                 # the exact path rounds similarities to 5 decimals (ties are exact)


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Row-normalised float32, the same expression as the exact path's unit vectors (bit-identical)."""
    nx = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(nx == 0, 1.0, nx), dtype=np.float32)


def _csr_groups(keys: np.ndarray, num: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr (num + 1,), items)``: the positions of ``keys`` grouped by key value, ascending inside."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(num + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=num), out=ptr[1:])
    return ptr, order


def _gather(ptr: np.ndarray, items: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Items of the CSR rows ``rows`` (concatenated) and, for each, the position in ``rows`` it came from."""
    lens = ptr[rows + 1] - ptr[rows]
    owner = np.repeat(np.arange(rows.size), lens)
    start = np.repeat(ptr[rows] - np.cumsum(lens) + lens, lens)
    return items[start + np.arange(owner.size)], owner


@dataclass
class CellIndex:
    """What local retrieval needs, built once per complex (see the module docstring).

    ``unit0 (N, d)`` unit node vectors; ``ivf`` a faiss IVF index or ``None``; 1-cell classes
    ``class_unit (G, d)``, ``class_of_edge (M,)``, ``class_ptr / class_edges`` (CSR);
    cofaces ``node_cells_ptr / node_cells`` and ``edge_cells_ptr / edge_cells``; skeleton
    adjacency ``adj`` (CSR ``(N, N)``, data = 1-cell id + 1); ``blen (F,)`` boundary lengths.
    """

    kind: str
    unit0: np.ndarray
    ivf: object | None
    class_unit: np.ndarray
    class_of_edge: np.ndarray
    class_ptr: np.ndarray
    class_edges: np.ndarray
    node_cells_ptr: np.ndarray
    node_cells: np.ndarray
    edge_cells_ptr: np.ndarray
    edge_cells: np.ndarray
    adj: sp.csr_matrix
    blen: np.ndarray
    nprobe: int = 16

    @classmethod
    def build(cls, ecx: EmbeddedComplex, kind: str = "flat", nlist: int | None = None,
              nprobe: int = 16, seed: int = 0) -> "CellIndex":
        cx, emb = ecx.complex, ecx.emb
        n, m, f = cx.shape
        unit0 = _unit_rows(emb.x0)
        ivf = None
        if kind == "ivf":
            import faiss

            nlist = int(nlist or max(1, min(n // 39, int(4 * np.sqrt(n)))))
            quant = faiss.IndexFlatIP(unit0.shape[1])
            ivf = faiss.IndexIVFFlat(quant, unit0.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(seed)
            sample = unit0[np.sort(rng.choice(n, size=min(n, 64 * nlist), replace=False))]
            ivf.train(sample)
            ivf.add(unit0)
            ivf.nprobe = nprobe
        # 1-cell classes: rows with bit-identical embeddings (two random projections, then verified)
        x1 = emb.x1
        if m:
            proj = x1 @ np.random.default_rng(seed).standard_normal((x1.shape[1], 2)).astype(np.float32)
            _, first, cls_of = np.unique(proj.view(np.complex64).ravel() if proj.shape[1] == 2 else proj,
                                         return_index=True, return_inverse=True)
            cls_of = cls_of.ravel().astype(np.int64)
            same = np.ones(m, dtype=bool)
            for a in range(0, m, 65536):  # verify against the class representative, chunk by chunk
                same[a:a + 65536] = (x1[a:a + 65536] == x1[first[cls_of[a:a + 65536]]]).all(1)
            odd = np.flatnonzero(~same)  # projection collisions (never seen): each its own class
            cls_of[odd] = first.size + np.arange(odd.size)
            reps = np.concatenate([first, odd])
            class_unit = _unit_rows(x1[reps])
        else:
            cls_of, class_unit = np.zeros(0, np.int64), np.zeros((0, emb.x0.shape[1]), np.float32)
        class_ptr, class_edges = _csr_groups(cls_of, class_unit.shape[0])
        cell_of_entry = np.repeat(np.arange(f), np.diff(cx.cell_ptr))
        nptr, nitems = _csr_groups(cx.cell_nodes, n)
        eptr, eitems = _csr_groups(cx.cell_edges, m)
        u, v = cx.edges[:, 0], cx.edges[:, 1]
        ids = np.arange(1, m + 1, dtype=np.float64)
        adj = sp.csr_matrix((np.concatenate([ids, ids]), (np.concatenate([u, v]), np.concatenate([v, u]))),
                            shape=(n, n))
        return cls(kind=kind, unit0=unit0, ivf=ivf, class_unit=class_unit, class_of_edge=cls_of,
                   class_ptr=class_ptr, class_edges=class_edges, node_cells_ptr=nptr,
                   node_cells=cell_of_entry[nitems], edge_cells_ptr=eptr, edge_cells=cell_of_entry[eitems],
                   adj=adj, blen=np.diff(cx.cell_ptr), nprobe=nprobe)

    # ------------------------------------------------------------ 0-cells
    def node_scores(self, q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Exact (rounded) cosine of nodes ``ids`` with the unit question ``q``."""
        return np.round(self.unit0[ids] @ q, ROUND)

    def top_nodes(self, q: np.ndarray, k: int) -> np.ndarray:
        """The top-``k`` nodes in the exact path's order (score desc, then index asc)."""
        n = self.unit0.shape[0]
        k = int(max(0, min(k, n)))
        if k == 0:
            return np.zeros(0, np.int64)
        want = min(n, max(2 * k, k + 16))
        while True:
            if want >= n or self.kind == "exact":
                s = np.round(self.unit0 @ q, ROUND)
                return np.argsort(-s, kind="stable")[:k]
            if self.ivf is not None:
                dist, ids = self.ivf.search(q[None, :].astype(np.float32), want)
            else:
                import faiss

                dist, ids = faiss.knn(q[None, :].astype(np.float32), self.unit0, want,
                                      metric=faiss.METRIC_INNER_PRODUCT)
            ids = ids[0][ids[0] >= 0]
            cand = np.sort(ids)
            s = self.node_scores(q, cand)
            order = np.argsort(-s, kind="stable")
            if self.ivf is not None or cand.size < want:  # approximate index, or every node returned
                return cand[order[:k]]
            # certificate: every node not returned scores <= the index's last score (+ float slack)
            if s[order[k - 1]] > float(dist[0][-1]) + 2 * 10.0 ** -ROUND:
                return cand[order[:k]]
            want *= 4

    # ------------------------------------------------------------ 1-cells
    def top_edges(self, q: np.ndarray, k: int, edges: np.ndarray) -> np.ndarray:
        """The top-``k`` 1-cells in the exact path's order (score desc, ``s0(u) + s0(v)`` desc, index asc)."""
        m = self.class_of_edge.size
        k = int(max(0, min(k, m)))
        if k == 0:
            return np.zeros(0, np.int64)
        cs = np.round(self.class_unit @ q, ROUND)
        levels = np.unique(cs)[::-1]
        counts = np.bincount(np.searchsorted(-levels, -cs), weights=np.diff(self.class_ptr), minlength=levels.size)
        take = int(np.searchsorted(np.cumsum(counts), k)) + 1  # score levels needed to hold k 1-cells
        classes = np.flatnonzero(cs >= levels[take - 1])
        cand, _ = _gather(self.class_ptr, self.class_edges, classes)
        cand = np.sort(cand)
        ends = edges[cand]
        uniq, inv = np.unique(ends, return_inverse=True)
        tb = self.node_scores(q, uniq)[inv.reshape(-1)].reshape(-1, 2).sum(1)
        order = np.lexsort((-tb, -cs[self.class_of_edge[cand]]))
        return cand[order[:k]]


def cell_index(ecx: EmbeddedComplex, kind: str = "flat", **options) -> CellIndex:
    """The :class:`CellIndex` of ``ecx`` (built on first use, kept in ``ecx.cache``)."""
    key = ("scale-index", kind)
    if key not in ecx.cache:
        ecx.cache[key] = CellIndex.build(ecx, kind=kind, **options)
    return ecx.cache[key]


def hop_neighbourhood(adj: sp.csr_matrix, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Sorted nodes within ``hops`` hops of ``seeds`` (frontier expansion over CSR rows)."""
    seen = np.unique(seeds)
    frontier = seen
    for _ in range(hops):
        if not frontier.size:
            break
        nb, _ = _gather(adj.indptr, adj.indices, frontier)
        nb = np.unique(nb)
        frontier = nb[~np.isin(nb, seen, assume_unique=True)]
        seen = np.union1d(seen, frontier)
    return seen.astype(np.int64)


def _roles(ids: np.ndarray, chosen: np.ndarray, prize: np.ndarray) -> np.ndarray:
    r = np.full(ids.size, CLOSURE, dtype=object)
    picked = np.isin(ids, chosen)
    r[picked] = STEINER
    r[picked & (prize[ids] > 0)] = TERMINAL
    return r.astype(str) if ids.size else np.zeros(0, dtype=str)


def retrieve_local(ecx: EmbeddedComplex, question: str | np.ndarray, k0: int = 3, k1: int = 3, k2: int = 3,
                   c2: float = 0.5, edge_cost: float = 0.5, hops: int = 2, max_hops: int = 3,
                   index: str = "auto") -> Subcomplex:
    """TopoRAG retrieval from an index and a local PCST (the module docstring says how and when it is exact).

    Args:
        ecx: the embedded complex.
        question: text or ``(d,)`` vector.
        k0, k1, k2, c2, edge_cost: as :func:`~.toporag.retrieve_subcomplex`.
        hops: first radius of the PCST neighbourhood around the terminals, in 1-skeleton hops; the
            radius grows by one until two consecutive radii give the same subcomplex, at most ``max_hops``.
        max_hops: the largest radius tried.
        index: ``auto`` (exact path below ``LOCAL_MIN_NODES`` nodes, else ``flat``), ``exact``
            (full numpy scan for 0-cells, local everything else), ``flat`` or ``ivf``.
    """
    if index not in INDEX_KINDS:
        raise ValueError(f"parameter 'index' must be one of {', '.join(INDEX_KINDS)}, got {index!r}")
    cx = ecx.complex
    n, m, f = cx.shape
    if n == 0:
        raise ValueError("cannot retrieve from an empty graph (no nodes)")
    if index == "auto":
        if n < LOCAL_MIN_NODES:
            sub = retrieve_subcomplex(ecx, question, k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost)
            sub.method = "toporag-local"
            sub.params = {**sub.params, "hops": hops, "max_hops": max_hops, "index": "exact-path"}
            return sub
        index = "flat"
    t0 = time.perf_counter()
    ix = cell_index(ecx, index)
    q = ecx.question_vector(question)
    t1 = time.perf_counter()
    p0, p1 = np.zeros(n), np.zeros(m)
    top0 = ix.top_nodes(q, k0)
    p0[top0] = np.arange(top0.size, 0, -1, dtype=np.float64)
    top1 = ix.top_edges(q, k1, cx.edges)
    p1[top1] = np.arange(top1.size, 0, -1, dtype=np.float64)
    # 2-cell prizes: only cofaces of prized cells can be positive
    p2 = -c2 * ix.blen if f else np.zeros(0)
    cand = np.zeros(0, np.int64)
    if f and (top0.size or top1.size):
        c0, o0 = _gather(ix.node_cells_ptr, ix.node_cells, top0)
        c1, o1 = _gather(ix.edge_cells_ptr, ix.edge_cells, top1)
        touched, inv = np.unique(np.concatenate([c0, c1]), return_inverse=True)
        tot = np.bincount(inv, weights=np.concatenate([p0[top0][o0], p1[top1][o1]]), minlength=touched.size)
        p2[touched] = tot - c2 * ix.blen[touched]
        pos = touched[p2[touched] > 0]
        if k2 > 0 and pos.size:
            cand = pos[np.argsort(-p2[pos], kind="stable")][:k2]
    t2 = time.perf_counter()
    # ---- local PCST, the radius grown until two consecutive radii agree (or max_hops)
    csort = np.sort(cand)
    cnodes, cowner = _gather(cx.cell_ptr, cx.cell_nodes, csort)
    slot = np.empty(cand.size, dtype=np.int64)
    slot[np.searchsorted(csort, cand)] = np.arange(cand.size)
    owner_slot = slot[cowner]  # the candidate slot (virtual vertex) of each boundary entry of csort
    seeds = np.concatenate([top0, cx.edges[top1].reshape(-1), cnodes])
    t_pcst = 0.0
    prev, radius, region = None, hops, np.zeros(0, np.int64)
    while True:
        grown = hop_neighbourhood(ix.adj, seeds, radius)
        if prev is not None and grown.size == region.size:
            break  # the whole component is inside: nothing more to see
        region = grown
        ts = time.perf_counter()
        result = _solve_region(cx, ix, region, p0, p1, p2, cand, cnodes, owner_slot, edge_cost)
        t_pcst += time.perf_counter() - ts
        if prev is not None and all(np.array_equal(x, y) for x, y in zip(prev, result)):
            break
        prev = result
        if radius >= max(max_hops, hops):
            break
        radius += 1
    chosen_nodes, chosen_edges, cells2 = result
    t4 = time.perf_counter()
    t3 = t4 - t_pcst
    # closure under boundaries (cell_ptr ranges of the chosen 2-cells only)
    bedges, _ = _gather(cx.cell_ptr, cx.cell_edges, cells2)
    edges_all = np.union1d(chosen_edges, bedges).astype(np.int64)
    nodes_all = np.union1d(chosen_nodes, cx.edges[edges_all].reshape(-1)).astype(np.int64)
    sub = Subcomplex(
        complex=cx, nodes=nodes_all, edges=edges_all, cells2=cells2,
        node_roles=_roles(nodes_all, chosen_nodes, p0), edge_roles=_roles(edges_all, chosen_edges, p1),
        cell2_roles=np.full(cells2.size, TERMINAL).astype(str) if cells2.size else np.zeros(0, dtype=str),
        prizes=(p0, p1, p2), method="toporag-local",
        params=dict(k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost, hops=hops, max_hops=max_hops, index=index,
                    candidates2=np.sort(cand).tolist(), radius=radius, region_nodes=int(region.size)),
        similarities=None)
    t5 = time.perf_counter()
    sub.timings = {"index": t1 - t0, "prizes": t2 - t1, "neighbourhood": t3 - t2, "pcst": t4 - t3, "closure": t5 - t4,
                   "total": t5 - t0}
    return sub


def _solve_region(cx, ix: CellIndex, region: np.ndarray, p0, p1, p2, cand, cnodes, owner_slot, edge_cost):
    """The PCST instance of the exact path restricted to ``region`` (sorted nodes), solved.

    Vertex layout and edge order are the exact path's with the outside removed (real nodes by id,
    then virtual 1-cell vertices by 1-cell id, then candidate 2-cells in candidate order; real
    1-cells by id, the two virtual-edge blocks, the 2-cell attachments in boundary order), so the
    solver meets the same instance up to an order-preserving relabelling.
    Returns the chosen ``(nodes, 1-cells, 2-cells)`` (global ids, before closure).
    """
    nb, owner = _gather(ix.adj.indptr, ix.adj.indices, region)
    eid, _ = _gather(ix.adj.indptr, ix.adj.data, region)
    inside = (region[owner] < nb) & np.isin(nb, region)
    local_edges = np.sort(eid[inside].astype(np.int64) - 1)  # 1-cells with both ends in the region
    nr = region.size
    real = local_edges[p1[local_edges] <= edge_cost]
    virt = local_edges[p1[local_edges] > edge_cost]
    ve = np.arange(nr, nr + virt.size)
    src = [np.searchsorted(region, cx.edges[real, 0]), np.searchsorted(region, cx.edges[virt, 0]), ve]
    dst = [np.searchsorted(region, cx.edges[real, 1]), ve, np.searchsorted(region, cx.edges[virt, 1])]
    cost = [np.maximum(edge_cost - p1[real], 0.0), np.zeros(virt.size), np.zeros(virt.size)]
    prizes = [p0[region], p1[virt] - edge_cost]
    if cand.size:
        prizes.append(p2[cand])
        src.append(nr + virt.size + owner_slot)
        dst.append(np.searchsorted(region, cnodes))
        cost.append(edge_cost * ix.blen[cand][owner_slot] / 2.0)
    pz = np.concatenate(prizes)
    if pz.sum() <= 0:
        sub_nodes, sel_e = np.zeros(0, np.int64), np.zeros(0, np.int64)
    else:
        sub_nodes, sel_e = solve_pcst(np.stack([np.concatenate(src), np.concatenate(dst)], axis=1),
                                      pz, np.concatenate(cost).astype(np.float64))
    chosen_nodes = region[sub_nodes[sub_nodes < nr]]
    chosen_edges = np.union1d(real[sel_e[sel_e < real.size]],
                              virt[sub_nodes[(sub_nodes >= nr) & (sub_nodes < nr + virt.size)] - nr])
    cells2 = np.sort(cand[sub_nodes[sub_nodes >= nr + virt.size] - nr - virt.size]) if cand.size \
        else np.zeros(0, np.int64)
    return chosen_nodes, chosen_edges.astype(np.int64), cells2
