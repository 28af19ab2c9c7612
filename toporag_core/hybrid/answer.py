"""Answer a question from retrieved hybrid context with the project's frozen LLM.

The answering layer's text-only path does the work: :meth:`TopoRAGPipeline.text_only
<toporag_core.answering.pipeline.TopoRAGPipeline.text_only>` (the frozen-LLM prompt layout
``[chat prefix] context \\n question [chat suffix]``, context truncated to the token budget, the
question never) and its greedy :meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.answer_texts`. This
module only keeps one such reader per process (per LLM and device) and returns the prompt layout
beside the answer.
"""
from __future__ import annotations

import threading
import time

_LOCK = threading.Lock()
_READERS: dict = {}


def frozen_reader(llm: str | None = None, device: str = "auto", model=None, tokenizer=None):
    """A text-only :class:`~toporag_core.answering.pipeline.TopoRAGPipeline` around ``load_llm(llm)`` (or the
    given model + tokenizer), cached per process."""
    from ..answering.pipeline import TopoRAGPipeline

    key = (llm, device, id(model))
    with _LOCK:
        if key not in _READERS:
            _READERS[key] = TopoRAGPipeline.text_only(llm, device=device, model=model, tokenizer=tokenizer)
        return _READERS[key]


def answer_from_context(question: str, context: str, reader=None, max_new_tokens: int = 32) -> dict:
    """``{"answer", "prompt" (what the LLM reads), "seconds"}`` for one question and context text."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty string")
    reader = reader or frozen_reader()
    t = time.perf_counter()
    ans = reader.answer_texts([question], [context or ""], max_new_tokens=max_new_tokens)[0]
    return {"answer": ans, "prompt": reader.model.prompt_layout(context or "", question),
            "seconds": time.perf_counter() - t}
