"""Retrieval: the method registry and settings, TopoRAG subcomplex retrieval, baselines, textualization.

``retrieve(ecx, question, method, **params)`` runs any registered method
(:data:`METHODS`; add one with :func:`register_method`); :class:`RetrievalSetting` is a method
with its validated parameters, the one form a setting takes from a slider to ``retrieve``.
"""
from .result import CLOSURE, ROLES, STEINER, TERMINAL, EmbeddedComplex, Subcomplex
from .registry import (METHODS, Param, RetrievalMethod, RetrievalSetting, get_method, method_label, method_names,
                       register_method, unregister_method)
from .api import retrieve
from .methods import whole_subcomplex
from .textualize import TEXT_FORMATS, cycle_text, node_label, textualize
from .toporag import cell2_prizes, rank_prizes, retrieve_subcomplex

__all__ = ["retrieve", "METHODS", "Param", "RetrievalMethod", "RetrievalSetting", "register_method",
           "unregister_method", "get_method", "method_names", "method_label", "whole_subcomplex",
           "EmbeddedComplex", "Subcomplex", "retrieve_subcomplex", "rank_prizes", "cell2_prizes",
           "textualize", "TEXT_FORMATS", "cycle_text", "node_label", "TERMINAL", "STEINER", "CLOSURE", "ROLES"]
