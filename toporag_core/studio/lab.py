"""Retrieval-lab support: one lab run, and tables of its results (labels from the method registry)."""
from __future__ import annotations

import pandas as pd

from ..retrieval import EmbeddedComplex, RetrievalSetting, Subcomplex, method_label, retrieve


def run(ecx: EmbeddedComplex, question: str, setting: RetrievalSetting) -> Subcomplex:
    """One retrieval with the lab's setting (the question vector comes from the cached encoder)."""
    if not question.strip():
        raise ValueError("type a question first")
    return retrieve(ecx, question, setting=setting)


def counts_frame(subs: dict[str, Subcomplex]) -> pd.DataFrame:
    """Cells per dimension and per role, one row per method."""
    rows = []
    for name, sub in subs.items():
        n, m, f = sub.counts
        roles = {r: int((sub.node_roles == r).sum() + (sub.edge_roles == r).sum())
                 for r in ("terminal", "steiner", "closure")}
        rows.append({"method": method_label(name), "0-cells": n, "1-cells": m, "2-cells": f,
                     "candidate 2-cells": len(sub.params.get("candidates2", [])),
                     "terminal 0/1-cells": roles["terminal"], "Steiner 0/1-cells": roles["steiner"],
                     "closure 0/1-cells": roles["closure"]})
    return pd.DataFrame(rows)


def timings_frame(subs: dict[str, Subcomplex]) -> pd.DataFrame:
    """Retrieval timings in milliseconds (as text), one row per method; stages a method lacks stay blank."""
    rows = [{"method": method_label(name), **{k: f"{v * 1000:.2f}" for k, v in sub.timings.items()}}
            for name, sub in subs.items()]
    return pd.DataFrame(rows).fillna("")
