"""Learn: how does a graph become a cell complex, and how does TopoRAG retrieve from it?"""
import streamlit as st

from toporag_core.studio import resources
from toporag_core.studio import learn, samples, state
from toporag_core.studio.figures import incidence_heatmap
from toporag_core.studio.graph_view import legend_html, render_view
from toporag_core.studio.resources import get_complex, get_embedded, show_view

st.set_page_config(page_title="Learn", layout="wide")
ss = st.session_state
current = resources.current_graph(ss)
tree, seed = state.tree_settings(ss)

# ---------------------------------------------------------------- sidebar
with st.sidebar:
    st.header("Teaching graph")
    options = (["current"] if current.num_nodes <= learn.MAX_TEACHING_NODES else []) + list(samples.SAMPLE_KEYS)
    pick = st.selectbox("Graph", options, key="learn_graph",
                        format_func=lambda o: f"current: {current.name or 'unnamed'}" if o == "current"
                        else samples.sample(o).title)
    if current.num_nodes > learn.MAX_TEACHING_NODES:
        st.caption(f"The loaded graph has {current.num_nodes} nodes; the tables here need at most "
                   f"{learn.MAX_TEACHING_NODES}, so pick a small one.")
    st.header("Retrieval walk-through")
    start = learn.walk_defaults()  # the library's retrieval defaults, as in the Retrieval lab
    k = st.slider("k", 0, 6, start["k"], key="learn_k")
    c2 = st.slider("C2", 0.0, 3.0, start["c2"], 0.05, key="learn_c2")
    edge_cost = st.slider("Edge cost", 0.0, 2.0, start["edge_cost"], 0.05, key="learn_edge_cost")

graph = current if pick == "current" else samples.load_sample(pick)
gkey = state.graph_fingerprint(graph)
cx = get_complex(gkey, tree, seed, graph)
nums = learn.euler_numbers(cx)
steps = learn.lifting_steps(cx)

st.title("Learn: cell-complex retrieval, step by step")
tab_lift, tab_maps, tab_walk = st.tabs(["1. Lifting", "2. Boundary maps and Betti numbers", "3. One retrieval"])

# ---------------------------------------------------------------- 1. lifting
with tab_lift:
    st.markdown(
        f"**{graph.name or 'This graph'}** has {nums['V']} nodes (0-cells) and {nums['E']} edges (1-cells). "
        f"A spanning tree ({tree}) reaches every node with {nums['tree_edges']} edges (solid). Each of the other "
        f"{nums['non_tree_edges']} edges (dashed) closes exactly one cycle with the tree (its *fundamental cycle*), "
        "and one 2-cell (a disc) is glued onto each.")
    step = (st.slider("Step (0 = spanning tree only)", 0, nums["cells2"], 0, key=f"learn_step_{gkey}_{tree}")
            if nums["cells2"] else 0)
    if nums["cells2"] == 0:
        view = render_view(cx, cap=learn.MAX_TEACHING_NODES)
        st.info("This graph is a forest: every edge is a tree edge, there is no cycle and no 2-cell to glue.")
    elif step == 0:
        view = render_view(cx, cap=learn.MAX_TEACHING_NODES)
        st.info("Step 0: the spanning tree (solid) and the non-tree edges (dashed). Move the slider to glue 2-cells.")
    else:
        row = steps.iloc[step - 1]
        f = int(row["2-cell"])
        view = render_view(cx, focus_cells2=[f], shade_cells2=list(range(f)),
                           focus_edges=[int(row["non-tree edge"])], cap=learn.MAX_TEACHING_NODES)
        st.success(f"Step {step}: the non-tree edge **{row['chord']}** closes the cycle "
                   f"`{row['cycle']}` ({row['boundary length']} edges): 2-cell c{f} is glued onto it. "
                   f"Earlier 2-cells are shaded.")
    st.markdown(legend_html(retrieval=False), unsafe_allow_html=True)
    show_view(view)
    st.dataframe(steps, hide_index=True)

# ---------------------------------------------------------------- 2. boundary maps
with tab_maps:
    tables = learn.boundary_tables(cx)
    st.markdown(
        "**B1** (nodes x 1-cells): edge e = (u, v) with u < v is oriented u -> v, so B1[u, e] = -1 and B1[v, e] = +1. "
        "**B2** (1-cells x 2-cells): +1 where a 2-cell's boundary walks an edge along its orientation, -1 against it. "
        "Blue = +1, red = -1, white = 0; hover a square for its row and column.")
    a, b = st.columns(2)
    a.plotly_chart(incidence_heatmap(tables.b1, "B1: boundary of each 1-cell"), key="b1")
    b.plotly_chart(incidence_heatmap(tables.b2, "B2: boundary of each 2-cell"), key="b2")
    verdict = "every entry is 0" if tables.product_is_zero else "NOT zero: the complex is broken"
    st.markdown(f"**B1 @ B2 = 0**: {verdict}. The boundary of a boundary is empty: each 2-cell's boundary is a "
                "closed walk, so every node on it is entered once and left once, and the +1 and -1 cancel.")
    with st.expander("B1 @ B2 as a table"):
        st.dataframe(tables.product)
    st.markdown(
        f"**Betti numbers.** b0 = {nums['b0']} connected component(s). A spanning forest has |V| - b0 = "
        f"{nums['V']} - {nums['b0']} = {nums['tree_edges']} edges, so |E| - |V| + b0 = {nums['E']} - {nums['V']} + "
        f"{nums['b0']} = **{nums['b1']}** edges are left over. Each left-over edge closes one independent cycle, so "
        f"b1 = {nums['b1']}, and since one 2-cell is glued per left-over edge, **#2-cells = {nums['cells2']}**"
        + (f" ({nums['skipped']} long cycles skipped)." if nums["skipped"] else "."))
    g1, c1 = st.columns(2)
    g1.metric("b1 of the graph", nums["b1"], help="Independent cycles of the 1-skeleton: |E| - |V| + b0.")
    c1.metric("b1 of the complex", nums["b1_complex"],
              help="Cycles left unfilled after gluing the 2-cells: b1(graph) - #2-cells.")
    st.markdown(
        f"**Graph vs complex.** The *graph* has b1 = {nums['b1']} independent cycles. Gluing a 2-cell onto a cycle "
        f"fills it (its boundary becomes the boundary of a disc, so it no longer counts as a hole): the *complex* "
        f"has b1 = {nums['b1']} - {nums['cells2']} = **{nums['b1_complex']}**"
        + (" - every cycle is filled." if nums["b1_complex"] == 0 else
           f" - {nums['b1_complex']} long cycle(s) were left open.") +
        " Same nodes and edges, different topology: that is what the lifting adds.")

# ---------------------------------------------------------------- 3. one retrieval
with tab_walk:
    ecx = get_embedded(gkey, tree, seed, graph)
    question = st.text_input("Question", value=graph.meta.get("question") or "", key=f"learn_question_{gkey}")
    if not question.strip():
        st.warning("Type a question to walk through a retrieval.")
        st.stop()
    walk = learn.retrieval_walkthrough(ecx, question, k, k, k, c2, edge_cost)
    st.markdown(f"**1. Similarities and rank prizes.** Every cell is embedded ({ecx.encoder.name}); the question "
                f"is compared by cosine. {learn.rank_prize_text(k)} Equal cosines: 0-cells go to the lower id; "
                "1-cells go to the one whose endpoints are closer to the question (higher *endpoint cosine sum*), "
                "then to the lower id.")
    a, b = st.columns(2)
    a.dataframe(walk.nodes.head(max(k, 1) + 5), hide_index=True)
    b.dataframe(walk.edges.head(max(k, 1) + 5), hide_index=True)
    for note in walk.ties:
        st.info("Tie: " + note)
    st.markdown(f"**2. 2-cell prizes.** prize = (sum of its boundary node and edge prizes) - C2 x boundary length, "
                f"with C2 = {c2:g}. " + (f"The top k = {k} 2-cells with a positive prize become candidates."
                                         if k else "With k = 0 no 2-cell becomes a candidate."))
    st.dataframe(walk.cells2, hide_index=True)
    sub = walk.sub
    same = all(bool((a == b).all()) for a, b in zip(sub.prizes, (walk.prizes.p0, walk.prizes.p1, walk.prizes.p2)))
    st.caption("These prizes come from `cell_prizes`, the function the retrieval itself calls; they equal the "
               f"prizes stored in the retrieval result: {same}.")
    n, e, f = sub.counts
    st.markdown(f"**3. Prize-collecting Steiner tree.** pcst_fast picks one connected subcomplex that collects "
                f"prizes at the least edge cost ({edge_cost:g} per edge, minus its prize); chosen 2-cells bring "
                f"their whole boundary (closure). Result: **{n} 0-cells, {e} 1-cells, {f} 2-cells**.")
    st.markdown(legend_html(retrieval=True), unsafe_allow_html=True)
    show_view(render_view(cx, sub=sub, cap=learn.MAX_TEACHING_NODES))
