"""Collating preprocessed examples into the model's batch (one place, shared by training, evaluation,
the graph-token arms and the alignment stage).

:func:`make_batch` turns ``B`` :class:`~toporag_core.tasks.prep.Example`\\ s into a
:class:`~toporag_core.model.QABatch`: the ``B`` subcomplexes collated into one
:class:`~toporag_core.nn.CellBatch` (cells of every example concatenated, with per-cell example indices),
the questions, contexts and (for training and scoring) answers as lists, and optionally the cached
frozen-part key/values of every example (``kv.get(ids)``, a :class:`~toporag_core.training.DiskKVShards`).
"""
from __future__ import annotations

from typing import Any

from ..model import QABatch
from ..nn import collate


def make_batch(examples: list[Any], with_answers: bool = True, use_graph: bool = True, kv: Any = None) -> QABatch:
    """Collate examples into a :class:`QABatch` (tensors on CPU); ``kv``: attach cached frozen parts."""
    return QABatch(cells=collate([e.tensors for e in examples]) if use_graph else None,
                   questions=[e.question for e in examples], contexts=[e.context for e in examples],
                   answers=[e.answer for e in examples] if with_answers else None,
                   kv=kv.get([e.id for e in examples]) if kv is not None else None)
