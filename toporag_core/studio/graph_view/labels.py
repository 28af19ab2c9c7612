"""Graph-view labels, placed here rather than in the browser so that none overlap.

The nodes that matter (retrieval terminals and every retrieved node, the picked 2-cells' boundaries,
marked nodes) are labelled on every graph size; the others follow where they find room. Labels are
never cut with "..." (:func:`wrap_label`: long texts wrap onto lines; only a text longer than
:data:`LABEL_LINES` lines ends in an ellipsis).

Placement (:func:`layout_labels`): greedily, in priority order, each node label takes the first place
around its node (below, above, right, left, diagonals, then rings farther out) that meets no label
placed before it (:func:`place_node_labels`); a label of a node that matters always gets a place
(with a leader line when it is away from its node), any other label that finds none is left to its
tooltip. Edge labels are placed after all node labels and skipped where they would cover one, a node,
or another edge label (:func:`place_edge_labels`). Boxes are ``(x0, y0, x1, y1)`` in canvas units,
sized so that, with the view fitted to its panel, node labels are :data:`LABEL_PX` and edge labels
:data:`EDGE_LABEL_PX` on screen; labels scale with the zoom like everything else, so they never
overlap at any zoom. :func:`label_payloads` turns a layout into what the page's painter draws.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...cells.complex import CellComplex

LABEL_CHARS = 28   # characters per label line
LABEL_LINES = 4    # lines per painted label


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
    always: np.ndarray       # (k,) bool: the labels kept as "always shown" (see layout_labels)

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
    always = np.asarray(always, dtype=bool).copy()
    start = min((w_px - 2 * VIEW_MARGIN_PX) / extent[0], (h_px - 2 * VIEW_MARGIN_PX) / extent[1])
    while True:
        scale, boxes, box, fitted = _fit_rounds(xy, radii, node_lines, always, discs, start, panel)
        # Labels that must show and find no free place stack below the others, and a long stack grows
        # with the labels, so no scale may fit them at full size: then the later half of them (placement
        # order is importance order) become optional labels, placed only where there is room.
        if fitted or not always.any():
            break
        keep = np.flatnonzero(always)
        always[keep[(len(keep) + 1) // 2:] if len(keep) > 1 else keep] = False
    margin = VIEW_MARGIN_PX / scale
    view = box + np.array([-margin, -margin, margin, margin])
    efont, epad = EDGE_LABEL_PX / scale, 1.0 / scale
    esizes = np.array([[text_width(t, efont) + 2 * epad, efont * LABEL_LINE] for t in edge_texts]).reshape(-1, 2)
    ebox = place_edge_labels(edge_ends.reshape(-1, 2, 2), esizes, np.concatenate([boxes, discs]), box)
    return LabelLayout(node_boxes=boxes, node_font=LABEL_PX / scale, edge_boxes=ebox, edge_font=efont,
                       view_box=view, scale=scale, panel=(float(w_px), float(h_px)), always=always)


def _fit_rounds(xy, radii, node_lines, always, discs, scale, panel):
    """``(scale, boxes, union box, fitted)``: a few rounds of place / refit (:func:`layout_labels`)."""
    w_px, h_px = panel
    for attempt in range(FIT_ROUNDS):
        font, pad = LABEL_PX / scale, LABEL_PAD_PX / scale
        boxes = place_node_labels(xy, radii + pad, _label_sizes(node_lines, font, pad), always)
        box = _union(discs, boxes) if len(discs) else np.zeros(4)
        span = np.maximum(box[2:] - box[:2], 1e-9)
        fit = min((w_px - 2 * VIEW_MARGIN_PX) / span[0], (h_px - 2 * VIEW_MARGIN_PX) / span[1])
        if fit >= FIT_SLACK * scale:
            return scale, boxes, box, True
        # Labels grow (in canvas units) as the scale falls and push the box out, so scale = fit creeps
        # down towards its fixed point; after two plain rounds step past fit (by fit / scale again),
        # which lands at or below the fixed point, where the labels fit at their full size.
        scale = fit if attempt < 2 else fit * fit / scale
    return scale, boxes, box, False


def edge_label(cx: CellComplex, e: int) -> str:
    """The painted label of 1-cell ``e``: its relations' texts (parallel edges joined by " / "), shortened."""
    return _short(" / ".join(cx.graph.edge_text[i] for i in cx.edge_members(e)), 20)


def label_payloads(cx: CellComplex, shown: np.ndarray, painted: list[int], important: set, edges: list[int],
                   xy: np.ndarray, local: np.ndarray, sizes: dict, height_px: int) -> tuple[LabelLayout, list, list]:
    """Place the node labels of ``painted`` (in that order) and the edge labels of ``edges``
    (:func:`layout_labels`, for a panel as wide as it is high, the narrowest the pages show):
    the layout and the painter's payloads (only the labels that found a place)."""
    lines = [wrap_label(cx.graph.node_text[i]) for i in painted]
    node_r = np.array([float(sizes.get(i, 10)) for i in shown.tolist()])
    at = local[np.asarray(painted, dtype=np.int64)]
    pxy, radii = xy[at].reshape(-1, 2), node_r[at]
    important_first = np.array([i in important for i in painted], dtype=bool)
    ends = xy[local[cx.edges[np.asarray(edges, dtype=np.int64)]]] if edges else np.zeros((0, 2, 2))
    texts = [edge_label(cx, e) for e in edges]
    lay = layout_labels(xy.reshape(-1, 2), node_r, at, lines, important_first, ends, texts,
                        (float(height_px), float(height_px)))
    always = lay.always
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
