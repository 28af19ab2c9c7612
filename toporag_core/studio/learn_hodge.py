"""Teaching data for the Learn tab "Hodge Laplacians and holes": everything read from
:mod:`toporag_core.topo.hodge` on the real lifted complex.

* :func:`laplacian_tables`: ``L0 = B1 B1^T`` (N x N), ``L1 = B1^T B1 + B2 B2^T`` (M x M), ``L2 = B2^T B2``
  (F x F) as labelled tables (heatmaps on the page).
* :func:`betti_table`: ``dim ker Lk`` (eigenvalues below a tolerance) against the counting argument of
  the Betti tab (``b0`` components, ``b1 - #2-cells`` cycles left open, no cavity): equal for a
  spanning-tree lifting; the ring lifting shows where counting fails (a 2-cell whose boundary is
  already spanned closes a cavity instead of filling a cycle).
* :func:`mode_marks`: a harmonic 1-cochain as edge colours and widths for the graph view.
* :func:`glue_frame` / :func:`glue_note`: gluing the 2-cells one by one, and what each one did.
* :func:`cavities`: the closed surfaces of 2-cells around each cavity (a basis of ``ker L2``).
* :func:`decomposition_frame`: a seeded random edge flow split into gradient, curl and harmonic parts.
* :func:`hodge_numbers` (``dim ker Lk`` and the spectra) and :data:`DENSE_MAX` (the most cells per rank the
  dense pictures take), :mod:`toporag_core.topo.hodge`'s own, re-exported for the page.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..cells.complex import CellComplex
from ..topo.hodge import (DENSE_MAX, cavity_basis, glue_steps, harmonic_basis, hodge_decomposition, hodge_numbers,
                          laplacians)

MODE_POSITIVE, MODE_NEGATIVE, MODE_ZERO = "#4e79a7", "#e15759", "#dddddd"


def small_enough(cx: CellComplex) -> bool:
    """Whether the dense pictures (spectra, harmonic cochains, gluing, cavities) are computed for ``cx``: every
    rank at most :data:`~toporag_core.topo.hodge.DENSE_MAX` cells."""
    return max(cx.shape) <= DENSE_MAX


def laplacian_tables(cx: CellComplex) -> dict[str, pd.DataFrame]:
    """``{"L0", "L1", "L2"}``: dense labelled Laplacians (rows and columns ``v*`` / ``e*`` / ``c*``)."""
    names = ([f"v{i}" for i in range(cx.num_nodes)], [f"e{e}" for e in range(cx.num_edges)],
             [f"c{f}" for f in range(cx.num_cells2)])
    return {f"L{k}": pd.DataFrame(lap.toarray().astype(int), index=lab, columns=lab)
            for k, (lap, lab) in enumerate(zip(laplacians(cx), names))}


def counting_betti(cx: CellComplex) -> tuple[int, int, int]:
    """What the Betti tab's counting says: ``b0`` components, ``b1(graph) - #2-cells`` open cycles (every
    glued 2-cell fills one), no cavity. Right for a spanning-tree lifting, not in general."""
    return cx.betti0, cx.betti1 - cx.num_cells2, 0


def betti_table(cx: CellComplex) -> pd.DataFrame:
    """One row per dimension k: the counting argument, ``dim ker Lk`` and whether they agree."""
    h = hodge_numbers(cx).harmonic
    count = counting_betti(cx)
    what = ("connected components", "cycles no 2-cell fills (holes)", "cavities (closed surfaces of 2-cells)")
    return pd.DataFrame({"k": [0, 1, 2], "what it counts": what, "counting (Betti tab)": list(count),
                         "dim ker Lk (eigenvalues)": list(h), "agree": [a == b for a, b in zip(count, h)]})


def spectrum_zero_counts(cx: CellComplex) -> dict[str, int]:
    """``{"L0": h0, "L1": h1, "L2": h2}``: the zero eigenvalues of each Laplacian."""
    return dict(zip(("L0", "L1", "L2"), hodge_numbers(cx).harmonic))


def mode_marks(cx: CellComplex, mode: np.ndarray) -> dict[int, tuple[str, float, str]]:
    """``{1-cell: (colour, width, note)}`` for a 1-cochain ``mode (M,)``: blue where it flows along the
    1-cell's orientation (u -> v, u < v), red against it, width by ``|value|``; ~0 drawn thin and grey."""
    mode = np.asarray(mode, dtype=float).reshape(-1)
    top = float(np.abs(mode).max(initial=0.0)) or 1.0
    out = {}
    for e, x in enumerate(mode.tolist()):
        u, v = cx.edges[e].tolist()
        if abs(x) < 1e-9 * top:
            out[e] = (MODE_ZERO, 0.8, "value 0")
        else:
            a, b = (u, v) if x > 0 else (v, u)
            out[e] = (MODE_POSITIVE if x > 0 else MODE_NEGATIVE, 1.5 + 7.0 * abs(x) / top,
                      f"value {x:+.3f} (flows v{a} -> v{b})")
    return out


def glue_frame(cx: CellComplex) -> pd.DataFrame:
    """Gluing the 2-cells one by one (:func:`~toporag_core.topo.hodge.glue_steps`): after ``glued`` 2-cells,
    ``h1`` harmonic 1-cochains and ``h2`` cavities; ``fills``: the last one filled a cycle."""
    return pd.DataFrame(glue_steps(cx), columns=["glued", "h1", "h2", "fills"])


def glue_note(cx: CellComplex, frame: pd.DataFrame, glued: int) -> str:
    """What gluing the ``glued``-th 2-cell did, in words."""
    row = frame.iloc[int(glued)]
    if glued == 0:
        return (f"No 2-cell glued yet: the 1-skeleton alone has h1 = {int(row['h1'])} harmonic 1-cochains, one per "
                "independent cycle (b1 of the graph).")
    prev = frame.iloc[int(glued) - 1]
    f = int(glued) - 1
    if bool(row["fills"]):
        return (f"2-cell c{f} fills a cycle that no earlier 2-cell filled: h1 drops from {int(prev['h1'])} to "
                f"{int(row['h1'])}.")
    return (f"2-cell c{f}'s boundary is already a sum of earlier boundaries: it fills no new cycle (h1 stays "
            f"{int(row['h1'])}) and closes a cavity instead (h2 goes from {int(prev['h2'])} to {int(row['h2'])}).")


def harmonic_modes(cx: CellComplex, glued: int | None = None) -> np.ndarray:
    """``(M, h1)``: an orthonormal basis of the harmonic 1-cochains after the first ``glued`` 2-cells."""
    return harmonic_basis(cx, glued)


def cavities(cx: CellComplex) -> list[list[int]]:
    """The 2-cells of each basis cavity (a closed surface: its boundaries cancel), smallest first."""
    basis = cavity_basis(cx)
    out = [np.flatnonzero(np.abs(basis[:, i]) > 1e-9).tolist() for i in range(basis.shape[1])]
    return sorted(out, key=len)


def decomposition_frame(cx: CellComplex, seed: int = 0) -> tuple[pd.DataFrame, object]:
    """A seeded random edge flow, its three parts' squared norms (they add up) and the largest pairwise
    inner product (0 up to rounding: the parts are orthogonal). Returns ``(table, decomposition)``."""
    flow = np.random.default_rng(int(seed)).normal(size=cx.num_edges)
    d = hodge_decomposition(cx, flow)
    nrm = d.norms()
    rows = [{"part": "gradient  B1^T a (flows down a node potential)", "squared norm": nrm["gradient"]},
            {"part": "curl  B2 b (circulates around 2-cells)", "squared norm": nrm["curl"]},
            {"part": "harmonic (neither: the unfilled cycles)", "squared norm": nrm["harmonic"]},
            {"part": "sum of the three", "squared norm": nrm["gradient"] + nrm["curl"] + nrm["harmonic"]},
            {"part": "the flow itself", "squared norm": nrm["flow"]}]
    table = pd.DataFrame(rows)
    table["squared norm"] = table["squared norm"].round(6)
    return table, d


def largest_inner_product(d) -> float:
    """``max |<a, b>|`` over the three pairs of parts of a :class:`~toporag_core.topo.hodge.HodgeDecomposition`."""
    parts = (d.gradient, d.curl, d.harmonic)
    return max(abs(float(parts[i] @ parts[j])) for i in range(3) for j in range(i + 1, 3))
