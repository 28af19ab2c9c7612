"""Parameter sweeps: how many cells of each dimension a retrieval returns as ``k`` or ``C2`` varies.

The live version of TopoRAG's Table 6 / Figure 3b. The question is encoded once and
passed as a vector, so a sweep of many retrievals never touches the encoder.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from ..retrieval import EmbeddedComplex, retrieve

COLUMNS = ["0-cells", "1-cells", "2-cells", "candidate 2-cells"]
DEFAULT_C2_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def _row(sub) -> list[int]:
    return [*sub.counts, len(sub.params.get("candidates2", []))]


def sweep_k(ecx: EmbeddedComplex, question, method: str = "toporag", ks: Iterable[int] = range(6),
            c2: float = 0.5, edge_cost: float = 0.5) -> pd.DataFrame:
    """One retrieval per ``k`` (``k0 = k1 = k2 = k``); columns ``k`` + :data:`COLUMNS`."""
    q = ecx.question_vector(question)
    rows = [[k, *_row(retrieve(ecx, q, method=method, k0=k, k1=k, k2=k, c2=c2, edge_cost=edge_cost))] for k in ks]
    return pd.DataFrame(rows, columns=["k", *COLUMNS])


def sweep_c2(ecx: EmbeddedComplex, question, method: str = "toporag", c2_values: Iterable[float] = DEFAULT_C2_VALUES,
             k0: int = 3, k1: int = 3, k2: int = 3, edge_cost: float = 0.5) -> pd.DataFrame:
    """One retrieval per ``C2``; columns ``C2`` + :data:`COLUMNS`."""
    q = ecx.question_vector(question)
    rows = [[float(c), *_row(retrieve(ecx, q, method=method, k0=k0, k1=k1, k2=k2, c2=float(c), edge_cost=edge_cost))]
            for c in np.asarray(list(c2_values), dtype=float)]
    return pd.DataFrame(rows, columns=["C2", *COLUMNS])
