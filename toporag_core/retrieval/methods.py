"""The built-in retrieval methods, registered once in :data:`~.registry.METHODS`.

Cell methods (``dimension="cells"``, return a :class:`~.result.Subcomplex`):

| name | label | parameters | what |
|---|---|---|---|
| ``toporag`` | TopoRAG (cell complex) | k0, k1, k2, c2, edge_cost | Algorithm 3: prizes, PCST, closure |
| ``toporag-seeded`` | TopoRAG, seeded | k0 ... match, lexical, synonyms | path prizes |
| ``g-retriever`` | G-Retriever PCST | k0, k1, edge_cost | G-Retriever's PCST on the original edges (PyG parity) |
| ``shortest-path`` | Shortest paths (w/o TSR) | k0, k1 | "w/o TSR": shortest paths joining top-k cells, no 2-cells |
| ``topk-triples`` | Top-k triples (KAPING) | k | top-k triples by cosine with the triple's cells (head, edge, tail) |
| ``whole`` | Whole graph (no retrieval) | - | every cell of the complex |

Node methods (``dimension="nodes"``, return a :class:`~toporag_core.topo.TopoRetrieval`):
``proximity`` and ``role`` (topology-aware node retrieval, Wang et al.) and their ``text`` and
``random`` baselines; parameters ``k`` (nodes) and ``target`` (a node index or text; without
it the node most similar to the question). Their per-graph indices are kept in
``ecx.cache`` so a second call only looks up.

The parameter ranges are the ones the CLI validates and the pages' sliders offer.
"""
from __future__ import annotations

import numpy as np

from ..topo.retriever import METHODS as NODE_METHODS
from ..topo.retriever import TopoNodeIndex, resolve_target, retrieve_nodes
from .baselines import g_retriever, shortest_path, topk_triples
from .registry import Param, RetrievalMethod, register_method
from .result import EmbeddedComplex, Subcomplex, make_subcomplex
from .scale import retrieve_local
from .seeded import retrieve_seeded
from .toporag import retrieve_subcomplex

K_MAX = 1000  # a generous bound: the CLI rejects a typo like --k 30000 rather than scoring every cell


def k_param(name: str, what: str, default: int = 3) -> Param:
    return Param(name, int, default, 0, K_MAX, f"top-k {what} get rank prizes k..1", ui=(0, 10, 1))


K0 = k_param("k0", "0-cells (nodes)")
K1 = k_param("k1", "1-cells (edges)")
K2 = Param("k2", int, 3, 0, K_MAX, "the top-k 2-cells with a positive prize are PCST candidates", ui=(0, 10, 1))
C2 = Param("c2", float, 0.5, 0.0, None, "2-cell prize = boundary prizes - c2 x boundary length", ui=(0.0, 3.0, 0.05))
EDGE_COST = Param("edge_cost", float, 0.5, 0.0, None, "cost of a 1-cell in the prize-collecting Steiner tree",
                  ui=(0.0, 2.0, 0.05))


def whole_subcomplex(ecx: EmbeddedComplex, question: str | np.ndarray | None = None) -> Subcomplex:
    """Every cell of the complex (no retrieval; the question is not used)."""
    cx = ecx.complex
    if cx.num_nodes == 0:
        raise ValueError("cannot retrieve from an empty graph (no nodes)")
    zeros = (np.zeros(cx.num_nodes), np.zeros(cx.num_edges), np.zeros(cx.num_cells2))
    return make_subcomplex(cx, np.arange(cx.num_nodes), np.arange(cx.num_edges), np.arange(cx.num_cells2),
                           zeros, "whole", {}, {"total": 0.0})


def node_index(ecx: EmbeddedComplex, method: str, K: int) -> TopoNodeIndex:
    """The topology-aware node index of ``ecx``'s graph, built once per (method, K) and kept in ``ecx.cache``."""
    key = ("topo-index", method, K)
    if key not in ecx.cache:
        ecx.cache[key] = TopoNodeIndex.build(ecx.complex.graph, method=method, K=K, encoder=ecx.encoder)
    return ecx.cache[key]


def _node_method(method: str):
    def run(ecx: EmbeddedComplex, question: str | np.ndarray | None = None, k: int = 5, target: str | None = None):
        graph = ecx.complex.graph
        if graph.num_nodes == 0:
            raise ValueError("cannot retrieve from an empty graph (no nodes)")
        node = resolve_target(graph, target) if target not in (None, "") else None
        if node is None and not (isinstance(question, str) and question.strip()):
            raise ValueError(f"method {method!r} needs a target node (index or text) or a question")
        index = node_index(ecx, method, max(k, 1))
        return retrieve_nodes(index, target=node, question=question if node is None else None,
                              encoder=ecx.encoder, k=k)
    run.__name__ = f"retrieve_{method}"
    run.__doc__ = f"Topology-aware node retrieval by {method} similarity to a target node."
    return run


NODE_LABELS = {"proximity": "Topology: proximity", "role": "Topology: role",
               "text": "Baseline: text similarity", "random": "Baseline: random"}
NODE_HELP = {"proximity": "nodes closest to the target in random-walk proximity",
             "role": "nodes whose structural role (GraphWave) is most like the target's",
             "text": "nodes whose text embedding is closest to the target's", "random": "random nodes (seeded)"}


def register_builtin_methods() -> None:
    """(Re-)register the built-in methods (idempotent)."""
    register_method(RetrievalMethod(
        "toporag", "TopoRAG (cell complex)", "cells", (K0, K1, K2, C2, EDGE_COST), retrieve_subcomplex,
        "rank prizes on 0/1-cells, 2-cell prizes, one PCST, boundary closure"))
    register_method(RetrievalMethod(
        "toporag-seeded", "TopoRAG, seeded by the question's entities", "cells",
        (k_param("k0", "0-cells (nodes) by path score", 10), k_param("k1", "1-cells (edges) by path score", 10),
         K2, C2, EDGE_COST,
         Param("hops", int, 2, 0, 6, "how many relations a path from a named entity may follow", ui=(0, 4, 1),
               advanced=True),
         Param("tau", float, 0.1, 0.001, 10.0, "temperature of relation relevance: a relation whose cosine is "
               "tau below the best one costs one unit of log score", ui=(0.01, 0.5, 0.01), advanced=True),
         Param("hop_cost", float, 0.5, 0.0, 10.0, "log-score cost of each hop, so nearer nodes win ties",
               ui=(0.0, 2.0, 0.05), advanced=True),
         Param("match", float, 1.0, 0.0, 10.0, "weight of the whole relation path's match with the question in "
               "the ranking (1: as much as one relation's), so the end of a path can outrank its bridge",
               ui=(0.0, 4.0, 0.25), advanced=True),
         Param("lexical", float, 0.4, 0.0, 1.0, "cosine added to a relation and to a relation path for each "
               "question word its words name ('writers' for written by, 'born' for place of birth)",
               ui=(0.0, 0.5, 0.05), advanced=True),
         Param("synonyms", bool, True, help="with lexical: a question word also names a relation word of its "
               "synonym group ('appeared' for starred, 'kind' for genre, 'screenwriter' for written)",
               advanced=True),
         Param("seeds", str, None, help="seed entities: node names or ids separated by '|' (default: the nodes the "
                                        "question names)", widget=False, advanced=True)),
        retrieve_seeded, "rank prizes by relation paths from the entities the question names (bridge entities "
        "and the answers behind them), then the paper's 2-cell prizes, one PCST, boundary closure"))
    register_method(RetrievalMethod(
        "g-retriever", "G-Retriever PCST", "cells", (K0, K1, EDGE_COST), g_retriever,
        "G-Retriever's PCST on the original edges, no 2-cells"))
    register_method(RetrievalMethod(
        "shortest-path", "Shortest paths (w/o TSR)", "cells", (K0, K1), shortest_path,
        "the paper's w/o TSR ablation: shortest paths joining the top-k cells, 2-cells removed"))
    register_method(RetrievalMethod(
        "topk-triples", "Top-k triples (KAPING)", "cells",
        (Param("k", int, 3, 0, K_MAX, "number of triples", ui=(0, 10, 1)),),
        topk_triples, "the top-k triples (head, relation, tail) by cosine with the mean of their cells' "
        "embeddings; not necessarily connected"))
    register_method(RetrievalMethod(
        "whole", "Whole graph (no retrieval)", "cells", (), whole_subcomplex, "every cell of the complex"))
    register_method(RetrievalMethod(  # large graphs: index top-k + PCST on a hop neighbourhood (retrieval/scale.py)
        "toporag-local", "TopoRAG, indexed + local PCST (large graphs)", "cells",
        (K0, K1, K2, C2, EDGE_COST,
         Param("hops", int, 3, 0, 50, "PCST neighbourhood radius around the terminals (1-skeleton hops)"),
         Param("max_hops", int, 4, 0, 50, "largest radius (grown by one while the tree reaches the outermost hop)"),
         Param("index", str, "auto", help="auto | exact | flat | ivf (auto: exact path below 20k nodes, else flat)",
               widget=False)), retrieve_local, "TopoRAG with top-k cells from an index and the PCST on the "
        "hop neighbourhood of the terminals; equals toporag where that neighbourhood holds its answer"))
    for m in NODE_METHODS:
        register_method(RetrievalMethod(
            m, NODE_LABELS.get(m, m), "nodes",
            (Param("k", int, 5, 1, K_MAX, "number of nodes to retrieve", ui=(1, 20, 1)),
             Param("target", str, None, help="target node (index or text); default: the node most similar to "
                                             "the question", widget=False)),
            _node_method(m), NODE_HELP.get(m, "")))


register_builtin_methods()
