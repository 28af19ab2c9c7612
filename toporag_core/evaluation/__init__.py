"""Evaluation: a checkpoint scored on a task's split, and the graph-token ablation arms.

* :mod:`.evaluate` - :func:`~.evaluate.evaluate`: retrieval, batched decoding and the task's
  metric over a split, one predictions record per question (read by ``toporag compare`` and the
  Error analysis page).
* :mod:`.arms` - the ablation arms (own, zeroed, permuted, mean, only graph tokens): the same
  questions answered with the graph tokens replaced, to measure what the graph path carries.

Layer: with training, above the answering path and the systems; only the app is above it.
"""
