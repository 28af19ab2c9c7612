"""What one traversal did: its steps, every FGW call against epsilon, the path and the context.

:class:`TraversalResult` holds the path (original node ids per move), one :class:`Step` per
depth (children, scores, weights, threshold, kept / fused positions, graft candidates and the
grafted ones), one :class:`Evaluation` per FGW call, the selected nodes, the context text, the
final deformed graph and its FGW against the original, and timings; :meth:`TraversalResult.to_dict`
is the JSON form ``toporag docgraph retrieve --json`` prints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .build import LEVELS, DocGraph
from .fgw import FGWResult, GraphState


@dataclass
class Evaluation:
    """One FGW call of the traversal."""

    depth: int
    op: str  # "fuse" | "graft"
    size: int
    value: float
    ok: bool
    seconds: float


@dataclass
class Step:
    """What happened at one depth; node ids are *original* node ids (a state node = its members)."""

    depth: int
    at: list[int]
    children: list[list[int]]
    scores: list[float]
    weights: list[float]
    threshold: float
    kept: list[int]  # positions in `children`, best first
    fused: list[int]  # positions in `children` fused into the next node ([] when none)
    graft_candidates: list[list[int]]
    grafted: list[list[int]]
    graft_weights: list[float]
    next: list[int]
    candidates: int = 0
    mention_candidates: int = 0  # how many of `graft_candidates` (the first ones) come from named titles
    before: GraphState | None = field(default=None, repr=False)  # the graph this step started from
    u: int = 0  # index of the current node in `before`


@dataclass
class TraversalResult:
    """Path, fusions, grafts, every FGW value against epsilon, the final deformed graph."""

    question: str
    path: list[list[int]]
    steps: list[Step]
    evaluations: list[Evaluation]
    selected: np.ndarray
    context: str
    state: GraphState
    final_fgw: FGWResult | None
    epsilon: float
    timings: dict[str, float]
    base: GraphState | None = field(default=None, repr=False)

    @property
    def fgw_calls(self) -> int:
        return len(self.evaluations)

    def fusions(self) -> list[list[int]]:
        """Members (original ids) of every super-node the traversal made."""
        return [list(map(int, self.state.members[i])) for i in range(self.state.num_nodes)
                if len(self.state.members[i]) > 1]

    def grafts(self) -> list[dict[str, Any]]:
        return [{"depth": s.depth, "onto": s.next, "node": g, "weight": w}
                for s in self.steps for g, w in zip(s.grafted, s.graft_weights)]

    def to_dict(self, graph: DocGraph | None = None) -> dict[str, Any]:
        def label(ids: list[int]) -> Any:
            if graph is None:
                return ids
            return {"ids": ids, "level": LEVELS[int(graph.level[ids[0]])], "text": [graph.text[i][:80] for i in ids]}

        return {"question": self.question, "path": [label(p) for p in self.path], "fusions": self.fusions(),
                "grafts": self.grafts(), "epsilon": self.epsilon, "fgw_calls": self.fgw_calls,
                "fgw": [{"depth": e.depth, "op": e.op, "size": e.size, "value": e.value, "ok": e.ok,
                         "ms": 1000 * e.seconds} for e in self.evaluations],
                "final_fgw": None if self.final_fgw is None else self.final_fgw.value,
                "steps": [{"depth": s.depth, "at": s.at, "children": s.children, "scores": s.scores,
                           "weights": s.weights, "threshold": s.threshold, "kept": s.kept, "fused": s.fused,
                           "graft_candidates": s.graft_candidates, "grafted": s.grafted,
                           "graft_weights": s.graft_weights, "next": s.next} for s in self.steps],
                "selected": self.selected.tolist(), "context": self.context,
                "timings_ms": {k: 1000 * v for k, v in self.timings.items()}}
