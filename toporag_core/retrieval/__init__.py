"""Retrieval: TopoRAG subcomplex retrieval, baselines, textualization."""
from .result import CLOSURE, ROLES, STEINER, TERMINAL, EmbeddedComplex, Subcomplex
from .api import METHODS, retrieve
from .textualize import cycle_text, textualize
from .toporag import cell2_prizes, rank_prizes, retrieve_subcomplex

__all__ = ["retrieve", "METHODS", "EmbeddedComplex", "Subcomplex", "retrieve_subcomplex", "rank_prizes", "cell2_prizes",
           "textualize", "cycle_text", "TERMINAL", "STEINER", "CLOSURE", "ROLES"]
