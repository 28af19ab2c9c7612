"""Which nodes a graph view shows and where they sit.

Big graphs are never sent whole: :func:`neighbourhood` keeps at most ``cap`` nodes (default
:data:`DEFAULT_CAP`), grown ring by ring (BFS on the 1-skeleton) from the cells of interest
(:func:`default_seeds`). :func:`spring_layout` places them (Fruchterman-Reingold, seeded, so the same
view comes back on every rerun). :func:`important_nodes` are those whose label is always painted.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ...cells.complex import CellComplex

DEFAULT_CAP = 150


def _adjacency(cx: CellComplex) -> sp.csr_matrix:
    """Symmetric node adjacency of the 1-skeleton, cached on the complex."""
    key = ("studio", "adjacency")
    if key not in cx.cache:
        u, v = cx.edges[:, 0], cx.edges[:, 1]
        n = cx.num_nodes
        a = sp.csr_matrix((np.ones(2 * u.size), (np.concatenate([u, v]), np.concatenate([v, u]))), shape=(n, n))
        cx.cache[key] = a
    return cx.cache[key]


def neighbourhood(cx: CellComplex, seeds, cap: int = DEFAULT_CAP) -> np.ndarray:
    """At most ``cap`` node ids: ``seeds`` first (in the given order), then whole BFS rings
    around them while they fit, then part of the next ring (highest degree first).

    Returns a sorted ``(<= cap,)`` int64 array.
    """
    cap = max(1, int(cap))
    seeds = np.asarray(list(dict.fromkeys(int(s) for s in np.asarray(seeds).reshape(-1))), dtype=np.int64)
    if seeds.size == 0:
        return np.zeros(0, np.int64)
    if seeds.size >= cap:
        return np.sort(seeds[:cap])
    adj = _adjacency(cx)
    degree = np.diff(adj.indptr)
    seen = np.zeros(cx.num_nodes, dtype=bool)
    seen[seeds] = True
    chosen, frontier, room = [seeds], seeds, cap - seeds.size
    while room > 0 and frontier.size:
        ring = np.unique(adj[frontier].indices)
        ring = ring[~seen[ring]]
        if ring.size > room:  # partial ring: keep the best-connected nodes, they explain most edges
            ring = ring[np.argsort(-degree[ring], kind="stable")[:room]]
        seen[ring] = True
        chosen.append(ring)
        room -= ring.size
        frontier = ring
    return np.sort(np.concatenate(chosen))


def spring_layout(num_nodes: int, edges: np.ndarray, iterations: int = 80, seed: int = 7) -> np.ndarray:
    """``(n, 2)`` Fruchterman-Reingold positions (dense, vectorised; ``edges`` ``(k, 2)`` local ids).

    Computed here rather than by vis-network's physics in the browser: a fixed, seeded layout
    appears at once (no seconds of in-browser stabilisation on a 2-core machine) and keeps
    every node where it was when only colours change (a slider move, a lifting step).
    """
    n = int(num_nodes)
    if n <= 1:
        return np.zeros((n, 2))
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 2))
    adj = np.zeros((n, n))
    if edges.size:
        adj[edges[:, 0], edges[:, 1]] = adj[edges[:, 1], edges[:, 0]] = 1.0
    k = 1.0 / np.sqrt(n)  # ideal edge length in the unit square
    temp = 0.1
    cool = temp / (iterations + 1)
    for _ in range(iterations):
        sq = (pos * pos).sum(1)
        dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * pos @ pos.T, 1e-4))
        force = k * k / dist ** 2 - adj * dist / k  # repulsion between all, attraction along edges
        np.fill_diagonal(force, 0.0)
        # sum_j force_ij (pos_i - pos_j), without the (n, n, 2) difference tensor
        disp = force.sum(1)[:, None] * pos - force @ pos
        length = np.maximum(np.sqrt((disp * disp).sum(1)), 0.01)
        pos += disp * (temp / length)[:, None]
        temp -= cool
    pos -= pos.mean(0)
    span = float(np.abs(pos).max()) or 1.0
    return pos / span * (110.0 * np.sqrt(n) + 60.0)  # pixels: room grows with the node count


def _terminals_first(sub) -> np.ndarray:
    """The subcomplex's nodes, its terminals first (otherwise in its order)."""
    return sub.nodes[np.argsort([r != "terminal" for r in sub.node_roles.tolist()], kind="stable")]


def default_seeds(cx: CellComplex, sub, node_marks, focus_cells2: list[int], highlight: dict[int, str],
                   focus_edges: np.ndarray) -> np.ndarray:
    """Where the neighbourhood grows from: the subcomplex (terminals first) or the marked nodes, the focus
    2-cells' boundaries, the highlighted nodes, the focus edges' ends; else the highest-degree node."""
    parts = []
    if sub is not None:
        parts.append(_terminals_first(sub))
    if node_marks and sub is None:
        parts.append(np.fromiter((int(i) for i in node_marks), dtype=np.int64))
    parts += [cx.cell2_nodes(f) for f in focus_cells2]
    if highlight:
        parts.append(np.fromiter(highlight, dtype=np.int64))
    if focus_edges.size:
        parts.append(cx.edges[focus_edges].reshape(-1))
    seeds = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if seeds.size == 0 and cx.num_nodes:
        seeds = np.array([int(np.argmax(np.diff(_adjacency(cx).indptr)))])
    return seeds


def important_nodes(cx: CellComplex, sub, marks, focus_cells2: list[int], highlight: dict[int, str]) -> list[int]:
    """Nodes whose label is always painted, in priority order (highlighted, terminals, retrieved, marked,
    focus 2-cells' boundaries), each once."""
    important: list[int] = list(highlight)
    if sub is not None:
        important += [int(i) for i in _terminals_first(sub).tolist()]
    if marks is not None:
        important += [int(i) for i in marks]
    for f in focus_cells2:
        important += cx.cell2_nodes(f).tolist()
    return list(dict.fromkeys(important))
