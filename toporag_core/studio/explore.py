"""Explore-page support: every 2-cell's cycle written out in full (the table's cell cuts long cycles short).

:func:`cycles_html` renders the rows of :func:`~toporag_core.studio.learn.lifting_steps` as wrapped lines,
``c<id> (length L): a -[r]- b -[s]- ...``, every user text ``html.escape``-d, at most ``limit`` rows (the
rest counted), for ``st.markdown(..., unsafe_allow_html=True)``.
"""
from __future__ import annotations

import html

import pandas as pd

CYCLES_SHOWN = 300


def cycles_html(table: pd.DataFrame, limit: int = CYCLES_SHOWN) -> str:
    """The ``cycle`` column of ``table`` in full, one wrapped line per 2-cell (escaped)."""
    rows = table.head(int(limit))
    lines = [f'<div style="margin:0 0 4px 0;white-space:normal;overflow-wrap:anywhere"><code>c{int(f)}</code> '
             f'(length {int(n)}): {html.escape(str(cyc))}</div>'
             for f, n, cyc in zip(rows["2-cell"], rows["boundary length"], rows["cycle"])]
    more = len(table) - len(rows)
    if more > 0:
        lines.append(f"<div><i>{more} more 2-cell(s): filter the table by text to see them.</i></div>")
    return '<div style="font-size:0.9rem;line-height:1.45">' + "".join(lines) + "</div>"
