"""Sidebar controls generated from the retrieval method registry (the lab and Ask pages share them).

:func:`setting_controls` draws one widget per parameter of the chosen methods, read from each
:class:`~toporag_core.retrieval.Param` (type, default, slider range ``ui``, help): the paper's
single ``k`` slider for every k-like parameter, an "advanced" switch for separate ``k0/k1/k2``,
then every other parameter once (shared by the methods that have it). It returns one
:class:`~toporag_core.retrieval.RetrievalSetting` per method, so a page never assembles
keyword dictionaries, and a newly registered method brings its own controls with it.

The registry look-ups the pages' selectors list from are here too: :func:`cell_methods` and
:func:`method_label` (the lab, Ask and Error-analysis method selectors), :func:`lifting_names` and
:func:`lifting_label` (the Home sidebar's lifting selector). Each reads its registry on every call, so
an entry registered after import is offered.
"""
from __future__ import annotations

from typing import Sequence

import streamlit as st

from ..cells.lift import LIFTING_SPECS
from ..cells.lift import lifting_names as _lifting_names
from ..retrieval import RetrievalSetting, get_method, method_names
from ..retrieval import method_label as _method_label
from ..retrieval.registry import K_PARAMS, Param, all_params

SEPARATE_K = ("k0", "k1", "k2")
LABELS = {"k0": "k0 (0-cells)", "k1": "k1 (1-cells)", "k2": "k2 (2-cells)",
          "c2": "C2 (cost per boundary edge of a 2-cell)", "edge_cost": "Edge cost"}


def cell_methods() -> list[str]:
    """The registered cell-complex retrieval methods, in registry order (the method selectors list these)."""
    return method_names("cells")


def method_label(method: str) -> str:
    """The label a method selector shows for a registered retrieval method (cell or node method)."""
    return _method_label(method)


def lifting_names() -> list[str]:
    """Every registered lifting (``LIFTING_SPECS``), the rings included: what the lifting selector lists."""
    return _lifting_names()


def lifting_label(name: str) -> str:
    """The label the lifting selector shows for a registered lifting."""
    return LIFTING_SPECS[name].label


def _widget(p: Param, key: str, value, disabled: bool):
    label = LABELS.get(p.name, p.name.replace("_", " "))
    if p.type is bool:
        return st.toggle(label, value=bool(value), key=key, help=p.help, disabled=disabled)
    if p.type is str:
        return st.text_input(label, value="" if value is None else str(value), key=key, help=p.help,
                             disabled=disabled) or None
    if p.ui is not None:
        lo, hi, step = p.ui
        cast = int if p.type is int else float
        value = min(max(cast(value), cast(lo)), cast(hi))
        return st.slider(label, cast(lo), cast(hi), value, cast(step), key=key, help=p.help, disabled=disabled)
    kw = {k: v for k, v in (("min_value", p.min), ("max_value", p.max)) if v is not None}
    if p.type is int:
        kw = {k: int(v) for k, v in kw.items()}
    return st.number_input(label, value=value, key=key, help=p.help, disabled=disabled, **kw)


def setting_controls(methods: Sequence[str], key: str, base: RetrievalSetting | None = None,
                     disabled: bool = False) -> dict[str, RetrievalSetting]:
    """Controls for the parameters of ``methods`` (cell methods) under widget keys ``<key>_<param>``;
    ``base``: the values to start from (e.g. a checkpoint's setting). Returns ``{method: setting}``."""
    params = [p for p in all_params(methods) if p.widget]
    start = dict(base.params) if base is not None else {}
    values: dict = {}
    ks = [p for p in params if p.name in K_PARAMS]
    if ks:
        k_start = start.get("k0", start.get("k", ks[0].default))
        ui = ks[0].ui or (0, 10, 1)
        k = st.slider("k (cells per dimension)", int(ui[0]), int(ui[1]), int(k_start), key=f"{key}_k",
                      disabled=disabled, help="Top-k 0-cells and 1-cells get rank prizes k..1; the top-k 2-cells "
                                              "are candidates (top-k triples: k triples).")
        values["k"] = k
        separate = [p for p in ks if p.name in SEPARATE_K]
        distinct = len({start.get(p.name) for p in separate if p.name in start}) > 1
        if separate and st.toggle("Advanced: separate k0, k1, k2", key=f"{key}_advanced", value=distinct,
                                  disabled=disabled):
            for p in separate:
                values[p.name] = _widget(p, f"{key}_{p.name}", start.get(p.name, k), disabled)
    for p in params:
        if p.name not in K_PARAMS:
            values[p.name] = _widget(p, f"{key}_{p.name}", start.get(p.name, p.default), disabled)
    k = values.pop("k", None)
    return {m: RetrievalSetting.make(m, k=k, **{n: v for n, v in values.items() if n in get_method(m).param_names})
            for m in methods}
