"""Parameter sweeps: how many cells of each dimension a retrieval returns as ``k`` or ``C2`` varies.

The live version of TopoRAG's Table 6 / Figure 3b. The question is encoded once and
passed as a vector, so a sweep of many retrievals never touches the encoder.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from ..retrieval import EmbeddedComplex, RetrievalSetting, retrieve
from ..retrieval.registry import K_PARAMS

COLUMNS = ["0-cells", "1-cells", "2-cells", "candidate 2-cells"]
DEFAULT_C2_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def _row(sub) -> list[int]:
    return [*sub.counts, len(sub.params.get("candidates2", []))]


def sweep_k(ecx: EmbeddedComplex, question, setting: RetrievalSetting | None = None,
            ks: Iterable[int] = range(6)) -> pd.DataFrame:
    """One retrieval per ``k`` (every k-like parameter = k, the other parameters as in ``setting``);
    columns ``k`` + :data:`COLUMNS`."""
    setting = setting or RetrievalSetting()
    others = {n: v for n, v in setting.params.items() if n not in K_PARAMS}
    q = ecx.question_vector(question)
    rows = [[k, *_row(retrieve(ecx, q, setting=RetrievalSetting.make(setting.method, k=k, **others)))] for k in ks]
    return pd.DataFrame(rows, columns=["k", *COLUMNS])


def sweep_c2(ecx: EmbeddedComplex, question, setting: RetrievalSetting | None = None,
             c2_values: Iterable[float] = DEFAULT_C2_VALUES) -> pd.DataFrame:
    """One retrieval per ``C2`` (a method without ``c2`` gives the same row each time); columns ``C2`` +
    :data:`COLUMNS`."""
    setting = setting or RetrievalSetting()
    q = ecx.question_vector(question)
    has_c2 = "c2" in setting.params
    rows = [[float(c), *_row(retrieve(ecx, q, setting=setting.replace(c2=float(c)) if has_c2 else setting))]
            for c in np.asarray(list(c2_values), dtype=float)]
    return pd.DataFrame(rows, columns=["C2", *COLUMNS])
