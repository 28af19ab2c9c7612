"""Interactive view of a cell complex as a self-contained pyvis (vis-network) HTML page.

One file per concern; pages and tests use the names re-exported here.

* :mod:`.render`: :func:`render_view` builds a :class:`GraphView` (0-cells as dots, 1-cells as lines,
  spanning-tree edges solid and chords dashed, 2-cells as translucent polygons under the graph; with a
  retrieval result, cells coloured by role);
* :mod:`.layout`: the nodes in view (:func:`neighbourhood`: at most ``cap``, grown ring by ring from the
  cells of interest, so big graphs are never sent whole) and their positions (:func:`spring_layout`);
* :mod:`.labels`: label text (:func:`wrap_label`) and placement (:func:`layout_labels`), computed here,
  not in the browser, so node labels never overlap and edge labels never cover them, at any zoom;
* :mod:`.style`: node, 1-cell and 2-cell colours and sizes by role, mark or focus;
* :mod:`.palette`: the colours and :func:`legend_html`;
* :mod:`.page`: the offline HTML page and its painter, the asset ``graph_view.js``, which publishes what
  it drew as ``window.TOPORAG_DRAWN`` and ``window.TOPORAG_DRAWN_EDGES`` (text, DOM box, font size on
  screen) for the browser tests. User text in tooltips is HTML-escaped; data enters the page as JSON
  that cannot close a ``<script>``; the page loads nothing from the network.
"""
from .labels import (EDGE_LABEL_PX, FIT_ROUNDS, FIT_SLACK, LABEL_CHARS, LABEL_LINE, LABEL_LINES, LABEL_PAD_PX,
                     LABEL_PX, VIEW_MARGIN_PX, LabelLayout, edge_label, layout_labels, place_edge_labels,
                     place_node_labels, text_width, wrap_label)
from .layout import DEFAULT_CAP, neighbourhood, spring_layout
from .palette import (CELL_FILL, CELL_PALETTE, CELL_SHADE, CELL_STROKE, EDGE_CHORD, EDGE_MUTED, EDGE_TREE,
                      NODE_DEFAULT, NODE_FOCUS, NODE_HIGHLIGHT, NODE_MUTED, ROLE_COLOURS, legend_html)
from .render import FRAME_MARGIN, PAINT_ALL_NODES, GraphView, render_view

__all__ = [
    "CELL_FILL", "CELL_PALETTE", "CELL_SHADE", "CELL_STROKE", "DEFAULT_CAP", "EDGE_CHORD", "EDGE_LABEL_PX",
    "EDGE_MUTED", "EDGE_TREE", "FIT_ROUNDS", "FIT_SLACK", "FRAME_MARGIN", "LABEL_CHARS", "LABEL_LINE",
    "LABEL_LINES", "LABEL_PAD_PX", "LABEL_PX", "NODE_DEFAULT", "NODE_FOCUS", "NODE_HIGHLIGHT", "NODE_MUTED",
    "PAINT_ALL_NODES", "ROLE_COLOURS", "VIEW_MARGIN_PX", "GraphView", "LabelLayout", "edge_label",
    "layout_labels", "legend_html", "neighbourhood", "place_edge_labels", "place_node_labels", "render_view",
    "spring_layout", "text_width", "wrap_label",
]
