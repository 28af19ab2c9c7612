"""Optional: cluster questions by the graphs they deform.

Each question's traversal leaves a deformed graph ``G_q`` (its fused nodes and grafted edges).
Two readings of "the graph a question deforms" (``region``):

* ``"graph"``: the whole deformed graph. The distance of two questions is ``FGW(G_a, G_b)``
  (same settings as the traversal; the solver starts from the composed natural coupling
  ``T_a^T diag(1 / mu) T_b`` when both graphs hold the original nodes in the ``"fused"`` mass
  mode, else from ``mu nu^T``). All questions must traverse *one* graph. Measured: on a graph
  of 24 questions' gold articles two comparison questions (each fusing two *different*
  documents) are farther apart than a comparison and a bridge question (0.0076 vs 0.0062 mean),
  so this reading does not recover the question type (adjusted Rand index 0.0).
* ``"visited"`` (default): the deformed graph restricted to the nodes the context comes from
  (path, fused super-nodes, grafted nodes; ``m_q`` nodes, edges among them, structure matrix
  normalised per graph, masses ``|S| / sum |S|``). This is the *shape* of the evidence a
  question gathered (one fused pair of articles for a comparison, a path with a grafted
  section of another article for a bridge question); the questions may come from different
  graphs. ``FGW`` is solved from ``mu nu^T``.

The ``(Q, Q)`` matrix is clustered by average-linkage agglomeration (``scipy.cluster.hierarchy``).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from .build import BuildConfig
from .fgw import FGWConfig, GraphState, feature_cost, fgw, natural_coupling, structure_matrix
from .traverse import TraversalConfig, TraversalResult


REGIONS = ("visited", "graph")


def visited_region(result: TraversalResult) -> GraphState:
    """The deformed graph restricted to the state nodes holding the context's selected nodes."""
    st = result.state
    keep = np.unique(st.assign[np.asarray(result.selected, np.int64)])
    new = np.full(st.num_nodes, -1, np.int64)
    new[keep] = np.arange(keep.size)
    inside = (new[st.edges[0]] >= 0) & (new[st.edges[1]] >= 0)
    return GraphState(assign=np.arange(keep.size), x=st.x[keep], size=st.size[keep], level=st.level[keep],
                      text=[st.text[i] for i in keep], content=[st.content[i] for i in keep],
                      edges=new[st.edges[:, inside]], edge_kind=st.edge_kind[inside], p=st.p[inside],
                      members=[st.members[i] for i in keep])


def question_distances(results: list[TraversalResult], config: FGWConfig | None = None,
                       region: str = "visited") -> np.ndarray:
    """``(Q, Q)`` symmetric FGW distances between the questions' deformed graphs (see the module docstring)."""
    cfg = config or FGWConfig()
    if region not in REGIONS:
        raise ValueError(f"region must be one of {REGIONS}, got {region!r}")
    if not results:
        return np.zeros((0, 0))
    if region == "visited":
        regs = [visited_region(r) for r in results]
        mats = [structure_matrix(g, cfg)[0] for g in regs]
        masses = [g.size / g.size.sum() for g in regs]
        q = len(results)
        out = np.zeros((q, q))
        for a in range(q):
            for b in range(a + 1, q):
                val, _ = fgw(feature_cost(regs[a].x, regs[b].x), mats[a], mats[b], masses[a], masses[b],
                             cfg.feature_weight, None, cfg.max_iter)
                out[a, b] = out[b, a] = max(val, 0.0)
        return out
    base: GraphState = results[0].base
    _, scale = structure_matrix(base, cfg)
    mats = [structure_matrix(r.state, cfg, scale)[0] for r in results]
    mu0 = base.masses(cfg.node_mass)
    q = len(results)
    out = np.zeros((q, q))
    for a in range(q):
        for b in range(a + 1, q):
            sa, sb = results[a].state, results[b].state
            ma, mb = sa.masses(cfg.node_mass), sb.masses(cfg.node_mass)
            t0 = None
            if cfg.node_mass == "fused":
                ta = natural_coupling(sa.assign, mu0, sa.num_nodes)
                tb = natural_coupling(sb.assign, mu0, sb.num_nodes)
                t0 = ta.T @ (tb / mu0[:, None])
            val, _ = fgw(feature_cost(sa.x, sb.x), mats[a], mats[b], ma, mb, cfg.feature_weight, t0, cfg.max_iter)
            out[a, b] = out[b, a] = val
    return out


def cluster_questions(results: list[TraversalResult], n_clusters: int = 2, config: FGWConfig | None = None,
                      region: str = "visited") -> tuple[np.ndarray, np.ndarray]:
    """``(labels (Q,), distances (Q, Q))``: average-linkage clusters of the questions."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if n_clusters < 1:
        raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
    d = question_distances(results, config, region)
    if len(results) < 2:
        return np.zeros(len(results), np.int64), d
    z = linkage(squareform(np.maximum(d, 0.0), checks=False), method="average")
    return fcluster(z, t=min(n_clusters, len(results)), criterion="maxclust").astype(np.int64) - 1, d


def cluster_records(records: list[dict], encoder, config: TraversalConfig | None = None,
                    build: BuildConfig | None = None, n_clusters: int = 2) -> dict[str, Any]:
    """Traverse each record's own graph, cluster the questions by FGW between their visited regions.

    Returns ``{"ids", "types", "labels", "distances" (Q, Q) list, "ari_vs_type" (adjusted Rand
    index of the labels against the records' ``type``, ``None`` without types), "seconds"}``.
    """
    from sklearn.metrics import adjusted_rand_score

    from .build import build_docgraph
    from .records import record_articles
    from .traverse import Traverser

    cfg = config or TraversalConfig()
    t = time.perf_counter()
    results = []
    for k, r in enumerate(records):
        g = build_docgraph(record_articles(r, where=f"record {k}"), encoder, build)
        results.append(Traverser(g, encoder, cfg).run(r["question"]))
    labels, d = cluster_questions(results, n_clusters, cfg.fgw, region="visited")
    types = [str(r.get("type", "")) for r in records]
    ari = float(adjusted_rand_score(types, labels)) if all(types) and len(records) > 1 else None
    return {"ids": [str(r.get("_id", k)) for k, r in enumerate(records)], "types": types,
            "labels": labels.tolist(), "distances": d.round(6).tolist(), "ari_vs_type": ari,
            "seconds": time.perf_counter() - t}
