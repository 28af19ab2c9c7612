"""Retrieval lab: which subcomplex does a question retrieve, and how do k, C2 and the method change it?

Next to the cell-complex methods, the two topology-aware node retrievers of Wang et al.
("Topology: proximity" / "Topology: role"): the nodes most similar to a target node.
"""
import streamlit as st

from toporag_core.studio import resources
from toporag_core.studio import lab, state, topo_view
from toporag_core.studio.controls import cell_methods, method_label, setting_controls
from toporag_core.studio.figures import prize_chart, prize_table, sweep_chart
from toporag_core.studio.graph_view import DEFAULT_CAP, legend_html, render_view
from toporag_core.studio.resources import encoder_choice, get_complex, get_embedded, app_encoder, show_view
from toporag_core.studio.sweep import DEFAULT_C2_VALUES, sweep_c2, sweep_k

st.set_page_config(page_title="Retrieval lab", layout="wide")


# Sweeps are cached by everything that determines them (the embedded complex by its graph
# fingerprint, tree, seed and encoder), so a slider the sweep does not vary costs nothing.
@st.cache_data(max_entries=64, show_spinner=False)
def cached_sweep_k(_ecx, graph_key, tree, seed, question, setting, encoder):
    return sweep_k(_ecx, question, setting, range(6))


@st.cache_data(max_entries=64, show_spinner=False)
def cached_sweep_c2(_ecx, graph_key, tree, seed, question, setting, encoder):
    return sweep_c2(_ecx, question, setting, DEFAULT_C2_VALUES)


ss = st.session_state
graph = resources.page_graph(ss)
tree, seed = state.tree_settings(ss)
key = ss[state.GRAPH_KEY]
choice = encoder_choice()
ALL_METHODS = [*cell_methods(), *topo_view.node_methods()]
is_node = topo_view.is_node_method

# ---------------------------------------------------------------- sidebar: every control
with st.sidebar:
    st.header("Retrieval")
    method = st.selectbox("Method", ALL_METHODS, format_func=method_label, key="lab_method",
                          help="Cell-complex methods retrieve a connected subcomplex for the question. Topology "
                               "methods retrieve the nodes most similar to a target node: by proximity (random-"
                               "walk neighbourhood) or by structural role (GraphWave).")
    compare = st.toggle("Compare two methods", key="lab_compare",
                        help="Any two methods side by side, a node method against a cell method included.")
    other = st.selectbox("Second method", [m for m in ALL_METHODS if m != method], format_func=method_label,
                         key="lab_method_b", disabled=not compare)
    methods = [method, other] if compare else [method]
    cells_used = not all(is_node(m) for m in methods)
    cell_methods = [m for m in methods if not is_node(m)]
    # one control per parameter of the chosen cell methods, from the method registry
    settings = setting_controls(cell_methods or ["toporag"], "lab", disabled=not cells_used)
    nodes_used = any(is_node(m) for m in methods)
    if nodes_used:
        st.header("Topology: target node")
        target_mode = st.radio("Target", topo_view.TARGET_MODES, key="lab_target_mode",
                               help="Retrieve the nodes most similar to this node (the node itself excluded).")
        picking = target_mode == topo_view.TARGET_PICKED
        find = st.text_input("Find a node (text or index)", key=f"lab_target_find_{key}", disabled=not picking)
        options = topo_view.node_options(graph, find)
        # keyed by the search too: a new search starts at its first match instead of keeping a stale pick
        picked = st.selectbox(f"Node ({len(options)} shown)", options, disabled=not picking,
                              key=topo_view.picker_key(key, find),
                              format_func=lambda i: topo_view.node_option_label(graph, i))
        node_k = st.slider("k (nodes to retrieve)", 1, topo_view.INDEX_K, 5, key="lab_node_k")
        partial = st.text_input("Partial text of the target (for the prompt)", key="lab_partial",
                                help="Topology-aware RAG writes a node's text from its related nodes; what is "
                                     "known of it goes here.")
        with_baselines = st.toggle("Also run the text and random baselines", value=True, key="lab_baselines")
    st.header("View")
    cap = st.slider("Node cap of the view", 30, 500, DEFAULT_CAP, step=10, key="lab_cap",
                    help="The view shows the retrieved subcomplex and its neighbourhood, at most this many nodes.")
    live_sweep = st.toggle("Live sweep charts", value=graph.num_nodes <= 500, key=f"lab_sweep_{key}",
                           help="14 extra retrievals per change (cached); off by default on big graphs.")

st.title("Retrieval lab")
cx = get_complex(key, tree, seed, graph)
ecx = get_embedded(key, tree, seed, graph) if cells_used else None  # node methods need no cell embeddings
st.caption(f"{graph.name or 'unnamed graph'}: {cx.num_nodes} nodes, {cx.num_edges} 1-cells, "
           f"{cx.num_cells2} 2-cells; encoder {app_encoder(choice).name}. Embeddings are computed once per "
           "graph; moving a slider only re-runs the retrieval.")
# the question typed on Home / Ask is carried here (state.question_box); the lab's own edits win afterwards
own_question = graph.meta.get("question") or ""
state.question_box(ss, f"lab_question_{key}", own_question or state.suggested_question(graph), graph_key=key)
question = st.text_area("Question", key=f"lab_question_{key}", height=90, on_change=state.share_question,
                        args=(ss, f"lab_question_{key}"), help="Press Ctrl+Enter (or click outside) to retrieve.")
if not own_question and question == state.suggested_question(graph):
    st.caption("This graph came without a question: a suggested one about its best-connected node. Edit it.")

try:
    results, baselines = {}, {}
    if nodes_used:
        target, target_score, target_question = topo_view.choose_target(key, choice, graph, target_mode, picked, find,
                                                                        question)
        for m in [m for m in methods if is_node(m)] + (["text", "random"] if with_baselines else []):
            res = topo_view.run_nodes(key, choice, graph, m, target, node_k, target_question, target_score)
            (results if m in methods else baselines)[m] = res
    for m in methods:
        if not is_node(m):
            results[m] = lab.run(ecx, question, settings[m])
    results = {m: results[m] for m in methods}  # sidebar order
except ValueError as e:
    st.warning(str(e))
    st.stop()
subs = {m: r for m, r in results.items() if not is_node(m)}
node_results = {m: r for m, r in results.items() if is_node(m)}

if subs:
    st.dataframe(lab.counts_frame(subs), hide_index=True)
    for m, sub in subs.items():
        for w in state.result_warnings(sub):
            st.warning(f"{method_label(m)}: {w}")
    first_cells = next(iter(subs))
    effect = lab.c2_effect(ecx, question, settings[first_cells])
    if effect is not None and (effect.lo < effect.hi or not effect.candidates):
        st.info(f"**C2 ({method_label(first_cells)})**: {effect.note}")
if len(subs) == 2:  # two cell methods: one full-width view, cells marked by which method retrieved them
    (name_a, sub_a), (name_b, sub_b) = subs.items()
    marks = lab.compare_marks(sub_a, sub_b, method_label(name_a), method_label(name_b))
    st.markdown(f"**{method_label(name_a)} (A) against {method_label(name_b)} (B)**")
    st.markdown(lab.compare_legend_html(name_a, name_b), unsafe_allow_html=True)
    diff = render_view(cx, node_marks=marks["node_marks"], edge_marks=marks["edge_marks"],
                       focus_cells2=marks["cells2"], cell_rgb=marks["cell_rgb"], cap=cap, height_px=620)
    st.caption(diff.caption())
    show_view(diff)
    st.dataframe(lab.membership_frame(sub_a, sub_b, name_a, name_b), hide_index=True)
    st.markdown("**Each method on its own** (coloured by role)")
if subs:
    st.markdown(legend_html(retrieval=True), unsafe_allow_html=True)
if node_results:
    st.markdown(topo_view.legend_html(), unsafe_allow_html=True)
for col, (m, res) in zip(st.columns(len(results)) if len(subs) != 2 else [st.container() for _ in results],
                         results.items()):
    with col:
        if is_node(m):
            st.markdown(f"**{method_label(m)}**: {topo_view.summary_line(res, graph)}")
            view = render_view(cx, node_marks=topo_view.node_marks(res), cap=cap, height_px=520 if compare else 580)
        else:
            n, e, f = res.counts
            st.markdown(f"**{method_label(m)}**: {n} 0-cells, {e} 1-cells, {f} 2-cells "
                        f"({res.timings.get('total', 0.0) * 1000:.1f} ms)")
            view = render_view(cx, sub=res, cap=cap, height_px=520 if compare else 580)
        st.caption(view.caption())
        show_view(view)

tab_names = (["Node scores"] if node_results else []) + (["Prizes"] if subs else []) + \
    ["Context for the LLM", "Sweep: k and C2", "Timings"]
tabs = dict(zip(tab_names, st.tabs(tab_names)))
if node_results:
    with tabs["Node scores"]:
        for m, res in node_results.items():
            st.markdown(f"**{method_label(m)}**: {topo_view.summary_line(res, graph)}")
            st.dataframe(topo_view.retrieval_table(res), hide_index=True)
        if baselines:
            ref = next(iter(node_results))
            st.markdown("**Against the baselines** (same target, same k; shared nodes marked)")
            st.dataframe(topo_view.comparison_table({ref: node_results[ref], **baselines}, ref), hide_index=True)
if subs:
    with tabs["Prizes"]:
        table = prize_table(next(iter(subs.values())))
        st.plotly_chart(prize_chart(table), key="prize_chart")
        st.dataframe(table, hide_index=True)
with tabs["Context for the LLM"]:
    text_fmt = st.radio("Text format", lab.text_formats(), horizontal=True, key="lab_text",
                        help="csv: G-Retriever's nodes/edges tables (the paper's); compact: 'cup [0]: red', "
                             "relations name both ends, letter-free fields such as boxes dropped. A checkpoint "
                             "reads the format it was trained with.")
    for col, (m, res) in zip(st.columns(len(results)), results.items()):
        if is_node(m):
            col.markdown(f"**{method_label(m)}**: the prompt of topology-aware RAG")
            col.code(topo_view.topo_prompt(graph, res, partial), language=None)
        else:
            col.markdown(f"**{method_label(m)}**: exactly the text the LLM reads ({text_fmt})")
            col.code(lab.context_text(res, text_fmt), language=None)
with tabs["Sweep: k and C2"]:
    if is_node(method):
        st.info("The sweeps vary k and C2 of the cell-complex methods: pick one as the first method.")
    elif not live_sweep:
        st.info("Turn on 'Live sweep charts' in the sidebar to run them on this graph.")
    else:
        a, b = st.columns(2)
        first = settings[method]
        shown = ", ".join(f"{n} = {v:g}" for n, v in first.params.items() if isinstance(v, (int, float)))
        dk = cached_sweep_k(ecx, key, tree, seed, question, first, ecx.encoder.name)
        a.plotly_chart(sweep_chart(dk, "k", "Cells per dimension as k goes 0..5", shown), key="sweep_k")
        dc = cached_sweep_c2(ecx, key, tree, seed, question, first, ecx.encoder.name)
        b.plotly_chart(sweep_chart(dc, "C2", "Cells per dimension as C2 varies", shown), key="sweep_c2")
        a.dataframe(dk, hide_index=True)
        b.dataframe(dc, hide_index=True)
with tabs["Timings"]:
    st.dataframe(topo_view.timings_frame(results), hide_index=True)
    st.caption("Milliseconds per stage of this retrieval (the question vector comes from the encoder cache; "
               "index_* stages of node methods ran once per graph, when the index was built).")
