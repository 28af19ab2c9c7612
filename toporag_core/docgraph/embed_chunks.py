"""Resumable embedding: texts encoded a chunk at a time, each chunk's vectors stored as it is done.

A chunk's file in the work folder is named by a hash of the encoder's name and the chunk's texts
(``blake2b``), written to a temporary file and renamed, so a stopped run re-started with the same
texts reads the chunks already stored and encodes only the rest; a damaged chunk file is encoded
again. Output: ``(len(texts), d)`` float32 vectors.
"""
from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

Progress = Callable[[int, int, float], None]  # (texts done, texts to encode, seconds left)


def _chunk_key(encoder_name: str, texts: Sequence[str]) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(encoder_name.encode())
    for t in texts:
        h.update(b"\x00")
        h.update(t.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def embed_resumable(texts: Sequence[str], encoder, work: Path | None, chunk_size: int = 256,
                    on_progress: Progress | None = None) -> np.ndarray:
    """``(len(texts), d)`` float32 vectors, ``chunk_size`` texts per encoder call; with a ``work``
    folder each chunk is stored there as it is done (temporary file + rename) and a chunk already
    stored is read instead of encoded. ``on_progress(done, total, seconds left)`` after each chunk
    encoded (``total`` counts the texts still to encode)."""
    from safetensors.numpy import load_file, save_file

    n = len(texts)
    out = np.zeros((n, int(encoder.dim)), np.float32)
    chunks = [(a, min(a + chunk_size, n)) for a in range(0, n, chunk_size)]
    name = str(getattr(encoder, "name", type(encoder).__name__))
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
    todo = []
    for a, b in chunks:
        f = None if work is None else work / f"{_chunk_key(name, texts[a:b])}.safetensors"
        if f is not None and f.is_file():
            try:
                v = load_file(str(f))["x"]
                if v.shape == (b - a, out.shape[1]):
                    out[a:b] = v
                    continue
            except Exception:  # a damaged chunk file (e.g. a full disk) is encoded again  # noqa: BLE001
                pass
        todo.append((a, b, f))
    total, done, t0 = sum(b - a for a, b, _ in todo), 0, time.perf_counter()
    for a, b, f in todo:
        v = np.asarray(encoder.encode(list(texts[a:b])), np.float32)
        out[a:b] = v
        if f is not None:
            tmp = f.with_suffix(f".tmp{os.getpid()}")
            save_file({"x": np.ascontiguousarray(v)}, str(tmp))
            os.replace(tmp, f)
        done += b - a
        if on_progress is not None:
            on_progress(done, total, (time.perf_counter() - t0) / done * (total - done))
    return out
