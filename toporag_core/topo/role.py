"""Role embeddings: GraphWave (Donnat et al., KDD 2018).

Two nodes play the same *structural role* when the heat that diffuses from them spreads
the same way, wherever they are in the graph. GraphWave makes that a vector:

1. heat-kernel wavelets ``Psi_s = exp(-s L) = U diag(exp(-s lambda)) U^T``, ``L = D - A``;
   column ``a`` is the heat profile of a unit of heat started at node ``a``;
2. the empirical characteristic function of each column's coefficients,
   ``phi_a(t) = (1/N) sum_m exp(i t Psi_s[m, a])``, sampled at ``d`` evenly spaced ``t``;
3. real and imaginary parts, concatenated over the scales ``s``.

The characteristic function does not care *which* node holds which coefficient, so the
embedding is invariant to automorphisms and identical for the role-twins of two copies.

``exp(-s L)`` is computed exactly (dense eigendecomposition, ``O(N^3)``) for small graphs
and otherwise by its Chebyshev expansion, whose coefficients are closed-form modified
Bessel functions, applied with sparse matrix products to blocks of columns of the
identity. The characteristic function is accumulated block by block, so memory is
``O(N x block)`` instead of ``O(N^2)`` per scale.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from scipy.special import ive

ROLE_EPS = 1e-6  # role similarity 1/||Pa - Pb|| is capped at 1/ROLE_EPS for identical embeddings
EXACT_MAX_NODES = 500  # method="auto": dense eigendecomposition up to this many nodes
DENSE_SPECTRUM_MAX = 1500  # scale selection: dense eigvalsh up to this many nodes, Lanczos beyond


def laplacian(adj: sp.spmatrix) -> sp.csr_matrix:
    """Combinatorial Laplacian ``L = D - A`` (CSR, float64) of a symmetric adjacency."""
    adj = sp.csr_matrix(adj, dtype=np.float64)
    deg = np.asarray(adj.sum(axis=1)).ravel()
    return (sp.diags(deg) - adj).tocsr()


def spectrum_bounds(adj: sp.spmatrix) -> tuple[float, float]:
    """``(lambda_1, lambda_N)``: the smallest non-zero Laplacian eigenvalue of the largest
    connected component (how slowly heat spreads there) and the largest eigenvalue of ``L``.

    Dense ``eigvalsh`` for small graphs, Lanczos (``eigsh``, shift-invert for ``lambda_1``)
    otherwise. A graph without edges returns ``(1, 1)`` (nothing diffuses; any scale works).
    """
    lap = laplacian(adj)
    if lap.nnz == 0 or not np.any(lap.diagonal() > 0):
        return 1.0, 1.0
    _, comp = csgraph.connected_components(adj, directed=False)
    big = np.flatnonzero(comp == np.bincount(comp).argmax())
    sub = laplacian(sp.csr_matrix(adj)[big][:, big])
    if lap.shape[0] <= DENSE_SPECTRUM_MAX:
        lam_n = float(np.linalg.eigvalsh(lap.toarray())[-1])
    else:
        lam_n = float(sp.linalg.eigsh(lap, k=1, which="LA", return_eigenvectors=False, tol=1e-8)[0])
    if sub.shape[0] < 2:
        return lam_n, lam_n
    if sub.shape[0] <= DENSE_SPECTRUM_MAX:
        lam_1 = float(np.linalg.eigvalsh(sub.toarray())[1])
    else:  # the two eigenvalues nearest -0.01: 0 and lambda_1 (L + 0.01 I is positive definite)
        vals = sp.linalg.eigsh(sub, k=2, sigma=-1e-2, which="LM", return_eigenvectors=False, tol=1e-10)
        lam_1 = float(np.sort(vals)[1])
    return max(lam_1, 1e-12), lam_n


def graphwave_scales(adj: sp.spmatrix, eta: float = 0.85, gamma: float = 0.95) -> np.ndarray:
    """GraphWave's automatic scales ``[s_min, s_max]``.

    ``s_max = -log(eta) / sqrt(lambda_1 lambda_N)`` and ``s_min = -log(gamma) / sqrt(lambda_1
    lambda_N)`` (Donnat et al., Sec. 3.2): large enough that heat leaves the start node
    (the wavelet is not a delta), small enough that it has not spread uniformly over the
    component (``exp(-s lambda_1)`` stays near ``eta``..``gamma``, so the profile is local).
    """
    lam_1, lam_n = spectrum_bounds(adj)
    root = np.sqrt(lam_1 * lam_n)
    return np.array([-np.log(gamma) / root, -np.log(eta) / root])


def chebyshev_heat_coefficients(scale: float, lmax: float, order: int) -> np.ndarray:
    """``order + 1`` Chebyshev coefficients of ``x -> exp(-scale x)`` on ``[0, lmax]``.

    With ``x = (lmax/2)(y + 1)`` and ``tau = scale lmax / 2``,
    ``exp(-scale x) = e^-tau (I_0(tau) + 2 sum_k (-1)^k I_k(tau) T_k(y))``, so
    ``c_k = 2 (-1)^k ive(k, tau)`` (``c_0 = ive(0, tau)``) exactly; no quadrature.
    """
    tau = scale * lmax / 2.0
    k = np.arange(order + 1)
    c = 2.0 * (-1.0) ** k * ive(k, tau)
    c[0] /= 2.0
    return c


def chebyshev_order(scales: Sequence[float], lmax: float, tol: float = 1e-8, max_order: int = 2000) -> int:
    """Smallest order whose coefficient tail (a bound on the max error on ``[0, lmax]``,
    since ``|T_k| <= 1``) is below ``tol`` for every scale."""
    order = 1
    for s in scales:
        c = np.abs(chebyshev_heat_coefficients(float(s), lmax, max_order))
        tail = np.cumsum(c[::-1])[::-1]  # tail[m] = sum_{k >= m} |c_k|
        below = np.flatnonzero(tail < tol)
        order = max(order, int(below[0]) - 1 if below.size else max_order)
    return max(order, 1)


def _heat_blocks_exact(lap: sp.csr_matrix, scales: np.ndarray, block: int) -> Iterator[tuple[slice, list]]:
    lam, u = np.linalg.eigh(lap.toarray())
    n = lap.shape[0]
    for start in range(0, n, block):
        sl = slice(start, min(n, start + block))
        yield sl, [(u * np.exp(-s * lam)) @ u[sl].T for s in scales]


def _heat_blocks_chebyshev(lap: sp.csr_matrix, scales: np.ndarray, block: int, order: int,
                           lmax: float) -> Iterator[tuple[slice, list]]:
    n = lap.shape[0]
    lt = (2.0 / lmax) * lap - sp.identity(n, format="csr")  # spectrum mapped into [-1, 1]
    coef = [chebyshev_heat_coefficients(float(s), lmax, order) for s in scales]
    for start in range(0, n, block):
        sl = slice(start, min(n, start + block))
        t_prev = np.zeros((n, sl.stop - sl.start))
        t_prev[np.arange(sl.start, sl.stop), np.arange(sl.stop - sl.start)] = 1.0  # T_0 E = E
        t_cur = lt @ t_prev  # T_1 E
        psi = [c[0] * t_prev + c[1] * t_cur for c in coef]
        for k in range(2, order + 1):
            t_next = lt @ t_cur
            t_next *= 2.0
            t_next -= t_prev  # T_k = 2 Lt T_{k-1} - T_{k-2}, in place: no extra N x B temporaries
            t_prev, t_cur = t_cur, t_next
            for p, c in zip(psi, coef):
                p += c[k] * t_cur
        yield sl, psi


def _characteristic_function(psi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``(B, len(t))`` complex: column means of ``exp(i t Psi)`` for a ``(N, B)`` block.

    ``t`` is evenly spaced from 0, so ``exp(i t_j Psi) = exp(i dt Psi)^j``: one complex
    exponential per entry, then one multiply per ``t`` (cheaper than cos and sin each time).
    """
    out = np.empty((psi.shape[1], t.size), dtype=np.complex128)
    dt = t[1] - t[0] if t.size > 1 else 0.0
    step = np.exp(1j * dt * psi)
    w = np.exp(1j * t[0] * psi)
    for j in range(t.size):
        out[:, j] = w.mean(axis=0)
        if j + 1 < t.size:
            w *= step
    return out


def role_embedding(adj: sp.spmatrix, scales: Sequence[float] | str = "auto", d: int = 25, t_max: float = 100.0,
                   method: str = "auto", cheb_order: int | None = None, cheb_tol: float = 1e-8,
                   block_size: int | None = None) -> np.ndarray:
    """``(N, 2 * d * len(scales))`` GraphWave structural embedding.

    Args:
        adj: ``(N, N)`` symmetric adjacency (scipy sparse).
        scales: heat scales ``s``; ``"auto"`` = :func:`graphwave_scales` (two scales,
            as GraphWave's default ``nb_filters=2``, chosen from the Laplacian spectrum).
        d: number of sample points ``t``, evenly spaced in ``[0, t_max]``. Defaults ``d=25``,
            ``t_max=100`` are GraphWave's (``np.linspace(0, 100, 25)``): wavelet coefficients
            lie in ``[0, 1]`` and ``t`` up to 100 resolves differences of about 0.01.
        method: ``"exact"`` (eigendecomposition), ``"chebyshev"`` (sparse polynomial), or
            ``"auto"`` (exact up to ``EXACT_MAX_NODES`` nodes).
        cheb_order: Chebyshev order; ``None`` picks the smallest one whose truncation error
            is below ``cheb_tol`` for every scale (:func:`chebyshev_order`).
        block_size: columns of ``Psi`` per block; ``None`` keeps a block near 256K entries (2 MiB
            per real array): peak memory is ``O(N x block)``, never ``O(N^2)``.

    Returns:
        float64 array, per scale ``[Re phi(t_1..t_d), Im phi(t_1..t_d)]``. Role similarity
        of ``a, b`` is ``1 / max(||P_a - P_b||_2, ROLE_EPS)`` (:func:`role_similarity`).
    """
    if method not in ("auto", "exact", "chebyshev"):
        raise ValueError(f"method must be 'auto', 'exact' or 'chebyshev', got {method!r}")
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    n = adj.shape[0]
    if isinstance(scales, str) and scales != "auto":
        raise ValueError(f"scales must be 'auto' or a list of floats, got {scales!r}")
    s = graphwave_scales(adj) if isinstance(scales, str) else np.asarray(scales, dtype=float).ravel()
    if s.size == 0 or np.any(s <= 0):
        raise ValueError("scales must be positive")
    if n == 0:
        return np.zeros((0, 2 * d * s.size))
    t = np.linspace(0.0, t_max, d)
    block = block_size or max(1, min(n, (1 << 18) // n))
    lap = laplacian(adj)
    if method == "exact" or (method == "auto" and n <= EXACT_MAX_NODES):
        blocks = _heat_blocks_exact(lap, s, block)
    else:
        lmax = 1.01 * spectrum_bounds(adj)[1] + 1e-9  # margin: Chebyshev diverges outside [-1, 1]
        order = cheb_order or chebyshev_order(s, lmax, cheb_tol)
        blocks = _heat_blocks_chebyshev(lap, s, block, order, lmax)
    out = np.empty((n, s.size, 2, d))
    for sl, psis in blocks:
        for i, psi in enumerate(psis):
            phi = _characteristic_function(psi, t)
            out[sl, i, 0], out[sl, i, 1] = phi.real, phi.imag
    return out.reshape(n, -1)


def role_similarity(emb: np.ndarray, a: int, b: np.ndarray | int | None = None) -> np.ndarray:
    """``1 / max(||P_a - P_b||_2, ROLE_EPS)`` of node ``a`` with nodes ``b`` (all if ``None``)."""
    other = emb if b is None else emb[np.atleast_1d(b)]
    dist = np.linalg.norm(other - emb[a], axis=1)
    return 1.0 / np.maximum(dist, ROLE_EPS)
