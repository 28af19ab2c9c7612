"""The graph view's colours and their legend.

Cells are coloured by retrieval role (terminal, Steiner connector, boundary closure), by mark, or by
focus; 1-cells of the spanning tree and chords (non-tree edges, the ones that created the 2-cells)
apart; 2-cells filled (picked / retrieved, one :data:`CELL_PALETTE` colour each when several are
picked) or shaded (candidates not chosen, other 2-cells). :func:`legend_html` shows the colours of
either kind of view as static HTML (no user text).
"""
from __future__ import annotations

ROLE_COLOURS = {"terminal": "#e15759", "steiner": "#f28e2b", "closure": "#4e79a7"}
NODE_DEFAULT, NODE_MUTED, NODE_FOCUS = "#9ecae9", "#d9d9d9", "#59a14f"
NODE_HIGHLIGHT = "#d4a017"  # e.g. the nodes holding the gold answer (Error analysis)
EDGE_TREE, EDGE_CHORD, EDGE_MUTED = "#7f7f7f", "#b07aa1", "#dddddd"
CELL_FILL, CELL_STROKE = "rgba(89, 161, 79, 0.28)", "rgba(89, 161, 79, 0.95)"
CELL_SHADE = "rgba(176, 122, 161, 0.13)"
# distinct fills for several picked 2-cells (the first is the usual green)
CELL_PALETTE = ("89, 161, 79", "78, 121, 167", "242, 142, 43", "176, 122, 161", "225, 87, 89", "118, 183, 178",
                "237, 201, 72", "156, 117, 95")


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
