"""Cellular lifting: textual graph -> regular cell complex.

One 2-cell is glued onto each fundamental cycle of a spanning forest, i.e. one per
non-tree edge, so ``#2-cells = M - N + b0`` (minus cycles skipped by ``max_cycle_len``).

Fundamental cycles come from tree parents and depths: all non-tree edges climb
towards their lowest common ancestor *together*, one vectorised numpy step per tree
level, so the cost is ``O(sum of cycle lengths)`` array work and ``O(tree height)``
Python iterations, never a path search per cycle.

``tree="rings"`` (beyond the paper; the ring lifting of CW networks, Bodnar et al. 2021): one
2-cell on *every* simple cycle of 3 or 4 edges (``max_cycle_len=3``: triangles only), whatever
the spanning tree. A closed loop a question names is then always a 2-cell, where the fundamental
cycles of one tree hold only some of them (27% of the generated SceneGraphs loop questions with a
BFS tree). ``#2-cells`` is no longer ``M - N + b0``: rings overlap, and a 4-cycle with a chord is
a 2-cell beside its two triangles. Enumeration is vectorised over wedges ``a - m - b`` (pairs of
neighbours of ``m``): a triangle is a wedge closed by the edge ``a b`` (kept once, at its smallest
node ``m``); a 4-cycle is two wedges with the same ends and different middles (kept once, with its
smallest node as an end). Work and memory are ``O(sum_v deg(v)^2)``; graphs past
:data:`MAX_RING_WEDGES` wedges (or 4-cycles) are refused with a clear message rather than exhausting memory.

The liftings are a registry, :data:`LIFTING_SPECS` (name -> :class:`Lifting`: a one-line label,
the spanning tree it walks, and the builder of its 2-cells); :func:`lifting_names` lists them. This
module imports scipy (and the cell complex) only inside the functions that compute, so the command
line reads the names and labels for its ``--tree`` choices without loading scipy.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

    from .complex import CellComplex
    from ..graph import TextualGraph

TREE_METHODS = ("bfs", "dfs", "random")
MAX_RING_WEDGES = 20_000_000


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


def _upper_csr(n_rows: int, u: np.ndarray, v: np.ndarray) -> sp.csr_matrix:
    """CSR of edges ``(u, v)`` already sorted by ``u`` (then ``v``), built without a sort."""
    import scipy.sparse as sp

    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(u, minlength=n_rows), out=indptr[1:])
    return sp.csr_matrix((np.ones(u.size), v, indptr), shape=(n_rows, n_rows))


def _spanning_forest(n: int, edges: np.ndarray, method: str, seed: int):
    """Parent array (roots point to themselves), depth, component labels."""
    import scipy.sparse as sp
    from scipy.sparse import csgraph

    m = edges.shape[0]
    u, v = edges[:, 0], edges[:, 1]  # sorted by (u, v): the skeleton comes from np.unique
    ncomp, comp = csgraph.connected_components(_upper_csr(n, u, v), directed=False)
    # A super-root tied to the first node of every component turns the forest into one
    # tree, so a single C-level traversal serves all components.
    first = np.unique(comp, return_index=True)[1]
    if method == "random":
        rng = np.random.default_rng(seed)
        w = rng.random(m) + 1.0  # random weights -> a random spanning forest (Kruskal)
        mst = csgraph.minimum_spanning_tree(sp.csr_matrix((w, (u, v)), shape=(n, n))).tocoo()
        sizes = np.bincount(comp, minlength=ncomp)
        order_in_comp = np.argsort(comp, kind="stable")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        first = order_in_comp[starts + rng.integers(0, sizes)]  # a random root per component
        tu, tv = np.minimum(mst.row, mst.col), np.maximum(mst.row, mst.col)
        o = np.lexsort((tv, tu))
        u, v = tu[o], tv[o]
    if method not in TREE_METHODS:
        raise ValueError(f"unknown spanning tree method {method!r}; choose one of {TREE_METHODS}")
    # rows 0..n-1: the (upper-triangular) edges; row n: the super-root -> component roots
    big = _upper_csr(n + 1, np.concatenate([u, np.full(ncomp, n)]), np.concatenate([v, np.sort(first)]))
    if method == "dfs":
        _, pred = csgraph.depth_first_order(big, n, directed=False, return_predecessors=True)
    else:
        _, pred = csgraph.breadth_first_order(big, n, directed=False, return_predecessors=True)
    parent = pred[:n].astype(np.int64)
    roots = parent == n
    parent[roots] = np.flatnonzero(roots)
    # depth by pointer jumping: log2(height) vectorised steps
    depth = (~roots).astype(np.int64)
    anc = parent.copy()
    while True:
        nxt = anc[anc]
        if (nxt == anc).all():
            break
        depth = depth + depth[anc]
        anc = nxt
    return parent, depth, comp.astype(np.int64)


def _lca_depth(u: np.ndarray, v: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Depth of the lowest common ancestor of every pair ``(u[i], v[i])``.

    The deeper endpoint climbs (both when level); pairs that met leave the active index set,
    so the total work is the sum of the climbs, not ``#pairs x tree height``.
    """
    out = np.empty(u.size, dtype=np.int64)
    idx = np.arange(u.size)
    a, b = u.copy(), v.copy()
    da, db = depth[a], depth[b]
    while idx.size:
        met = a == b
        if met.any():
            out[idx[met]] = da[met]
            live = ~met
            idx, a, b, da, db = idx[live], a[live], b[live], da[live], db[live]
            if not idx.size:
                break
        up_a, up_b = da >= db, db >= da
        a = np.where(up_a, parent[a], a)
        b = np.where(up_b, parent[b], b)
        da, db = da - up_a, db - up_b
    return out


def _cycle_arrays(u, v, len_l, len_r, cell_ptr, chords, parent, parent_edge):
    """Boundary nodes and 1-cells of every 2-cell, written straight into CSR arrays.

    Cycle ``i`` is ``u, parent(u), ..., lca, ..., parent(v), v`` then the chord ``v -> u``.
    Step ``k`` writes the ``k``-th ancestor of ``u`` at ``ptr + k`` (``k < len_l``) and of
    ``v`` at ``ptr + len - 1 - k`` (``k < len_r - 1``), only for the cycles still that long
    (cycles sorted by length once: the active ones are a prefix). Memory and work are
    ``O(sum of boundary lengths)``; the former dense ``(F, max length)`` matrices written
    column by column were both larger and cache-hostile (strided writes), which made lifting
    grow faster than the boundary size past ~50k nodes.
    """
    total = int(cell_ptr[-1])
    nodes = np.empty(total, dtype=np.int64)
    edg = np.empty(total, dtype=np.int64)
    if not total:
        return nodes, edg
    start = cell_ptr[:-1]
    last = cell_ptr[1:] - 1
    for seq_len, node0, pos_of in ((len_l, u, lambda s, k: start[s] + k),
                                   (len_r - 1, v, lambda s, k: last[s] - k)):
        order = np.argsort(-seq_len, kind="stable")
        lens = seq_len[order]
        cur = node0[order]
        k = 0
        n_act = int(np.searchsorted(-lens, -1, side="right"))  # cycles with length >= 1
        while n_act:
            sel = order[:n_act]
            pos = pos_of(sel, k)
            nodes[pos] = cur[:n_act]
            k += 1
            n_act = int(np.searchsorted(-lens, -(k + 1), side="right"))
            cur = parent[cur[:n_act]]
    # edge j joins nodes[j] and nodes[j + 1]: on the left arc the child is nodes[j] (climbing), on
    # the right arc the child is nodes[j + 1] (descending); the last edge is the chord
    cell = np.repeat(np.arange(cell_ptr.size - 1), np.diff(cell_ptr))
    j = np.arange(total)
    on_left = (j - start[cell]) < (len_l - 1)[cell]
    child = np.where(on_left, nodes, np.concatenate([nodes[1:], nodes[:1]]))
    edg[:] = parent_edge[child]
    edg[last] = chords
    return nodes, edg


def _wedges(n: int, edges: np.ndarray, above: bool):
    """Every wedge ``a - m - b`` with ``a < b`` (``above``: also ``m < a``), as arrays ``(a, m, b)``."""
    u, v = edges[:, 0], edges[:, 1]
    if above:  # neighbours larger than m only: the upper adjacency, already sorted by (u, v)
        mid, nb = u, v
    else:
        mid, nb = np.concatenate([u, v]), np.concatenate([v, u])
        o = np.lexsort((nb, mid))
        mid, nb = mid[o], nb[o]
    deg = np.bincount(mid, minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=ptr[1:])
    total = int((deg * (deg - 1) // 2).sum())
    if total > MAX_RING_WEDGES:
        raise ValueError(f"the ring lifting needs {total:,} wedges (node pairs around a node), more than "
                         f"{MAX_RING_WEDGES:,}: the graph is too dense for rings; lift it with a spanning tree "
                         f"(bfs, dfs or random) instead")
    # entry i of a node's neighbour list pairs with every later entry j of the same list
    pos = np.arange(mid.size) - ptr[mid]
    later = deg[mid] - pos - 1
    first = np.repeat(np.arange(mid.size), later)
    off = np.arange(first.size) - np.repeat(np.cumsum(later) - later, later)
    second = first + 1 + off
    return nb[first], mid[first], nb[second]


def _ring_cells(n: int, edges: np.ndarray, keys: np.ndarray, max_len: int):
    """2-cells on every simple 3-cycle (and 4-cycle when ``max_len >= 4``): CSR boundary arrays
    ``(cell_ptr, cell_nodes, cell_edges)`` in cycle order, triangles first."""
    def edge_id(a, b):
        k = np.minimum(a, b) * n + np.maximum(a, b)
        i = np.searchsorted(keys, k)
        ok = i < keys.size
        ok[ok] = keys[i[ok]] == k[ok]
        return i, ok

    a, m, b = _wedges(n, edges, above=True)          # m < a < b: m is the triangle's smallest node
    _, closed = edge_id(a, b)
    cycles = [np.stack([m[closed], a[closed], b[closed]], axis=1)]
    if max_len >= 4:
        a, m, b = _wedges(n, edges, above=False)     # every wedge, ends a < b
        keep = a < m                                 # a is smaller than the middle ...
        a, m, b = a[keep], m[keep], b[keep]
        o = np.lexsort((m, b, a))                    # ... group the wedges by their ends (a, b)
        a, m, b = a[o], m[o], b[o]
        grp = np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
        size = np.diff(np.r_[grp, a.size])
        start = np.repeat(grp, size)
        later = start + np.repeat(size, size) - np.arange(a.size) - 1
        if int(later.sum()) > MAX_RING_WEDGES:  # 4-cycles grow as deg^4 on dense graphs, wedges only as deg^2
            raise ValueError(f"the ring lifting would glue {int(later.sum()):,} 4-cycles, more than "
                             f"{MAX_RING_WEDGES:,}: the graph is too dense for rings; lift it with a spanning "
                             f"tree (bfs, dfs or random) or keep triangles only (max_cycle_len=3)")
        i = np.repeat(np.arange(a.size), later)
        j = i + 1 + np.arange(i.size) - np.repeat(np.cumsum(later) - later, later)
        cycles.append(np.stack([a[i], m[i], b[i], m[j]], axis=1))   # a - m1 - b - m2 - a, a smallest
    lens = np.repeat([c.shape[1] for c in cycles], [c.shape[0] for c in cycles])  # triangles, then 4-cycles
    cell_ptr = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=cell_ptr[1:])
    nodes = np.concatenate([c.ravel() for c in cycles])
    nxt = np.concatenate([np.roll(c, -1, axis=1).ravel() for c in cycles])
    eid, ok = edge_id(nodes, nxt)
    assert ok.all(), "a ring boundary step is not an edge"
    return cell_ptr, nodes.astype(np.int64), eid.astype(np.int64)


def lift(graph: TextualGraph, tree: str = "bfs", seed: int = 0,
         max_cycle_len: int | None = None) -> CellComplex:
    """Lift ``graph`` into a :class:`CellComplex`.

    Args:
        graph: the textual graph (parallel edges merge into one 1-cell, self-loops stay
            attached to their node; see :mod:`toporag_core.graph`).
        tree: spanning-tree method, ``bfs`` | ``dfs`` | ``random`` (seeded), whose fundamental
            cycles are the 2-cells; or ``rings``: every simple cycle of 3 or 4 edges is a 2-cell
            (the BFS tree is still computed, for ``tree_mask``; ``cell_chord`` is each ring's
            closing 1-cell).
        seed: seed of the ``random`` method.
        max_cycle_len: fundamental cycles with more edges get no 2-cell (counted in
            ``num_skipped_cycles``); ``None`` keeps them all. For ``rings``: 3 keeps triangles only
            (below 3: no 2-cells).
    """
    from .complex import CellComplex

    spec = LIFTING_SPECS.get(tree)
    if spec is None:
        raise ValueError(f"unknown lifting {tree!r}; choose one of {LIFTINGS}")
    n = graph.num_nodes
    edges, keys, mptr, midx, edge_of_orig = _skeleton(graph)
    m = edges.shape[0]
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return CellComplex(graph, edges, mptr, midx, edge_of_orig, np.zeros(0, bool), np.zeros(1, np.int64),
                           empty, empty, empty, empty, empty, tree, max_cycle_len, 0)
    # rings keep the BFS forest for tree_mask (the pictures draw tree edges solid)
    parent, depth, comp = _spanning_forest(n, edges, spec.spanning_tree, seed)
    # skeleton id of every node's edge to its parent (-1 at roots), and the tree mask
    child = np.flatnonzero(parent != np.arange(n))
    parent_edge = np.full(n, -1, dtype=np.int64)
    parent_edge[child] = np.searchsorted(keys, np.minimum(child, parent[child]) * n + np.maximum(child, parent[child]))
    tree_mask = np.zeros(m, dtype=bool)
    tree_mask[parent_edge[child]] = True
    forest = Forest(n, edges, keys, parent, depth, parent_edge, tree_mask)
    cell_ptr, cell_nodes, cell_edges, chords, skipped = spec.cells(forest, max_cycle_len)
    # the walk direction of entry j: from cell_nodes[j] to the next node (the chord closes the cycle)
    nxt = np.empty_like(cell_nodes)
    if cell_nodes.size:
        nxt[:-1] = cell_nodes[1:]
        nxt[cell_ptr[1:] - 1] = cell_nodes[cell_ptr[:-1]]
    cell_signs = np.where(cell_nodes < nxt, 1, -1).astype(np.int8)
    return CellComplex(
        graph=graph, edges=edges, edge_member_ptr=mptr, edge_member_idx=midx, edge_of_orig=edge_of_orig,
        tree_mask=tree_mask, cell_ptr=cell_ptr, cell_nodes=cell_nodes.astype(np.int64),
        cell_edges=cell_edges.astype(np.int64), cell_signs=cell_signs, cell_chord=chords.astype(np.int64),
        component=comp, tree_method=tree, max_cycle_len=max_cycle_len, num_skipped_cycles=skipped,
    )


def _fundamental_cells(forest: Forest, max_cycle_len: int | None):
    """One 2-cell per fundamental cycle: ``(cell_ptr, cell_nodes, cell_edges, chords, skipped)``."""
    edges, parent, depth, parent_edge, tree_mask = (forest.edges, forest.parent, forest.depth, forest.parent_edge,
                                                    forest.tree_mask)
    chords = np.flatnonzero(~tree_mask)
    # ---- lowest common ancestors: both endpoints of every chord climb together; chords whose
    # endpoints met drop out (index compaction), so the work is O(sum of cycle lengths)
    u, v = edges[chords, 0], edges[chords, 1]
    lca_depth = _lca_depth(u, v, parent, depth)
    len_l = depth[u] - lca_depth + 1  # nodes u ... lca
    len_r = depth[v] - lca_depth + 1  # nodes v ... lca
    cyc_len = len_l + len_r - 1       # nodes on the cycle = edges on the cycle
    keep = np.ones(chords.size, dtype=bool) if max_cycle_len is None else cyc_len <= max_cycle_len
    skipped = int((~keep).sum())
    u, v, len_l, len_r, cyc_len, chords = u[keep], v[keep], len_l[keep], len_r[keep], cyc_len[keep], chords[keep]
    cell_ptr = np.zeros(chords.size + 1, dtype=np.int64)
    np.cumsum(cyc_len, out=cell_ptr[1:])
    cell_nodes, cell_edges = _cycle_arrays(u, v, len_l, len_r, cell_ptr, chords, parent, parent_edge)
    return cell_ptr, cell_nodes, cell_edges, chords, skipped


def _rings(forest: Forest, max_cycle_len: int | None):
    """One 2-cell per simple cycle of 3 or 4 edges (``max_cycle_len`` 3: triangles; below 3: none):
    ``(cell_ptr, cell_nodes, cell_edges, chords, skipped)``; a ring's "chord" is its closing 1-cell."""
    if max_cycle_len is not None and max_cycle_len < 3:  # no 2-cells, as for the tree liftings
        empty = np.zeros(0, dtype=np.int64)
        cell_ptr, cell_nodes, cell_edges = np.zeros(1, np.int64), empty, empty
    else:
        longest = 4 if max_cycle_len is None else max_cycle_len
        cell_ptr, cell_nodes, cell_edges = _ring_cells(forest.n, forest.edges, forest.keys, longest)
    return cell_ptr, cell_nodes, cell_edges, cell_edges[cell_ptr[1:] - 1], 0


# ----------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Forest:
    """What a lifting's builder reads: the simple skeleton (``edges (M, 2)``, sorted ``keys``) and the
    spanning forest (``parent``, ``depth``, each node's ``parent_edge``, the ``tree_mask`` of 1-cells)."""

    n: int
    edges: np.ndarray
    keys: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    parent_edge: np.ndarray
    tree_mask: np.ndarray


@dataclass(frozen=True)
class Lifting:
    """One way to glue 2-cells: ``label`` (one line for help texts), ``spanning_tree`` (the forest it
    computes: its fundamental cycles, or only the tree mask the pictures draw) and ``cells(forest,
    max_cycle_len) -> (cell_ptr, cell_nodes, cell_edges, chords, skipped)``."""

    name: str
    label: str
    spanning_tree: str
    cells: Callable[[Forest, int | None], tuple]


LIFTING_SPECS: dict[str, Lifting] = {
    "bfs": Lifting("bfs", "fundamental cycles of a breadth-first spanning tree (the paper)", "bfs",
                   _fundamental_cells),
    "dfs": Lifting("dfs", "fundamental cycles of a depth-first spanning tree", "dfs", _fundamental_cells),
    "random": Lifting("random", "fundamental cycles of a random (seeded) spanning tree", "random",
                      _fundamental_cells),
    "rings": Lifting("rings", "every cycle of 3 or 4 edges (beyond the paper: a question's closed loop is "
                              "always a 2-cell)", "bfs", _rings),
}


class _LiftingNames(Sequence):
    """The registered liftings' names, in registry order, read from :data:`LIFTING_SPECS` on every use: a
    lifting added to the registry after import is a valid ``tree`` everywhere that checks against
    :data:`LIFTINGS` (the service's validation, preprocessing), not only in freshly built ``--tree`` choices."""

    def __getitem__(self, i):
        return tuple(LIFTING_SPECS)[i]

    def __len__(self) -> int:
        return len(LIFTING_SPECS)

    def __contains__(self, name: object) -> bool:
        return name in LIFTING_SPECS

    def __iter__(self):
        return iter(tuple(LIFTING_SPECS))

    def __repr__(self) -> str:
        return repr(tuple(LIFTING_SPECS))


LIFTINGS: Sequence[str] = _LiftingNames()  # the names, in registry order (a live view of LIFTING_SPECS)


def lifting_names() -> list[str]:
    """The registered liftings' names (``--tree`` choices), in registry order."""
    return list(LIFTING_SPECS)
