"""The LLM's input as the Ask page shows it: its parts in reading order, and the whole text.

An answer's prompt layout (``Answer.prompt``, from
:meth:`~toporag_core.answering.pipeline.TopoRAGPipeline`) names its text parts (chat prefix, context,
question, chat suffix) and says how many graph tokens the cell-complex encoder gave, where they sit
(``graph_position``: right after the chat prefix, the paper's prefix, or before the question), whether
the question is read before the context too (``question_first``) and whether the context was cut
(``context_cut`` by prize, ``context_truncated`` by prefix). :func:`prompt_layout_frame` is one row per
part; :func:`prompt_text` the whole input as one string, the soft tokens as ``<graph token x T>``.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

# where the soft prompt sits, per ``TopoRAGConfig.graph_position`` (index into the text parts below)
_SOFT_AT = {"prefix": 1, "before_question": 2}


def _prompt_parts(layout: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(part name, content, text as the LLM reads it)`` in reading order: chat prefix, (the
    question once more when ``question_first``), context, question, chat suffix, with the soft
    prompt where the model's ``graph_position`` puts it (the paper's prefix: right after the chat prefix)."""
    soft, soft_text = [], ""
    if layout.get("graph_tokens"):
        soft.append(f"{layout['graph_tokens']} graph token(s) from the cell-complex encoder")
        soft_text += f"<graph token x {layout['graph_tokens']}>"
    question = layout.get("question", "")
    parts = [("chat prefix", layout.get("prefix", ""), layout.get("prefix", "")),
             (context_part(layout), layout.get("context", ""), layout.get("context", "") + "\n"),
             ("question", question, question), ("chat suffix", layout.get("suffix", ""), layout.get("suffix", ""))]
    parts.insert(_SOFT_AT.get(layout.get("graph_position", "prefix"), 1),
                 ("soft prompt", " + ".join(soft) if soft else "(none: frozen LLM alone)", soft_text))
    if layout.get("question_first"):  # read before the context too, so the context is read knowing it
        at = next(i for i, p in enumerate(parts) if p[0].startswith("context"))
        parts.insert(at, ("question (read first)", question, question + "\n"))
    return parts


def prompt_layout_frame(layout: dict[str, Any]) -> pd.DataFrame:
    """The LLM input in reading order (:func:`_prompt_parts`), one row per part."""
    return pd.DataFrame([p[:2] for p in _prompt_parts(layout)], columns=["part", "content"])


def context_part(layout: dict[str, Any]) -> str:
    """The prompt layout's context row name: says whether and how the context was cut."""
    cut = layout.get("context_cut")
    if isinstance(cut, dict) and cut.get("truncated"):
        return f"context (cut by prize to {cut['budget']} tokens: {cut['summary']})"
    return "context (cut by prefix to the token budget)" if layout.get("context_truncated") else "context"


def prompt_text(layout: dict[str, Any]) -> str:
    """The whole input as one string in reading order, soft tokens shown as ``<graph token x T>``
    placeholders where the layout puts them."""
    return "".join(p[2] for p in _prompt_parts(layout))
