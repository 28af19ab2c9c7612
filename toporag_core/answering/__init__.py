"""The one answering path: which model answers (:mod:`.route`) and how it answers (:mod:`.pipeline`).

Every surface (``toporag ask``, ``kg ask`` / ``kg eval``, ``toporag serve``, the Ask page,
evaluation) answers through :class:`~.pipeline.TopoRAGPipeline`: ``plan`` (retrieve, fit the
context to the token budget, decide label set / entity names / generation), ``decode`` (batched
over jobs), ``finish`` (the answer record with confidence and timings).

Layer: above the neural model and the task registry (routing reads the tasks' label sets),
below the systems that answer with it (hybrid, document graph, serve).
"""
from .pipeline import REPO_ROOT, DecodeJob, EncoderMismatch, TopoRAGPipeline

__all__ = ["REPO_ROOT", "DecodeJob", "EncoderMismatch", "TopoRAGPipeline"]
