"""The graph view of a cell complex: :func:`render_view` builds it, :class:`GraphView` is what it holds.

What it draws:

* 0-cells as dots, 1-cells as lines: spanning-tree edges solid, non-tree edges (the chords that
  created the 2-cells) dashed;
* 2-cells as translucent polygons through their boundary nodes, painted under the graph;
* with a retrieval result, cells coloured by role (terminal, Steiner connector, boundary closure);
  retrieved 2-cells filled, candidate 2-cells that were not chosen shaded (:mod:`.style`).

The steps: the nodes in view and their positions (:mod:`.layout`), the label order (the nodes that
matter first; on small views, at most :data:`PAINT_ALL_NODES` nodes, every node and every 1-cell is
labelled, on denser views the other nodes follow best-connected first), the label boxes
(:mod:`.labels`), then the page (:mod:`.page`). The view's height is ``height_px``;
:attr:`GraphView.frame_height` is the iframe height that shows all of it (the page has no margins).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ...cells.complex import CellComplex
from .labels import LabelLayout, label_payloads
from .layout import DEFAULT_CAP, default_seeds, important_nodes, neighbourhood, spring_layout
from .page import add_edges, add_nodes, finish_html, network
from .style import ViewStyle, cells_payload

PAINT_ALL_NODES = 60
FRAME_MARGIN = 8   # px between the view's height and its iframe's (border, rounding)


@dataclass
class GraphView:
    """What one rendered view contains (for captions and tests)."""

    nodes: np.ndarray
    edges: np.ndarray
    cells2_filled: list[int]
    cells2_shaded: list[int]
    total_nodes: int
    cap: int
    html: str = field(repr=False, default="")
    height_px: int = 560
    labelled: list[int] = field(default_factory=list)  # nodes whose label is always painted
    cell_colours: dict[int, str] = field(default_factory=dict)  # filled 2-cell -> its stroke colour
    label_layout: "LabelLayout | None" = field(default=None, repr=False)  # where the painter draws labels
    label_nodes: list[int] = field(default_factory=list)  # nodes in label_layout.node_boxes' order
    label_edges: list[int] = field(default_factory=list)  # 1-cells in label_layout.edge_boxes' order

    @property
    def frame_height(self) -> int:
        """Height of an iframe that shows the whole view (the page itself has no margins)."""
        return int(self.height_px) + FRAME_MARGIN

    @property
    def capped(self) -> bool:
        return self.nodes.size < self.total_nodes

    def caption(self) -> str:
        if self.capped:
            return (f"Showing {self.nodes.size} of {self.total_nodes} nodes (cap {self.cap}): the neighbourhood "
                    "of the cells of interest, grown ring by ring. Raise the cap in the sidebar to see more.")
        return f"Showing all {self.total_nodes} nodes."


def _paint_order(cx: CellComplex, shown: np.ndarray, eids: np.ndarray, local: np.ndarray,
                 important: list[int]) -> tuple[list[int], bool]:
    """The nodes whose labels are placed, in placement order (``important`` first), and whether every
    node and 1-cell is labelled (a small view)."""
    important_set = set(important)
    paint_all = shown.size <= PAINT_ALL_NODES
    others = [i for i in shown.tolist() if i not in important_set]
    if not paint_all:  # a dense view: the best-connected nodes' labels where they find room, the rest on hover
        deg = np.bincount(local[cx.edges[eids]].reshape(-1), minlength=shown.size) if eids.size else \
            np.zeros(shown.size, np.int64)
        others = sorted(others, key=lambda i: -int(deg[local[i]]))
    return important + others, paint_all


def render_view(cx: CellComplex, *, sub=None, focus_cells2=(), shade_cells2=(), focus_edges=(),
                seeds=None, cap: int = DEFAULT_CAP, height_px: int = 560,
                node_marks: Mapping[int, tuple[str, str]] | None = None,
                highlight_nodes: Mapping[int, str] | None = None,
                edge_marks: Mapping[int, tuple[str, float, str]] | None = None,
                cell_rgb: Mapping[int, str] | None = None) -> GraphView:
    """Build the HTML view of ``cx``.

    Args:
        cx: the complex.
        sub: optional :class:`~toporag_core.retrieval.Subcomplex`: colour cells by role,
            fill its 2-cells, shade its candidate 2-cells that were not chosen.
        focus_cells2: 2-cells to fill (e.g. picked in a table); their boundary is highlighted.
        shade_cells2: 2-cells to shade faintly (e.g. earlier steps of the lifting).
        focus_edges: 1-cells to draw thick (e.g. the chord of the current lifting step).
        seeds: nodes the neighbourhood grows from; default: the subcomplex / focus cells,
            else the highest-degree node.
        cap: most nodes shown.
        node_marks: optional ``{node: (colour, tooltip note)}`` (e.g. a target node and the
            nodes retrieved for it, with their scores): those nodes are drawn big in their
            colour, all others muted; the neighbourhood grows from them (in dict order).
            Ignored when ``sub`` is given.
        highlight_nodes: optional ``{node: tooltip note}`` (e.g. the nodes holding the gold
            answer): drawn big in :data:`NODE_HIGHLIGHT` on top of any other style, always
            labelled, kept in view; the other nodes keep their style.
        edge_marks: optional ``{1-cell: (colour, width, tooltip note)}`` (e.g. a harmonic 1-cochain's value
            on each edge, or the method that retrieved it): those 1-cells are drawn so, on top of any
            other style; the other 1-cells keep theirs.
        cell_rgb: optional ``{2-cell: "r, g, b"}``: the fill and outline colour of those filled 2-cells
            (e.g. which method retrieved them), instead of the palette.
    """
    highlight = {int(i): str(note) for i, note in (highlight_nodes or {}).items()}
    focus_cells2 = [int(f) for f in focus_cells2]
    shade_cells2 = [int(f) for f in shade_cells2]
    focus_edges = np.asarray(list(focus_edges), dtype=np.int64)
    n = cx.num_nodes
    if seeds is None:
        seeds = default_seeds(cx, sub, node_marks, focus_cells2, highlight, focus_edges)
    shown = neighbourhood(cx, seeds, cap) if n else np.zeros(0, np.int64)
    in_view = np.zeros(n, dtype=bool)
    in_view[shown] = True
    eids = np.flatnonzero(in_view[cx.edges[:, 0]] & in_view[cx.edges[:, 1]]) if cx.num_edges else np.zeros(0, np.int64)
    style = ViewStyle.of(cx, sub, node_marks, focus_cells2, focus_edges, highlight)

    net = network(height_px)
    local = np.full(n, -1, dtype=np.int64)
    local[shown] = np.arange(shown.size)
    xy = spring_layout(shown.size, local[cx.edges[eids]] if eids.size else np.zeros((0, 2), np.int64))
    important = [i for i in important_nodes(cx, sub, style.marks, focus_cells2, highlight) if in_view[i]]
    important_set = set(important)
    painted, paint_all = _paint_order(cx, shown, eids, local, important)
    add_nodes(net, cx, shown, style, xy, local)
    add_edges(net, cx, eids, style, edge_marks)

    # edge labels: every 1-cell's on small views, else those between nodes whose labels are always painted
    labelled_edges = [e for e in eids.tolist() if paint_all or (int(cx.edges[e, 0]) in important_set
                                                                and int(cx.edges[e, 1]) in important_set)]
    sizes = {n["id"]: n["size"] for n in net.nodes}
    lay, labels_payload, edge_payload = label_payloads(cx, shown, painted, important_set, labelled_edges, xy, local,
                                                       sizes, height_px)
    # the labels that must show: those the layout kept (a view too crowded makes the later ones optional)
    kept = [i for i, a in zip(painted, lay.always) if a]
    payload, kept_f, kept_o, colours = cells_payload(cx, sub, focus_cells2, shade_cells2, in_view, cell_rgb or {})
    page = finish_html(net.generate_html(notebook=False), payload, labels_payload, edge_payload,
                       lay.view_box.tolist())
    return GraphView(nodes=shown, edges=eids, cells2_filled=kept_f, cells2_shaded=kept_o,
                     total_nodes=n, cap=cap, html=page, height_px=int(height_px), labelled=kept,
                     cell_colours=colours, label_layout=lay, label_nodes=list(painted), label_edges=labelled_edges)
