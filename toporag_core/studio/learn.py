"""Teaching data for the Learn page: the lifting step by step, boundary maps, one retrieval in numbers.

Everything here reads the real objects (the lifted :class:`CellComplex`, the real
retrieval result), so what the page teaches is exactly what the library does: the prizes
come from :func:`~toporag_core.retrieval.toporag.cell_prizes`, the one function
:func:`~toporag_core.retrieval.toporag.retrieve_subcomplex` calls, never from a re-derivation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..cells.complex import CellComplex
from ..retrieval import EmbeddedComplex, RetrievalSetting, cycle_text, retrieve_subcomplex
from ..retrieval.toporag import CellPrizes, cell_prizes, rank_order

MAX_TEACHING_NODES = 40  # B1 / B2 tables stop being readable beyond this


def walk_defaults() -> dict[str, float]:
    """The walk-through's starting ``k``, ``c2`` and ``edge_cost``: the defaults of TopoRAG's
    :class:`~toporag_core.retrieval.RetrievalSetting`, the same the Retrieval lab starts from."""
    p = RetrievalSetting("toporag").params
    return {"k": int(p["k0"]), "c2": float(p["c2"]), "edge_cost": float(p["edge_cost"])}


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
    """The counts behind ``#2-cells = |E| - |V| + b0`` (``|E|`` = 1-cells of the simple skeleton).

    ``b1`` is the first Betti number of the *graph* (its 1-skeleton, ``|E| - |V| + b0``);
    ``b1_complex`` that of the *complex* after the 2-cells are glued: every glued 2-cell fills
    one independent cycle, so ``b1_complex = b1 - #2-cells`` (0 unless long cycles were skipped).
    """
    n, m, f = cx.shape
    return {"V": n, "E": m, "b0": cx.betti0, "b1": cx.betti1, "b1_complex": cx.betti1_complex,
            "tree_edges": int(cx.tree_mask.sum()), "non_tree_edges": m - int(cx.tree_mask.sum()), "cells2": f,
            "skipped": cx.num_skipped_cycles}


def prize_sequence(k: int) -> str:
    """The rank prizes of the top ``k`` as text, right for every ``k``: ``""`` (k = 0), ``"1"``,
    ``"2, 1"``, ``"3, 2, 1"``, ``"4, 3, 2, 1"``, then ``"k, k-1, ..., 1"`` written out as numbers."""
    k = int(k)
    if k <= 0:
        return ""
    if k <= 4:
        return ", ".join(str(i) for i in range(k, 0, -1))
    return f"{k}, {k - 1}, ..., 1"


def rank_prize_text(k: int) -> str:
    """Step 1 of the walk-through in words, for this ``k``."""
    k = int(k)
    if k <= 0:
        return ("With k = 0 no 0-cell or 1-cell gets a prize (all prizes are 0), so no 2-cell has a positive "
                "prize either and the retrieval returns nothing.")
    if k == 1:
        return "The top 0-cell and the top 1-cell (k = 1) get prize 1; all others get 0."
    return (f"The top k = {k} 0-cells and the top {k} 1-cells get prizes {prize_sequence(k)} "
            "(best first); all others get 0.")


@dataclass
class Walkthrough:
    """One TopoRAG retrieval, every intermediate number kept."""

    nodes: pd.DataFrame   # 0-cells: cosine, rank, prize
    edges: pd.DataFrame   # 1-cells: cosine, endpoint cosine sum (tie-break), rank, prize
    cells2: pd.DataFrame  # 2-cells: boundary prize sum, length, C2 x length, prize, candidate, retrieved
    sub: object           # the Subcomplex
    prizes: CellPrizes    # what cell_prizes returned (the numbers the retrieval used)
    ties: list[str]       # where equal cosines were ordered by the tie-break, in words


def _ranked(sim: np.ndarray, prize: np.ndarray, texts: list[str], chosen: np.ndarray, label: str,
            tiebreak: np.ndarray | None = None) -> pd.DataFrame:
    order = rank_order(sim, tiebreak)  # the order rank_prizes gives prizes in
    rank = np.empty_like(order)
    rank[order] = np.arange(1, order.size + 1)
    cols = {label: np.arange(sim.size), "text": texts, "cosine": np.round(sim.astype(float), 4)}
    if tiebreak is not None:
        cols["endpoint cosine sum"] = np.round(tiebreak.astype(float), 4)
    cols.update({"rank": rank, "prize": prize, "retrieved": np.isin(np.arange(sim.size), chosen)})
    return pd.DataFrame(cols).sort_values("rank").reset_index(drop=True)


def tie_notes(sim: np.ndarray, prize: np.ndarray, k: int, what: str, tiebreak: np.ndarray | None = None) -> list[str]:
    """Sentences explaining each group of equal cosines that the top-``k`` cut or the prize order
    runs through (only groups that hold a prized cell and another cell)."""
    k = int(max(0, min(k, sim.size)))
    if k == 0:
        return []
    order = rank_order(sim, tiebreak)
    notes = []
    for value in np.unique(sim[order[:k]])[::-1]:
        group = order[sim[order] == value]  # best first
        if group.size < 2:
            continue
        shown = group[:6].tolist()
        more = f" and {group.size - 6} more" if group.size > 6 else ""
        names = ", ".join(f"{what} {i} (prize {prize[i]:g})" for i in shown)
        if tiebreak is not None:
            why = ("ordered by the sum of their endpoints' cosines with the question (higher first: "
                   + ", ".join(f"{tiebreak[i]:.4f}" for i in shown) + "), then by lower id")
        else:
            why = "ordered by lower id"
        notes.append(f"{group.size} {what}s share cosine {float(value):.4f}: {names}{more}; {why}.")
    return notes


def retrieval_walkthrough(ecx: EmbeddedComplex, question, k0: int = 3, k1: int = 3, k2: int = 3, c2: float = 0.5,
                          edge_cost: float = 0.5) -> Walkthrough:
    """Every step of :func:`retrieve_subcomplex`, with its numbers, and the real retrieval.

    The prizes are :func:`cell_prizes` - the function the retrieval itself calls - so they
    equal ``sub.prizes`` by construction (the page and the tests check it).
    """
    cx = ecx.complex
    s0, s1, s2 = ecx.similarities(question)
    prz = cell_prizes(cx, s0, s1, k0, k1, k2, c2)
    p0, p1, p2 = prz.p0, prz.p1, prz.p2
    cand = set(prz.candidates.tolist())
    sub = retrieve_subcomplex(ecx, question, k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost)
    nodes = _ranked(s0, p0, list(cx.graph.node_text), sub.nodes, "0-cell")
    edges = _ranked(s1, p1, [edge_label(cx, e) for e in range(cx.num_edges)], sub.edges, "1-cell",
                    prz.edge_tiebreak)
    ties = tie_notes(s0, p0, k0, "0-cell") + (tie_notes(s1, p1, k1, "1-cell", prz.edge_tiebreak)
                                              if cx.num_edges else [])
    rows = []
    lens = cx.boundary_lengths()
    retrieved = set(sub.cells2.tolist())
    for f in range(cx.num_cells2):
        bn, be = cx.cell2_nodes(f), cx.cell2_edges(f)
        total = float(p0[bn].sum() + p1[be].sum())
        rows.append({"2-cell": f, "cycle": cycle_text(cx, f), "node prizes": float(p0[bn].sum()),
                     "edge prizes": float(p1[be].sum()), "boundary sum": total, "length": int(lens[f]),
                     "C2 x length": c2 * int(lens[f]), "prize": float(p2[f]), "candidate": f in cand,
                     "retrieved": f in retrieved})
    cells = pd.DataFrame(rows, columns=["2-cell", "prize", "boundary sum", "C2 x length", "node prizes",
                                        "edge prizes", "length", "candidate", "retrieved", "cycle"])
    return Walkthrough(nodes, edges, cells.sort_values("prize", ascending=False, kind="stable").reset_index(drop=True),
                       sub, prz, ties)
