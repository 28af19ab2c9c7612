"""One entry point for every retrieval method (same arguments, same result type)."""
from __future__ import annotations

import numpy as np

from .result import EmbeddedComplex, Subcomplex
from .toporag import retrieve_subcomplex

METHODS = ("toporag", "g-retriever", "shortest-path", "topk-triples")


def retrieve(ecx: EmbeddedComplex, question: str | np.ndarray, method: str = "toporag", k0: int = 3,
             k1: int = 3, k2: int = 3, c2: float = 0.5, edge_cost: float = 0.5) -> Subcomplex:
    """Retrieve a subcomplex with ``method`` (one of :data:`METHODS`)."""
    if method == "toporag":
        return retrieve_subcomplex(ecx, question, k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost)
    from . import baselines

    if method == "g-retriever":
        return baselines.g_retriever(ecx, question, k0=k0, k1=k1, edge_cost=edge_cost)
    if method == "shortest-path":
        return baselines.shortest_path(ecx, question, k0=k0, k1=k1)
    if method == "topk-triples":
        return baselines.topk_triples(ecx, question, k=max(k1, 1))
    raise ValueError(f"unknown retrieval method {method!r}; choose one of {', '.join(METHODS)}")
