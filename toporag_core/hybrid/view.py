"""Figures and tables for the app's "Hybrid tables" page (plotly; no Streamlit here, so testable),
and :func:`follow_top`, which keeps the page's selections on the top-ranked unit.

Every text that comes from a document or a question is passed through :func:`html.escape`
before it enters a figure (plotly renders a subset of HTML in labels and hovers).
"""
from __future__ import annotations

import html
from typing import Any, MutableMapping, Sequence

import numpy as np


def sds_strip(routing, tau: float):
    """Bar per line: its SDS (0 on blank lines), coloured by the router's decision; the tau line."""
    import plotly.graph_objects as go

    sds = np.nan_to_num(routing.line_sds)
    colour = np.where(routing.structured, "#d62728", "#1f77b4")
    hover = [f"line {i + 1}: SDS {s:.2f}<br>{html.escape(x[:80])}" for i, (s, x) in enumerate(zip(sds, routing.lines))]
    fig = go.Figure(go.Bar(x=np.arange(1, len(sds) + 1), y=sds, marker_color=colour, hovertext=hover,
                           hoverinfo="text"))
    fig.add_hline(y=tau, line_dash="dash", annotation_text=f"tau = {tau:.2f}")
    fig.update_layout(height=220, margin=dict(l=10, r=10, t=10, b=10), xaxis_title="line (red = table)",
                      yaxis_title="SDS", yaxis_range=[0, 1.05])
    return fig


def route_frame(index, hits: list[dict]):
    """A route's hits as a DataFrame (rank, unit, score, preview)."""
    import pandas as pd

    return pd.DataFrame([{"rank": i + 1, "unit": h["uid"], "score": round(h["score"], 4),
                          "preview": index.units[h["unit"]].flat_text()[:90]} for i, h in enumerate(hits)])


def fused_frame(index, result: dict):
    """The final ranking: rank, unit, kind, fused score, preview."""
    import pandas as pd

    ranking = result.get("reranked") or result["fused"]
    return pd.DataFrame([{"rank": r["rank"], "unit": r["uid"], "kind": index.units[r["unit"]].kind,
                          "score": round(r["score"], 4), "preview": index.units[r["unit"]].flat_text()[:90]}
                         for r in ranking])


NOT_RERANKED = "\u2014"  # a unit the reranker did not rank


def rank_frame(result: dict):
    """Ranks per route and after fusion; a ``reranked rank`` column only when a reranker ran (then a
    unit it did not rank shows :data:`NOT_RERANKED`, never ``None``; the column is text, as a column of
    whole numbers and dashes has to be for the table widget)."""
    import pandas as pd

    rows = [{"unit": r["uid"], "route": r["route"], "route rank": r["route_rank"], "fused rank": r["rank"],
             "fused score": round(r["score"], 4)} for r in result["fused"]]
    if result.get("reranked"):
        rer = {r["unit"]: r["rank"] for r in result["reranked"]}
        for row, r in zip(rows, result["fused"]):
            row["reranked rank"] = str(rer[r["unit"]]) if r["unit"] in rer else NOT_RERANKED
    return pd.DataFrame(rows)


def cell_heatmap(explained: dict):
    """Heatmap of max-over-terms similarity per cell; each term's best cell outlined and labelled."""
    import plotly.graph_objects as go

    grid = explained["grid"]  # (K, R, C)
    with np.errstate(all="ignore"):
        z = np.nanmax(np.where(np.isnan(grid), -np.inf, grid), axis=0) if grid.size else np.zeros((0, 0))
    z = np.where(np.isfinite(z), z, np.nan)
    header = [html.escape(h) for h in explained["header"]]
    text = [[html.escape(v) for v in row] for row in explained["rows"]]
    rows = list(range(1, len(text) + 1))  # data rows numbered from 1, as in best_cell_frame
    fig = go.Figure(go.Heatmap(z=z, x=list(range(len(header))), y=rows, text=text,
                               texttemplate="%{text}", colorscale="Blues", hoverongaps=False,
                               colorbar=dict(title="best term cos")))
    for b in explained["best"]:
        if b["row"] is None:
            continue
        fig.add_shape(type="rect", x0=b["col"] - 0.5, x1=b["col"] + 0.5, y0=b["row"] + 0.5, y1=b["row"] + 1.5,
                      line=dict(color="#d62728", width=2))
    fig.update_layout(height=120 + 28 * len(text), margin=dict(l=10, r=10, t=30, b=10),
                      xaxis=dict(tickmode="array", tickvals=list(range(len(header))), ticktext=header, side="top"),
                      yaxis=dict(autorange="reversed", title="row", tickmode="array", tickvals=rows))
    return fig


def best_cell_frame(explained: dict):
    """Each query term's best cell: term, row (data rows from 1, as on the heatmap), column, value, cos."""
    import pandas as pd

    return pd.DataFrame([{"term": b["term"], "row": None if b["row"] is None else b["row"] + 1,
                          "column": b["header"], "value": b["value"],
                          "cos": None if b["sim"] is None else round(b["sim"], 4)} for b in explained["best"]])


def follow_top(state: MutableMapping[str, Any], key: str, options: Sequence[str]) -> None:
    """Point the selection ``state[key]`` at ``options[0]`` (the top-ranked or newest choice) whenever
    the first option changes, so a new upload or a new ranking is what the page shows; a choice the
    user made among the same options stays. The first option seen is remembered under ``key + "_top"``."""
    top = options[0] if options else None
    if state.get(f"{key}_top") != top:
        state[f"{key}_top"] = top
        if top is not None:
            state[key] = top
