"""The graph view as a self-contained pyvis (vis-network) HTML page.

:func:`network` makes the pyvis network (fixed layout, no physics, straight edges); :func:`add_nodes`
and :func:`add_edges` put in the cells with their tooltips; :func:`finish_html` makes the page offline
and wires in the painter, :data:`PAINTER_JS` (the asset ``graph_view.js``): it draws the 2-cells as
polygons under the graph (vis-network has no faces, so a ``beforeDrawing`` hook draws them), paints
the labels the server placed, fits the view box and turns tooltips into DOM elements.

Safety: every user text that becomes a tooltip is ``html.escape``-d (tooltips are turned into DOM
elements client-side so the view can use line breaks), labels are canvas text (never parsed as HTML),
and all data enters the page through JSON that cannot close a ``<script>`` (``<``, ``>``, ``&``
escaped). The page loads nothing from the network.
"""
from __future__ import annotations

import html
import json
import re
from importlib import resources

import numpy as np

from ...cells.complex import CellComplex
from .style import ViewStyle

# the painter (plain JavaScript, shipped as package data)
PAINTER_JS = resources.files(__package__).joinpath("graph_view.js").read_text(encoding="utf-8")

# the data the painter reads, defined before it
_DATA_SCRIPT = """<script type="text/javascript">
var TOPORAG_CELLS = %s;
var TOPORAG_LABELS = %s;
var TOPORAG_EDGE_LABELS = %s;
var TOPORAG_VIEW = %s;
"""


def _script_json(obj) -> str:
    """JSON that is safe inside a ``<script>`` element."""
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _safe_title(title: str) -> str:
    # pyvis switches to a different tooltip template when a title contains "href"; user text
    # must not pick the template, so spell it with an entity (renders the same).
    return title.replace("href", "hr&#101;f")


_TEMPLATE_ENV = None


def _template_env(net):
    """One jinja environment for every render: pyvis makes a new one per network, which
    re-parses its 0.5 MB template (with the inlined vis-network) on every slider move."""
    global _TEMPLATE_ENV
    if _TEMPLATE_ENV is None:
        from jinja2 import Environment, FileSystemLoader

        _TEMPLATE_ENV = Environment(loader=FileSystemLoader(net.template_dir))
    return _TEMPLATE_ENV


def _node_title(cx: CellComplex, i: int, extra: str) -> str:
    g = cx.graph
    parts = [f"<b>0-cell {i}</b>", html.escape(g.node_text[i])]
    if g.node_ids is not None:
        parts.append(f"id: {html.escape(str(g.node_ids[i]))}")
    if extra:
        parts.append(extra)
    return "<br>".join(parts)


def _edge_title(cx: CellComplex, e: int, extra: str) -> str:
    rels = [f"{html.escape(h)} -[{html.escape(r)}]-&gt; {html.escape(t)}" for h, r, t in cx.edge_relations(e)]
    kind = "tree edge" if cx.tree_mask[e] else "non-tree edge (creates a 2-cell)"
    return "<br>".join([f"<b>1-cell {e}</b> ({kind})", *rels] + ([extra] if extra else []))



def network(height_px: int):
    """An empty pyvis network: fixed layout (no physics), straight edges, the shared template."""
    from pyvis.network import Network

    net = Network(height=f"{height_px}px", width="100%", directed=False, cdn_resources="in_line", bgcolor="#ffffff")
    net.templateEnv = _template_env(net)
    net.toggle_physics(False)
    net.options.edges.smooth.enabled = False  # 1-cells are unique: straight lines never overlap
    return net


def add_nodes(net, cx: CellComplex, shown: np.ndarray, style: ViewStyle, xy: np.ndarray, local: np.ndarray) -> None:
    """The ``shown`` nodes at their positions ``xy[local[i]]``, styled by ``style``, with their tooltips."""
    for i in shown.tolist():
        colour, size, extra = style.node(i)
        x, y = xy[local[i]].tolist()
        # painted labels replace vis-network's own (a single space: pyvis shows the id for ""); vis-network's
        # labels are never drawn, as nothing keeps them apart
        label = " "
        net.add_node(i, label=label, title=_safe_title(_node_title(cx, i, html.escape(extra))),
                     color=colour, size=size, font={"size": 13, "color": "#222222"}, x=x, y=y)


def add_edges(net, cx: CellComplex, eids: np.ndarray, style: ViewStyle, edge_marks=None) -> None:
    """The 1-cells ``eids`` (tree edges solid, chords dashed), styled by ``style`` or ``edge_marks``."""
    from pyvis.edge import Edge

    for e in eids.tolist():
        a, b = cx.edges[e].tolist()
        tree = bool(cx.tree_mask[e])
        colour, width, extra = style.edge(e, a, b, tree)
        if edge_marks and e in edge_marks:
            colour, width, extra = edge_marks[e]
        # Edge(...).options is what add_edge stores; add_edge itself scans all edges for
        # duplicates (quadratic), and 1-cells are unique already.
        # (no vis-network label: edge labels are painted, see labels.label_payloads)
        net.edges.append(Edge(a, b, title=_safe_title(_edge_title(cx, e, html.escape(extra))), color=colour,
                              width=width, dashes=not tree).options)


def finish_html(page: str, cells_payload: list[dict], labels_payload: list[dict] | None = None,
                edge_labels_payload: list[dict] | None = None, view_box: list[float] | None = None) -> str:
    """Make pyvis' page offline and wire the 2-cell painter and the HTML tooltips in."""
    # pyvis' template always links bootstrap from a CDN; nothing is reachable offline, and
    # the view does not use it.
    page = re.sub(r"<link[^>]*cdn\.jsdelivr\.net[^>]*/>", "", page)
    page = re.sub(r"<script[^>]*cdn\.jsdelivr\.net[^>]*>\s*</script>", "", page)
    head = _DATA_SCRIPT % (_script_json(cells_payload), _script_json(labels_payload or []),
                           _script_json(edge_labels_payload or []), _script_json(view_box))
    head += PAINTER_JS + "</script>\n"
    head += ("<style>html, body {margin: 0; padding: 0; overflow: hidden;} center {display: none;} "
             ".card {margin: 0; border: 0;} #mynetwork {height: calc(100vh - 2px) !important;}</style>\n")
    page = page.replace("</head>", head + "</head>", 1)
    anchor = "network = new vis.Network(container, data, options);"
    if anchor not in page:  # a pyvis template change must fail loudly, not silently lose features
        raise RuntimeError("unexpected pyvis template: cannot find the network constructor")
    return page.replace(anchor, "toporagPrepare(nodes, edges); " + anchor + " toporagDecorate(network);", 1)
