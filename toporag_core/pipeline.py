"""Load once, answer many: the object the app and ``toporag ask`` hold.

>>> pipe = TopoRAGPipeline.load()                  # committed ExplaGraphs checkpoint, packaged LLM
>>> ecx = pipe.prepare(graph)                        # lift + embed once per graph
>>> out = pipe.answer(ecx, "Do argument 1 and ...?", method="toporag", k0=3, k1=3, k2=3, c2=0.5)
>>> out["answer"], out["subcomplex"], out["timings"]

Thread-safe for a Streamlit server: retrieval runs concurrently (numpy; the sentence encoder has
its own lock), the neural part (encoder, projector, LLM) runs under one lock, so two sessions
asking at once each get their own, correct answer.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import torch

from .model import QABatch, TopoRAGConfig, TopoRAGModel
from .nn import collate, subcomplex_tensors

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CHECKPOINT = REPO_ROOT / "assets" / "checkpoints" / "expla_graphs"


class TopoRAGPipeline:
    """A trained (or frozen-only) model plus the sentence encoder used for retrieval."""

    def __init__(self, model: TopoRAGModel, encoder=None, checkpoint: str | None = None,
                 meta: dict[str, Any] | None = None) -> None:
        self.model = model.eval()
        self._encoder = encoder
        self.checkpoint = checkpoint
        self.meta = meta or {}
        self._lock = threading.Lock()
        self._enc_lock = threading.Lock()

    # -- construction ---------------------------------------------------------------
    @classmethod
    def load(cls, checkpoint_dir: str | os.PathLike | None = None, llm: str | None = None,
             device: str = "auto", encoder=None, dtype: str | None = "auto") -> "TopoRAGPipeline":
        """``checkpoint_dir=None``: the committed ExplaGraphs checkpoint when present, else the frozen
        LLM alone (no soft prompt). ``llm``: override the checkpoint's LLM (folder or hub id)."""
        import json

        from .llm import load_llm

        folder = Path(checkpoint_dir) if checkpoint_dir is not None else (
            DEFAULT_CHECKPOINT if (DEFAULT_CHECKPOINT / "config.json").is_file() else None)
        if folder is None:
            model_llm, tok = load_llm(llm, device=device, dtype=dtype)
            return cls(TopoRAGModel(TopoRAGConfig(use_graph=False), model_llm, tok), encoder, None, {})
        meta = json.loads((folder / "config.json").read_text())
        model_llm, tok = load_llm(llm or meta["config"]["llm"], device=device, dtype=dtype)
        model = TopoRAGModel.load(folder, llm=model_llm, tokenizer=tok, device=device)
        return cls(model, encoder, str(folder), meta)

    @property
    def encoder(self):
        """The sentence encoder (created on first use; the packaged MiniLM behind the cache)."""
        with self._enc_lock:
            if self._encoder is None:
                from .data_prep import default_encoder

                self._encoder = default_encoder()
            return self._encoder

    @property
    def use_cells2(self) -> bool:
        return bool(self.model.config.cwn.use_cells2) if self.model.config.use_graph else True

    def retrieval_defaults(self) -> dict[str, Any]:
        """The retrieval setting the checkpoint was trained with (method, k0, k1, k2, c2, edge_cost)."""
        r = dict(self.meta.get("retrieval", {}))
        return {k: r[k] for k in ("method", "k0", "k1", "k2", "c2", "edge_cost") if k in r}

    def describe(self) -> dict[str, Any]:
        """Checkpoint, LLM, device, mode: what the app shows next to the model picker."""
        cfg = self.model.config
        return {"checkpoint": self.checkpoint, "llm": cfg.llm, "device": str(self.model.device),
                "dtype": str(self.model.dtype).replace("torch.", ""), "mode": cfg.mode if cfg.use_graph else
                "frozen LLM (no soft prompt)", "encoder": cfg.encoder if cfg.use_graph else None,
                "trainable_params": self.model.num_trainable()}

    def prepare(self, graph, tree: str = "bfs"):
        """Lift and embed a :class:`~toporag_core.graph.TextualGraph` (do it once per graph)."""
        from .retrieval import EmbeddedComplex

        return EmbeddedComplex.from_graph(graph, self.encoder, tree=tree)

    # -- answering ------------------------------------------------------------------
    def answer(self, graph_or_ecx, question: str, method: str = "toporag", k0: int = 3, k1: int = 3,
               k2: int = 3, c2: float = 0.5, edge_cost: float = 0.5, query: str | None = None,
               max_new_tokens: int | None = None) -> dict[str, Any]:
        """Retrieve a subcomplex for ``question`` and generate the answer.

        Args:
            graph_or_ecx: a ``TextualGraph`` (lifted and embedded here) or an ``EmbeddedComplex``.
            question: the text the LLM reads after the context.
            method: ``toporag`` | ``g-retriever`` | ``shortest-path`` | ``topk-triples`` | ``whole``.
            query: text used for retrieval (default: the question).

        Returns:
            ``{"answer", "subcomplex", "context", "prompt" (layout), "cells" (texts),
            "timings" {prepare, retrieve, encode, generate, total} (seconds), "method", "params"}``.
        """
        from .data_prep import RetrievalSetting, retrieve_for, retrieved_cells
        from .retrieval import EmbeddedComplex, textualize

        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        t0 = time.perf_counter()
        ecx = graph_or_ecx if isinstance(graph_or_ecx, EmbeddedComplex) else self.prepare(graph_or_ecx)
        if ecx.encoder is None:
            ecx.encoder = self.encoder
        t1 = time.perf_counter()
        setting = RetrievalSetting(method=method, k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost,
                                   use_cells2=self.use_cells2)
        sub = retrieve_for(ecx, query or question, setting)
        context = textualize(sub, include_cells2=self.use_cells2)
        t2 = time.perf_counter()
        batch = QABatch(cells=None, questions=[question], contexts=[context])
        with self._lock, torch.no_grad():
            soft = None
            if self.model.config.use_graph:
                batch.cells = collate([subcomplex_tensors(sub, ecx.emb, use_cells2=self.use_cells2)])
                batch = batch.to(self.model.device)
                soft = self.model.graph_tokens(batch.cells)
            t3 = time.perf_counter()
            answer = self.model.generate(batch, max_new_tokens=max_new_tokens, soft=soft)[0]
            t4 = time.perf_counter()
        return {"answer": answer, "subcomplex": sub, "context": context,
                "prompt": self.model.prompt_layout(context, question),
                "cells": retrieved_cells(sub, self.use_cells2), "method": method, "params": sub.params,
                "timings": {"prepare": t1 - t0, "retrieve": t2 - t1, "encode": t3 - t2, "generate": t4 - t3,
                            "total": t4 - t0}}
