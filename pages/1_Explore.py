"""Explore: what are the 2-cells of this graph, and where do they sit?"""
import html

import streamlit as st

from toporag_core.studio import resources
from toporag_core.studio import state
from toporag_core.studio.graph_view import DEFAULT_CAP, legend_html, render_view
from toporag_core.studio.learn import lifting_steps
from toporag_core.studio.explore import cycles_html
from toporag_core.studio.resources import get_complex, show_view

st.set_page_config(page_title="Explore the complex", layout="wide")
ss = st.session_state
graph = resources.page_graph(ss)
tree, seed = state.tree_settings(ss)
cx = get_complex(ss[state.GRAPH_KEY], tree, seed, graph)


@st.cache_data(show_spinner="Writing out the 2-cells ...", max_entries=16)
def cells_table(graph_key: str, tree: str, seed: int):
    return lifting_steps(cx).drop(columns=["step"])


st.title("Explore the complex")
st.caption(f"{graph.name or 'unnamed graph'}: {cx.num_nodes} nodes, {cx.num_edges} 1-cells, {cx.num_cells2} 2-cells "
           f"(spanning tree: {tree}). Pick 2-cells in the table (or the sidebar) to highlight their cycles.")

table = cells_table(ss[state.GRAPH_KEY], tree, seed)
with st.sidebar:
    st.header("View")
    cap = st.slider("Node cap of the view", 30, 500, DEFAULT_CAP, step=10,
                    help="Big graphs show only the neighbourhood of the picked cells, at most this many nodes.")
    picked_side = st.multiselect("Highlight 2-cells", table["2-cell"].tolist(), key="explore_cells",
                                 format_func=lambda f: f"c{f} (length {int(table.loc[f, 'boundary length'])})")
    shade_all = st.toggle("Shade every 2-cell in view", value=cx.num_nodes <= 60)
    find = st.text_input("Filter the table by text", key="explore_find")

shown = table
if find:
    shown = table[table["cycle"].str.contains(find, case=False, regex=False)]
event = st.dataframe(shown, hide_index=True, on_select="rerun", selection_mode="multi-row", key="cells_table",
                     height=240, column_order=["2-cell", "boundary length", "cycle", "chord", "non-tree edge"],
                     column_config={"cycle": st.column_config.TextColumn(width="large")})
picked_table = shown.iloc[list(event.selection.rows)]["2-cell"].tolist() if event is not None else []
with st.expander(f"Every cycle in full ({len(shown)} 2-cells)", expanded=len(shown) <= 12):
    st.markdown(cycles_html(shown), unsafe_allow_html=True)  # user text escaped there
picked = list(dict.fromkeys([*picked_table, *picked_side]))
shaded = [f for f in range(cx.num_cells2) if f not in picked] if shade_all else []

view = render_view(cx, focus_cells2=picked, shade_cells2=shaded, cap=cap)
st.markdown(legend_html(retrieval=False), unsafe_allow_html=True)
st.caption(view.caption() + " Hover a node or edge for its full text.")
show_view(view)
if picked:
    st.markdown("**Picked 2-cells**")
    for f in picked:
        colour = view.cell_colours.get(int(f), "#999999")
        # the chip is a static colour from the palette; the cycle text is escaped
        st.markdown(f'<span style="display:inline-block;width:12px;height:12px;background:{colour};'
                    f'border-radius:3px;margin-right:6px"></span><code>c{f}</code>: '
                    + html.escape(str(table.loc[f, "cycle"])), unsafe_allow_html=True)
    off = sorted(set(picked) - set(view.cells2_filled))
    if off:
        st.warning(f"2-cells {off} reach outside the shown neighbourhood; raise the node cap to draw them.")
