"""Hodge Laplacians of a lifted cell complex: harmonic numbers, spectra, harmonic cycles, edge-flow splits.

From the signed incidences of :class:`~toporag_core.cells.complex.CellComplex` (``N`` 0-cells, ``M``
1-cells, ``F`` 2-cells), ``B1 = cx.incidence_matrix(1)`` ``(N, M)`` and ``B2 = cx.incidence_matrix(2)``
``(M, F)`` with ``B1 @ B2 = 0``, the Hodge Laplacians are::

    L0 = B1 B1^T                  (N, N)   the graph Laplacian
    L1 = B1^T B1 + B2 B2^T        (M, M)   down part (shared nodes) + up part (shared 2-cells)
    L2 = B2^T B2                  (F, F)

Hodge theorem (real coefficients): ``dim ker Lk`` is the k-th Betti number of the complex, and
``R^M = im B1^T (+) im B2 (+) ker L1``, three orthogonal pieces, because ``B1 B2 = 0``. Hence::

    h0 = N - rank B1 = b0,      h2 = F - rank B2,      h1 = M - rank B1 - rank B2,
    h0 - h1 + h2 = N - M + F    (the Euler characteristic).

For a spanning-tree lifting (bfs / dfs / random) every 2-cell holds its own chord, so the columns of
``B2`` are independent: ``h2 = 0`` and ``h1 = b1(graph) - F`` = the fundamental cycles skipped by
``max_cycle_len``. The ring lifting glues every 3- and 4-cycle; a 4-cycle with a chord and its two
triangles then bound a closed pillow (a cavity), and ``h2 > 0``.

How the ranks are computed (:func:`sparse_rank`, exact elimination before any floating point):

* ``rank B1 = rank B1[:, tree columns]``: a chord ``u -> v`` is the signed sum of the tree path from
  ``u`` to ``v``, so its column adds nothing to ``im B1``.
* ``rank B2 = rank B2[non-tree rows]``: ``im B2`` lies in the cycle space ``ker B1``, and a cycle is
  fixed by its values on the chords of a spanning forest (one that vanishes on every chord lives on
  the forest, which has no cycle), so dropping the tree rows loses no rank. That leaves ``b1`` rows.
* Singleton elimination: a column with one non-zero ``a`` at row ``r`` gives ``rank A = 1 + rank A'``
  with row ``r`` and the column removed (column operations clear the rest of row ``r`` without
  touching ``A'``); likewise a row with one non-zero. Rounds of this are vectorised over all
  singletons at once; for ``B1`` it peels the leaves of the forest, for ``B2`` every 2-cell that
  owns a chord nobody else uses (with a tree lifting: all of them, in one round).
* What is left (the core) is dense and small: its rank is the number of singular values above
  ``max(shape) * eps * sigma_max`` (a QR of the long side, then an SVD of the square ``R``).

So WebQSP-size complexes (2,000 nodes, 7,500 edges, 280,000 ring 2-cells) take well under a second.
Small complexes (every ``Lk`` at most :data:`DENSE_MAX` square) are also solved densely: ``dim ker Lk``
= eigenvalues of ``Lk`` below :data:`EIG_TOL`, the full spectra, and an orthonormal basis of
``ker L1`` (the harmonic 1-cochains: cycles no 2-cell fills); the tests check both routes agree.

:func:`hodge_decomposition` splits an edge flow ``f (M,)`` into ``B1^T a`` (gradient), ``B2 b``
(curl) and the harmonic rest, by least squares; :func:`glue_steps` glues the 2-cells one by one and
records ``(h1, h2)`` after each (a 2-cell whose boundary is new removes a harmonic mode, one whose
boundary is already spanned adds a cavity instead).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..cells.complex import CellComplex
from ..embed.base import single_thread_blas

DENSE_MAX = 400        # every Lk at most this square: dense spectra and the harmonic basis
EIG_TOL = 1e-8         # an eigenvalue of a Laplacian below this (times max(1, largest)) counts as 0
CORE_SVD_MAX = 3000    # a dense core with a short side at most this goes through QR + SVD, else a Gram matrix
MAX_PEEL_ROUNDS = 100_000


@dataclass
class HodgeNumbers:
    """``harmonic = (h0, h1, h2)``: dims of ker L0, ker L1, ker L2; the ranks of B1 and B2 behind them;
    ``spectra``: eigenvalues of L0, L1, L2 ascending (``None`` for complexes past :data:`DENSE_MAX`);
    ``method``: ``"dense"`` (eigenvalues of the Laplacians) or ``"sparse"`` (exact elimination + core rank)."""

    harmonic: tuple[int, int, int]
    rank_b1: int
    rank_b2: int
    shape: tuple[int, int, int]
    spectra: dict[str, list[float]] | None
    method: str

    @property
    def euler(self) -> int:
        """``h0 - h1 + h2`` (equals ``N - M + F``)."""
        h0, h1, h2 = self.harmonic
        return h0 - h1 + h2

    def as_json(self, digits: int = 6) -> dict:
        """The CLI's ``"hodge"`` field: ``harmonic``, ``spectra`` (rounded) or ``None``, ranks, method."""
        spectra = None if self.spectra is None else {k: [round(float(x), digits) + 0.0 for x in v]
                                                     for k, v in self.spectra.items()}
        return {"harmonic": list(self.harmonic), "spectra": spectra, "rank_b1": self.rank_b1,
                "rank_b2": self.rank_b2, "method": self.method}


def laplacians(cx: CellComplex) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """``(L0 (N, N), L1 (M, M), L2 (F, F))`` as sparse matrices (see the module docstring)."""
    b1, b2 = cx.incidence_matrix(1), cx.incidence_matrix(2)
    return (b1 @ b1.T).tocsr(), (b1.T @ b1 + b2 @ b2.T).tocsr(), (b2.T @ b2).tocsr()


def _dense_rank(a: np.ndarray) -> int:
    """Numerical rank of a dense matrix: a QR of the long side first (down to the short side's square
    ``R``, same singular values), then singular values of ``R`` above ``max(shape) * eps * sigma_max``;
    a short side past :data:`CORE_SVD_MAX` uses the Gram eigenvalues above ``n * eps * 100 * largest``."""
    if a.size == 0:
        return 0
    with single_thread_blas():  # small cores: BLAS threads cost more than they give
        return _dense_rank_1(a)


def _dense_rank_1(a: np.ndarray) -> int:
    short = a if a.shape[0] <= a.shape[1] else a.T
    if short.shape[0] <= CORE_SVD_MAX:
        r = np.linalg.qr(short.T, mode="r")
        s = np.linalg.svd(r, compute_uv=False)
        return int((s > s.max(initial=0.0) * max(a.shape) * np.finfo(float).eps).sum()) if s.size else 0
    w = np.linalg.eigvalsh(short @ short.T)
    top = float(w[-1]) if w.size else 0.0
    return int((w > max(top, 1.0) * short.shape[0] * np.finfo(float).eps * 100).sum())


def sparse_rank(a) -> int:
    """Rank of a sparse matrix: rounds of exact singleton elimination (module docstring), then the dense
    rank of the core that is left. Exact for incidence matrices whose core is empty (any forest's
    ``B1``, a tree lifting's ``B2``)."""
    coo = sp.coo_matrix(a)
    keep = coo.data != 0
    rows, cols, vals = coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64), coo.data[keep]
    nr, nc = coo.shape
    rank = 0
    for _ in range(MAX_PEEL_ROUNDS):
        if not rows.size:
            break
        found = False
        for line, other, n_line in ((cols, rows, nc), (rows, cols, nr)):  # singleton columns, then rows
            count = np.bincount(line, minlength=n_line)
            single = count[line] == 1
            if not single.any():
                continue
            pivots = np.unique(other[single])       # one pivot per row (column) they hit
            rank += int(pivots.size)
            gone = np.zeros(nr if other is rows else nc, dtype=bool)
            gone[pivots] = True
            live = ~gone[other]                     # drop every entry of the pivot rows (columns)
            rows, cols, vals = rows[live], cols[live], vals[live]
            found = True
            break
        if not found:
            break
    if not rows.size:
        return rank
    ur, ri = np.unique(rows, return_inverse=True)
    uc, ci = np.unique(cols, return_inverse=True)
    core = np.zeros((ur.size, uc.size))
    np.add.at(core, (ri, ci), vals)
    return rank + _dense_rank(core)


def _small(cx: CellComplex) -> bool:
    return max(cx.shape) <= DENSE_MAX


def _kernel_dim(w: np.ndarray) -> int:
    top = float(w[-1]) if w.size else 0.0
    return int((w < EIG_TOL * max(1.0, top)).sum())


def hodge_numbers(cx: CellComplex, dense: bool | None = None) -> HodgeNumbers:
    """``dim ker L0, L1, L2`` of ``cx``, numerically (module docstring).

    ``dense=None``: the dense route (eigenvalues of each Lk, with spectra) for complexes whose every
    ``Lk`` is at most :data:`DENSE_MAX` square, else the sparse route (ranks of B1 and B2, no spectra).
    ``True`` / ``False`` force a route (tests compare them)."""
    n, m, f = cx.shape
    dense = _small(cx) if dense is None else dense
    if dense:
        with single_thread_blas():
            spectra = {name: np.linalg.eigvalsh(lap.toarray()) if lap.shape[0] else np.zeros(0)
                       for name, lap in zip(("L0", "L1", "L2"), laplacians(cx))}
        h = tuple(_kernel_dim(spectra[k]) for k in ("L0", "L1", "L2"))
        return HodgeNumbers(h, n - h[0], f - h[2], (n, m, f), {k: v.tolist() for k, v in spectra.items()}, "dense")
    tree = cx.tree_mask if cx.tree_mask.size == m else np.ones(m, dtype=bool)
    r1 = sparse_rank(cx.incidence_matrix(1)[:, tree]) if m else 0
    r2 = sparse_rank(cx.incidence_matrix(2)[~tree]) if f else 0
    return HodgeNumbers((n - r1, m - r1 - r2, f - r2), r1, r2, (n, m, f), None, "sparse")


def harmonic_basis(cx: CellComplex, glued: int | None = None) -> np.ndarray:
    """``(M, h1)`` orthonormal basis of ``ker L1 = ker B1 ∩ ker B2^T``: edge flows with no divergence at
    any node and no circulation around any 2-cell (the unfilled cycles). ``glued``: only the first
    ``glued`` 2-cells count (the complex part-way through :func:`glue_steps`). Small complexes only."""
    if not _small(cx):
        raise ValueError(f"the harmonic basis is computed densely, for complexes of at most {DENSE_MAX} cells per "
                         f"dimension; this one has {cx.shape}")
    from scipy.linalg import null_space

    m = cx.num_edges
    if m == 0:
        return np.zeros((0, 0))
    b2 = cx.incidence_matrix(2).toarray()[:, :cx.num_cells2 if glued is None else int(glued)]
    return _fixed_signs(null_space(np.vstack([cx.incidence_matrix(1).toarray(), b2.T])))


def _fixed_signs(basis: np.ndarray) -> np.ndarray:
    """A fixed sign per column (largest entry positive), so pictures do not flip between runs."""
    if not basis.size:
        return basis
    lead = basis[np.abs(basis).argmax(0), np.arange(basis.shape[1])]
    return basis * np.where(lead < 0, -1.0, 1.0)


def cavity_basis(cx: CellComplex) -> np.ndarray:
    """``(F, h2)`` basis of ``ker L2 = ker B2``: 2-chains with no boundary, i.e. closed surfaces of 2-cells
    around a cavity. In reduced echelon form (each vector owns one pivot 2-cell the others do not use),
    so each column is a small surface that can be drawn. Small complexes only."""
    if not _small(cx):
        raise ValueError(f"cavities are computed densely, for complexes of at most {DENSE_MAX} cells per dimension")
    from scipy.linalg import null_space

    if cx.num_cells2 == 0:
        return np.zeros((0, 0))
    basis = null_space(cx.incidence_matrix(2).toarray())
    if not basis.size:
        return basis
    # reduced row echelon form of basis^T (Gauss-Jordan with partial pivoting): sparse, readable surfaces
    r = basis.T.copy()
    row = 0
    for col in range(r.shape[1]):
        if row == r.shape[0]:
            break
        piv = row + int(np.abs(r[row:, col]).argmax())
        if abs(r[piv, col]) < 1e-9:
            continue
        r[[row, piv]] = r[[piv, row]]
        r[row] /= r[row, col]
        others = np.arange(r.shape[0]) != row
        r[others] -= np.outer(r[others, col], r[row])
        row += 1
    r[np.abs(r) < 1e-9] = 0.0
    return r.T


@dataclass
class HodgeDecomposition:
    """``flow = gradient + curl + harmonic`` (each ``(M,)``): ``gradient = B1^T potential`` (``(N,)``),
    ``curl = B2 circulation`` (``(F,)``), ``harmonic`` in ``ker L1``; the three are orthogonal."""

    flow: np.ndarray
    gradient: np.ndarray
    curl: np.ndarray
    harmonic: np.ndarray
    potential: np.ndarray
    circulation: np.ndarray

    def norms(self) -> dict[str, float]:
        """Squared norms, which add up: ``|f|^2 = |grad|^2 + |curl|^2 + |harm|^2``."""
        return {k: float(getattr(self, k) @ getattr(self, k)) for k in ("flow", "gradient", "curl", "harmonic")}


def _lstsq(a, y: np.ndarray) -> np.ndarray:
    if a.shape[1] == 0:
        return np.zeros(0)
    if max(a.shape) <= DENSE_MAX * 4:
        return np.linalg.lstsq(a.toarray(), y, rcond=None)[0]
    from scipy.sparse.linalg import lsqr

    return lsqr(a, y, atol=1e-14, btol=1e-14, iter_lim=20 * max(a.shape))[0]


def hodge_decomposition(cx: CellComplex, flow) -> HodgeDecomposition:
    """Split the edge flow ``flow`` ``(M,)`` (positive along each 1-cell's orientation ``u -> v``, ``u < v``)
    into its gradient, curl and harmonic parts by two least-squares problems:
    ``potential = argmin |B1^T a - f|``, ``circulation = argmin |B2 b - f|``; the harmonic part is the rest."""
    f = np.asarray(flow, dtype=np.float64).reshape(-1)
    if f.size != cx.num_edges:
        raise ValueError(f"an edge flow needs one value per 1-cell ({cx.num_edges}); got {f.size}")
    b1, b2 = cx.incidence_matrix(1), cx.incidence_matrix(2)
    a = _lstsq(b1.T.tocsr(), f)
    b = _lstsq(b2, f)
    grad, curl = b1.T @ a, b2 @ b
    return HodgeDecomposition(f, grad, curl, f - grad - curl, a, b)


def glue_steps(cx: CellComplex) -> list[dict[str, int]]:
    """Glue the 2-cells one by one, in their order: ``[{"glued": j, "h1": .., "h2": .., "fills": bool}]``
    for ``j = 0 .. F``. ``fills``: the ``j``-th 2-cell's boundary was independent of the earlier ones
    (it removes one harmonic mode); otherwise it closes a cavity (``h2`` grows). Small complexes only."""
    if not _small(cx):
        raise ValueError(f"gluing step by step is for complexes of at most {DENSE_MAX} cells per dimension")
    n, m, f = cx.shape
    r1 = sparse_rank(cx.incidence_matrix(1)) if m else 0
    b2 = cx.incidence_matrix(2).toarray()
    basis = np.zeros((m, 0))
    out = [{"glued": 0, "h1": m - r1, "h2": 0, "fills": False}]
    for j in range(f):
        col = b2[:, j] - basis @ (basis.T @ b2[:, j])
        col = col - basis @ (basis.T @ col)  # twice: Gram-Schmidt stays orthogonal
        norm = float(np.linalg.norm(col))
        fills = norm > 1e-8 * max(1.0, float(np.linalg.norm(b2[:, j])))
        if fills:
            basis = np.hstack([basis, (col / norm)[:, None]])
        r2 = basis.shape[1]
        out.append({"glued": j + 1, "h1": m - r1 - r2, "h2": j + 1 - r2, "fills": bool(fills)})
    return out
