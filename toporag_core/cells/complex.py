"""The regular cell complex a textual graph is lifted into.

Cells of rank 0 are nodes, rank 1 the edges of the simple undirected skeleton, rank 2
one disc glued onto each fundamental cycle of a spanning forest. Boundaries are
stored as CSR index arrays (like PyG stores graphs) and exposed as signed sparse
incidence matrices, TopoNetX style:

* ``incidence_matrix(1)`` = ``B1`` (nodes x edges): edge ``e = (u, v)`` with ``u < v`` is
  oriented ``u -> v``, so ``B1[u, e] = -1`` and ``B1[v, e] = +1``.
* ``incidence_matrix(2)`` = ``B2`` (edges x 2-cells): ``+1`` where the cycle walks the
  edge along its orientation, ``-1`` against it. Every boundary is a closed walk, so
  ``B1 @ B2 == 0``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..graph import TextualGraph


@dataclass
class CellComplex:
    """A 2-dimensional regular cell complex over a :class:`TextualGraph`.

    Attributes (``N`` nodes, ``M`` 1-cells, ``F`` 2-cells):
        graph: the source graph (its original directed edges are the 1-cells' members).
        edges: ``(M, 2)`` int64, the 1-cells as ``(u, v)`` with ``u < v``, sorted.
        edge_member_ptr, edge_member_idx: CSR, original edge ids of each 1-cell
            (parallel edges in either direction merge into one 1-cell).
        edge_of_orig: ``(E,)`` 1-cell of every original edge, ``-1`` for self-loops.
        tree_mask: ``(M,)`` bool, the 1-cell is in the spanning forest.
        cell_ptr: ``(F + 1,)`` CSR pointer into the three boundary arrays below.
        cell_nodes: boundary nodes of each 2-cell in cycle order.
        cell_edges: boundary 1-cells, ``cell_edges[j]`` joins ``cell_nodes[j]`` to the next node.
        cell_signs: ``+1`` / ``-1``, the walk direction relative to each edge's orientation.
        cell_chord: ``(F,)`` the non-tree 1-cell that created each 2-cell (rings: its closing 1-cell).
        component: ``(N,)`` connected-component label of each node.
        tree_method: ``bfs`` | ``dfs`` | ``random``, or ``rings`` (every 3-/4-cycle a 2-cell).
        num_skipped_cycles: fundamental cycles longer than ``max_cycle_len`` (no 2-cell).
    """

    graph: TextualGraph
    edges: np.ndarray
    edge_member_ptr: np.ndarray
    edge_member_idx: np.ndarray
    edge_of_orig: np.ndarray
    tree_mask: np.ndarray
    cell_ptr: np.ndarray
    cell_nodes: np.ndarray
    cell_edges: np.ndarray
    cell_signs: np.ndarray
    cell_chord: np.ndarray
    component: np.ndarray
    tree_method: str = "bfs"
    max_cycle_len: int | None = None
    num_skipped_cycles: int = 0
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # public memo: derived matrices, layouts

    # ------------------------------------------------------------------ sizes
    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[0])

    @property
    def num_cells2(self) -> int:
        return int(self.cell_ptr.shape[0] - 1)

    @property
    def shape(self) -> tuple[int, int, int]:
        """Number of cells per rank, ``(N, M, F)``."""
        return self.num_nodes, self.num_edges, self.num_cells2

    @property
    def betti0(self) -> int:
        """Connected components (b0)."""
        return int(self.component.max() + 1) if self.component.size else 0

    @property
    def betti1(self) -> int:
        """Independent cycles of the 1-skeleton, ``M - N + b0`` (b1 of the graph)."""
        return self.num_edges - self.num_nodes + self.betti0

    @property
    def betti1_complex(self) -> int:
        """b1 of the complex itself: cycles not filled by a 2-cell (the skipped ones)."""
        return self.betti1 - self.num_cells2

    @property
    def self_loops(self) -> np.ndarray:
        """Original edge ids of self-loops (attached to their node, not 1-cells)."""
        return np.flatnonzero(self.edge_of_orig < 0)

    # ------------------------------------------------------------- boundaries
    def boundary_lengths(self) -> np.ndarray:
        """``(F,)`` number of edges on each 2-cell's boundary."""
        return np.diff(self.cell_ptr)

    def cell2_nodes(self, f: int) -> np.ndarray:
        return self.cell_nodes[self.cell_ptr[f]:self.cell_ptr[f + 1]]

    def cell2_edges(self, f: int) -> np.ndarray:
        return self.cell_edges[self.cell_ptr[f]:self.cell_ptr[f + 1]]

    def cell2_signs(self, f: int) -> np.ndarray:
        return self.cell_signs[self.cell_ptr[f]:self.cell_ptr[f + 1]]

    def cell2_index(self) -> np.ndarray:
        """``(sum of boundary lengths,)`` the 2-cell each CSR boundary entry belongs to."""
        return np.repeat(np.arange(self.num_cells2), self.boundary_lengths())

    def edge_members(self, e: int) -> np.ndarray:
        """Original (directed) edge ids merged into 1-cell ``e``."""
        return self.edge_member_idx[self.edge_member_ptr[e]:self.edge_member_ptr[e + 1]]

    def edge_relations(self, e: int) -> list[tuple[str, str, str]]:
        """The original ``(head, relation, tail)`` triples behind 1-cell ``e``."""
        g = self.graph
        out = []
        for i in self.edge_members(e).tolist():
            a, b = g.edge_index[:, i].tolist()
            out.append((g.node_text[a], g.edge_text[i], g.node_text[b]))
        return out

    # ------------------------------------------------------ sparse operators
    def incidence_matrix(self, rank: int, signed: bool = True) -> sp.csr_matrix:
        """Boundary map from rank-``rank`` cells to rank-``rank-1`` cells.

        ``rank=1``: ``B1`` of shape ``(N, M)``; ``rank=2``: ``B2`` of shape ``(M, F)``.
        """
        key = ("B", rank, signed)
        if key in self.cache:
            return self.cache[key]
        # built column-wise straight from the CSR boundary arrays (no COO sort)
        if rank == 1:
            m = self.num_edges
            vals = np.tile(np.array([-1.0, 1.0]), m)
            mat = sp.csc_matrix((vals, self.edges.reshape(-1), np.arange(0, 2 * m + 1, 2)),
                                shape=(self.num_nodes, m)).tocsr()
        elif rank == 2:
            mat = sp.csc_matrix((self.cell_signs.astype(np.float64), self.cell_edges, self.cell_ptr),
                                shape=(self.num_edges, self.num_cells2)).tocsr()
        else:
            raise ValueError("a 2-complex has incidence matrices of rank 1 and 2 only")
        if not signed:
            mat = abs(mat).tocsr()
        self.cache[key] = mat
        return mat

    def adjacency_matrix(self, rank: int) -> sp.csr_matrix:
        """Upper adjacency: rank-``rank`` cells sharing a coface (``rank`` in 0, 1).

        ``rank=0``: nodes joined by an edge; ``rank=1``: edges on a common 2-cell.
        """
        if rank not in (0, 1):
            return sp.csr_matrix((self.shape[rank], self.shape[rank]))
        b = self.incidence_matrix(rank + 1, signed=False)
        a = (b @ b.T).tocsr()
        a.setdiag(0)
        a.eliminate_zeros()
        a.data[:] = 1.0
        return a

    def coadjacency_matrix(self, rank: int) -> sp.csr_matrix:
        """Lower adjacency: rank-``rank`` cells sharing a face (``rank`` in 1, 2)."""
        if rank not in (1, 2):
            return sp.csr_matrix((self.shape[rank], self.shape[rank]))
        b = self.incidence_matrix(rank, signed=False)
        a = (b.T @ b).tocsr()
        a.setdiag(0)
        a.eliminate_zeros()
        a.data[:] = 1.0
        return a

    def boundary_ok(self) -> bool:
        """``B1 @ B2 == 0`` (every 2-cell boundary is a closed cycle)."""
        prod = self.incidence_matrix(1) @ self.incidence_matrix(2)
        return bool(prod.count_nonzero() == 0)

    def summary(self) -> dict:
        n, m, f = self.shape
        lens = self.boundary_lengths()
        return {
            "nodes": n, "edges": m, "original_edges": self.graph.num_edges, "cells2": f,
            "components": self.betti0, "betti0": self.betti0, "betti1": self.betti1,
            "self_loops": int(self.self_loops.size), "skipped_cycles": self.num_skipped_cycles,
            "tree": self.tree_method,
            "mean_boundary_len": float(lens.mean()) if f else 0.0,
            "max_boundary_len": int(lens.max()) if f else 0,
        }

    def __repr__(self) -> str:
        n, m, f = self.shape
        return f"CellComplex(nodes={n}, edges={m}, cells2={f}, b0={self.betti0}, b1={self.betti1})"
