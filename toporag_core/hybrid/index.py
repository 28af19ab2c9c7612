"""Cell-aware late interaction (CALI) over tables, and its index reduction.

**Cells.** Cell ``(i, j)`` of a table with header ``h`` is embedded once as the text
``[COL: h_j] [VAL: v_ij]`` (``[ROW: r_i] [COL: h_j] [VAL: v_ij]`` in the ``row_tag`` ablation,
``r_i`` = the row's first cell). The index keeps

* ``vecs (V, d)`` float32 unit vectors, or PQ ``codes (V, m)`` uint8 + ``codebooks (m, K, d/m)``;
* per kept cell ``c``: ``cell_vec (C,)`` (which vector), ``cell_table``, ``cell_row``, ``cell_col``
  (C,), sorted by (table, row); ``row_ptr (G+1,)`` and ``table_row_ptr (T+1,)`` delimit the
  cells of each global row and the rows of each table.

**Query terms.** The content unigrams and bigrams of the question (bigrams = two adjacent
content words, e.g. ``"week 42"``), each embedded as a short text: ``Q (K, d)``.

**Scores.** ``S = Q @ vecs.T`` gives ``(K, V)``; ``S[:, cell_vec]`` is ``(K, C)``.

* MaxSim (ColBERT): ``score(t) = sum_k max_{c in t} S[k, c]`` (a segment max per table).
* Row-aware (our design): ``m[k, g] = max_{c in row g} S[k, c]``; a row's coverage
  ``R(g) = sum_k m[k, g]``; ``row(t) = max_{g in t} R(g)``. The table score is
  ``(1 - lam) * MaxSim(t) + lam * row(t)`` (``lam = 0.5``): query terms matched within one row
  count fully, terms scattered over three rows ("Verna" in row 1, "week 42" in row 2,
  "Mercadona" in row 3) only through the MaxSim half. The best row ``argmax_g R(g)`` is also the
  row handed to the LLM.

**Reduction** (:class:`ReductionConfig`):

1. drop empty and stop-word cells (value made only of stop words, ``-``, ``n/a`` ...);
2. exact duplicates share one vector (cells with the same text are encoded once): MaxSim and
   the row-aware score are unchanged, only storage shrinks;
3. near-duplicates: within the cells of one column header, vectors with cosine ``>= 0.98`` are
   joined (connected components of that graph) and replaced by their normalised centroid;
4. product quantisation: ``d`` split into ``m`` sub-spaces (48 x 8 dims for MiniLM's 384), each
   quantised to ``K = 16`` centroids with scikit-learn ``KMeans``; scores use asymmetric distance
   (the query stays float): ``S[k, v] = sum_s <q_k^(s), C_s[code[v, s]]>``, computed as a sparse
   one-hot ``(V, m K)`` matrix times the ``(m K, K_q)`` lookup table.

``nbytes()`` counts what the table route stores: vectors (float32) or codes (uint8) + codebooks,
plus the int32 ``cell_vec``/``cell_table``/``cell_row``/``cell_col`` arrays.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .tables import Table

STOP_WORDS = frozenset("""a an the of in on at to for from by with and or but is are was were be been being do does did
what which who whom whose when where why how that this these those it its as than then there their they them he she
his her we our you your i me my any all each per about into over under between during after before within without
much many how many one get got give gave same""".split())
EMPTY_VALUES = frozenset({"", "-", "--", "---", "n/a", "na", "none", "null", "nan", "—", "–", "...", "?", "tbd"})
_WORD_RE = re.compile(r"[A-Za-z][\w'&-]*|\d[\d.,:/%-]*\d%?|\d%?")


def query_terms(question: str) -> list[str]:
    """Content unigrams, then bigrams of adjacent content words, without repeats (order kept)."""
    toks = _WORD_RE.findall(question)
    content = [t.lower() not in STOP_WORDS for t in toks]
    uni = [t for t, c in zip(toks, content) if c]
    bi = [f"{a} {b}" for a, b, ca, cb in zip(toks, toks[1:], content, content[1:]) if ca and cb]
    return list(dict.fromkeys(uni + bi))


def is_stop_cell(value: str) -> bool:
    """Empty, placeholder or made only of stop words / punctuation."""
    v = value.strip().lower()
    if v in EMPTY_VALUES:
        return True
    words = _WORD_RE.findall(v)
    return not words or all(w in STOP_WORDS for w in words)


def cell_text(header: str, value: str, row_id: str | None = None) -> str:
    """``[COL: header] [VAL: value]`` (with ``[ROW: id]`` first in the ablation)."""
    head = f"[ROW: {row_id}] " if row_id is not None else ""
    return f"{head}[COL: {header}] [VAL: {value}]"


@dataclass
class ReductionConfig:
    """Index reduction switches (all off = the plain CALI index)."""

    drop_stop_cells: bool = True
    near_duplicate: float | None = None  # cosine threshold, e.g. 0.98
    pq_subspaces: int = 0  # 0 = no product quantisation; e.g. 48
    pq_centroids: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if self.near_duplicate is not None and not 0.0 < self.near_duplicate <= 1.0:
            raise ValueError(f"near_duplicate must be in (0, 1], got {self.near_duplicate}")
        if self.pq_subspaces < 0:
            raise ValueError(f"pq_subspaces must be >= 0, got {self.pq_subspaces}")
        if not 2 <= self.pq_centroids <= 256:
            raise ValueError(f"pq_centroids must be in [2, 256], got {self.pq_centroids}")

    @classmethod
    def full(cls) -> "ReductionConfig":
        """Every reduction step: stop cells, near duplicates at 0.98, PQ 48 x 16."""
        return cls(drop_stop_cells=True, near_duplicate=0.98, pq_subspaces=48, pq_centroids=16)


class CellIndex:
    """The CALI index over a list of tables (see the module docstring for the arrays)."""

    def __init__(self, dim: int, vecs: np.ndarray | None, codes: np.ndarray | None, codebooks: np.ndarray | None,
                 cell_vec: np.ndarray, cell_table: np.ndarray, cell_row: np.ndarray, cell_col: np.ndarray,
                 num_tables: int, row_tag: bool, stats: dict) -> None:
        self.dim = int(dim)
        self.vecs, self.codes, self.codebooks = vecs, codes, codebooks
        self.cell_vec = cell_vec.astype(np.int32)
        self.cell_table = cell_table.astype(np.int32)
        self.cell_row = cell_row.astype(np.int32)
        self.cell_col = cell_col.astype(np.int32)
        self.num_tables = int(num_tables)
        self.row_tag = bool(row_tag)
        self.stats = dict(stats)
        self._derive()

    def _derive(self) -> None:
        """Segment pointers: cells per global row, rows per table (cells are sorted by table, row)."""
        c = self.cell_table.size
        new_row = np.ones(c, bool)
        if c:
            new_row[1:] = (self.cell_table[1:] != self.cell_table[:-1]) | (self.cell_row[1:] != self.cell_row[:-1])
        self.row_start = np.flatnonzero(new_row)  # (G,) first cell of each global row
        self.row_table = self.cell_table[self.row_start]  # (G,)
        self.table_has_cells = np.zeros(self.num_tables, bool)
        self.table_has_cells[self.row_table] = True
        self.table_start_cell = np.searchsorted(self.cell_table, np.arange(self.num_tables))  # (T,)
        self.table_start_row = np.searchsorted(self.row_table, np.arange(self.num_tables))
        self._onehot = None
        if self.codes is not None:
            v, m = self.codes.shape
            k = self.codebooks.shape[1]
            cols = (self.codes.astype(np.int64) + np.arange(m) * k).ravel()
            rows = np.repeat(np.arange(v), m)
            self._onehot = sp.csr_matrix((np.ones(v * m, np.float32), (rows, cols)), shape=(v, m * k))

    # -- construction ----------------------------------------------------------------
    @classmethod
    def build(cls, tables: list[Table], encoder, row_tag: bool = False,
              reduction: ReductionConfig | None = None) -> "CellIndex":
        """Embed every kept cell of ``tables`` (unique texts once) and apply ``reduction``."""
        red = reduction or ReductionConfig(drop_stop_cells=False)
        t_ids, r_ids, c_ids, texts, heads = [], [], [], [], []
        total_cells = 0
        for t, tab in enumerate(tables):
            n_r, n_c = len(tab.rows), len(tab.header)
            total_cells += n_r * n_c
            for i, row in enumerate(tab.rows):
                rid = row[0] if row_tag and row else None
                for j, val in enumerate(row):
                    if red.drop_stop_cells and is_stop_cell(val):
                        continue
                    t_ids.append(t)
                    r_ids.append(i)
                    c_ids.append(j)
                    texts.append(cell_text(tab.header[j], val, rid))
                    heads.append(tab.header[j])
        if texts:
            uniq, inv = np.unique(np.array(texts, dtype=object), return_inverse=True)
        else:
            uniq, inv = np.array([]), np.zeros(0, int)
        vecs = encoder.encode(list(uniq)) if len(uniq) else np.zeros((0, encoder.dim), np.float32)
        vecs = np.asarray(vecs, np.float32)
        cell_vec = inv.astype(np.int64)
        stats = {"tables": len(tables), "cells_total": total_cells, "cells_kept": len(texts),
                 "unique_vectors": int(len(uniq))}
        if red.near_duplicate is not None and len(uniq):
            # header of each unique text (identical texts share the header)
            head_of = np.empty(len(uniq), dtype=object)
            head_of[cell_vec] = np.array(heads, dtype=object)
            vecs, cell_vec = _merge_near_duplicates(vecs, cell_vec, head_of, red.near_duplicate)
        stats["vectors_after_merge"] = int(vecs.shape[0])
        codes = codebooks = None
        if red.pq_subspaces:
            codes, codebooks = _train_pq(vecs, pq_subspaces_for(vecs.shape[1], red.pq_subspaces), red.pq_centroids,
                                         red.seed)
            vecs = None
        order = np.lexsort((np.array(c_ids), np.array(r_ids), np.array(t_ids))) if texts else np.zeros(0, int)
        idx = cls(encoder.dim, vecs, codes, codebooks, cell_vec[order], np.array(t_ids, int)[order],
                  np.array(r_ids, int)[order], np.array(c_ids, int)[order], len(tables), row_tag, stats)
        idx.stats["bytes_plain"] = int(total_cells * (encoder.dim * 4 + 16))
        idx.stats["bytes"] = idx.nbytes()
        return idx

    def nbytes(self) -> int:
        """Bytes of the vectors / codes + codebooks + the four int32 per-cell arrays."""
        payload = self.vecs.nbytes if self.vecs is not None else self.codes.nbytes + self.codebooks.nbytes
        return int(payload + 16 * self.cell_vec.size)

    # -- scoring ---------------------------------------------------------------------
    def term_vector_sims(self, q: np.ndarray) -> np.ndarray:
        """``(K, V)`` similarities of query terms with the stored vectors (PQ: asymmetric)."""
        q = np.asarray(q, np.float32)
        if self.vecs is not None:
            return q @ self.vecs.T
        m, k, sub = self.codebooks.shape
        lut = np.einsum("qms,mks->qmk", q.reshape(q.shape[0], m, sub), self.codebooks)  # (K, m, k)
        return np.asarray(self._onehot @ lut.reshape(q.shape[0], m * k).T).T  # (K, V)

    def cell_sims(self, q: np.ndarray) -> np.ndarray:
        """``(K, C)`` similarity of every query term with every kept cell."""
        return self.term_vector_sims(q)[:, self.cell_vec]

    def scores(self, q: np.ndarray, mode: str = "rowaware", lam: float = 0.5) -> dict[str, np.ndarray]:
        """Per-table scores for term vectors ``q (K, d)``.

        Returns ``{"score" (T,), "maxsim" (T,), "row" (T,), "best_row" (T,) row index in the table,
        "cell_sims" (K, C)}``; tables without cells score ``-inf``.
        """
        if mode not in ("maxsim", "rowaware"):
            raise ValueError(f"mode must be 'maxsim' or 'rowaware', got {mode!r}")
        T = self.num_tables
        out_max = np.full(T, -np.inf)
        out_row = np.full(T, -np.inf)
        best_row = np.full(T, -1, dtype=np.int64)
        s = self.cell_sims(q) if self.cell_vec.size else np.zeros((len(q), 0), np.float32)
        if self.cell_vec.size and len(q):
            has = np.flatnonzero(self.table_has_cells)
            tmax = np.maximum.reduceat(s, self.table_start_cell[has], axis=1)  # (K, T')
            out_max[has] = tmax.sum(0)
            rmax = np.maximum.reduceat(s, self.row_start, axis=1)  # (K, G)
            cover = rmax.sum(0)  # (G,)
            out_row[has] = np.maximum.reduceat(cover, self.table_start_row[has])
            # best row per table: the first row reaching the table's maximum
            hit = cover >= out_row[self.row_table] - 1e-9
            g = np.flatnonzero(hit)
            first = np.unique(self.row_table[g], return_index=True)
            best_row[first[0]] = self.cell_row[self.row_start[g[first[1]]]]
        elif len(q) == 0:
            out_max[self.table_has_cells] = 0.0
            out_row[self.table_has_cells] = 0.0
        score = out_max if mode == "maxsim" else (1 - lam) * out_max + lam * out_row
        return {"score": score, "maxsim": out_max, "row": out_row, "best_row": best_row, "cell_sims": s}

    def best_cells(self, cell_sims: np.ndarray, table: int) -> list[dict]:
        """For each query term, the best cell of ``table``: ``{"row", "col", "sim"}``."""
        a, b = self.table_start_cell[table], (self.table_start_cell[table + 1] if table + 1 < self.num_tables
                                               else self.cell_table.size)
        if b <= a:
            return [{"row": None, "col": None, "sim": None} for _ in range(cell_sims.shape[0])]
        sub = cell_sims[:, a:b]
        arg = sub.argmax(1)
        return [{"row": int(self.cell_row[a + c]), "col": int(self.cell_col[a + c]), "sim": float(sub[k, c])}
                for k, c in enumerate(arg)]

    def table_cell_grid(self, cell_sims: np.ndarray, table: int, shape: tuple[int, int]) -> np.ndarray:
        """``(K, R, C)`` term-cell similarities of one table (``nan`` where a cell was dropped)."""
        grid = np.full((cell_sims.shape[0],) + tuple(shape), np.nan, np.float32)
        sel = np.flatnonzero(self.cell_table == table)
        grid[:, self.cell_row[sel], self.cell_col[sel]] = cell_sims[:, sel]
        return grid

    # -- persistence -----------------------------------------------------------------
    def arrays(self, prefix: str = "cali.") -> dict[str, np.ndarray]:
        out = {f"{prefix}cell_vec": self.cell_vec, f"{prefix}cell_table": self.cell_table,
               f"{prefix}cell_row": self.cell_row, f"{prefix}cell_col": self.cell_col}
        if self.vecs is not None:
            out[f"{prefix}vecs"] = self.vecs
        else:
            out[f"{prefix}codes"] = self.codes
            out[f"{prefix}codebooks"] = self.codebooks
        return out

    def meta(self) -> dict:
        return {"dim": self.dim, "num_tables": self.num_tables, "row_tag": self.row_tag, "stats": self.stats}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict, prefix: str = "cali.") -> "CellIndex":
        return cls(meta["dim"], arrays.get(f"{prefix}vecs"), arrays.get(f"{prefix}codes"),
                   arrays.get(f"{prefix}codebooks"), arrays[f"{prefix}cell_vec"], arrays[f"{prefix}cell_table"],
                   arrays[f"{prefix}cell_row"], arrays[f"{prefix}cell_col"], meta["num_tables"], meta["row_tag"],
                   meta["stats"])

    def describe(self) -> dict:
        return {**self.stats, "pq": self.codes is not None, "row_tag": self.row_tag}


def _merge_near_duplicates(vecs: np.ndarray, cell_vec: np.ndarray, head_of: np.ndarray,
                           thr: float, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Join vectors of the same column header with cosine >= ``thr`` (connected components) into
    normalised centroids; returns the new vectors and the remapped ``cell_vec``."""
    v = vecs.shape[0]
    _, group = np.unique(head_of.astype(str), return_inverse=True)
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.r_[True, group[order][1:] != group[order][:-1], True])
    src, dst = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        ids = order[a:b]
        if ids.size < 2:
            continue
        x = vecs[ids]
        for s in range(0, ids.size, block):
            sim = x[s:s + block] @ x.T
            i, j = np.nonzero(sim >= thr)
            keep = ids[i + s] < ids[j]
            src.append(ids[i + s][keep])
            dst.append(ids[j][keep])
    if not src or not sum(len(x) for x in src):
        return vecs, cell_vec
    src, dst = np.concatenate(src), np.concatenate(dst)
    graph = sp.coo_matrix((np.ones(src.size), (src, dst)), shape=(v, v))
    n, label = connected_components(graph, directed=False)
    cent = np.zeros((n, vecs.shape[1]), np.float64)
    np.add.at(cent, label, vecs)
    cent /= np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-12)
    return cent.astype(np.float32), label[cell_vec]


def pq_subspaces_for(d: int, m: int) -> int:
    """The largest number of sub-spaces ``<= m`` that divides the dimension ``d`` (48 for MiniLM's 384,
    32 for the 256-d hashing encoder)."""
    return next(j for j in range(min(m, d), 0, -1) if d % j == 0)


def _train_pq(vecs: np.ndarray, m: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``codes (V, m)`` uint8 and ``codebooks (m, k, d/m)`` float32 (scikit-learn KMeans per sub-space)."""
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    v, d = vecs.shape
    if d % m:
        raise ValueError(f"pq_subspaces={m} must divide the embedding dimension {d}")
    sub = d // m
    kk = max(1, min(k, v))
    codes = np.zeros((v, m), np.uint8)
    books = np.zeros((m, k, sub), np.float32)
    for s in range(m):
        x = vecs[:, s * sub:(s + 1) * sub].astype(np.float64)
        if v == 0:
            continue
        with warnings.catch_warnings():  # fewer distinct points than centroids is fine here
            warnings.simplefilter("ignore", ConvergenceWarning)
            km = KMeans(n_clusters=kk, n_init=1, random_state=seed + s, max_iter=50).fit(x)
        books[s, :kk] = km.cluster_centers_
        codes[:, s] = km.labels_
    return codes, books
