"""Retrieval-lab support: one lab run, tables of its results (labels from the method registry), two
retrievals compared cell by cell (:func:`membership`, :func:`compare_marks`), why the C2 slider does
or does not change the retrieval at the current setting (:func:`c2_effect`), and the text the LLM reads
of a retrieval in each registered text format (:func:`text_formats`, :func:`context_text`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..retrieval import TEXT_FORMATS, EmbeddedComplex, RetrievalSetting, Subcomplex, method_label, retrieve, textualize


def run(ecx: EmbeddedComplex, question: str, setting: RetrievalSetting) -> Subcomplex:
    """One retrieval with the lab's setting (the question vector comes from the cached encoder)."""
    if not question.strip():
        raise ValueError("type a question first")
    return retrieve(ecx, question, setting=setting)


def text_formats() -> tuple[str, ...]:
    """The registered text formats (``TEXT_FORMATS``, read on every call), in registry order."""
    return tuple(TEXT_FORMATS)


def context_text(sub: Subcomplex, fmt: str) -> str:
    """Exactly the text the LLM reads of ``sub`` in text format ``fmt`` (:func:`~toporag_core.retrieval.textualize`)."""
    return textualize(sub, fmt=fmt)


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


# ------------------------------------------------------------------------------------------ comparing two methods
COMPARE_COLOURS = {"only A": "#4e79a7", "only B": "#f28e2b", "both": "#59a14f"}
COMPARE_RGB = {"only A": "78, 121, 167", "only B": "242, 142, 43", "both": "89, 161, 79"}


def membership(a: Subcomplex, b: Subcomplex) -> dict[int, dict[str, list[int]]]:
    """``{rank: {"only A": ids, "only B": ids, "both": ids}}`` for the 0-, 1- and 2-cells of two retrievals."""
    out = {}
    for r, (x, y) in enumerate(((a.nodes, b.nodes), (a.edges, b.edges), (a.cells2, b.cells2))):
        sx, sy = set(np.asarray(x).tolist()), set(np.asarray(y).tolist())
        out[r] = {"only A": sorted(sx - sy), "only B": sorted(sy - sx), "both": sorted(sx & sy)}
    return out


def compare_marks(a: Subcomplex, b: Subcomplex, name_a: str, name_b: str) -> dict:
    """What :func:`~toporag_core.studio.graph_view.render_view` needs to draw two retrievals in one view:
    ``node_marks``, ``edge_marks``, ``cells2`` (to fill) and ``cell_rgb``, coloured by :data:`COMPARE_COLOURS`."""
    mem = membership(a, b)
    words = {"only A": f"only {name_a}", "only B": f"only {name_b}", "both": "both methods"}
    nodes = {i: (COMPARE_COLOURS[k], f"retrieved by {words[k]}") for k, ids in mem[0].items() for i in ids}
    edges = {e: (COMPARE_COLOURS[k], 4.0, f"retrieved by {words[k]}") for k, ids in mem[1].items() for e in ids}
    cells = {f: COMPARE_RGB[k] for k, ids in mem[2].items() for f in ids}
    return {"node_marks": nodes, "edge_marks": edges, "cells2": sorted(cells), "cell_rgb": cells}


def membership_frame(a: Subcomplex, b: Subcomplex, name_a: str, name_b: str) -> pd.DataFrame:
    """Cells per rank only in A, only in B and in both, with their ids."""
    mem = membership(a, b)
    rows = []
    for r, prefix in enumerate("vec"):
        row = {"cells": f"{r}-cells"}
        for k, label in (("only A", f"only {method_label(name_a)}"), ("only B", f"only {method_label(name_b)}"),
                         ("both", "both")):
            ids = mem[r][k]
            row[label] = f"{len(ids)}: " + ", ".join(f"{prefix}{i}" for i in ids[:12]) + \
                (" ..." if len(ids) > 12 else "") if ids else "0"
        rows.append(row)
    return pd.DataFrame(rows)


def compare_legend_html(name_a: str, name_b: str) -> str:
    """The compare view's colour legend (method labels escaped)."""
    import html

    items = [(COMPARE_COLOURS["only A"], f"only {method_label(name_a)}"),
             (COMPARE_COLOURS["only B"], f"only {method_label(name_b)}"), (COMPARE_COLOURS["both"], "both")]
    chips = "".join(f'<span style="display:inline-block;width:12px;height:12px;background:{c};border-radius:3px;'
                    f'margin:0 4px 0 12px;vertical-align:middle"></span>{html.escape(t)}' for c, t in items)
    return f'<div style="font-size:0.85rem;line-height:1.8">{chips}</div>'


# ------------------------------------------------------------------------------------------ when C2 does nothing
@dataclass
class C2Effect:
    """Where the C2 slider changes nothing around the current value: ``[lo, hi]`` (on the slider's grid) keeps
    the same candidate 2-cells; ``same_retrieval``: the retrieval at ``lo`` and ``hi`` equals the current one;
    ``note``: the reason in words."""

    lo: float
    hi: float
    candidates: list[int]
    same_retrieval: bool
    note: str


def c2_effect(ecx: EmbeddedComplex, question: str, setting: RetrievalSetting,
              grid: tuple[float, float, float] = (0.0, 3.0, 0.05)) -> C2Effect | None:
    """Why moving C2 around its current value does (or does not) change the retrieval, from the prizes the
    retrieval computes (:func:`~toporag_core.retrieval.toporag.cell_prizes`: a 2-cell's prize is its boundary
    prizes minus ``C2 x length``; the top ``k2`` with a positive prize are candidates). ``None`` for a method
    without ``k0, k1, k2, c2`` or an empty question."""
    from ..retrieval.toporag import cell_prizes

    p = setting.params
    if not question.strip() or not all(n in p for n in ("k0", "k1", "k2", "c2")):
        return None
    cx = ecx.complex
    s0, s1, _ = ecx.similarities(question)
    lo_g, hi_g, step = grid
    values = np.round(np.arange(lo_g, hi_g + step / 2, step), 10)
    c2 = float(p["c2"])
    k0, k1, k2 = int(p["k0"]), int(p["k1"]), int(p["k2"])
    cands = [tuple(cell_prizes(cx, s0, s1, k0, k1, k2, float(c)).candidates.tolist()) for c in values]
    now = tuple(cell_prizes(cx, s0, s1, k0, k1, k2, c2).candidates.tolist())
    at = int(np.abs(values - c2).argmin())
    i = j = at
    while i > 0 and cands[i - 1] == now:
        i -= 1
    while j < len(values) - 1 and cands[j + 1] == now:
        j += 1
    lo, hi = float(values[i]), float(values[j])
    base = retrieve(ecx, question, setting=setting)
    same = all(_same(base, retrieve(ecx, question, setting=setting.replace(c2=v))) for v in {lo, hi})
    prz = cell_prizes(cx, s0, s1, k0, k1, k2, c2)
    lens = cx.boundary_lengths()
    sums = np.asarray(prz.p2, dtype=float) + c2 * lens  # boundary prize sums
    ratio = np.where(lens > 0, sums / np.maximum(lens, 1), 0.0)  # a 2-cell's prize is positive below this C2
    if cx.num_cells2 == 0:
        note = "This complex has no 2-cell, so C2 (a cost on 2-cells) has nothing to act on."
    elif k2 == 0:
        note = "k2 = 0: no 2-cell can be a candidate, so C2 changes nothing."
    elif not now:
        best = int(np.argmax(ratio))
        note = (f"No 2-cell has a positive prize at C2 = {c2:g}: the best boundary prize per edge is "
                f"{ratio[best]:.3g} (2-cell c{best}), so C2 matters only below that.")
    else:
        positive = int((prz.p2 > 0).sum())
        names = ", ".join(f"c{f}" for f in now)
        why = (f"every 2-cell with a positive prize is a candidate ({positive} of them, k2 = {k2})" if positive <= k2
               else f"the same {len(now)} 2-cells stay the top k2 = {k2} by prize")
        nxt = [f"above C2 = {hi:g} {_change(cands[j + 1], now)}" if j < len(values) - 1 else "",
               f"below C2 = {lo:g} {_change(cands[i - 1], now)}" if i > 0 else ""]
        note = (f"C2 from {lo:g} to {hi:g} keeps the same candidate 2-cells ({names}): {why}"
                + "".join(f"; {t}" for t in nxt if t) + ".")
    if lo < hi:
        note += (" The retrieval is the same at both ends of that range." if same else
                 " The candidates stay, but their prizes still move the Steiner tree within that range.")
    return C2Effect(lo, hi, list(now), same, note)


def _change(other: tuple, now: tuple) -> str:
    gone, new = sorted(set(now) - set(other)), sorted(set(other) - set(now))
    parts = ([", ".join(f"c{f}" for f in gone) + (" drops out" if len(gone) == 1 else " drop out")] if gone else []) + \
        ([", ".join(f"c{f}" for f in new) + (" becomes a candidate" if len(new) == 1 else " become candidates")]
         if new else [])
    return " and ".join(parts) or "the order changes"


def _same(a: Subcomplex, b: Subcomplex) -> bool:
    return all(np.array_equal(np.sort(x), np.sort(y)) for x, y in ((a.nodes, b.nodes), (a.edges, b.edges),
                                                                  (a.cells2, b.cells2)))
