"""One entry point for every registered retrieval method.

``retrieve(ecx, question, "toporag", k0=3, c2=0.5)`` or ``retrieve(ecx, question, setting=s)``:
the method and its parameters are validated by :class:`~.registry.RetrievalSetting`
(unknown method or parameter, wrong type, out of range: ``ValueError`` naming it), then the
registered function runs. Cell methods return a :class:`~.result.Subcomplex`, node methods a
:class:`~toporag_core.topo.TopoRetrieval`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import methods as _builtin  # noqa: F401  (registers the built-in methods)
from .registry import RetrievalSetting
from .result import EmbeddedComplex


def retrieve(ecx: EmbeddedComplex, question: str | np.ndarray | None, method: str | None = None,
             setting: RetrievalSetting | None = None, **params: Any):
    """Retrieve with a registered method.

    Args:
        ecx: the embedded complex of the graph.
        question: the question text (encoded with ``ecx.encoder``) or its ``(d,)`` vector.
        method: a registered method name (default ``"toporag"``), or
        setting: a complete :class:`RetrievalSetting` (then ``method``/``params`` may only repeat it).
        **params: the method's own parameters (missing ones take their defaults).
    """
    if setting is None:
        setting = RetrievalSetting(method or "toporag", params)
    elif params or (method is not None and method != setting.method):
        setting = setting.replace(method, **params)
    spec = setting.spec
    if spec.dimension == "cells" and ecx.complex.num_nodes == 0:
        name = ecx.complex.graph.name
        raise ValueError(f"cannot retrieve from an empty graph (no nodes){f': {name}' if name else ''}")
    return spec.fn(ecx, question, **setting.params)
