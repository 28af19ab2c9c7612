"""Fused Gromov-Wasserstein distance between a document graph and a deformed copy of it.

**Graph state.** A :class:`GraphState` is the graph as FGW sees it: ``m`` nodes with
features ``x (m, d)`` (unit rows), masses ``mass (m,)`` summing to 1, edges ``(2, E)``
with kinds and existence weights, and ``assign (n,)``: which state node holds each of
the ``n`` original nodes (identity for the original, many-to-one after fusions).

**Dissimilarity** of nodes ``u, v``: ``d_uv = exp(dissim_power * (1 - cos_uv))``
(``dissim_power`` is the source's ``p``, default 1).

**Structure matrix** ``D (m, m)``:

* ``structure="paths"`` (default): shortest-path lengths over the edges with ``p > 0``
  (undirected), each edge of length ``d_uv``; divided by ``scale``, the largest finite
  distance of the *original* graph, so both graphs share one unit; pairs that are not
  connected get ``max(1, largest finite)``;
* ``structure="embedding"`` (the literal reading): ``D_uv = d_uv / scale`` for every pair,
  zero diagonal. It depends on the features only, so grafting (adding edges) changes
  nothing under it.

**FGW** between the original ``G1`` (``n`` nodes, masses ``mu``) and ``G2`` (``m`` nodes,
masses ``nu``), over couplings ``T (n, m) >= 0`` with ``T 1 = mu``, ``T^T 1 = nu``::

    FGW = min_T  a * sum_ij C_ij T_ij  +  (1 - a) * sum_ijkl |D1_ik - D2_jl|^2 T_ij T_kl,
    C_ij = ||x1_i - x2_j||^2,   a = feature_weight (alpha here, default 0.5).

Solved by POT's ``ot.gromov.fused_gromov_wasserstein2`` (conditional gradient). POT's
``alpha`` weights the *structure* term, so we pass ``alpha_POT = 1 - feature_weight``.
With ``feature_weight = 1`` the value is the exact ``ot.emd2(mu, nu, C)``.

**Node masses** (``node_mass``): ``"fused"`` (default) gives every original node ``1/n``
and a fused node ``|S|/n``; then the **natural coupling** ``T_nat[i, assign[i]] = mu_i``
is feasible and is the solver's starting point, so the returned value is never above
``cost(T_nat)``, and ``FGW(G, G) = 0`` exactly. ``"uniform"`` (the literal reading) gives
each state node ``1/m``; the natural coupling is then infeasible after a fusion and the
solver starts from ``mu nu^T``.

The square-loss quadratic term is evaluated without the ``(n, m, n, m)`` tensor:
``sum |D1_ik - D2_jl|^2 T_ij T_kl = mu^T D1^2 mu + nu^T D2^2 nu - 2 <D1 T D2^T, T>``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .build import DocGraph

STRUCTURES = ("paths", "embedding")
NODE_MASSES = ("fused", "uniform")


@dataclass
class FGWConfig:
    """Settings of the FGW comparison.
    ``toporag docgraph``'s options are made from the fields whose metadata carries a ``help``.

    Attributes:
        feature_weight: alpha of the source (weight of the feature term), in ``[0, 1]``.
        dissim_power: ``p`` in ``d_uv = exp(p (1 - cos))``, ``> 0``.
        structure: ``"paths"`` or ``"embedding"`` (see the module docstring).
        node_mass: ``"fused"`` or ``"uniform"``.
        max_iter: conditional-gradient iterations at most.
    """

    feature_weight: float = field(default=0.5, metadata={"help": "alpha: weight of the feature term"})
    dissim_power: float = 1.0
    structure: str = field(default="paths", metadata={"help": "structure matrix", "choices": STRUCTURES})
    node_mass: str = field(default="fused", metadata={"help": "node masses of FGW", "choices": NODE_MASSES})
    max_iter: int = 100

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.feature_weight) <= 1.0:
            raise ValueError(f"FGWConfig.feature_weight must be in [0, 1], got {self.feature_weight}")
        if not float(self.dissim_power) > 0:
            raise ValueError(f"FGWConfig.dissim_power must be > 0, got {self.dissim_power}")
        if self.structure not in STRUCTURES:
            raise ValueError(f"FGWConfig.structure must be one of {STRUCTURES}, got {self.structure!r}")
        if self.node_mass not in NODE_MASSES:
            raise ValueError(f"FGWConfig.node_mass must be one of {NODE_MASSES}, got {self.node_mass!r}")
        if int(self.max_iter) < 1:
            raise ValueError(f"FGWConfig.max_iter must be >= 1, got {self.max_iter}")


@dataclass
class GraphState:
    """A document graph, possibly deformed (fused nodes, grafted edges). See the module docstring."""

    assign: np.ndarray
    x: np.ndarray
    size: np.ndarray
    level: np.ndarray
    text: list[str]
    content: list[str]
    edges: np.ndarray
    edge_kind: np.ndarray
    p: np.ndarray
    members: list[np.ndarray] = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    def masses(self, node_mass: str = "fused") -> np.ndarray:
        """``(m,)`` node masses: ``|S| / n`` per node (``"fused"``) or ``1 / m`` (``"uniform"``)."""
        if node_mass == "uniform":
            return np.full(self.num_nodes, 1.0 / self.num_nodes)
        return self.size / self.size.sum()

    @classmethod
    def from_graph(cls, g: DocGraph) -> GraphState:
        n = g.num_nodes
        return cls(assign=np.arange(n), x=np.asarray(g.x, np.float32), size=np.ones(n), level=g.level.copy(),
                   text=list(g.text), content=list(g.content), edges=g.edges.copy(), edge_kind=g.edge_kind.copy(),
                   p=g.p.astype(np.float64).copy(), members=[np.array([i]) for i in range(n)])


def dissimilarity(xa: np.ndarray, xb: np.ndarray, power: float = 1.0) -> np.ndarray:
    """``exp(power * (1 - cos))`` between rows of ``xa (a, d)`` and ``xb (b, d)`` (unit rows)."""
    return np.exp(power * (1.0 - np.clip(np.asarray(xa, np.float64) @ np.asarray(xb, np.float64).T, -1.0, 1.0)))


def raw_structure(state: GraphState, config: FGWConfig) -> np.ndarray:
    """Unnormalised ``D (m, m)`` (shortest paths or pairwise dissimilarities)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    m = state.num_nodes
    if config.structure == "embedding":
        d = dissimilarity(state.x, state.x, config.dissim_power)
        np.fill_diagonal(d, 0.0)
        return d
    live = state.p > 0
    u, v = state.edges[0, live], state.edges[1, live]
    length = np.exp(config.dissim_power * (1.0 - np.clip(
        np.einsum("ij,ij->i", state.x[u].astype(np.float64), state.x[v].astype(np.float64)), -1.0, 1.0)))
    # parallel edges (e.g. tree + semantic between one pair after a fusion): keep the shortest
    key = np.minimum(u, v) * m + np.maximum(u, v)
    order = np.lexsort((length, key))
    key, length = key[order], length[order]
    first = np.ones(key.size, bool)
    first[1:] = key[1:] != key[:-1]
    a, b = key[first] // m, key[first] % m
    w = np.maximum(length[first], 1e-12)
    adj = csr_matrix((w, (a, b)), shape=(m, m))
    return shortest_path(adj, method="D", directed=False)


def structure_matrix(state: GraphState, config: FGWConfig, scale: float | None = None) -> tuple[np.ndarray, float]:
    """``(D normalised, scale used)``; ``scale=None`` takes this graph's largest finite value."""
    d = raw_structure(state, config)
    finite = np.isfinite(d)
    if scale is None:
        scale = float(d[finite].max()) if finite.any() else 1.0
        scale = scale if scale > 0 else 1.0
    d = np.where(finite, d / scale, np.nan)
    top = np.nanmax(d) if finite.any() else 1.0
    return np.where(finite, d, max(1.0, float(top))), scale


def feature_cost(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """``C (n, m)``, ``C_ij = ||x1_i - x2_j||^2``."""
    a, b = np.asarray(x1, np.float64), np.asarray(x2, np.float64)
    c = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.maximum(c, 0.0)


def natural_coupling(assign: np.ndarray, mu: np.ndarray, m: int) -> np.ndarray:
    """``T (n, m)`` with ``T[i, assign[i]] = mu_i``: every original node goes whole to the node holding it."""
    t = np.zeros((assign.size, m))
    t[np.arange(assign.size), assign] = mu
    return t


def fgw_cost(t: np.ndarray, c: np.ndarray, d1: np.ndarray, d2: np.ndarray, feature_weight: float) -> float:
    """The FGW objective of a coupling ``T`` (any feasible one), without the 4-index tensor."""
    mu, nu = t.sum(1), t.sum(0)
    quad = mu @ (d1 * d1) @ mu + nu @ (d2 * d2) @ nu - 2.0 * float(np.sum((d1 @ t @ d2.T) * t))
    return float(feature_weight * np.sum(c * t) + (1.0 - feature_weight) * max(quad, 0.0))


@dataclass
class FGWResult:
    """One FGW evaluation: ``value``, the optimal ``coupling (n, m)``, its marginals ``mu``/``nu``,
    ``natural_value`` (cost of the natural coupling, ``None`` when infeasible) and ``seconds``."""

    value: float
    coupling: np.ndarray
    mu: np.ndarray
    nu: np.ndarray
    natural_value: float | None
    seconds: float


def fgw(c: np.ndarray, d1: np.ndarray, d2: np.ndarray, mu: np.ndarray, nu: np.ndarray, feature_weight: float,
        t0: np.ndarray | None = None, max_iter: int = 100) -> tuple[float, np.ndarray]:
    """``(value, T)``: POT's FGW with ``alpha_POT = 1 - feature_weight``, started at ``t0``."""
    import ot

    if feature_weight >= 1.0:  # the feature-only limit: an exact OT problem
        t = ot.emd(mu, nu, c)
        return float(np.sum(c * t)), t
    _, log = ot.gromov.fused_gromov_wasserstein2(
        c, d1, d2, mu, nu, loss_fun="square_loss", alpha=1.0 - feature_weight, G0=t0, log=True,
        max_iter=max_iter, tol_rel=1e-9, tol_abs=1e-12)
    t = np.asarray(log["T"], np.float64)
    value = fgw_cost(t, c, d1, d2, feature_weight)
    return value, t


def fgw_between(orig: GraphState, d1: np.ndarray, other: GraphState, d2: np.ndarray,
                config: FGWConfig) -> FGWResult:
    """FGW between the original state (with its ``D1``) and a deformed one (``D2``)."""
    t_start = time.perf_counter()
    mu = orig.masses(config.node_mass)
    nu = other.masses(config.node_mass)
    c = feature_cost(orig.x, other.x)
    t_nat, nat_val = None, None
    if orig.num_nodes == orig.assign.size:  # orig is the undeformed graph: assign maps into `other`
        held = np.bincount(other.assign, weights=mu[orig.assign], minlength=other.num_nodes)
        if np.allclose(held, nu, atol=1e-12):
            t_nat = natural_coupling(other.assign, mu[orig.assign], other.num_nodes)
            nat_val = fgw_cost(t_nat, c, d1, d2, config.feature_weight)
    value, t = fgw(c, d1, d2, mu, nu, config.feature_weight, t_nat, config.max_iter)
    if nat_val is not None and value > nat_val:  # CG is a descent method; guard float noise
        value, t = nat_val, t_nat
    return FGWResult(value=value, coupling=t, mu=mu, nu=nu, natural_value=nat_val,
                     seconds=time.perf_counter() - t_start)
