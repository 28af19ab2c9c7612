"""What the training loop trains on, and in which order.

* Targets: an example's ``answer``; :func:`with_evidence_targets` turns yes/no answers into
  ``"<evidence>. Answer: <label>"`` for evidence-first training (the task's ``evidence`` hook).
* Graph-only rows: :func:`with_graph_only_rows` adds a seeded fraction of the training set again with the
  context removed (graph tokens + question), so an answer must be read from the graph tokens.
* Order: :func:`epoch_batches` derives epoch ``e``'s batches from ``randperm(seed + e)``, so a resumed run
  skips exactly the batches already done and sees the same data as an uninterrupted run. With ``bucket > 1``
  the batches are cut from length-sorted windows of ``bucket x batch_size`` shuffled examples (less padding,
  since :func:`~toporag_core.tasks.batching.make_batch` pads each batch to its own longest row), then
  shuffled. Under ``torchrun`` rank ``r`` of ``W`` takes ``batch[r::W]`` of the same global batches.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from ..tasks.prep import Example
from ..model import evidence_target

if TYPE_CHECKING:
    from .config import TrainConfig


def with_evidence_targets(examples: Sequence[Example], evidence: dict[str, str]) -> tuple[list[Example], int]:
    """Evidence-first targets (``answer_style="evidence"``): every example whose ``id`` has an
    evidence sentence trains on :func:`~toporag_core.model.evidence_target` (``"The metal cup is
    orange. Answer: no"``) instead of its bare answer; the others keep theirs. Returns the new
    list (the inputs are not changed) and how many examples got evidence."""
    out, n = [], 0
    for e in examples:
        ev = evidence.get(str(e.id))
        if ev:
            out.append(replace(e, answer=evidence_target(ev, e.answer)))
            n += 1
        else:
            out.append(e)
    return out, n


GRAPH_ONLY_SUFFIX = "#graph-only"


def with_graph_only_rows(examples: Sequence[Example], fraction: float, seed: int = 0) -> list[Example]:
    """``examples`` plus a seeded ``fraction`` of them again with an empty context and the id suffix
    :data:`GRAPH_ONLY_SUFFIX` (their own frozen-part cache): graph tokens + question, as the ``only`` arm
    of :mod:`~toporag_core.evaluation.arms` reads them."""
    k = int(round(fraction * len(examples)))
    if k <= 0:
        return list(examples)
    pick = np.random.default_rng(seed).choice(len(examples), size=k, replace=False)
    return list(examples) + [replace(examples[i], context="", id=f"{examples[i].id}{GRAPH_ONLY_SUFFIX}")
                             for i in sorted(pick.tolist())]


def epoch_batches(n: int, lengths: list[int], cfg: TrainConfig, epoch: int, rank: int = 0,
                  world: int = 1) -> list[list[int]]:
    """This rank's share of every batch (example indices) of epoch ``epoch``: THE data order.

    The global batches are the same in every process: ``randperm(seed + epoch)`` cut into
    ``cfg.batch_size`` slices (with ``bucket > 1``: cut from length-sorted windows of
    ``bucket x batch_size``, then the batches shuffled by the same generator). Rank ``r`` of
    ``world`` takes positions ``r, r + world, ...`` of each global batch, so the ranks' shares are
    disjoint and together exactly the one-process batch (a short last batch can leave a rank an
    empty share)."""
    g = torch.Generator().manual_seed(cfg.seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    bs = cfg.batch_size
    if cfg.bucket <= 1:
        batches = [order[i:i + bs] for i in range(0, n, bs)]
    else:
        batches = []
        win = bs * cfg.bucket
        for w in range(0, n, win):
            window = sorted(order[w:w + win], key=lambda i: lengths[i])
            batches += [window[i:i + bs] for i in range(0, len(window), bs)]
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[i] for i in perm]
    return [b[rank::world] for b in batches] if world > 1 else batches
