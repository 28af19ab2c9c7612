"""The frozen part's key/value cache (layout ``"before_question"``): the chat prefix and context are
read by the plain frozen LLM (LoRA off, no soft token before them), so their cache depends on nothing
trainable. Training computes it once per example (:func:`context_kv`, no grad) and reuses it every
epoch; only the tail (graph tokens, question, chat suffix, answer) runs with grad."""
from __future__ import annotations

import contextlib
from dataclasses import replace

import torch
from torch import Tensor

from .qa_batch import QABatch, left_pad


@contextlib.contextmanager
def adapters_off(model):
    """LoRA switched off on ``model`` (a :class:`~toporag_core.model.TopoRAGModel`; the frozen part is
    read by the plain LLM), back on afterwards."""
    if model.config.mode != "lora":
        yield
        return
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in model.llm.modules() if isinstance(m, BaseTunerLayer)]
    for m in layers:
        m.enable_adapters(False)
    try:
        yield
    finally:
        for m in layers:
            m.enable_adapters(True)


@torch.no_grad()
def context_kv(model, batch: QABatch) -> list[Tensor]:
    """The frozen part's key/value cache per example of ``batch``, ``(layers, 2, kv_heads, S_i, head_dim)``
    (``model``: a :class:`~toporag_core.model.TopoRAGModel` in the cacheable layout)."""
    if not model.cacheable:
        raise ValueError("context_kv() needs graph_position 'before_question' "
                         "(the prefix layout has no frozen part)")
    rows = [model.prompter.row(ctx, q)[0] for ctx, q in zip(batch.contexts, batch.questions)]
    ids, mask = left_pad(rows, model.pad_id, model.device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with adapters_off(model):
        out = model.llm.get_decoder()(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    layers = out.past_key_values.layers
    return [torch.stack([torch.stack([lay.keys[i, :, -len(r):], lay.values[i, :, -len(r):]]) for lay in layers])
            for i, r in enumerate(rows)]


def with_context_kv(model, batch: QABatch) -> QABatch:
    """``batch`` with its frozen-part caches computed once (:func:`context_kv`), for several passes over the
    same prompts (greedy generation, then scoring what was generated; the graph-token arms): each pass would
    otherwise read the chat prefix and context again. Rows with the same frozen part share one cache. The
    batch itself when the layout has no frozen part or its caches are already there."""
    if not model.cacheable or batch.kv is not None or len(batch) == 0:
        return batch
    rows = [tuple(model.prompter.row(ctx, q)[0]) for ctx, q in zip(batch.contexts, batch.questions)]
    first: dict[tuple[int, ...], int] = {}
    slot = [first.setdefault(r, len(first)) for r in rows]  # distinct frozen part of each row: 0, 1, ...
    kv = context_kv(model, batch.select([slot.index(s) for s in range(len(first))]))
    return replace(batch, kv=[kv[s] for s in slot])


def cache_from_kv(kvs: list[Tensor], dtype: torch.dtype, device: torch.device, llm_config):
    """A left-padded ``DynamicCache`` from per-example caches, and its attention mask ``(B, S)``: per
    layer one contiguous ``(B, kv_heads, S, head_dim)`` key and value tensor, zero where padded."""
    from transformers import DynamicCache

    n = [int(t.shape[3]) for t in kvs]
    length, (layers, _, heads, _, hd) = max(n), kvs[0].shape
    data = []
    for j in range(layers):
        k, v = (kvs[0].new_zeros((len(kvs), heads, length, hd), dtype=dtype) for _ in range(2))
        for i, t in enumerate(kvs):
            k[i, :, length - n[i]:] = t[j, 0]
            v[i, :, length - n[i]:] = t[j, 1]
        data.append((k, v))
    mask = torch.tensor([[0] * (length - k) + [1] * k for k in n], dtype=torch.long, device=device)
    return DynamicCache(ddp_cache_data=data, config=llm_config), mask


def frozen_cache(model, batch: QABatch, frozen_rows: list[list[int]]):
    """``(past, frozen mask (B, P))`` of ``batch``: ``batch.kv`` when precomputed (checked against
    ``frozen_rows``: a cache built for another layout or budget would silently mislead), else
    :func:`context_kv` without grad."""
    if batch.kv is None:
        return cache_from_kv(context_kv(model, batch), model.dtype, model.device, model.llm.config)
    bad = [i for i, (t, r) in enumerate(zip(batch.kv, frozen_rows)) if int(t.shape[3]) != len(r)]
    if bad:
        raise ValueError(f"cached key/value of batch row {bad[0]} has {int(batch.kv[bad[0]].shape[3])} positions, "
                         f"its frozen part {len(frozen_rows[bad[0]])} tokens: rebuild the KV cache")
    return cache_from_kv(batch.kv, model.dtype, model.device, model.llm.config)
