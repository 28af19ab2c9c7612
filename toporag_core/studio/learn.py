"""Teaching data for the Learn page: the lifting step by step, boundary maps, one retrieval in numbers.

Everything here reads the real objects (the lifted :class:`CellComplex`, the real
retrieval result), so what the page teaches is exactly what the library does.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..complex import CellComplex
from ..retrieval import EmbeddedComplex, cycle_text, retrieve_subcomplex
from ..retrieval.toporag import candidate_cells2, cell2_prizes, rank_prizes

MAX_TEACHING_NODES = 40  # B1 / B2 tables stop being readable beyond this


def edge_label(cx: CellComplex, e: int) -> str:
    """``head -[relation]- tail`` of a 1-cell (all parallel relations joined by ``/``)."""
    u, v = cx.edges[e].tolist()
    t = cx.graph.node_text
    rel = " / ".join(cx.graph.edge_text[i] for i in cx.edge_members(e).tolist())
    return f"{t[u]} -[{rel}]- {t[v]}"


def lifting_steps(cx: CellComplex) -> pd.DataFrame:
    """One row per 2-cell in gluing order: the non-tree edge (chord) and the fundamental cycle it closes."""
    rows = []
    for f in range(cx.num_cells2):
        chord = int(cx.cell_chord[f])
        rows.append({"step": f + 1, "2-cell": f, "non-tree edge": chord, "chord": edge_label(cx, chord),
                     "boundary length": int(cx.boundary_lengths()[f]), "cycle": cycle_text(cx, f)})
    return pd.DataFrame(rows, columns=["step", "2-cell", "non-tree edge", "chord", "boundary length", "cycle"])


def tree_edges(cx: CellComplex) -> pd.DataFrame:
    """The spanning forest's edges (``|V| - b0`` of them)."""
    ids = np.flatnonzero(cx.tree_mask)
    return pd.DataFrame({"1-cell": ids, "edge": [edge_label(cx, int(e)) for e in ids]})


@dataclass
class BoundaryTables:
    """``B1 (N x M)``, ``B2 (M x F)`` and their product as labelled tables."""

    b1: pd.DataFrame
    b2: pd.DataFrame
    product: pd.DataFrame

    @property
    def product_is_zero(self) -> bool:
        return bool((self.product.values == 0).all())


def boundary_tables(cx: CellComplex) -> BoundaryTables:
    """Dense labelled copies of the sparse boundary maps (for small teaching graphs only)."""
    if cx.num_nodes > MAX_TEACHING_NODES:
        raise ValueError(f"boundary tables are for small graphs (at most {MAX_TEACHING_NODES} nodes); "
                         f"this one has {cx.num_nodes}")
    b1 = cx.incidence_matrix(1).toarray().astype(int)
    b2 = cx.incidence_matrix(2).toarray().astype(int)
    nodes = [f"v{i} {t}" for i, t in enumerate(cx.graph.node_text)]
    edges = [f"e{e}" for e in range(cx.num_edges)]
    cells = [f"c{f}" for f in range(cx.num_cells2)]
    return BoundaryTables(pd.DataFrame(b1, index=nodes, columns=edges), pd.DataFrame(b2, index=edges, columns=cells),
                          pd.DataFrame(b1 @ b2, index=nodes, columns=cells))


def euler_numbers(cx: CellComplex) -> dict[str, int]:
    """The counts behind ``#2-cells = |E| - |V| + b0`` (``|E|`` = 1-cells of the simple skeleton)."""
    n, m, f = cx.shape
    return {"V": n, "E": m, "b0": cx.betti0, "b1": cx.betti1, "tree_edges": int(cx.tree_mask.sum()),
            "non_tree_edges": m - int(cx.tree_mask.sum()), "cells2": f, "skipped": cx.num_skipped_cycles}


@dataclass
class Walkthrough:
    """One TopoRAG retrieval, every intermediate number kept."""

    nodes: pd.DataFrame   # 0-cells: cosine, rank, prize
    edges: pd.DataFrame   # 1-cells: cosine, rank, prize
    cells2: pd.DataFrame  # 2-cells: boundary prize sum, length, C2 x length, prize, candidate, retrieved
    sub: object           # the Subcomplex


def _ranked(sim: np.ndarray, prize: np.ndarray, texts: list[str], chosen: np.ndarray, label: str) -> pd.DataFrame:
    order = np.argsort(-sim, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(1, order.size + 1)
    df = pd.DataFrame({label: np.arange(sim.size), "text": texts, "cosine": np.round(sim.astype(float), 4),
                       "rank": rank, "prize": prize, "retrieved": np.isin(np.arange(sim.size), chosen)})
    return df.sort_values("rank").reset_index(drop=True)


def retrieval_walkthrough(ecx: EmbeddedComplex, question, k0: int = 3, k1: int = 3, k2: int = 3, c2: float = 0.5,
                          edge_cost: float = 0.5) -> Walkthrough:
    """Recompute the steps of :func:`retrieve_subcomplex` in the open and run the real retrieval.

    The recomputed prizes are the library's own functions; the page shows that they equal
    the prizes stored in the result (``sub.prizes``).
    """
    cx = ecx.complex
    s0, s1, s2 = ecx.similarities(question)
    p0, p1 = rank_prizes(s0, k0), rank_prizes(s1, k1)
    p2 = cell2_prizes(cx, p0, p1, c2)
    cand = set(candidate_cells2(p2, k2).tolist())
    sub = retrieve_subcomplex(ecx, question, k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost)
    nodes = _ranked(s0, p0, list(cx.graph.node_text), sub.nodes, "0-cell")
    edges = _ranked(s1, p1, [edge_label(cx, e) for e in range(cx.num_edges)], sub.edges, "1-cell")
    rows = []
    lens = cx.boundary_lengths()
    for f in range(cx.num_cells2):
        bn, be = cx.cell2_nodes(f), cx.cell2_edges(f)
        total = float(p0[bn].sum() + p1[be].sum())
        rows.append({"2-cell": f, "cycle": cycle_text(cx, f), "node prizes": float(p0[bn].sum()),
                     "edge prizes": float(p1[be].sum()), "boundary sum": total, "length": int(lens[f]),
                     "C2 x length": c2 * int(lens[f]), "prize": float(p2[f]), "candidate": f in cand,
                     "retrieved": f in set(sub.cells2.tolist())})
    cells = pd.DataFrame(rows, columns=["2-cell", "prize", "boundary sum", "C2 x length", "node prizes",
                                        "edge prizes", "length", "candidate", "retrieved", "cycle"])
    return Walkthrough(nodes, edges, cells.sort_values("prize", ascending=False).reset_index(drop=True), sub)
