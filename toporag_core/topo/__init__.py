"""Topology-aware node retrieval (Wang et al.): proximity and role similarity of nodes,
a top-K node retriever with text and random baselines, and the topology-text analysis.

* :mod:`.proximity`: ``P = sum_k alpha_k (D^-1 A)^k R`` random-projection embeddings.
* :mod:`.role`: GraphWave structural-role embeddings (exact or Chebyshev heat wavelets).
* :mod:`.retriever`: :class:`TopoNodeIndex`, :func:`retrieve_nodes`, :func:`build_topo_prompt`.
* :mod:`.correlation`: text-vs-topology correlation and the text-similarity-by-hop curve.
"""
from .correlation import UNREACHABLE, sample_pairs, text_similarity_by_distance, topology_text_correlation
from .proximity import cosine_rows, graph_adjacency, proximity_embedding
from .retriever import (METHODS, TopoNodeIndex, TopoRetrieval, build_topo_prompt, resolve_target, retrieve_for_cli,
                        retrieve_nodes)
from .role import graphwave_scales, role_embedding, role_similarity

__all__ = ["proximity_embedding", "graph_adjacency", "cosine_rows", "role_embedding", "role_similarity",
           "graphwave_scales", "TopoNodeIndex", "TopoRetrieval", "retrieve_nodes", "build_topo_prompt",
           "resolve_target", "retrieve_for_cli", "METHODS", "topology_text_correlation",
           "text_similarity_by_distance", "sample_pairs", "UNREACHABLE"]
