"""What every evaluation of the training loop measures on the validation split.

* :func:`validation_loss`: the mean answer loss (teacher-forced, the training objective) and, for a model with a
  closed ``answer_set``, the label-scoring accuracy; model selection (``TrainConfig.select``) reads them.
* :func:`token_spread`: how much the graph tokens differ across examples,
  ``||std_i G_i|| / ||mean_i G_i||`` over the flattened ``(T, H)`` tokens ``G_i``; 0 means every example gets
  the same tokens (a collapsed graph path; ``TrainConfig.min_token_spread`` stops such a run).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

from ..tasks.prep import Example
from ..tasks.batching import make_batch
from .kv_shards import DiskKVShards
from ..model import TopoRAGModel


@torch.no_grad()
def validation_loss(model: TopoRAGModel, examples: list[Example], batch_size: int = 16,
                    kv: DiskKVShards | None = None, accuracy: bool = True) -> tuple[float, float | None]:
    """``(mean answer loss, label-scoring accuracy or None)`` over ``examples``. Accuracy needs the
    model's ``answer_set``; a prediction is right when it equals the example's answer."""
    was = model.training
    model.eval()
    total, n, right = 0.0, 0, 0
    scoring = accuracy and bool(model.config.answer_set)
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        batch = make_batch(chunk, use_graph=model.config.use_graph, kv=kv).to(model.device)
        total += float(model(batch)) * len(chunk)
        n += len(chunk)
        if scoring:
            preds = model.answer(batch)
            right += sum(p["answer"].strip().lower() == e.answer.strip().lower() for p, e in zip(preds, chunk))
    model.train(was)
    return total / max(n, 1), (right / max(n, 1) if scoring else None)


@torch.no_grad()
def token_spread(model: TopoRAGModel, examples: Sequence[Example], batch_size: int = 16, limit: int = 64) -> float:
    """``||std_i G_i|| / ||mean_i G_i||`` of the graph tokens ``G_i`` (``(T, H)`` flattened) of up to ``limit``
    examples: 0 when every example gets the same tokens (an inert graph path)."""
    rows = []
    for i in range(0, min(limit, len(examples)), batch_size):
        chunk = list(examples[i:min(i + batch_size, limit)])
        cells = make_batch(chunk, with_answers=False).to(model.device).cells
        rows.append(model.graph_tokens(cells).float().flatten(1).cpu())
    g = torch.cat(rows)
    if g.shape[0] < 2:
        return math.nan
    return float(g.std(0).norm() / g.mean(0).norm().clamp(min=1e-12))
