"""Interactive view of a cell complex as a self-contained pyvis (vis-network) HTML page.

What it draws:

* 0-cells as dots, 1-cells as lines: spanning-tree edges solid, non-tree edges (the
  chords that created the 2-cells) dashed.
* 2-cells as translucent polygons through their boundary nodes, painted on the canvas
  under the graph (vis-network has no faces, so a ``beforeDrawing`` hook draws them).
* With a retrieval result, cells are coloured by role: terminal, Steiner connector,
  boundary closure; retrieved 2-cells filled, candidate 2-cells that were not chosen shaded.

Labels: the nodes that matter (retrieval terminals and every retrieved node, the picked
2-cells' boundaries, marked nodes) are labelled on *every* graph size; on small views (at most
:data:`PAINT_ALL_NODES` nodes) every node is, and every 1-cell too; on denser views the other nodes'
labels follow, best-connected first, wherever they find room (the rest are left to their tooltips).
Labels are never cut with "..." (long texts wrap onto lines; only a text longer than
:data:`LABEL_LINES` lines ends in an ellipsis).
They are placed here, not in the browser (:func:`layout_labels`): greedily, in priority order, each
node label takes the first place around its node (below, above, right, left, diagonals, then rings
farther out) that meets no label placed before it, so node labels never overlap; a label of a node
that matters always gets a place (with a leader line when it is away from its node), any other label
that finds none is left to its tooltip. Edge labels are placed after all node labels and skipped
where they would cover one (or a node, or another edge label). Sizes are in canvas units, chosen so
that, with the view fitted to its panel, node labels are :data:`LABEL_PX` and edge labels
:data:`EDGE_LABEL_PX` on screen; since labels scale with the zoom like everything else, they never
overlap at any zoom. The page fits the view box (nodes and labels plus a margin), not the nodes
alone, so no label is cut at the panel's edge. The painter publishes what it drew as
``window.TOPORAG_DRAWN`` and ``window.TOPORAG_DRAWN_EDGES`` (text, DOM box, font size on screen), which
the browser tests check.

The view's height is ``height_px``; :attr:`GraphView.frame_height` is the iframe height
that shows all of it (the page has no margins), so no view is clipped.

Big graphs are never sent whole: :func:`neighbourhood` keeps at most ``cap`` nodes, grown
ring by ring from the cells of interest, and :class:`GraphView` reports what was cut.

Safety: every user text that becomes a tooltip is ``html.escape``-d (tooltips are turned
into DOM elements client-side so the view can use line breaks), labels are canvas text
(never parsed as HTML), and all data enters the page through JSON that cannot close a
``<script>`` (``<``, ``>``, ``&`` escaped). The page loads nothing from the network.
"""
from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import scipy.sparse as sp

from ..cells.complex import CellComplex

ROLE_COLOURS = {"terminal": "#e15759", "steiner": "#f28e2b", "closure": "#4e79a7"}
NODE_DEFAULT, NODE_MUTED, NODE_FOCUS = "#9ecae9", "#d9d9d9", "#59a14f"
NODE_HIGHLIGHT = "#d4a017"  # e.g. the nodes holding the gold answer (Error analysis)
EDGE_TREE, EDGE_CHORD, EDGE_MUTED = "#7f7f7f", "#b07aa1", "#dddddd"
CELL_FILL, CELL_STROKE = "rgba(89, 161, 79, 0.28)", "rgba(89, 161, 79, 0.95)"
CELL_SHADE = "rgba(176, 122, 161, 0.13)"
# distinct fills for several picked 2-cells (the first is the usual green)
CELL_PALETTE = ("89, 161, 79", "78, 121, 167", "242, 142, 43", "176, 122, 161", "225, 87, 89", "118, 183, 178",
                "237, 201, 72", "156, 117, 95")
DEFAULT_CAP = 150
LABEL_CHARS = 28   # characters per label line
LABEL_LINES = 4    # lines per painted label
PAINT_ALL_NODES = 60
FRAME_MARGIN = 8   # px between the view's height and its iframe's (border, rounding)


def _adjacency(cx: CellComplex) -> sp.csr_matrix:
    """Symmetric node adjacency of the 1-skeleton, cached on the complex."""
    key = ("studio", "adjacency")
    if key not in cx.cache:
        u, v = cx.edges[:, 0], cx.edges[:, 1]
        n = cx.num_nodes
        a = sp.csr_matrix((np.ones(2 * u.size), (np.concatenate([u, v]), np.concatenate([v, u]))), shape=(n, n))
        cx.cache[key] = a
    return cx.cache[key]


def neighbourhood(cx: CellComplex, seeds, cap: int = DEFAULT_CAP) -> np.ndarray:
    """At most ``cap`` node ids: ``seeds`` first (in the given order), then whole BFS rings
    around them while they fit, then part of the next ring (highest degree first).

    Returns a sorted ``(<= cap,)`` int64 array.
    """
    cap = max(1, int(cap))
    seeds = np.asarray(list(dict.fromkeys(int(s) for s in np.asarray(seeds).reshape(-1))), dtype=np.int64)
    if seeds.size == 0:
        return np.zeros(0, np.int64)
    if seeds.size >= cap:
        return np.sort(seeds[:cap])
    adj = _adjacency(cx)
    degree = np.diff(adj.indptr)
    seen = np.zeros(cx.num_nodes, dtype=bool)
    seen[seeds] = True
    chosen, frontier, room = [seeds], seeds, cap - seeds.size
    while room > 0 and frontier.size:
        ring = np.unique(adj[frontier].indices)
        ring = ring[~seen[ring]]
        if ring.size > room:  # partial ring: keep the best-connected nodes, they explain most edges
            ring = ring[np.argsort(-degree[ring], kind="stable")[:room]]
        seen[ring] = True
        chosen.append(ring)
        room -= ring.size
        frontier = ring
    return np.sort(np.concatenate(chosen))


def spring_layout(num_nodes: int, edges: np.ndarray, iterations: int = 80, seed: int = 7) -> np.ndarray:
    """``(n, 2)`` Fruchterman-Reingold positions (dense, vectorised; ``edges`` ``(k, 2)`` local ids).

    Computed here rather than by vis-network's physics in the browser: a fixed, seeded layout
    appears at once (no seconds of in-browser stabilisation on a 2-core machine) and keeps
    every node where it was when only colours change (a slider move, a lifting step).
    """
    n = int(num_nodes)
    if n <= 1:
        return np.zeros((n, 2))
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 2))
    adj = np.zeros((n, n))
    if edges.size:
        adj[edges[:, 0], edges[:, 1]] = adj[edges[:, 1], edges[:, 0]] = 1.0
    k = 1.0 / np.sqrt(n)  # ideal edge length in the unit square
    temp = 0.1
    cool = temp / (iterations + 1)
    for _ in range(iterations):
        sq = (pos * pos).sum(1)
        dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * pos @ pos.T, 1e-4))
        force = k * k / dist ** 2 - adj * dist / k  # repulsion between all, attraction along edges
        np.fill_diagonal(force, 0.0)
        # sum_j force_ij (pos_i - pos_j), without the (n, n, 2) difference tensor
        disp = force.sum(1)[:, None] * pos - force @ pos
        length = np.maximum(np.sqrt((disp * disp).sum(1)), 0.01)
        pos += disp * (temp / length)[:, None]
        temp -= cool
    pos -= pos.mean(0)
    span = float(np.abs(pos).max()) or 1.0
    return pos / span * (110.0 * np.sqrt(n) + 60.0)  # pixels: room grows with the node count


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


def _short(text: str, n: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def wrap_label(text: str, width: int = LABEL_CHARS, lines: int = LABEL_LINES) -> list[str]:
    """``text`` on lines of at most ``width`` characters (breaking at spaces; a longer word is
    split); more than ``lines`` lines end in an ellipsis. Nothing short is ever cut."""
    import textwrap

    out = textwrap.wrap(" ".join(text.split()), width=width, break_long_words=True) or [""]
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1] + "\u2026"
    return out


# ------------------------------------------------------------------------------------------ label placement
LABEL_PX = 12.0        # node-label font size on screen when the view is fitted to its panel
EDGE_LABEL_PX = 10.0   # edge-label font size on screen, likewise
LABEL_LINE = 1.25      # line height / font size
LABEL_PAD_PX = 2.0     # padding around a label's text
VIEW_MARGIN_PX = 6.0   # free border between the labelled view and the panel's edge
FIT_ROUNDS = 10        # place / refit rounds of layout_labels at most
FIT_SLACK = 0.98       # a fit within 2% of the scale the labels were sized for is taken (labels >= 98% size)
_RINGS_OPTIONAL, _RINGS_ALWAYS = 2, 8  # rings of candidate places tried for a label
# em widths of Arial (a little generous: the painter shrinks a text that is wider than its box, never the box)
_NARROW, _WIDE = set("fijlrtI.,;:!|'\" ()[]"), set("mwMW@%")


def text_width(line: str, font_px: float) -> float:
    """Estimated width of ``line`` in Arial at ``font_px``."""
    em = sum(0.34 if c in _NARROW else 0.86 if c in _WIDE else 0.7 if c.isupper() else 0.56 for c in line)
    return em * font_px


def _collides(cands: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """``(k,)`` bool: which of the ``(k, 4)`` candidate boxes intersect any of the ``(m, 4)`` boxes."""
    if boxes.size == 0:
        return np.zeros(len(cands), dtype=bool)
    w = np.minimum(cands[:, None, 2], boxes[None, :, 2]) - np.maximum(cands[:, None, 0], boxes[None, :, 0])
    h = np.minimum(cands[:, None, 3], boxes[None, :, 3]) - np.maximum(cands[:, None, 1], boxes[None, :, 1])
    return ((w > 0) & (h > 0)).any(1)


def _ring_candidates(x: float, y: float, r: float, w: float, h: float, rings: int) -> np.ndarray:
    """``(8 * rings, 4)`` boxes of a ``w`` x ``h`` label around a node at ``(x, y)`` of radius ``r``:
    below, above, right, left, then the four diagonals, on rings ever farther out."""
    d = r + np.arange(rings)[:, None] * h  # (rings, 1)
    q = d * 0.71
    left = np.concatenate([np.full_like(d, x - w / 2), np.full_like(d, x - w / 2), x + d, x - d - w,
                           x + q, x - q - w, x + q, x - q - w], 1)
    top = np.concatenate([y + d, y - d - h, np.full_like(d, y - h / 2), np.full_like(d, y - h / 2),
                          y + q, y + q, y - q - h, y - q - h], 1)
    left, top = left.reshape(-1), top.reshape(-1)
    return np.stack([left, top, left + w, top + h], 1)


def place_node_labels(xy: np.ndarray, radii: np.ndarray, sizes: np.ndarray, always: np.ndarray) -> np.ndarray:
    """Greedy, in the given order: each label takes the first candidate place (:func:`_ring_candidates`)
    that intersects no label placed before it.

    ``xy`` ``(k, 2)`` node centres, ``radii`` ``(k,)``, ``sizes`` ``(k, 2)`` label width and height (all in
    the same units). A label in ``always`` that finds no free place on its rings goes just below every
    label placed so far (always free; the painter draws a leader line to it); any other label that
    finds none is not placed. Returns ``(k, 4)`` boxes ``x0, y0, x1, y1``, NaN where not placed; no two
    placed boxes intersect.
    """
    k = len(xy)
    out = np.full((k, 4), np.nan)
    placed = np.zeros((0, 4))
    for i in range(k):
        (x, y), (w, h) = xy[i], sizes[i]
        cands = _ring_candidates(x, y, radii[i], w, h, _RINGS_ALWAYS if always[i] else _RINGS_OPTIONAL)
        free = np.flatnonzero(~_collides(cands, placed))
        if free.size:
            box = cands[free[0]]
        elif always[i]:
            top = max(placed[:, 3].max(), y + radii[i])
            box = np.array([x - w / 2, top, x + w / 2, top + h])
        else:
            continue
        out[i] = box
        placed = np.vstack([placed, box])
    return out


def place_edge_labels(ends: np.ndarray, sizes: np.ndarray, obstacles: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Edge labels after the node labels: each goes at its edge's middle, else a third of the way from
    either end, where it intersects no obstacle (node-label boxes, node discs) and no edge label placed
    before it, and lies inside ``bounds`` ``(x0, y0, x1, y1)``; else it is not placed.

    ``ends`` ``(k, 2, 2)`` edge end points, ``sizes`` ``(k, 2)``. Returns ``(k, 4)`` boxes, NaN where not placed.
    """
    k = len(ends)
    out = np.full((k, 4), np.nan)
    taken = obstacles.reshape(-1, 4)
    t = np.array([0.5, 0.33, 0.67])[:, None]
    for i in range(k):
        c = ends[i, 0] + t * (ends[i, 1] - ends[i, 0])  # (3, 2) candidate centres
        w, h = sizes[i]
        cands = np.concatenate([c - [w / 2, h / 2], c + [w / 2, h / 2]], 1)
        inside = (cands[:, 0] >= bounds[0]) & (cands[:, 1] >= bounds[1]) & (cands[:, 2] <= bounds[2]) & \
            (cands[:, 3] <= bounds[3])
        free = np.flatnonzero(inside & ~_collides(cands, taken))
        if free.size:
            out[i] = cands[free[0]]
            taken = np.vstack([taken, out[i]])
    return out


@dataclass
class LabelLayout:
    """Where the painter draws each label, in canvas units, for a view fitted to a panel of ``panel``
    pixels (width, height): ``scale`` canvas units -> pixels; ``view_box`` is what the view is fitted to
    (nodes and labels, plus a margin), so nothing is cut at the panel's edge."""

    node_boxes: np.ndarray   # (k, 4), NaN where a label found no place
    node_font: float         # canvas units
    edge_boxes: np.ndarray   # (m, 4), NaN where not placed
    edge_font: float
    view_box: np.ndarray     # (4,)
    scale: float
    panel: tuple[float, float]

    def font_px(self, font: float) -> float:
        """On-screen size of a font of ``font`` canvas units once the view box is fitted to the panel."""
        bw, bh = self.view_box[2] - self.view_box[0], self.view_box[3] - self.view_box[1]
        return font * min(self.panel[0] / bw, self.panel[1] / bh)


def _label_sizes(lines: list[list[str]], font: float, pad: float) -> np.ndarray:
    return np.array([[max(text_width(t, font) for t in ls) + 2 * pad, len(ls) * font * LABEL_LINE + pad]
                     for ls in lines]).reshape(-1, 2)


def _union(*boxes: np.ndarray) -> np.ndarray:
    b = np.concatenate([x.reshape(-1, 4) for x in boxes])
    b = b[~np.isnan(b).any(1)]
    return np.array([b[:, 0].min(), b[:, 1].min(), b[:, 2].max(), b[:, 3].max()])


def layout_labels(node_xy: np.ndarray, node_r: np.ndarray, labelled: np.ndarray, node_lines: list[list[str]],
                  always: np.ndarray, edge_ends: np.ndarray, edge_texts: list[str],
                  panel: tuple[float, float]) -> LabelLayout:
    """Node labels (:func:`place_node_labels`), then edge labels (:func:`place_edge_labels`), sized so
    that, once the view box (nodes + node labels + margin) is fitted to ``panel``, node labels are
    :data:`LABEL_PX` and edge labels :data:`EDGE_LABEL_PX` on screen.

    ``node_xy`` ``(n, 2)`` and ``node_r`` ``(n,)``: every node in view; ``labelled``: the indices (into
    those) of the nodes to label, in placement order, with their ``node_lines`` and ``always`` flags.

    Labels have a constant size in canvas units, so they never overlap at any zoom. Their size
    depends on the scale, and the scale on how far they stick out: a few rounds of place / refit.
    """
    w_px, h_px = panel
    discs = np.concatenate([node_xy - node_r[:, None], node_xy + node_r[:, None]], 1).reshape(-1, 4)
    extent = np.maximum(_union(discs)[2:] - _union(discs)[:2], 1.0) if len(node_xy) else np.ones(2)
    labelled = np.asarray(labelled, dtype=np.int64)
    xy, radii = node_xy[labelled].reshape(-1, 2), node_r[labelled]
    scale = min((w_px - 2 * VIEW_MARGIN_PX) / extent[0], (h_px - 2 * VIEW_MARGIN_PX) / extent[1])
    for attempt in range(FIT_ROUNDS):
        font, pad = LABEL_PX / scale, LABEL_PAD_PX / scale
        boxes = place_node_labels(xy, radii + pad, _label_sizes(node_lines, font, pad), always)
        box = _union(discs, boxes) if len(node_xy) else np.zeros(4)
        span = np.maximum(box[2:] - box[:2], 1e-9)
        fit = min((w_px - 2 * VIEW_MARGIN_PX) / span[0], (h_px - 2 * VIEW_MARGIN_PX) / span[1])
        if fit >= FIT_SLACK * scale:
            break
        # Labels grow (in canvas units) as the scale falls and push the box out, so scale = fit creeps
        # down towards its fixed point; after two plain rounds step past fit (by fit / scale again),
        # which lands at or below the fixed point, where the labels fit at their full size.
        scale = fit if attempt < 2 else fit * fit / scale
    margin = VIEW_MARGIN_PX / scale
    view = box + np.array([-margin, -margin, margin, margin])
    efont, epad = EDGE_LABEL_PX / scale, 1.0 / scale
    esizes = np.array([[text_width(t, efont) + 2 * epad, efont * LABEL_LINE] for t in edge_texts]).reshape(-1, 2)
    ebox = place_edge_labels(edge_ends.reshape(-1, 2, 2), esizes, np.concatenate([boxes, discs]), box)
    return LabelLayout(node_boxes=boxes, node_font=font, edge_boxes=ebox, edge_font=efont, view_box=view,
                       scale=scale, panel=(float(w_px), float(h_px)))


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


_HEAD_SCRIPT = """<script type="text/javascript">
var TOPORAG_CELLS = %s;
var TOPORAG_LABELS = %s;
var TOPORAG_EDGE_LABELS = %s;
var TOPORAG_VIEW = %s;
window.TOPORAG_DRAWN = [];
window.TOPORAG_DRAWN_EDGES = [];
function toporagFit(network) {
  // Fit the view box (nodes and their labels, with a margin) rather than the nodes alone, so no label
  // is cut at the panel's edge.
  var el = document.getElementById("mynetwork"), v = TOPORAG_VIEW;
  var w = el ? el.clientWidth : 0, h = el ? el.clientHeight : 0;
  if (!v || !w || !h) { network.fit(); return; }
  network.moveTo({position: {x: (v[0] + v[2]) / 2, y: (v[1] + v[3]) / 2},
                  scale: Math.min(w / (v[2] - v[0]), h / (v[3] - v[1])), animation: false});
}
function toporagText(network, ctx, lines, box, fs, colour) {
  // The lines centred in their box (canvas units, placed by the server so that no two boxes meet);
  // a text measured wider than its box is drawn smaller, never past the box. Returns the DOM box and
  // the font size drawn, in screen pixels (what the browser test reads).
  var w = 0, f = fs;
  ctx.font = f + "px Arial, sans-serif";
  lines.forEach(function (t) { w = Math.max(w, ctx.measureText(t).width); });
  var room = (box[2] - box[0]) * 0.96;
  if (w > room) { f = fs * room / w; ctx.font = f + "px Arial, sans-serif"; }
  var lh = f * 1.25, top = (box[1] + box[3]) / 2 - lines.length * lh / 2, x = (box[0] + box[2]) / 2;
  ctx.lineWidth = f * 0.25;
  ctx.strokeStyle = "rgba(255,255,255,0.92)";
  ctx.fillStyle = colour;
  lines.forEach(function (t, j) {
    var y = top + j * lh + (lh - f) / 2;
    ctx.strokeText(t, x, y);
    ctx.fillText(t, x, y);
  });
  var tl = network.canvasToDOM({x: box[0], y: box[1]}), br = network.canvasToDOM({x: box[2], y: box[3]});
  return {box: [tl.x, tl.y, br.x, br.y], px: f * network.getScale()};
}
function toporagLabels(network, ctx) {
  var pos = network.getPositions(TOPORAG_LABELS.map(function (l) { return l.id; }));
  var drawn = [], edges = [];
  ctx.save();
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  TOPORAG_EDGE_LABELS.forEach(function (lab) {
    var t = toporagText(network, ctx, [lab.text], lab.box, lab.fs, "#444444");
    edges.push({id: lab.id, text: lab.text, box: t.box, px: t.px});
  });
  TOPORAG_LABELS.forEach(function (lab) {
    var p = pos[lab.id], b = lab.box;
    if (!p) { return; }
    if (lab.lead) {  // a label moved away from its node: a thin line leads to it
      ctx.beginPath();
      ctx.moveTo(p.x, p.y);
      ctx.lineTo(Math.min(Math.max(p.x, b[0]), b[2]), Math.min(Math.max(p.y, b[1]), b[3]));
      ctx.lineWidth = lab.fs * 0.08;
      ctx.strokeStyle = "rgba(90,90,90,0.7)";
      ctx.stroke();
    }
    var t = toporagText(network, ctx, lab.lines, b, lab.fs, lab.always ? "#111111" : "#333333");
    drawn.push({id: lab.id, text: lab.lines.join(" "), always: lab.always, box: t.box, px: t.px});
  });
  ctx.restore();
  window.TOPORAG_DRAWN = drawn;
  window.TOPORAG_DRAWN_EDGES = edges;
}
function toporagPrepare(nodes, edges) {
  // Titles arrive as escaped HTML strings; vis-network shows strings as plain text, so turn
  // them into elements to get line breaks and bold headings (the user text inside is escaped).
  [nodes, edges].forEach(function (ds) {
    var upd = [];
    ds.forEach(function (item) {
      if (typeof item.title === "string") {
        var div = document.createElement("div");
        div.innerHTML = item.title;
        upd.push({id: item.id, title: div});
      }
    });
    ds.update(upd);
  });
}
function toporagDecorate(network) {
  // A view created inside a hidden tab has no size yet: refit once it is shown (the iframe
  // resizes) and once the layout has settled.
  window.addEventListener("resize", function () { network.redraw(); toporagFit(network); });
  toporagFit(network);
  network.on("beforeDrawing", function (ctx) {
    TOPORAG_CELLS.forEach(function (cell) {
      var pos = network.getPositions(cell.nodes);
      ctx.beginPath();
      cell.nodes.forEach(function (id, j) {
        var p = pos[id];
        if (!p) { return; }
        if (j === 0) { ctx.moveTo(p.x, p.y); } else { ctx.lineTo(p.x, p.y); }
      });
      ctx.closePath();
      if (cell.fill) { ctx.fillStyle = cell.fill; ctx.fill(); }
      if (cell.stroke) { ctx.lineWidth = cell.width; ctx.strokeStyle = cell.stroke; ctx.stroke(); }
    });
  });
  network.on("afterDrawing", function (ctx) { toporagLabels(network, ctx); });
}
</script>
"""


def _finish_html(page: str, cells_payload: list[dict], labels_payload: list[dict] | None = None,
                 edge_labels_payload: list[dict] | None = None, view_box: list[float] | None = None) -> str:
    """Make pyvis' page offline and wire the 2-cell painter and the HTML tooltips in."""
    # pyvis' template always links bootstrap from a CDN; nothing is reachable offline, and
    # the view does not use it.
    page = re.sub(r"<link[^>]*cdn\.jsdelivr\.net[^>]*/>", "", page)
    page = re.sub(r"<script[^>]*cdn\.jsdelivr\.net[^>]*>\s*</script>", "", page)
    head = _HEAD_SCRIPT % (_script_json(cells_payload), _script_json(labels_payload or []),
                           _script_json(edge_labels_payload or []), _script_json(view_box))
    # no page margins: the iframe of frame_height px shows the whole view
    # (pyvis' template puts an empty <center><h1> heading above the view: hidden; the view fills the frame)
    head += ("<style>html, body {margin: 0; padding: 0; overflow: hidden;} center {display: none;} "
             ".card {margin: 0; border: 0;} #mynetwork {height: calc(100vh - 2px) !important;}</style>\n")
    page = page.replace("</head>", head + "</head>", 1)
    anchor = "network = new vis.Network(container, data, options);"
    if anchor not in page:  # a pyvis template change must fail loudly, not silently lose features
        raise RuntimeError("unexpected pyvis template: cannot find the network constructor")
    return page.replace(anchor, "toporagPrepare(nodes, edges); " + anchor + " toporagDecorate(network);", 1)


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
        seeds = _default_seeds(cx, sub, node_marks, focus_cells2, highlight, focus_edges)
    shown = neighbourhood(cx, seeds, cap) if n else np.zeros(0, np.int64)
    in_view = np.zeros(n, dtype=bool)
    in_view[shown] = True
    eids = np.flatnonzero(in_view[cx.edges[:, 0]] & in_view[cx.edges[:, 1]]) if cx.num_edges else np.zeros(0, np.int64)
    style = _Style.of(cx, sub, node_marks, focus_cells2, focus_edges, highlight)

    net = _network(height_px)
    local = np.full(n, -1, dtype=np.int64)
    local[shown] = np.arange(shown.size)
    xy = spring_layout(shown.size, local[cx.edges[eids]] if eids.size else np.zeros((0, 2), np.int64))
    important = [i for i in _important_nodes(cx, sub, style.marks, focus_cells2, highlight) if in_view[i]]
    important_set = set(important)
    paint_all = shown.size <= PAINT_ALL_NODES
    others = [i for i in shown.tolist() if i not in important_set]
    if not paint_all:  # a dense view: the best-connected nodes' labels where they find room, the rest on hover
        deg = np.bincount(local[cx.edges[eids]].reshape(-1), minlength=shown.size) if eids.size else \
            np.zeros(shown.size, np.int64)
        others = sorted(others, key=lambda i: -int(deg[local[i]]))
    painted = important + others
    for i in shown.tolist():
        colour, size, extra = style.node(i)
        x, y = xy[local[i]].tolist()
        # painted labels replace vis-network's own (a single space: pyvis shows the id for ""); vis-network's
        # labels are never drawn, as nothing keeps them apart
        label = " "
        net.add_node(i, label=label, title=_safe_title(_node_title(cx, i, html.escape(extra))),
                     color=colour, size=size, font={"size": 13, "color": "#222222"}, x=x, y=y)
    from pyvis.edge import Edge

    for e in eids.tolist():
        a, b = cx.edges[e].tolist()
        tree = bool(cx.tree_mask[e])
        colour, width, extra = style.edge(e, a, b, tree)
        if edge_marks and e in edge_marks:
            colour, width, extra = edge_marks[e]
        # Edge(...).options is what add_edge stores; add_edge itself scans all edges for
        # duplicates (quadratic), and 1-cells are unique already.
        # (no vis-network label: edge labels are painted, see _labels)
        net.edges.append(Edge(a, b, title=_safe_title(_edge_title(cx, e, html.escape(extra))), color=colour,
                              width=width, dashes=not tree).options)

    # edge labels: every 1-cell's on small views, else those between nodes whose labels are always painted
    labelled_edges = [e for e in eids.tolist() if paint_all or (int(cx.edges[e, 0]) in important_set
                                                                and int(cx.edges[e, 1]) in important_set)]
    sizes = {n["id"]: n["size"] for n in net.nodes}
    lay, labels_payload, edge_payload = _labels(cx, shown, painted, important_set, labelled_edges, xy, local, sizes,
                                                height_px)
    payload, kept_f, kept_o, colours = _cells_payload(cx, sub, focus_cells2, shade_cells2, in_view, cell_rgb or {})
    page = _finish_html(net.generate_html(notebook=False), payload, labels_payload, edge_payload,
                        lay.view_box.tolist())
    return GraphView(nodes=shown, edges=eids, cells2_filled=kept_f, cells2_shaded=kept_o,
                     total_nodes=n, cap=cap, html=page, height_px=int(height_px), labelled=important,
                     cell_colours=colours, label_layout=lay, label_nodes=list(painted), label_edges=labelled_edges)


def edge_label(cx: CellComplex, e: int) -> str:
    """The painted label of 1-cell ``e``: its relations' texts (parallel edges joined by " / "), shortened."""
    return _short(" / ".join(cx.graph.edge_text[i] for i in cx.edge_members(e)), 20)


def _labels(cx: CellComplex, shown: np.ndarray, painted: list[int], important: set, edges: list[int],
            xy: np.ndarray, local: np.ndarray, sizes: dict, height_px: int) -> tuple[LabelLayout, list, list]:
    """Place the node labels of ``painted`` (in that order) and the edge labels of ``edges``
    (:func:`layout_labels`, for a panel as wide as it is high, the narrowest the pages show):
    the layout and the painter's payloads (only the labels that found a place)."""
    lines = [wrap_label(cx.graph.node_text[i]) for i in painted]
    node_r = np.array([float(sizes.get(i, 10)) for i in shown.tolist()])
    at = local[np.asarray(painted, dtype=np.int64)]
    pxy, radii = xy[at].reshape(-1, 2), node_r[at]
    always = np.array([i in important for i in painted], dtype=bool)
    ends = xy[local[cx.edges[np.asarray(edges, dtype=np.int64)]]] if edges else np.zeros((0, 2, 2))
    texts = [edge_label(cx, e) for e in edges]
    lay = layout_labels(xy.reshape(-1, 2), node_r, at, lines, always, ends, texts,
                        (float(height_px), float(height_px)))
    # a label away from its node (not on its first ring of places) gets a leader line
    near = np.stack([np.clip(pxy[:, 0], lay.node_boxes[:, 0], lay.node_boxes[:, 2]),
                     np.clip(pxy[:, 1], lay.node_boxes[:, 1], lay.node_boxes[:, 3])], 1) if painted else pxy
    gap = np.hypot(*(near - pxy).T) if painted else np.zeros(0)
    lead = gap > (radii + LABEL_PAD_PX / lay.scale) * 1.01 + 1e-9
    nodes = [{"id": i, "lines": lines[j], "r": sizes.get(i, 10), "always": bool(always[j]),
              "box": lay.node_boxes[j].tolist(), "fs": lay.node_font, "lead": bool(lead[j])}
             for j, i in enumerate(painted) if not np.isnan(lay.node_boxes[j]).any()]
    edge_payload = [{"id": e, "text": texts[j], "box": lay.edge_boxes[j].tolist(), "fs": lay.edge_font}
                    for j, e in enumerate(edges) if not np.isnan(lay.edge_boxes[j]).any()]
    return lay, nodes, edge_payload


def _terminals_first(sub) -> np.ndarray:
    """The subcomplex's nodes, its terminals first (otherwise in its order)."""
    return sub.nodes[np.argsort([r != "terminal" for r in sub.node_roles.tolist()], kind="stable")]


def _default_seeds(cx: CellComplex, sub, node_marks, focus_cells2: list[int], highlight: dict[int, str],
                   focus_edges: np.ndarray) -> np.ndarray:
    """Where the neighbourhood grows from: the subcomplex (terminals first) or the marked nodes, the focus
    2-cells' boundaries, the highlighted nodes, the focus edges' ends; else the highest-degree node."""
    parts = []
    if sub is not None:
        parts.append(_terminals_first(sub))
    if node_marks and sub is None:
        parts.append(np.fromiter((int(i) for i in node_marks), dtype=np.int64))
    parts += [cx.cell2_nodes(f) for f in focus_cells2]
    if highlight:
        parts.append(np.fromiter(highlight, dtype=np.int64))
    if focus_edges.size:
        parts.append(cx.edges[focus_edges].reshape(-1))
    seeds = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if seeds.size == 0 and cx.num_nodes:
        seeds = np.array([int(np.argmax(np.diff(_adjacency(cx).indptr)))])
    return seeds


def _important_nodes(cx: CellComplex, sub, marks, focus_cells2: list[int], highlight: dict[int, str]) -> list[int]:
    """Nodes whose label is always painted, in priority order (highlighted, terminals, retrieved, marked,
    focus 2-cells' boundaries), each once."""
    important: list[int] = list(highlight)
    if sub is not None:
        important += [int(i) for i in _terminals_first(sub).tolist()]
    if marks is not None:
        important += [int(i) for i in marks]
    for f in focus_cells2:
        important += cx.cell2_nodes(f).tolist()
    return list(dict.fromkeys(important))


@dataclass
class _Style:
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
           highlight: dict[int, str]) -> "_Style":
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


def _network(height_px: int):
    """An empty pyvis network: fixed layout (no physics), straight edges, the shared template."""
    from pyvis.network import Network

    net = Network(height=f"{height_px}px", width="100%", directed=False, cdn_resources="in_line", bgcolor="#ffffff")
    net.templateEnv = _template_env(net)
    net.toggle_physics(False)
    net.options.edges.smooth.enabled = False  # 1-cells are unique: straight lines never overlap
    return net


def _cells_payload(cx: CellComplex, sub, focus_cells2: list[int], shade_cells2: list[int], in_view: np.ndarray,
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


def legend_html(retrieval: bool) -> str:
    """A static colour legend (no user text) for ``st.markdown(..., unsafe_allow_html=True)``."""
    def chip(colour: str, text: str, dashed: bool = False) -> str:
        border = ("border:2px dashed %s;background:none" % colour if dashed
                  else f"background:{colour};border:1px solid rgba(0,0,0,0.25)")
        return (f'<span style="display:inline-block;width:12px;height:12px;{border};border-radius:3px;'
                f'margin:0 4px 0 12px;vertical-align:middle"></span>{text}')

    if retrieval:
        items = [chip(ROLE_COLOURS["terminal"], "terminal (had a prize)"),
                 chip(ROLE_COLOURS["steiner"], "Steiner connector"),
                 chip(ROLE_COLOURS["closure"], "boundary closure"),
                 chip(CELL_STROKE, "retrieved 2-cell (filled)"),
                 chip(CELL_SHADE, "candidate 2-cell not chosen (shaded)")]
    else:
        items = [chip(EDGE_TREE, "spanning-tree edge (solid)"), chip(EDGE_CHORD, "non-tree edge (dashed)", True),
                 chip(NODE_FOCUS, "picked 2-cell and its boundary"), chip(CELL_SHADE, "other 2-cells (shaded)")]
    return '<div style="font-size:0.85rem;line-height:1.8">' + "".join(items) + "</div>"
