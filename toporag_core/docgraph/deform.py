"""The two deformations of a traversal: fusing sibling nodes into a super-node, grafting edges.

* :func:`fuse`: nodes ``v_1..v_m`` (state indices) become one super-node at the smallest index:
  texts and contents concatenated in the given order, members united, edges re-indexed (edges
  inside the group dropped, parallel edges of one kind merged with their mean weight ``p``); its
  vector is the re-encoded content (``how="reencode"``) or the mass-weighted mean
  ``normalise(sum_i size_i x_i)`` of the members' vectors (``"mean"``). ``remap (m,)`` maps every
  old index to its new one.
* :func:`graft`: new edges ``parent -> g`` of kind ``graft`` with given existence weights.

:func:`children` (tree and grafted edges out of a node) and :func:`semantic_candidates` (the
"far" nodes a semantic edge joins to a child) are what the traversal scores and offers.

Shapes: ``x (n, d)`` node vectors, ``edges (2, E)``, ``edge_kind (E,)``, ``p (E,)``.
"""
from __future__ import annotations

import numpy as np

from .build import GRAFT, SEMANTIC
from .fgw import GraphState


def fuse(state: GraphState, nodes: list[int], encoder=None, how: str = "reencode") -> tuple[GraphState, np.ndarray]:
    """Fuse ``nodes`` (state indices, text order = given order) into one super-node.

    Returns ``(new state, remap (m,))`` with ``remap[old index] = new index``; the super-node
    takes the place of the smallest index. Edges are re-indexed, edges inside the group
    dropped, and parallel edges of one kind merged with the mean weight (vectorised).
    """
    m = state.num_nodes
    nodes = [int(v) for v in nodes]
    first = min(nodes)
    keep = np.ones(m, bool)
    keep[[v for v in nodes if v != first]] = False
    remap = np.cumsum(keep) - 1
    remap[nodes] = remap[first]
    s = int(remap[first])
    size = np.bincount(remap, weights=state.size, minlength=int(keep.sum()))
    kept = np.flatnonzero(keep)
    text = [state.text[i] for i in kept]
    content = [state.content[i] for i in kept]
    members = [state.members[i] for i in kept]
    text[s] = "\n".join(state.text[v] for v in nodes)
    content[s] = " ".join(state.content[v] for v in nodes)
    members[s] = np.sort(np.concatenate([state.members[v] for v in nodes]))
    x = state.x[kept].copy()
    if how == "reencode" and encoder is not None:
        x[s] = encoder.encode([content[s]])[0]
    else:
        v = (state.x[nodes].astype(np.float64) * state.size[nodes, None]).sum(0)
        x[s] = v / max(np.linalg.norm(v), 1e-12)
    e = remap[state.edges]
    live = e[0] != e[1]
    e, kind, p = e[:, live], state.edge_kind[live], state.p[live]
    sem = kind == SEMANTIC
    e[:, sem] = np.sort(e[:, sem], axis=0)
    n2 = len(kept)
    key = (kind * n2 + e[0]) * n2 + e[1]
    uniq, inv = np.unique(key, return_inverse=True)
    p_mean = np.bincount(inv, weights=p) / np.bincount(inv)
    kind_u = uniq // (n2 * n2)
    rest = uniq % (n2 * n2)
    edges = np.stack([rest // n2, rest % n2])
    new = GraphState(assign=remap[state.assign], x=x, size=size, level=state.level[kept], text=text,
                     content=content, edges=edges, edge_kind=kind_u, p=p_mean, members=members)
    return new, remap


def graft(state: GraphState, parent: int, nodes: list[int], weights: list[float]) -> GraphState:
    """Add grafted edges ``parent -> g`` (kind ``graft``) with the given existence weights."""
    if not nodes:
        return state
    add = np.array([[parent] * len(nodes), nodes], dtype=np.int64)
    return GraphState(assign=state.assign, x=state.x, size=state.size, level=state.level, text=state.text,
                      content=state.content, edges=np.concatenate([state.edges, add], axis=1),
                      edge_kind=np.concatenate([state.edge_kind, np.full(len(nodes), GRAFT)]),
                      p=np.concatenate([state.p, np.asarray(weights, np.float64)]), members=state.members)


def children(state: GraphState, u: int) -> tuple[np.ndarray, np.ndarray]:
    """``(child indices, edge weights)`` of ``u`` over tree and grafted edges."""
    sel = (state.edges[0] == u) & (state.edge_kind != SEMANTIC)
    return state.edges[1, sel], state.p[sel]


def semantic_candidates(state: GraphState, nxt: int, exclude: np.ndarray) -> np.ndarray:
    """Nodes joined by a semantic edge to a child of ``nxt``, at the children's level, not already
    children of ``nxt``; best edge cosine first (each node once)."""
    kids, _ = children(state, nxt)
    if kids.size == 0:
        return np.zeros(0, np.int64)
    sem = state.edge_kind == SEMANTIC
    a, b, w = state.edges[0, sem], state.edges[1, sem], state.p[sem]
    hit_a, hit_b = np.isin(a, kids), np.isin(b, kids)
    cand = np.concatenate([b[hit_a & ~hit_b], a[hit_b & ~hit_a]])
    cw = np.concatenate([w[hit_a & ~hit_b], w[hit_b & ~hit_a]])
    keep = ~np.isin(cand, np.concatenate([kids, exclude]))
    cand, cw = cand[keep], cw[keep]
    order = np.lexsort((cand, -cw))
    _, first = np.unique(cand[order], return_index=True)
    return cand[order][np.sort(first)]
