"""Retrieval lab: which subcomplex does a question retrieve, and how do k, C2 and the method change it?"""
import streamlit as st

from toporag_core.retrieval import METHODS, textualize
from toporag_core.studio import lab, state
from toporag_core.studio.figures import prize_chart, prize_table, sweep_chart
from toporag_core.studio.graph_view import DEFAULT_CAP, legend_html, render_view
from toporag_core.studio.resources import get_embedded, show_html
from toporag_core.studio.sweep import DEFAULT_C2_VALUES, sweep_c2, sweep_k

st.set_page_config(page_title="Retrieval lab", layout="wide")


# Sweeps are cached by everything that determines them (the embedded complex by its graph
# fingerprint, tree, seed and encoder), so a slider the sweep does not vary costs nothing.
@st.cache_data(max_entries=64, show_spinner=False)
def cached_sweep_k(_ecx, graph_key, tree, seed, question, method, c2, edge_cost, encoder):
    return sweep_k(_ecx, question, method, range(6), c2=c2, edge_cost=edge_cost)


@st.cache_data(max_entries=64, show_spinner=False)
def cached_sweep_c2(_ecx, graph_key, tree, seed, question, method, ks, edge_cost, encoder):
    return sweep_c2(_ecx, question, method, DEFAULT_C2_VALUES, *ks, edge_cost=edge_cost)


ss = st.session_state
graph = state.current_graph(ss)
tree, seed = state.tree_settings(ss)
key = ss[state.GRAPH_KEY]

# ---------------------------------------------------------------- sidebar: every control
with st.sidebar:
    st.header("Retrieval")
    method = st.selectbox("Method", METHODS, format_func=lab.METHOD_LABELS.get, key="lab_method")
    compare = st.toggle("Compare two methods", key="lab_compare")
    other = st.selectbox("Second method", [m for m in METHODS if m != method], format_func=lab.METHOD_LABELS.get,
                         key="lab_method_b", disabled=not compare)
    k = st.slider("k (cells per dimension)", 0, 10, 3, key="lab_k",
                  help="Top-k 0-cells and 1-cells get rank prizes k..1; the top-k 2-cells are candidates.")
    advanced = st.toggle("Advanced: separate k0, k1, k2", key="lab_advanced")
    k0 = st.slider("k0 (0-cells)", 0, 10, 3, key="lab_k0") if advanced else None
    k1 = st.slider("k1 (1-cells)", 0, 10, 3, key="lab_k1") if advanced else None
    k2 = st.slider("k2 (2-cells)", 0, 10, 3, key="lab_k2") if advanced else None
    c2 = st.slider("C2 (cost per boundary edge of a 2-cell)", 0.0, 3.0, 0.5, 0.05, key="lab_c2")
    edge_cost = st.slider("Edge cost", 0.0, 2.0, 0.5, 0.05, key="lab_edge_cost")
    st.header("View")
    cap = st.slider("Node cap of the view", 30, 500, DEFAULT_CAP, step=10, key="lab_cap",
                    help="The view shows the retrieved subcomplex and its neighbourhood, at most this many nodes.")
    live_sweep = st.toggle("Live sweep charts", value=graph.num_nodes <= 500, key=f"lab_sweep_{key}",
                           help="14 extra retrievals per change (cached); off by default on big graphs.")
settings = lab.LabSettings(k=k, c2=c2, edge_cost=edge_cost, k0=k0, k1=k1, k2=k2)

st.title("Retrieval lab")
ecx = get_embedded(key, tree, seed, graph)
st.caption(f"{graph.name or 'unnamed graph'}: {ecx.complex.num_nodes} nodes, {ecx.complex.num_edges} 1-cells, "
           f"{ecx.complex.num_cells2} 2-cells; encoder {ecx.encoder.name}. Cell embeddings are computed once per "
           "graph; moving a slider only re-runs the retrieval.")
question = st.text_area("Question", value=graph.meta.get("question") or "", key=f"lab_question_{key}", height=90,
                        help="Press Ctrl+Enter (or click outside) to retrieve.")

methods = [method, other] if compare else [method]
try:
    subs = {m: lab.run(ecx, question, m, settings) for m in methods}
except ValueError as e:
    st.warning(str(e))
    st.stop()

st.dataframe(lab.counts_frame(subs), hide_index=True)
st.markdown(legend_html(retrieval=True), unsafe_allow_html=True)
for col, (m, sub) in zip(st.columns(len(subs)), subs.items()):
    with col:
        n, e, f = sub.counts
        st.markdown(f"**{lab.METHOD_LABELS[m]}**: {n} 0-cells, {e} 1-cells, {f} 2-cells "
                    f"({sub.timings.get('total', 0.0) * 1000:.1f} ms)")
        view = render_view(ecx.complex, sub=sub, cap=cap, height_px=520 if compare else 580)
        st.caption(view.caption())
        show_html(view.html, 540 if compare else 600)

tab_prizes, tab_context, tab_sweep, tab_time = st.tabs(["Prizes", "Context for the LLM", "Sweep: k and C2", "Timings"])
with tab_prizes:
    table = prize_table(subs[method])
    st.plotly_chart(prize_chart(table), key="prize_chart")
    st.dataframe(table, hide_index=True)
with tab_context:
    for col, (m, sub) in zip(st.columns(len(subs)), subs.items()):
        col.markdown(f"**{lab.METHOD_LABELS[m]}**: exactly the text the LLM reads")
        col.code(textualize(sub), language=None)
with tab_sweep:
    if not live_sweep:
        st.info("Turn on 'Live sweep charts' in the sidebar to run them on this graph.")
    else:
        a, b = st.columns(2)
        dk = cached_sweep_k(ecx, key, tree, seed, question, method, c2, edge_cost, ecx.encoder.name)
        a.plotly_chart(sweep_chart(dk, "k", f"Cells per dimension as k goes 0..5 (C2 = {c2:g})"), key="sweep_k")
        dc = cached_sweep_c2(ecx, key, tree, seed, question, method, settings.ks(), edge_cost, ecx.encoder.name)
        b.plotly_chart(sweep_chart(dc, "C2", f"Cells per dimension as C2 varies (k = {settings.ks()})"), key="sweep_c2")
        a.dataframe(dk, hide_index=True)
        b.dataframe(dc, hide_index=True)
with tab_time:
    st.dataframe(lab.timings_frame(subs), hide_index=True)
    st.caption("Milliseconds per stage of this retrieval (the question vector comes from the encoder cache).")
