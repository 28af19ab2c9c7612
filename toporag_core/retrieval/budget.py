"""Fit a textualized subcomplex into a token budget, keeping what matters most.

:func:`~toporag_core.retrieval.textualize.textualize` writes every retrieved cell; an LLM
with an input limit then sees only a prefix of it, and a prefix cut drops the 2-cells
section first (it comes last) and keeps whatever nodes happen to come first. This module
cuts by *prize* instead:

1. every retrieved 2-cell (best prize first): its line writes the whole closed loop, so it
   reads on its own;
2. the retrieved 0- and 1-cells by prize (best first; a 1-cell brings the node lines of its
   endpoints, since its line refers to them by local id);
3. the remaining retrieved 0- and 1-cells (Steiner connectors and boundary closure, prize 0)
   in their textualize order.

Units are added greedily in that order while the token count stays within ``budget``; a unit
that does not fit is skipped (a later, smaller one may still fit). The kept lines are then
written in textualize's own order with textualize's own local ids and 2-cell labels, so the
text is exactly a subset of the lines of :func:`textualize` (nothing is re-written).

The answering path (:meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.fit_context`) cuts every
context this way before the model sees it; the model's own prefix cut
(:meth:`~toporag_core.model.TopoRAGModel.context_ids`) is only a safety net that a fitted
context never reaches. :meth:`ContextFit.to_dict` is what answers carry (JSON: the core
service sends it too). Prepared training / evaluation data (``tasks/prep.py``) keeps its own
stored contexts.

Token counts: ``count(text) -> int`` (the LLM tokenizer's length without special tokens).
Each line is counted once (plus one for its newline); the final text is re-counted and, if
the tokenizer merged differently, the lowest-priority units are dropped until it fits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .result import Subcomplex
from .textualize import DEFAULT_TEXT, text_lines


@dataclass
class ContextFit:
    """A context cut to a token budget, and what was dropped (cell ids of the complex)."""

    text: str
    tokens: int
    full_tokens: int
    budget: int
    dropped_nodes: list[int] = field(default_factory=list)
    dropped_edges: list[int] = field(default_factory=list)
    dropped_cells2: list[int] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return bool(self.dropped_nodes or self.dropped_edges or self.dropped_cells2)

    def to_dict(self) -> dict:
        """JSON-able: token counts, budget, ``truncated``, the dropped cell ids and :meth:`summary`."""
        return {"full_tokens": int(self.full_tokens), "tokens": int(self.tokens), "budget": int(self.budget),
                "truncated": self.truncated, "dropped_nodes": list(self.dropped_nodes),
                "dropped_edges": list(self.dropped_edges), "dropped_cells2": list(self.dropped_cells2),
                "summary": self.summary()}

    def summary(self) -> str:
        """``"dropped 3 0-cells, 1 1-cell, 0 2-cells"`` (or ``"nothing dropped"``)."""
        if not self.truncated:
            return "nothing dropped"
        parts = [(len(self.dropped_nodes), "0-cell"), (len(self.dropped_edges), "1-cell"),
                 (len(self.dropped_cells2), "2-cell")]
        return "dropped " + ", ".join(f"{n} {w}{'' if n == 1 else 's'}" for n, w in parts)


def _line_layout(sub: Subcomplex, include_cells2: bool = True, fmt: str = DEFAULT_TEXT) -> tuple[list[str], dict]:
    """The lines of ``textualize(sub, include_cells2, fmt)`` and which cell each belongs to."""
    rows = text_lines(sub, include_cells2, fmt)
    return [t for t, _ in rows], {i: o for i, (_, o) in enumerate(rows) if o is not None}


def fit_context(sub: Subcomplex, budget: int, count: Callable[[str], int], include_cells2: bool = True,
                fmt: str = DEFAULT_TEXT) -> ContextFit:
    """``textualize(sub, include_cells2, fmt)`` cut to ``budget`` tokens by prize (see the module
    docstring); without ``include_cells2`` no 2-cell is written, so none counts as dropped."""
    lines, owner = _line_layout(sub, include_cells2, fmt)
    full = "\n".join(lines)
    full_tokens = int(count(full))
    budget = int(max(0, budget))
    if full_tokens <= budget:
        return ContextFit(full, full_tokens, full_tokens, budget)
    cx = sub.complex
    p0, p1, p2 = sub.prizes
    by_cell: dict = {}
    for i, c in owner.items():
        by_cell.setdefault(c, []).append(i)
    # priority units: each a list of cells (a 1-cell brings its endpoints)
    cells2 = sub.cells2 if include_cells2 else sub.cells2[:0]
    units: list[list[tuple]] = [[("f", int(f))] for f in cells2[np.argsort(-p2[cells2], kind="stable")].tolist()] \
        if cells2.size and p2.size else [[("f", int(f))] for f in cells2.tolist()]
    pr = [(float(p0[n]), 0, j, ("n", int(n))) for j, n in enumerate(sub.nodes.tolist())]
    pr += [(float(p1[e]), 1, j, ("e", int(e))) for j, e in enumerate(sub.edges.tolist())]
    prized = sorted([t for t in pr if t[0] > 0], key=lambda t: (-t[0], t[1], t[2]))
    rest = [t for t in pr if t[0] <= 0]
    for _, _, _, c in prized + rest:
        if c[0] == "e":
            u, v = cx.edges[c[1]].tolist()
            units.append([("n", u), ("n", v), c])
        else:
            units.append([c])
    header = [i for i in range(len(lines)) if i not in owner]
    line_cost = [int(count(t)) + 1 for t in lines]
    used = sum(line_cost[i] for i in header)
    kept: set = set()
    order: list[tuple] = []
    for unit in units:
        new = [c for c in unit if c not in kept]
        cost = sum(line_cost[i] for c in new for i in by_cell.get(c, []))
        if new and used + cost <= budget:
            kept.update(new)
            order.extend(new)
            used += cost

    def build(keep: set) -> str:
        return "\n".join(t for i, t in enumerate(lines) if i not in owner or owner[i] in keep)

    text = build(kept)
    tokens = int(count(text))
    while tokens > budget and order:  # the tokenizer merged across lines differently: drop the least important
        kept.discard(order.pop())
        text = build(kept)
        tokens = int(count(text))
    return ContextFit(text, tokens, full_tokens, budget,
                      dropped_nodes=[int(n) for n in sub.nodes.tolist() if ("n", n) not in kept],
                      dropped_edges=[int(e) for e in sub.edges.tolist() if ("e", e) not in kept],
                      dropped_cells2=[int(f) for f in cells2.tolist() if ("f", f) not in kept])


def prefix_cut(sub: Subcomplex, kept_text: str, kept_tokens: int, full_tokens: int,
               fmt: str = DEFAULT_TEXT) -> ContextFit:
    """What a *prefix* cut of ``textualize(sub)`` to ``kept_text`` dropped (how a model that simply
    truncates its input ids loses cells): a cell is dropped when none of its lines survives whole."""
    lines, owner = _line_layout(sub, fmt=fmt)
    n_whole = len(kept_text.split("\n")) - (0 if "\n".join(lines).startswith(kept_text + "\n") or
                                            kept_text == "\n".join(lines) else 1)
    surviving = {owner[i] for i in range(min(n_whole, len(lines))) if i in owner}
    return ContextFit(kept_text, int(kept_tokens), int(full_tokens), int(kept_tokens),
                      dropped_nodes=[int(n) for n in sub.nodes.tolist() if ("n", n) not in surviving],
                      dropped_edges=[int(e) for e in sub.edges.tolist() if ("e", e) not in surviving],
                      dropped_cells2=[int(f) for f in sub.cells2.tolist() if ("f", f) not in surviving])
