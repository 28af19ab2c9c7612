"""How a graph view draws its cells: node colour and size, 1-cell colour and width, 2-cell fills.

:class:`ViewStyle` picks, for each node and 1-cell, a colour, a size (or width) and a tooltip note: by
retrieval role (with a subcomplex: terminals, Steiner connectors, boundary closure, with their prizes),
by mark (``node_marks``: the marked nodes in their colour, all others muted), else by focus (the picked
2-cells' boundaries, the focus 1-cells thickest); highlighted nodes go on top of any of these.
:func:`cells_payload` lists the 2-cells to paint as polygons (filled or shaded).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ...cells.complex import CellComplex
from .palette import (CELL_PALETTE, CELL_SHADE, EDGE_CHORD, EDGE_MUTED, EDGE_TREE, NODE_DEFAULT, NODE_FOCUS,
                      NODE_HIGHLIGHT, NODE_MUTED, ROLE_COLOURS)

@dataclass
class ViewStyle:
    """How nodes and edges are drawn: by retrieval role (with ``sub``), by mark (``node_marks``), else by
    focus; highlighted nodes on top of any of these."""

    sub: object
    marks: dict | None
    highlight: dict[int, str]
    node_role: dict
    edge_role: dict
    focus_nodes: set
    focus_edges: set  # the focus 1-cells (thickest)
    hot_edges: set  # the focus 1-cells and the focus 2-cells' boundaries
    p0: np.ndarray | None = None  # node and edge prizes (with ``sub``)
    p1: np.ndarray | None = None

    @classmethod
    def of(cls, cx: CellComplex, sub, node_marks, focus_cells2: list[int], focus_edges: np.ndarray,
           highlight: dict[int, str]) -> "ViewStyle":
        focus_nodes = set(np.concatenate([cx.cell2_nodes(f) for f in focus_cells2]).tolist()) if focus_cells2 \
            else set()
        hot = set(focus_edges.tolist())
        if focus_cells2:
            hot |= set(np.concatenate([cx.cell2_edges(f) for f in focus_cells2]).tolist())
        return cls(sub=sub, marks=dict(node_marks) if node_marks is not None and sub is None else None,
                   highlight=highlight, node_role=sub.role_of(0) if sub is not None else {},
                   edge_role=sub.role_of(1) if sub is not None else {}, focus_nodes=focus_nodes,
                   focus_edges=set(focus_edges.tolist()), hot_edges=hot,
                   p0=sub.prizes[0] if sub is not None else None, p1=sub.prizes[1] if sub is not None else None)

    def _node_colour(self, i: int, role, mark) -> tuple[str, str]:
        """Colour and tooltip note before highlighting."""
        if self.sub is not None:
            colour = ROLE_COLOURS[role] if role else NODE_MUTED
            return colour, f"role: {role or 'not retrieved'}; prize {self.p0[i]:g}"
        if self.marks is not None:
            return mark if mark else (NODE_MUTED, "")
        return (NODE_FOCUS if i in self.focus_nodes else NODE_DEFAULT), ""

    def node(self, i: int) -> tuple[str, float, str]:
        """``(colour, size, tooltip note)`` of node ``i``."""
        role = self.node_role.get(i)
        mark = self.marks.get(i) if self.marks is not None else None
        colour, extra = self._node_colour(i, role, mark)
        if i in self.highlight:
            colour = NODE_HIGHLIGHT
            extra = "; ".join(x for x in (self.highlight[i], extra) if x)
        # retrieved / picked cells stand out even when a big view is zoomed out to fit
        if role == "terminal" or i in self.focus_nodes or mark or i in self.highlight:
            size = 17
        elif role:
            size = 13
        else:
            size = 9 if self.sub is not None or self.marks is not None else 11
        return colour, size, extra

    def edge(self, e: int, a: int, b: int, tree: bool) -> tuple[str, float, str]:
        """``(colour, width, tooltip note)`` of the 1-cell ``e`` from ``a`` to ``b``."""
        if self.sub is not None:
            role = self.edge_role.get(e)
            extra = f"role: {role or 'not retrieved'}; prize {self.p1[e]:g}"
            return (ROLE_COLOURS[role] if role else EDGE_MUTED), (4 if role else 0.8), extra
        if self.marks is not None:  # edges between marked nodes keep their style, the rest fade
            both = a in self.marks and b in self.marks
            return ((EDGE_TREE if tree else EDGE_CHORD) if both else EDGE_MUTED), (2.5 if both else 0.8), ""
        hot = e in self.hot_edges
        colour = NODE_FOCUS if hot else (EDGE_TREE if tree else EDGE_CHORD)
        return colour, (5 if e in self.focus_edges else (3.5 if hot else 1.5)), ""


def cells_payload(cx: CellComplex, sub, focus_cells2: list[int], shade_cells2: list[int], in_view: np.ndarray,
                  cell_rgb: Mapping[int, str] | None = None
                  ) -> tuple[list[dict], list[int], list[int], dict[int, str]]:
    """The 2-cells to paint (filled: the focus and retrieved ones; shaded: the others asked for and the
    candidates not chosen) whose every vertex is in view: ``(payload, filled, shaded, {filled: stroke})``."""
    filled = list(focus_cells2)
    shaded = list(shade_cells2)
    if sub is not None:
        filled += sub.cells2.tolist()
        chosen = set(sub.cells2.tolist())
        shaded += [f for f in sub.params.get("candidates2", []) if f not in chosen]
    payload, kept_f, kept_o, colours = [], [], [], {}
    picked = list(dict.fromkeys(focus_cells2))
    many = len(picked) > 1
    for f, is_filled in [(f, True) for f in dict.fromkeys(filled)] + [(f, False) for f in shaded]:
        ids = cx.cell2_nodes(f)
        if not in_view[ids].all():  # a face with a vertex off screen would be drawn wrong
            continue
        (kept_f if is_filled else kept_o).append(int(f))
        fill, stroke = CELL_SHADE, None  # other cells are only shaded: an outline would sit on their edges
        if is_filled:
            # several picked / retrieved 2-cells: one colour each, so they can be told apart
            rgb = CELL_PALETTE[picked.index(f) % len(CELL_PALETTE)] if many and f in picked else CELL_PALETTE[0]
            rgb = (cell_rgb or {}).get(int(f), rgb)
            fill, stroke = f"rgba({rgb}, 0.28)", f"rgba({rgb}, 0.95)"
            colours[int(f)] = stroke
        payload.append({"nodes": ids.tolist(), "fill": fill, "stroke": stroke, "width": 2.5})
    return payload, kept_f, kept_o, colours
