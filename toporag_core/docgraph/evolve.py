"""Edge evolution across questions: existence weights ``p`` learn which edges questions use.

After a question ``q`` has been traversed, the **candidate edges** are the graph's edges
with one end on the visited region (path, fused and grafted nodes) and the other among
the nodes the traversal scored (the children it looked at, and the visited nodes).
Each candidate edge ``e = (u, v)`` gets a similarity ``r_e = (cos(q, x_u) + cos(q, x_v)) / 2``,
z-scored over the candidates: ``z_e = (r_e - mean r) / std r`` (all zero when ``std = 0``).

Actions ``a (E_c,)`` (the source's eta, delta, gamma are ``z_margin``, ``z_cut``,
``neg_share`` here, to keep them apart from the traversal's symbols):

* positive pool ``P = {e : z_e + z_margin > 0}``:
  ``a_e = (1 - neg_share) R softmax_P(max(0, z_e + z_margin) / temp_pos)``;
* negative pool ``N = {e : z_e < -z_cut}``: ``a_e = -neg_share R softmax_N(-z_e / temp_neg)``;
* so ``sum_P a = (1 - neg_share) R`` and ``sum_N a = -neg_share R`` whenever the pool is not
  empty (the pools are disjoint when ``z_cut >= z_margin``; otherwise an edge in both keeps
  only its positive action);
* update ``p <- clip(p + lr * a, 0, 1)``.

Defaults: ``R = 1``, ``lr = 0.5``, ``temp_pos = temp_neg = 1``, ``z_margin = 0.5``,
``z_cut = 1``, ``neg_share = 0.2``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .build import DocGraph
from .traverse import TraversalResult


@dataclass
class EvolutionConfig:
    """Settings of :func:`evolve` (see the module docstring)."""

    reward: float = 1.0
    lr: float = 0.5
    temp_pos: float = 1.0
    temp_neg: float = 1.0
    z_margin: float = 0.5
    z_cut: float = 1.0
    neg_share: float = 0.2

    def __post_init__(self) -> None:
        for name in ("reward", "lr", "temp_pos", "temp_neg", "z_cut"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"EvolutionConfig.{name} must be > 0, got {getattr(self, name)}")
        if not 0.0 <= float(self.neg_share) <= 1.0:
            raise ValueError(f"EvolutionConfig.neg_share must be in [0, 1], got {self.neg_share}")


def _softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max())
    return e / e.sum()


def edge_actions(sim: np.ndarray, config: EvolutionConfig | None = None) -> np.ndarray:
    """``a (E_c,)`` from the candidate edges' similarities ``sim (E_c,)``."""
    cfg = config or EvolutionConfig()
    sim = np.asarray(sim, np.float64)
    a = np.zeros(sim.size)
    if sim.size == 0:
        return a
    sd = sim.std()
    z = (sim - sim.mean()) / sd if sd > 1e-12 else np.zeros(sim.size)
    pos = z + cfg.z_margin > 0
    neg = (z < -cfg.z_cut) & ~pos
    if pos.any():
        a[pos] = (1.0 - cfg.neg_share) * cfg.reward * _softmax(np.maximum(0.0, z[pos] + cfg.z_margin) / cfg.temp_pos)
    if neg.any():
        a[neg] = -cfg.neg_share * cfg.reward * _softmax(-z[neg] / cfg.temp_neg)
    return a


def candidate_edges(graph: DocGraph, result: TraversalResult) -> np.ndarray:
    """Indices of the graph's edges touched by the traversal (see the module docstring)."""
    visited = np.unique(np.concatenate([np.asarray(p, np.int64) for p in result.path]
                                       + [np.asarray(g, np.int64) for s in result.steps for g in s.grafted]))
    seen = np.unique(np.concatenate([visited] + [np.asarray(c, np.int64) for s in result.steps for c in s.children]))
    a, b = graph.edges
    on_a, on_b = np.isin(a, visited), np.isin(b, visited)
    touched = (on_a & np.isin(b, seen)) | (on_b & np.isin(a, seen))
    return np.flatnonzero(touched)


def evolve(graph: DocGraph, result: TraversalResult, qvec: np.ndarray,
           config: EvolutionConfig | None = None) -> dict[str, np.ndarray]:
    """Update ``graph.p`` in place after one question; returns ``{"edges", "actions", "before", "after"}``."""
    cfg = config or EvolutionConfig()
    idx = candidate_edges(graph, result)
    q = np.asarray(qvec, np.float64)
    s = graph.x.astype(np.float64) @ q
    sim = (s[graph.edges[0, idx]] + s[graph.edges[1, idx]]) / 2.0
    act = edge_actions(sim, cfg)
    before = graph.p[idx].copy()
    graph.p[idx] = np.clip(graph.p[idx] + cfg.lr * act, 0.0, 1.0)
    return {"edges": idx, "actions": act, "before": before, "after": graph.p[idx].copy()}
