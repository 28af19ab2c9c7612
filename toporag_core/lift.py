"""Cellular lifting: textual graph -> regular cell complex.

One 2-cell is glued onto each fundamental cycle of a spanning forest, i.e. one per
non-tree edge, so ``#2-cells = M - N + b0`` (minus cycles skipped by ``max_cycle_len``).

Fundamental cycles come from tree parents and depths: all non-tree edges climb
towards their lowest common ancestor *together*, one vectorised numpy step per tree
level, so the cost is ``O(sum of cycle lengths)`` array work and ``O(tree height)``
Python iterations, never a path search per cycle.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from .complex import CellComplex
from .graph import TextualGraph

TREE_METHODS = ("bfs", "dfs", "random")


def _skeleton(graph: TextualGraph):
    """Simple undirected skeleton: unique ``u < v`` pairs, CSR of original members."""
    n = graph.num_nodes
    s, t = graph.edge_index
    loop = s == t
    lo, hi = np.minimum(s, t), np.maximum(s, t)
    keys = lo * max(n, 1) + hi
    keep = np.flatnonzero(~loop)
    uniq, inv = np.unique(keys[keep], return_inverse=True)
    edges = np.stack([uniq // max(n, 1), uniq % max(n, 1)], axis=1).astype(np.int64)
    edge_of_orig = np.full(graph.num_edges, -1, dtype=np.int64)
    edge_of_orig[keep] = inv
    order = np.argsort(inv, kind="stable")
    member_idx = keep[order]
    member_ptr = np.zeros(len(uniq) + 1, dtype=np.int64)
    np.cumsum(np.bincount(inv, minlength=len(uniq)), out=member_ptr[1:])
    return edges, uniq, member_ptr, member_idx, edge_of_orig


def _spanning_forest(n: int, edges: np.ndarray, method: str, seed: int):
    """Parent array (roots point to themselves), depth, component labels, tree-edge mask."""
    m = edges.shape[0]
    u, v = edges[:, 0], edges[:, 1]
    adj = sp.csr_matrix((np.ones(m), (u, v)), shape=(n, n))
    ncomp, comp = csgraph.connected_components(adj, directed=False)
    # A super-root tied to the first node of every component turns the forest into one
    # tree, so a single C-level traversal serves all components.
    first = np.full(ncomp, n, dtype=np.int64)
    np.minimum.at(first, comp, np.arange(n))
    if method == "random":
        rng = np.random.default_rng(seed)
        w = rng.random(m) + 1.0  # random weights -> a random spanning forest (Kruskal)
        mst = csgraph.minimum_spanning_tree(sp.csr_matrix((w, (u, v)), shape=(n, n)))
        tu, tv = mst.nonzero()
        base_u, base_v = tu, tv
        root_choice = rng.integers(0, np.bincount(comp, minlength=ncomp))  # random root per component
        order_in_comp = np.argsort(comp, kind="stable")
        starts = np.concatenate([[0], np.cumsum(np.bincount(comp, minlength=ncomp))[:-1]])
        first = order_in_comp[starts + root_choice]
        method_traverse = "bfs"
    else:
        base_u, base_v = u, v
        method_traverse = method
    rows = np.concatenate([base_u, base_v, np.full(ncomp, n), first])
    cols = np.concatenate([base_v, base_u, first, np.full(ncomp, n)])
    big = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n + 1, n + 1))
    big.sum_duplicates()
    if method_traverse == "bfs":
        order, pred = csgraph.breadth_first_order(big, n, directed=True, return_predecessors=True)
    elif method_traverse == "dfs":
        order, pred = csgraph.depth_first_order(big, n, directed=True, return_predecessors=True)
    else:
        raise ValueError(f"unknown spanning tree method {method!r}; choose one of {TREE_METHODS}")
    parent = pred[:n].astype(np.int64)
    roots = parent == n
    parent[roots] = np.flatnonzero(roots)
    # depth = BFS distance from the super-root along tree edges (one C-level call)
    child = np.flatnonzero(~roots)
    tree_adj = sp.csr_matrix((np.ones(child.size + int(roots.sum())),
                              (np.concatenate([child, np.full(int(roots.sum()), n)]),
                               np.concatenate([parent[child], np.flatnonzero(roots)]))), shape=(n + 1, n + 1))
    depth = csgraph.shortest_path(tree_adj, directed=False, unweighted=True, indices=n)[:n].astype(np.int64) - 1
    # tree edges as skeleton keys
    pk = np.minimum(child, parent[child]) * max(n, 1) + np.maximum(child, parent[child])
    return parent, depth, comp.astype(np.int64), pk


def lift(graph: TextualGraph, tree: str = "bfs", seed: int = 0,
         max_cycle_len: int | None = None) -> CellComplex:
    """Lift ``graph`` into a :class:`CellComplex`.

    Args:
        graph: the textual graph (parallel edges merge into one 1-cell, self-loops stay
            attached to their node; see :mod:`toporag_core.graph`).
        tree: spanning-tree method, ``bfs`` | ``dfs`` | ``random`` (seeded).
        seed: seed of the ``random`` method.
        max_cycle_len: fundamental cycles with more edges get no 2-cell (counted in
            ``num_skipped_cycles``); ``None`` keeps them all.
    """
    if tree not in TREE_METHODS:
        raise ValueError(f"unknown spanning tree method {tree!r}; choose one of {TREE_METHODS}")
    n = graph.num_nodes
    edges, keys, mptr, midx, edge_of_orig = _skeleton(graph)
    m = edges.shape[0]
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return CellComplex(graph, edges, mptr, midx, edge_of_orig, np.zeros(0, bool), np.zeros(1, np.int64),
                           empty, empty, empty, empty, empty, tree, max_cycle_len, 0)
    parent, depth, comp, tree_keys = _spanning_forest(n, edges, tree, seed)
    tree_mask = np.isin(keys, tree_keys)
    chords = np.flatnonzero(~tree_mask)

    # ---- climb both endpoints of every chord to their LCA, all chords at once
    a = edges[chords, 0].copy()
    b = edges[chords, 1].copy()
    da, db = depth[a], depth[b]
    left, right = [a.copy()], [b.copy()]
    while True:
        active = a != b
        if not active.any():
            break
        up_a = active & (da >= db)
        up_b = active & (db >= da)
        a = np.where(up_a, parent[a], a)
        b = np.where(up_b, parent[b], b)
        da = da - up_a
        db = db - up_b
        # a position that did not move repeats its node; the repeats are masked below
        left.append(np.where(up_a, a, -1))
        right.append(np.where(up_b, b, -1))
    L = np.stack(left, axis=1)  # (F0, S): u, then each new ancestor (or -1)
    R = np.stack(right, axis=1)
    # lengths: nodes on each side including the LCA
    len_l = (L >= 0).sum(1)
    len_r = (R >= 0).sum(1)
    cyc_len = len_l + len_r - 1
    keep = np.ones(chords.size, dtype=bool) if max_cycle_len is None else cyc_len <= max_cycle_len
    skipped = int((~keep).sum())
    L, R, len_l, len_r, cyc_len, chords = L[keep], R[keep], len_l[keep], len_r[keep], cyc_len[keep], chords[keep]

    f = chords.size
    # compact the -1 holes out of each row (stable: valid entries first, in order)
    def compact(mat: np.ndarray, width: int) -> np.ndarray:
        order = np.argsort(mat < 0, axis=1, kind="stable")
        mat = np.take_along_axis(mat, order, axis=1)
        return np.pad(mat, ((0, 0), (0, max(0, width - mat.shape[1]))), constant_values=-1)

    width = max(int(cyc_len.max()) if f else 1, L.shape[1])
    L, R = compact(L, width), compact(R, width)
    col = np.arange(width)[None, :]
    # row i: u ... lca (left, len_l nodes), then the right side reversed without the lca
    ridx = np.clip(len_l[:, None] + len_r[:, None] - 2 - col, 0, width - 1)
    seq = np.where(col < len_l[:, None], L, np.take_along_axis(R, ridx, axis=1))
    seq = np.where(col < cyc_len[:, None], seq, -1)
    flat_mask = seq >= 0
    cell_nodes = seq[flat_mask]
    cell_ptr = np.zeros(f + 1, dtype=np.int64)
    np.cumsum(cyc_len, out=cell_ptr[1:])
    # boundary edges: consecutive pairs, closing pair (last -> first)
    nxt = np.roll(seq, -1, axis=1)
    last_col = cyc_len - 1
    nxt[np.arange(f), last_col] = seq[:, 0] if f else nxt[np.arange(f), last_col]
    p, q = seq[flat_mask], nxt[flat_mask]
    k = np.minimum(p, q) * n + np.maximum(p, q)
    cell_edges = np.searchsorted(keys, k)
    cell_signs = np.where(p < q, 1, -1).astype(np.int8)
    return CellComplex(
        graph=graph, edges=edges, edge_member_ptr=mptr, edge_member_idx=midx, edge_of_orig=edge_of_orig,
        tree_mask=tree_mask, cell_ptr=cell_ptr, cell_nodes=cell_nodes.astype(np.int64),
        cell_edges=cell_edges.astype(np.int64), cell_signs=cell_signs, cell_chord=chords.astype(np.int64),
        component=comp, tree_method=tree, max_cycle_len=max_cycle_len, num_skipped_cycles=skipped,
    )
