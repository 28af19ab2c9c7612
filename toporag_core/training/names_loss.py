"""Candidate-name loss: train the model's name likelihoods to pick the right entity among the retrieved ones.

The name reader (:func:`~toporag_core.model.decode.score_names`) answers an open knowledge-graph question with
the retrieved name the model finds likeliest, ``s_c = log p(name_c + <eos> | prompt)``. The answer loss trains
``p(answer | prompt)`` up, but never says that another retrieved name must be *less* likely: on two-hop
questions the model puts more likelihood on the bridge entity (one relation from the question's entity) than on
the answer behind it (docs/results/kg.md). This term is the listwise loss over one example's candidates
``C = G + N`` (``G`` the right names among them, at most :data:`MAX_GOLD`; ``N`` up to ``negatives`` other
names, sampled uniformly with a seeded generator):

    L_names = - log ( sum_{g in G} exp(s_g) / sum_{c in C} exp(s_c) ),

averaged over the examples whose candidates hold a right name (the others add nothing). The training loop adds
``names_weight x L_names`` to each micro-batch's answer loss (:class:`~toporag_core.training.config.TrainConfig`).

Candidates at training time are what the reader would see at answering time, read from the example alone: the
retrieved nodes' names (``Example.cells["nodes"]``) whose text is in the fitted context, without the names
the question itself contains (the topic entities the reader leaves out), machine identifiers and long
descriptions (:mod:`~toporag_core.retrieval.candidates`).

Shapes: one row per candidate, ``R = sum_b |C_b|`` rows in one pass of
:meth:`~toporag_core.model.TopoRAGModel.answer_token_nll` (the cached frozen part is shared by every row of
an example); ``s (R,)``; a group's loss is two ``logsumexp`` over its slice.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from ..retrieval.candidates import MAX_WORDS
from ..retrieval.mediators import is_machine_id
from ..retrieval.seeds import norm
from ..tasks.batching import make_batch
from ..tasks.prep import Example

MAX_GOLD = 2  # right names per example that enter the loss


def gold_names(ex: Example) -> set[str]:
    """The normalised right answers of ``ex`` (its ``label``: one answer or a list of them)."""
    label = ex.label if isinstance(ex.label, (list, tuple)) else [ex.label]
    return {norm(str(x)) for x in label if norm(str(x))}


def candidate_names(ex: Example) -> list[str]:
    """The retrieved names the reader could answer ``ex`` with (the module docstring), in retrieval order."""
    question, context = norm(ex.question), ex.context
    out, seen = [], set()
    for name in (ex.cells or {}).get("nodes") or []:
        name = str(name).strip()
        key = norm(name)
        if (not key or key in seen or is_machine_id(name) or len(key.split()) > MAX_WORDS or key in question
                or name not in context):
            continue
        seen.add(key)
        out.append(name)
    return out


def name_rows(examples: Sequence[Example], negatives: int, rng: np.random.Generator
              ) -> tuple[list[Example], list[tuple[int, int, int]]]:
    """``(rows, groups)``: one copy of an example per candidate name with that name as its answer, right names
    first; ``groups`` holds ``(first row, right names, names)`` per example that has a right candidate."""
    rows: list[Example] = []
    groups: list[tuple[int, int, int]] = []
    for ex in examples:
        names = candidate_names(ex)
        gold = gold_names(ex)
        right = [n for n in names if norm(n) in gold][:MAX_GOLD]
        wrong = [n for n in names if norm(n) not in gold]
        if not right or not wrong:
            continue
        pick = rng.choice(len(wrong), size=min(negatives, len(wrong)), replace=False)
        chosen = right + [wrong[i] for i in sorted(pick.tolist())]
        groups.append((len(rows), len(right), len(chosen)))
        rows += [replace(ex, answer=n) for n in chosen]
    return rows, groups


def group_loss(scores: Tensor, groups: Sequence[tuple[int, int, int]]) -> Tensor:
    """The mean over ``groups`` of ``-(logsumexp(s[right]) - logsumexp(s[all]))``; ``scores (R,)`` are the rows'
    log-likelihoods."""
    losses = [torch.logsumexp(scores[a:a + n], 0) - torch.logsumexp(scores[a:a + g], 0) for a, g, n in groups]
    return torch.stack(losses).mean()


def names_loss(model: Any, examples: Sequence[Example], negatives: int, rng: np.random.Generator,
               kv: Any = None) -> Tensor | None:
    """``L_names`` of ``examples`` (the module docstring), or ``None`` when none has a right and a wrong
    candidate. ``kv``: the training run's frozen-part cache (rows of one example share its entry)."""
    rows, groups = name_rows(examples, negatives, rng)
    if not groups:
        return None
    batch = make_batch(rows, use_graph=model.config.use_graph, kv=kv).to(model.device)
    ce, row, _ = model.answer_token_nll(batch)
    scores = -torch.zeros(len(rows), dtype=ce.dtype, device=ce.device).index_add_(0, row, ce)
    return group_loss(scores, groups)
