"""Graph-view labels as the painter draws them: node labels never overlap, edge labels never cover a
node label, nothing leaves the panel, and both are readable at the default size.

The placement is computed server-side (:func:`toporag_core.studio.graph_view.layout_labels`) and the
painter draws exactly those boxes (shrinking a text that measures wider than its box, never the box),
so these checks on the layout are checks on the page.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("pyvis")

from toporag_core.embed import HashingEncoder, embed_complex  # noqa: E402
from toporag_core.cells.lift import lift  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.studio import graph_view  # noqa: E402


def _boxes(b: np.ndarray) -> np.ndarray:
    return b[~np.isnan(b).any(1)]


def _intersections(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    return (w > 1e-9) & (h > 1e-9)


def _check(view: graph_view.GraphView) -> None:
    lay = view.label_layout
    nodes, edges = _boxes(lay.node_boxes), _boxes(lay.edge_boxes)
    hit = _intersections(nodes, nodes)
    np.fill_diagonal(hit, False)
    assert not hit.any(), "two node labels overlap"
    assert not _intersections(edges, nodes).any(), "an edge label covers a node label"
    hit = _intersections(edges, edges)
    np.fill_diagonal(hit, False)
    assert not hit.any()
    vb = lay.view_box
    every = np.concatenate([nodes, edges])
    assert (every[:, :2] >= vb[:2]).all() and (every[:, 2:] <= vb[2:]).all(), "a label leaves the panel"
    # the view box fits the panel, so at fit everything inside it is inside the panel
    fit = min(lay.panel[0] / (vb[2] - vb[0]), lay.panel[1] / (vb[3] - vb[1]))
    assert lay.panel[1] == view.height_px and ((vb[2:] - vb[:2]) * fit <= np.array(lay.panel) + 1e-6).all()
    placed = {i for i, b in zip(view.label_nodes, lay.node_boxes) if not np.isnan(b).any()}
    assert set(view.labelled) <= placed, "a label of a node that matters found no place"
    assert lay.font_px(lay.node_font) >= 11 and lay.font_px(lay.edge_font) >= 9
    # the page carries exactly these boxes and sizes
    payload = json.loads(re.search(r"var TOPORAG_LABELS = (.*);\n", view.html).group(1))
    assert sorted(p["id"] for p in payload) == sorted(placed)
    assert all(p["fs"] * fit >= 11 for p in payload)
    edge_payload = json.loads(re.search(r"var TOPORAG_EDGE_LABELS = (.*);\n", view.html).group(1))
    assert len(edge_payload) == len(edges) and all(p["fs"] * fit >= 9 for p in edge_payload)
    assert json.loads(re.search(r"var TOPORAG_VIEW = (.*);\n", view.html).group(1)) == pytest.approx(vb.tolist())


def _retrieved(g, k: int):
    cx = lift(g)
    enc = HashingEncoder()
    ecx = EmbeddedComplex(cx, embed_complex(cx, enc, show_progress=False), enc)
    question = g.meta.get("question") or " ".join(g.node_text[:3])
    return cx, retrieve(ecx, question, setting=RetrievalSetting.make("toporag", k=k))


@pytest.mark.parametrize("key", samples.SAMPLE_KEYS)
def test_sample_views_labels_never_overlap_nor_leave_the_panel(key):
    g = samples.load_sample(key)
    cx = lift(g)
    _check(graph_view.render_view(cx))
    _check(graph_view.render_view(cx, focus_cells2=[0], height_px=420))
    for k in (4, 8):
        _cx, sub = _retrieved(g, k)
        _check(graph_view.render_view(_cx, sub=sub, height_px=480))  # Ask's side-by-side height


def test_webqsp_size_view_at_k8_labels_never_overlap():
    recs = samples.webqsp_records()
    if not recs:
        pytest.skip("no ../shared/data/webqsp_sample.json on this machine")
    j = next((i for i, r in enumerate(recs) if r.get("id") == "WebQTest-20"), 0)
    g = samples.webqsp_graph(recs[j], j)
    cx, sub = _retrieved(g, 8)
    for h in (480, 560):
        view = graph_view.render_view(cx, sub=sub, height_px=h)
        assert view.nodes.size > graph_view.PAINT_ALL_NODES and len(view.labelled) >= 8
        _check(view)


def test_crowded_labels_that_matter_are_all_placed_apart():
    xy = np.zeros((12, 2)) + np.random.default_rng(0).normal(0, 1, (12, 2))  # all on one spot
    sizes = np.tile([60.0, 15.0], (12, 1))
    always = np.arange(12) < 9
    boxes = graph_view.place_node_labels(xy, np.full(12, 5.0), sizes, always)
    placed = _boxes(boxes)
    assert not np.isnan(boxes[always]).any()  # every label that matters has a place
    hit = _intersections(placed, placed)
    np.fill_diagonal(hit, False)
    assert not hit.any()


def test_edge_labels_are_readable_and_only_painted():
    view = graph_view.render_view(lift(samples.load_sample("scene")))
    assert graph_view.EDGE_LABEL_PX >= 9
    edges = re.search(r"edges = new vis\.DataSet\((.*?)\);", view.html, re.S)
    assert edges is None or '"label"' not in edges.group(1)  # vis-network draws none of its own


def test_a_crowd_of_labels_that_must_show_keeps_the_first_ones_at_full_size():
    """Forty labels that must show on forty nodes in one spot stack up; no scale fits them all at full size,
    so the layout keeps the first ones (placement order is importance order) and makes the rest optional."""
    from toporag_core.studio.graph_view.labels import FIT_SLACK, LABEL_PX, layout_labels

    n = 40
    xy = np.random.default_rng(0).normal(scale=0.5, size=(n, 2))
    lines = [[f"a rather long entity name {i}"] for i in range(n)]
    lay = layout_labels(xy, np.full(n, 5.0), np.arange(n), lines, np.ones(n, bool), np.zeros((0, 2, 2)), [],
                        (480.0, 480.0))
    assert lay.always[0] and 0 < lay.always.sum() < n
    assert lay.font_px(lay.node_font) >= LABEL_PX * FIT_SLACK - 1e-6  # the labels kept are full size
    assert not np.isnan(lay.node_boxes[lay.always]).any()  # every kept label has a place
