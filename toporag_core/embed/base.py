"""What every text encoder and its callers share: the :class:`TextEncoder` interface, the folder
encoders keep their files in (:func:`default_cache_dir`) and one-thread BLAS for small products
(:func:`single_thread_blas`).

An encoder maps ``n`` texts to ``(n, dim)`` float32 rows of unit L2 norm, so a dot product is a
cosine; ``name`` says which model made the vectors (caches and indexes are keyed by it).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class TextEncoder(Protocol):
    """Anything that maps texts to L2-normalised float32 vectors."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """``(len(texts), dim)`` float32, rows L2-normalised."""
        ...


_BLAS = None


def single_thread_blas():
    """Context manager: BLAS on one thread. A matrix-vector product over a few thousand
    cells takes ~0.4 ms on one thread but can take 10+ ms when OpenBLAS spins up threads
    on a busy 2-core machine; retrieval is full of such small products. The BLAS libraries are found
    once per process (a new ``threadpool_limits`` reads ``/proc/self/maps`` every time: 3 ms a call)."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def default_cache_dir() -> Path:
    """``$TOPORAG_CACHE`` or ``~/.cache/toporag``."""
    return Path(os.environ.get("TOPORAG_CACHE", Path.home() / ".cache" / "toporag"))
