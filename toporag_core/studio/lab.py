"""Retrieval-lab support: the settings of one lab run, and tables of its results."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from ..retrieval import METHODS, EmbeddedComplex, Subcomplex, retrieve

METHOD_LABELS = {"toporag": "TopoRAG (cell complex)", "g-retriever": "G-Retriever PCST",
                 "shortest-path": "Shortest paths (w/o TSR)", "topk-triples": "Top-k triples (KAPING)"}


@dataclass(frozen=True)
class LabSettings:
    """Retrieval parameters as the lab's controls set them.

    ``k`` is the paper's single k for all dimensions; ``k0/k1/k2`` override it when not ``None``
    (the "advanced" switch).
    """

    k: int = 3
    c2: float = 0.5
    edge_cost: float = 0.5
    k0: int | None = None
    k1: int | None = None
    k2: int | None = None

    def ks(self) -> tuple[int, int, int]:
        return tuple(self.k if v is None else int(v) for v in (self.k0, self.k1, self.k2))  # type: ignore[return-value]

    def kwargs(self) -> dict:
        k0, k1, k2 = self.ks()
        return dict(k0=k0, k1=k1, k2=k2, c2=self.c2, edge_cost=self.edge_cost)

    def as_dict(self) -> dict:
        return asdict(self)


def run(ecx: EmbeddedComplex, question: str, method: str, settings: LabSettings) -> Subcomplex:
    """One retrieval with the lab's settings (the question vector comes from the cached encoder)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}")
    if not question.strip():
        raise ValueError("type a question first")
    return retrieve(ecx, question, method=method, **settings.kwargs())


def counts_frame(subs: dict[str, Subcomplex]) -> pd.DataFrame:
    """Cells per dimension and per role, one row per method."""
    rows = []
    for name, sub in subs.items():
        n, m, f = sub.counts
        roles = {r: int((sub.node_roles == r).sum() + (sub.edge_roles == r).sum())
                 for r in ("terminal", "steiner", "closure")}
        rows.append({"method": METHOD_LABELS.get(name, name), "0-cells": n, "1-cells": m, "2-cells": f,
                     "candidate 2-cells": len(sub.params.get("candidates2", [])),
                     "terminal 0/1-cells": roles["terminal"], "Steiner 0/1-cells": roles["steiner"],
                     "closure 0/1-cells": roles["closure"]})
    return pd.DataFrame(rows)


def timings_frame(subs: dict[str, Subcomplex]) -> pd.DataFrame:
    """Retrieval timings in milliseconds (as text), one row per method; stages a method lacks stay blank."""
    rows = [{"method": METHOD_LABELS.get(name, name), **{k: f"{v * 1000:.2f}" for k, v in sub.timings.items()}}
            for name, sub in subs.items()]
    return pd.DataFrame(rows).fillna("")
