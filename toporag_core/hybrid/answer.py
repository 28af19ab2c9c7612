"""Answer a question from retrieved hybrid context with the project's frozen LLM.

The graph pipeline (:class:`toporag_core.pipeline.TopoRAGPipeline`) answers from a *subcomplex*;
there is no generic "context text + question -> answer" entry point, so this module is one: a
:class:`~toporag_core.model.TopoRAGModel` with ``use_graph=False`` (the frozen-LLM prompt layout
``[chat prefix] context \\n question [chat suffix]``, context truncated to the token budget, the
question never) and its greedy ``generate``. The LLM is loaded once per process.
"""
from __future__ import annotations

import threading
import time

_LOCK = threading.Lock()
_MODELS: dict = {}


def frozen_reader(llm: str | None = None, device: str = "auto", model=None, tokenizer=None):
    """A text-only :class:`TopoRAGModel` around ``load_llm(llm)`` (or the given model + tokenizer), cached."""
    from ..llm import load_llm
    from ..model import TopoRAGConfig, TopoRAGModel

    key = (llm, device, id(model))
    with _LOCK:
        if key not in _MODELS:
            if model is None:
                model, tokenizer = load_llm(llm, device=device)
            _MODELS[key] = TopoRAGModel(TopoRAGConfig(use_graph=False), model, tokenizer).eval()
        return _MODELS[key]


def answer_from_context(question: str, context: str, reader=None, max_new_tokens: int = 32) -> dict:
    """``{"answer", "prompt" (what the LLM reads), "seconds"}`` for one question and context text."""
    import torch

    from ..model import QABatch

    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    reader = reader or frozen_reader()
    t = time.perf_counter()
    with _LOCK, torch.no_grad():
        ans = reader.generate(QABatch(cells=None, questions=[question], contexts=[context or ""]),
                              max_new_tokens=max_new_tokens)[0]
    return {"answer": ans, "prompt": reader.prompt_layout(context or "", question), "seconds": time.perf_counter() - t}
