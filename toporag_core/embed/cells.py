"""Cell embeddings of a complex: ``x0 (N, d)``, ``x1 (M, d)``, ``x2 (F, d)`` (:func:`embed_complex`).

A 0-cell is its node text's vector, a 1-cell the mean of its member edges' relation texts, a 2-cell the
mean of its boundary 0- and 1-cells; every distinct text is encoded once and the means are sparse
products run a chunk of cells at a time, so memory stays linear in the complex.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from ..cells.complex import CellComplex
from .base import TextEncoder


@dataclass
class CellEmbeddings:
    """Cell embeddings of one complex: ``x0 (N, d)``, ``x1 (M, d)``, ``x2 (F, d)``."""

    x0: np.ndarray
    x1: np.ndarray
    x2: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.x0.shape[1])


EMBED_CHUNK = 65536  # texts per encoder call and cells per sparse product: bounds temporary memory


def _encode_unique(texts: Sequence[str], encoder: TextEncoder, chunk: int,
                   show_progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(U, d)`` vectors of the distinct texts and ``(len(texts),)`` the row of each text.

    Every distinct text is encoded once, ``chunk`` texts per call: a 3M-edge graph with 50
    relation texts encodes 50 relation texts, not 3M.
    """
    rows: dict[str, int] = {}
    inv = np.fromiter((rows.setdefault(t, len(rows)) for t in texts), dtype=np.int64, count=len(texts))
    uniq = list(rows)
    out = np.zeros((len(uniq), encoder.dim), dtype=np.float32)
    for a in range(0, len(uniq), chunk):
        out[a:a + chunk] = encoder.encode(uniq[a:a + chunk], show_progress=show_progress)
    return out, inv


def mean_operator(ptr: np.ndarray, idx: np.ndarray, num_cols: int, rows: slice | None = None) -> sp.csr_matrix:
    """Row-normalised sparse ``(R, num_cols)`` matrix of a CSR grouping: row ``r`` holds ``1 / |group r|``
    at the columns ``idx[ptr[r]:ptr[r + 1]]`` (repeats add up), so ``mean_operator(...) @ X`` is the
    per-group mean of ``X``'s rows. ``rows`` takes a contiguous block of groups (chunking)."""
    lo, hi = (0, ptr.size - 1) if rows is None else (rows.start, rows.stop)
    p = ptr[lo:hi + 1] - ptr[lo]
    cnt = np.diff(p)
    data = np.repeat(1.0 / np.maximum(cnt, 1), cnt).astype(np.float32)
    return sp.csr_matrix((data, idx[ptr[lo]:ptr[hi]], p), shape=(hi - lo, num_cols))


def cell2_mean_blocks(cx: CellComplex, chunk: int = EMBED_CHUNK):
    """Yield ``(rows, P, Q)`` per block of 2-cells: ``x2[rows] = P @ x0 + Q @ x1`` with
    ``P (r, N)`` and ``Q (r, M)`` holding ``1 / (2 L_f)`` on each boundary node and 1-cell of 2-cell
    ``f`` (``L_f`` = boundary length; a 2-cell has as many boundary nodes as boundary edges)."""
    f = cx.num_cells2
    for a in range(0, f, chunk):
        rows = slice(a, min(a + chunk, f))
        p = mean_operator(cx.cell_ptr, cx.cell_nodes, cx.num_nodes, rows)
        q = mean_operator(cx.cell_ptr, cx.cell_edges, cx.num_edges, rows)
        p.data *= 0.5
        q.data *= 0.5
        yield rows, p, q


def embed_complex(cx: CellComplex, encoder: TextEncoder, show_progress: bool = False,
                  chunk: int = EMBED_CHUNK) -> CellEmbeddings:
    """Embed every cell, in memory linear in the complex.

    * 0-cell: its node text.
    * 1-cell: mean of the embeddings of its original edges' relation texts (parallel
      relations all count): ``x1 = A1 @ T`` with ``A1 (M, U)`` the row-normalised
      member-text incidence and ``T (U, d)`` the distinct texts' vectors.
    * 2-cell: mean of its boundary 0- and 1-cell embeddings: ``x2 = P @ x0 + Q @ x1``
      with the boundary incidences scaled by ``1 / (2 L)`` (see :func:`cell2_mean_blocks`).

    Distinct texts are encoded once; the sparse products run ``chunk`` cells at a time, so
    the temporary memory is ``O(chunk x d)`` on top of the ``(N + M + F) x d`` result, never
    ``(sum of boundary lengths) x d`` as a gather of boundary vectors would be.
    """
    g = cx.graph
    d = encoder.dim
    texts = list(g.node_text) + list(g.edge_text)
    if texts:
        vecs, inv = _encode_unique(texts, encoder, chunk, show_progress)
    else:
        vecs, inv = np.zeros((0, d), np.float32), np.zeros(0, np.int64)
    x0 = vecs[inv[:g.num_nodes]]
    m = cx.num_edges
    x1 = np.zeros((m, d), np.float32)
    text_of_member = inv[g.num_nodes:][cx.edge_member_idx]
    for a in range(0, m, chunk):
        rows = slice(a, min(a + chunk, m))
        x1[rows] = mean_operator(cx.edge_member_ptr, text_of_member, vecs.shape[0], rows) @ vecs
    x2 = np.zeros((cx.num_cells2, d), np.float32)
    for rows, p, q in cell2_mean_blocks(cx, chunk):
        x2[rows] = p @ x0 + q @ x1
    return CellEmbeddings(x0=np.ascontiguousarray(x0, np.float32), x1=x1, x2=x2)
