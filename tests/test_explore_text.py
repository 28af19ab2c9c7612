"""Explore: every cycle in full (wrapped, escaped), and dense views label their best-connected nodes where
they find room, never overlapping and never with vis-network's own (unplaced) labels."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np

from toporag_core import TextualGraph, lift
from toporag_core.studio.explore import cycles_html
from toporag_core.studio.graph_view import PAINT_ALL_NODES, render_view
from toporag_core.studio.learn import lifting_steps


def test_cycles_html_writes_long_cycles_out_in_full_and_escapes():
    names = [f"<b>node number {i} with a rather long name</b>" for i in range(12)]
    g = TextualGraph.from_triples([(names[i], "is next to", names[(i + 1) % 12]) for i in range(12)])
    table = lifting_steps(lift(g))
    out = cycles_html(table)
    assert "<b>node" not in out and "&lt;b&gt;node number 11 with a rather long name&lt;/b&gt;" in out
    assert len(table["cycle"][0]) > 300 and out.count("node number") == 12 + 1  # every node, the first twice
    assert "more 2-cell" in cycles_html(table, limit=0)


def test_dense_view_paints_optional_labels_without_overlap():
    g = TextualGraph.from_networkx(nx.barabasi_albert_graph(140, 3, seed=2))
    cx = lift(g)
    view = render_view(cx, cap=140)
    assert view.nodes.size > PAINT_ALL_NODES
    boxes = view.label_layout.node_boxes
    placed = ~np.isnan(boxes).any(1)
    assert placed.sum() >= 10  # dense: labels where they fit
    b = boxes[placed]
    w = np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0])
    h = np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1])
    hit = (w > 1e-9) & (h > 1e-9)
    np.fill_diagonal(hit, False)
    assert not hit.any()
    deg = np.bincount(cx.edges.reshape(-1), minlength=cx.num_nodes)
    first = [i for i, ok in zip(view.label_nodes, placed) if ok][:5]
    assert min(deg[first]) >= np.sort(deg)[-40]  # the best-connected nodes come first
    nodes = json.loads(view.html.split("nodes = new vis.DataSet(")[1].split(");")[0])
    assert {n["label"] for n in nodes} == {" "}  # vis-network draws no label of its own
