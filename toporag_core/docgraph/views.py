"""Plotly figures of the Document-graph page (library code: testable without Streamlit).

* :func:`tree_layout`: ``(n, 2)`` positions, sentences evenly spaced on the bottom row,
  every other node at the mean x of its children, ``y = -level``.
* :func:`tree_figure`: the tree coloured by level; path nodes up to a depth ringed; fused
  nodes drawn as one super-node (diamond at their mean position, members in the hover);
  grafted edges dashed; edge width proportional to the existence weight ``p`` (pass the
  weights before or after evolution).
* :func:`fgw_curve_figure`: FGW against the fusion prefix size with the epsilon line.
* :func:`coupling_figure`: the coupling heatmap with its row / column marginals.

All user text goes through ``html.escape`` before it reaches a hover label.
"""
from __future__ import annotations

import html

import numpy as np

from .build import LEVELS, SEMANTIC, DocGraph
from .traverse import TraversalResult

LEVEL_COLOURS = ("#444444", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd")


def tree_layout(graph: DocGraph) -> np.ndarray:
    """``(n, 2)`` positions of a pre-order tree (children after parents)."""
    n = graph.num_nodes
    pos = np.zeros((n, 2))
    pos[:, 1] = -graph.level
    leaves = np.flatnonzero(np.bincount(graph.parent[1:], minlength=n) == 0)
    pos[leaves, 0] = np.arange(leaves.size)
    for lv in range(int(graph.level.max()) - 1, -1, -1):  # bottom-up: mean of the children
        rows = np.flatnonzero(graph.level == lv + 1)
        par = graph.parent[rows]
        s = np.bincount(par, weights=pos[rows, 0], minlength=n)
        c = np.bincount(par, minlength=n)
        inner = np.flatnonzero((graph.level == lv) & (c > 0))
        pos[inner, 0] = s[inner] / c[inner]
    return pos


def _hover(text: str, limit: int = 160) -> str:
    t = text if len(text) <= limit else text[: limit - 1] + "\u2026"
    return html.escape(t)


def tree_figure(graph: DocGraph, result: TraversalResult | None = None, depth: int | None = None,
                p: np.ndarray | None = None, title: str = ""):
    """The document tree (see the module docstring); ``p`` overrides ``graph.p`` for edge widths."""
    import plotly.graph_objects as go

    pos = tree_layout(graph)
    weights = graph.p if p is None else np.asarray(p)
    fig = go.Figure()
    sem = graph.edge_kind == SEMANTIC
    bins = np.clip(np.round(weights * 4).astype(int), 0, 4)
    for semantic in (False, True):
        for b in range(5):
            idx = np.flatnonzero((sem == semantic) & (bins == b))
            if idx.size == 0:
                continue
            xs = np.stack([pos[graph.edges[0, idx], 0], pos[graph.edges[1, idx], 0], np.full(idx.size, np.nan)], 1)
            ys = np.stack([pos[graph.edges[0, idx], 1], pos[graph.edges[1, idx], 1], np.full(idx.size, np.nan)], 1)
            fig.add_trace(go.Scatter(
                x=xs.ravel(), y=ys.ravel(), mode="lines", hoverinfo="skip", showlegend=False,
                line={"width": 0.4 + 1.2 * b, "color": "rgba(214,39,40,0.35)" if semantic else "rgba(90,90,90,0.6)"}))
    for lv, name in enumerate(LEVELS):
        idx = np.flatnonzero(graph.level == lv)
        fig.add_trace(go.Scatter(x=pos[idx, 0], y=pos[idx, 1], mode="markers", name=name,
                                 marker={"size": 12 - 1.5 * lv, "color": LEVEL_COLOURS[lv]},
                                 text=[_hover(graph.text[i]) for i in idx], hovertemplate="%{text}<extra></extra>"))
    if result is not None:
        steps = result.steps if depth is None else result.steps[:depth]
        on_path = [i for s in steps for i in s.next]
        fig.add_trace(go.Scatter(x=pos[on_path, 0], y=pos[on_path, 1], mode="markers", name="path",
                                 marker={"size": 18, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": "red"}},
                                 hoverinfo="skip"))
        for s in steps:
            if s.fused:
                members = [i for k in s.fused for i in s.children[k]]
                cx, cy = pos[members, 0].mean(), pos[members, 1].mean()
                fig.add_trace(go.Scatter(
                    x=[cx], y=[cy + 0.35], mode="markers", name=f"super-node (depth {s.depth})",
                    marker={"size": 20, "symbol": "diamond", "color": "gold", "line": {"width": 1, "color": "black"}},
                    text=[_hover(" | ".join(graph.text[i] for i in members), 400)],
                    hovertemplate="fused: %{text}<extra></extra>"))
                xs = [v for i in members for v in (cx, pos[i, 0], None)]
                ys = [v for i in members for v in (cy + 0.35, pos[i, 1], None)]
                fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", showlegend=False, hoverinfo="skip",
                                         line={"color": "gold", "width": 1}))
            for g, w in zip(s.grafted, s.graft_weights):
                a, b = s.next[0], g[0]
                fig.add_trace(go.Scatter(x=[pos[a, 0], pos[b, 0]], y=[pos[a, 1], pos[b, 1]], mode="lines",
                                         name=f"grafted (p={w:.2f})", line={"dash": "dash", "color": "purple",
                                                                            "width": 0.5 + 3 * w}))
    fig.update_layout(title=html.escape(title), height=520, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      xaxis={"visible": False}, yaxis={"tickvals": [-i for i in range(5)], "ticktext": list(LEVELS)})
    return fig


def fgw_curve_figure(curve: list[tuple[int, float]], epsilon: float, chosen: int | None = None):
    """FGW against prefix size, with the budget line; ``chosen`` marks the traversal's prefix."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[m for m, _ in curve], y=[v for _, v in curve], mode="lines+markers", name="FGW"))
    fig.add_hline(y=epsilon, line_dash="dash", line_color="red", annotation_text=f"epsilon = {epsilon:g}")
    if chosen is not None and curve:
        val = dict(curve).get(chosen)
        if val is not None:
            fig.add_trace(go.Scatter(x=[chosen], y=[val], mode="markers", name="chosen prefix",
                                     marker={"size": 14, "symbol": "star", "color": "red"}))
    fig.update_layout(xaxis_title="prefix size m (kept children fused)", yaxis_title="FGW(G, G')", height=340,
                      margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig


def coupling_figure(coupling: np.ndarray, mu: np.ndarray, nu: np.ndarray):
    """Heatmap of ``T (n, m)`` with the row marginal ``T 1`` (right) and column marginal ``T^T 1`` (top)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    t = np.asarray(coupling)
    fig = make_subplots(rows=2, cols=2, column_widths=[0.85, 0.15], row_heights=[0.15, 0.85],
                        shared_xaxes=True, shared_yaxes=True, horizontal_spacing=0.02, vertical_spacing=0.02)
    fig.add_trace(go.Heatmap(z=t, colorscale="Viridis", showscale=False,
                             hovertemplate="orig %{y} -> deformed %{x}: %{z:.2e}<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Bar(x=np.arange(t.shape[1]), y=t.sum(0), name="T^T 1", marker_color="#1f77b4"), row=1, col=1)
    fig.add_trace(go.Scatter(x=np.arange(t.shape[1]), y=nu, mode="markers", name="nu", marker={"color": "red",
                                                                                                "size": 4}),
                  row=1, col=1)
    fig.add_trace(go.Bar(y=np.arange(t.shape[0]), x=t.sum(1), orientation="h", name="T 1", marker_color="#2ca02c"),
                  row=2, col=2)
    fig.add_trace(go.Scatter(y=np.arange(t.shape[0]), x=mu, mode="markers", name="mu", marker={"color": "red",
                                                                                                "size": 4}),
                  row=2, col=2)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_layout(height=520, margin={"l": 10, "r": 10, "t": 30, "b": 10}, showlegend=False)
    return fig
