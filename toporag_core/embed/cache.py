"""The persistent embedding cache (:class:`CachedEncoder`) and the progress lines of long encodings.

:class:`CachedEncoder` wraps any encoder with an on-disk cache keyed by ``(model, text)``: one SQLite
file per model and width, ``<cache>/emb-<name>-<dim>.sqlite``, table ``emb(text PRIMARY KEY, vec BLOB)``
holding ``dim`` float32 values per text. Every write is one atomic transaction, so a killed process never
leaves a corrupt cache; texts are deduplicated and encoded in chunks.
"""
from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .base import TextEncoder, default_cache_dir

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
