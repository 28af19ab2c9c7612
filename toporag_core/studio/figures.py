"""Plotly figures of the app: boundary lengths, prizes, sweeps, incidence heatmaps."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..cells.complex import CellComplex

RANK_COLOURS = {"0-cells": "#4e79a7", "1-cells": "#f28e2b", "2-cells": "#59a14f"}


def boundary_length_histogram(cx: CellComplex) -> go.Figure:
    """Histogram of the 2-cells' boundary lengths (one bar per length)."""
    lens = cx.boundary_lengths()
    if lens.size == 0:
        fig = go.Figure()
        fig.add_annotation(text="no 2-cells: the graph is a forest", showarrow=False, x=0.5, y=0.5,
                           xref="paper", yref="paper")
    else:
        values, counts = np.unique(lens, return_counts=True)
        fig = px.bar(x=values, y=counts, labels={"x": "boundary length (edges)", "y": "2-cells"})
        fig.update_traces(marker_color=RANK_COLOURS["2-cells"])
        fig.update_xaxes(dtick=1)
    fig.update_layout(title="2-cell boundary lengths", height=300, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def prize_table(sub, top: int = 10) -> pd.DataFrame:
    """Non-zero prizes of each dimension (up to ``top`` per dimension), with the cell's text, whether it was
    retrieved and, for a retrieved 2-cell, its label in the LLM context (``c0``, ``c1``, ... in retrieval order,
    as :func:`~toporag_core.retrieval.textualize` numbers them)."""
    from ..retrieval import cycle_text

    cx = sub.complex
    g = cx.graph
    rows = []
    for rank, prizes, chosen in ((0, sub.prizes[0], sub.nodes), (1, sub.prizes[1], sub.edges),
                                 (2, sub.prizes[2], sub.cells2)):
        if prizes.size == 0:
            continue
        order = np.argsort(-prizes, kind="stable")
        if rank < 2:
            order = order[prizes[order] > 0]
        else:  # 2-cell prizes can be negative; show the best ones (those are the interesting ones)
            order = order[:top]
        chosen_set = set(chosen.tolist())
        in_context = {int(f): f"c{f}" for f in sub.cells2.tolist()} if rank == 2 else {}  # as the context names it
        for c in order[:top].tolist():
            if rank == 0:
                text = g.node_text[c]
            elif rank == 1:
                text = "; ".join(f"{h} -[{r}]-> {t}" for h, r, t in cx.edge_relations(c))
            else:
                text = cycle_text(cx, c)
            rows.append({"dim": rank, "cell": c, "prize": float(prizes[c]), "retrieved": c in chosen_set,
                         "in context": in_context.get(c, ""), "text": text})
    return pd.DataFrame(rows, columns=["dim", "cell", "prize", "retrieved", "in context", "text"])


PANEL_GAP_PX = 72   # between the prize panels: the x tick labels of one and the title of the next fit in it
BAR_PX = 24


def prize_chart(table: pd.DataFrame) -> go.Figure:
    """Horizontal bars of the prizes in :func:`prize_table`, one panel (row) per rank.

    Laid out in pixels: every bar :data:`BAR_PX` high and :data:`PANEL_GAP_PX` between panels, so a panel's
    title never meets the tick labels of the panel above, however many bars each has."""
    names = ("0-cells", "1-cells", "2-cells")
    sizes = [max(1, int((table["dim"] == r).sum())) for r in range(3)]
    panels = [BAR_PX * s + 16 for s in sizes]
    top, bottom = 70, 30
    plot = sum(panels) + 2 * PANEL_GAP_PX
    fig = make_subplots(rows=3, cols=1, subplot_titles=names, vertical_spacing=PANEL_GAP_PX / plot,
                        row_heights=[p / sum(panels) for p in panels])
    for rank, name in enumerate(names):
        part = table[table["dim"] == rank].iloc[::-1]
        labels = [(t if len(t) <= 60 else t[:59] + "\u2026") for t in part["text"]]
        # keep bars distinct; a retrieved 2-cell also shows its context label (c<id>)
        labels = [f"{lab} [{c}{' = ' + ctx if ctx else ''}]" for lab, c, ctx in
                  zip(labels, part["cell"], part["in context"])]
        fig.add_trace(go.Bar(x=part["prize"], y=labels, orientation="h", name=name, hovertext=part["text"],
                             marker_color=[RANK_COLOURS[name] if r else "#c7c7c7" for r in part["retrieved"]]),
                      row=rank + 1, col=1)
    fig.update_yaxes(automargin=True, tickfont=dict(size=11))
    fig.update_xaxes(tickfont=dict(size=11))
    for ann in fig.layout.annotations:  # subplot titles: left, bold, just above their panel
        ann.update(x=0, xanchor="left", font=dict(size=13), yshift=4)
    fig.update_layout(height=top + plot + bottom, showlegend=False, margin=dict(l=10, r=10, t=top, b=bottom),
                      title=dict(text="Prizes (grey = not retrieved)", y=1, yanchor="top", pad=dict(t=12)))
    return fig


def sweep_chart(df: pd.DataFrame, x: str, title: str, subtitle: str = "") -> go.Figure:
    """Cells per dimension (lines) against the swept parameter ``x``; ``subtitle`` (e.g. the other parameters)
    goes on a second, smaller title line, the legend below the axis, so nothing overlaps at half a page's width."""
    long = df.melt(id_vars=[x], value_vars=["0-cells", "1-cells", "2-cells"], var_name="dimension", value_name="cells")
    fig = px.line(long, x=x, y="cells", color="dimension", markers=True, color_discrete_map=RANK_COLOURS)
    text = title + (f"<br><span style='font-size:11px;color:#555'>{subtitle}</span>" if subtitle else "")
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=70, b=10), title=dict(text=text, x=0.01, y=0.97),
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0, title_text=""))
    return fig


def incidence_heatmap(table: pd.DataFrame, title: str) -> go.Figure:
    """A signed incidence table (rows x columns of -1/0/+1) as a red-white-blue heatmap."""
    fig = px.imshow(table.values, x=[str(c) for c in table.columns], y=[str(r) for r in table.index],
                    color_continuous_scale=["#e15759", "#ffffff", "#4e79a7"], zmin=-1, zmax=1, aspect="auto",
                    title=title)
    fig.update_layout(height=max(240, 22 * len(table) + 80), margin=dict(l=10, r=10, t=40, b=10),
                      coloraxis_showscale=False)
    return fig


def laplacian_heatmap(table: pd.DataFrame, title: str) -> go.Figure:
    """A Hodge Laplacian (integer table) as a heatmap in the incidence heatmaps' red-white-blue scale, symmetric
    around 0 (diagonal: degrees / boundary lengths; off the diagonal: -1 / +1 by orientation, 0 elsewhere)."""
    top = max(1.0, float(np.abs(table.values).max(initial=0)))
    fig = px.imshow(table.values, x=[str(c) for c in table.columns], y=[str(r) for r in table.index],
                    color_continuous_scale=["#e15759", "#ffffff", "#4e79a7"], zmin=-top, zmax=top, aspect="auto",
                    title=title)
    fig.update_layout(height=max(240, min(620, 16 * len(table) + 90)), margin=dict(l=10, r=10, t=40, b=10),
                      coloraxis_showscale=False)
    return fig


def spectrum_chart(spectra: dict[str, list[float]], zero_counts: dict[str, int]) -> go.Figure:
    """The eigenvalues of L0, L1, L2 (one row of dots each), the zero eigenvalues (the kernel) in black."""
    fig = go.Figure()
    names = [n for n in ("L0", "L1", "L2") if n in spectra]
    for name in names:
        w = np.asarray(spectra[name], dtype=float)
        zero = np.arange(w.size) < zero_counts.get(name, 0)  # ascending: the kernel comes first
        fig.add_trace(go.Scatter(x=w, y=[name] * w.size, mode="markers", name=name, showlegend=False,
                                 marker=dict(size=11, color=np.where(zero, "#111111", "#4e79a7"),
                                             line=dict(width=1, color="#ffffff")),
                                 hovertemplate="%{y}: eigenvalue %{x:.4f}<extra></extra>"))
    fig.update_layout(title="Spectra (black: eigenvalue 0, the harmonic part)", height=260,
                      margin=dict(l=10, r=10, t=50, b=40), xaxis_title="eigenvalue")
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1])
    return fig
