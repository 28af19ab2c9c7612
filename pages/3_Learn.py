"""Learn: how does a graph become a cell complex, and how does TopoRAG retrieve from it?"""
import streamlit as st

from toporag_core.studio import resources
from toporag_core.studio import learn, learn_hodge, learn_messages, state
from toporag_core.studio import sources
from toporag_core.studio.figures import incidence_heatmap, laplacian_heatmap, spectrum_chart
from toporag_core.studio.graph_view import legend_html, render_view
from toporag_core.studio.resources import get_complex, get_embedded, show_view

st.set_page_config(page_title="Learn", layout="wide")
ss = st.session_state
current = resources.page_graph(ss)
tree, seed = state.tree_settings(ss)

# ---------------------------------------------------------------- sidebar
with st.sidebar:
    st.header("Teaching graph")
    options = (["current"] if current.num_nodes <= learn.MAX_TEACHING_NODES else []) + list(sources.SAMPLE_KEYS)
    pick = st.selectbox("Graph", options, key="learn_graph",
                        format_func=lambda o: f"current: {current.name or 'unnamed'}" if o == "current"
                        else sources.sample(o).title)
    if current.num_nodes > learn.MAX_TEACHING_NODES:
        st.caption(f"The loaded graph has {current.num_nodes} nodes; the tables here need at most "
                   f"{learn.MAX_TEACHING_NODES}, so pick a small one.")
    st.header("Retrieval walk-through")
    start = learn.walk_defaults()  # the library's retrieval defaults, as in the Retrieval lab
    k = st.slider("k", 0, 6, start["k"], key="learn_k")
    c2 = st.slider("C2", 0.0, 3.0, start["c2"], 0.05, key="learn_c2")
    edge_cost = st.slider("Edge cost", 0.0, 2.0, start["edge_cost"], 0.05, key="learn_edge_cost")

graph = current if pick == "current" else sources.load_sample(pick)
gkey = state.graph_fingerprint(graph)
cx = get_complex(gkey, tree, seed, graph)
nums = learn.euler_numbers(cx)
steps = learn.lifting_steps(cx)

st.title("Learn: cell-complex retrieval, step by step")
tab_lift, tab_maps, tab_walk, tab_hodge, tab_msgs = st.tabs(
    ["1. Lifting", "2. Boundary maps and Betti numbers", "3. One retrieval", "4. Hodge Laplacians and holes",
     "5. Messages and graph tokens"], key="learn_tab", on_change="rerun")

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

# ---------------------------------------------------------------- 4. Hodge Laplacians
with tab_hodge:
    hn = learn_hodge.hodge_numbers(cx)
    st.markdown(
        "The **Hodge Laplacians** are built from the boundary maps of tab 2: "
        "**L0 = B1 B1^T** (nodes x nodes: the graph Laplacian), **L1 = B1^T B1 + B2 B2^T** (1-cells x 1-cells: "
        "1-cells sharing a node, plus 1-cells sharing a 2-cell) and **L2 = B2^T B2** (2-cells x 2-cells). "
        "A vector that every Lk sends to 0 is *harmonic*; by the Hodge theorem the number of independent ones, "
        "dim ker Lk, is the k-th Betti number: components, holes (cycles no 2-cell fills), cavities.")
    cols = st.columns(3)
    for col, (name, table) in zip(cols, learn_hodge.laplacian_tables(cx).items()):
        if table.shape[0]:
            col.plotly_chart(laplacian_heatmap(table, f"{name} ({table.shape[0]} x {table.shape[1]})"),
                             key=f"hodge_{name}")
        else:
            col.info(f"{name} is empty: this complex has no cells of that rank.")
    if hn.spectra is not None:
        st.plotly_chart(spectrum_chart(hn.spectra, learn_hodge.spectrum_zero_counts(cx)), key="hodge_spectra")
    m0, m1, m2 = st.columns(3)
    m0.metric("dim ker L0", hn.harmonic[0], help="Zero eigenvalues of L0: connected components (b0).")
    m1.metric("dim ker L1", hn.harmonic[1], help="Zero eigenvalues of L1: harmonic 1-cochains, the unfilled cycles.")
    m2.metric("dim ker L2", hn.harmonic[2], help="Zero eigenvalues of L2: cavities enclosed by 2-cells.")
    st.markdown("**Against the counting of tab 2.** Counting says b0 components, b1(graph) - #2-cells open cycles "
                "and no cavity; the eigenvalues say:")
    st.dataframe(learn_hodge.betti_table(cx), hide_index=True)
    st.caption(f"The same numbers as `toporag lift GRAPH --tree {tree} --json` prints under \"hodge\": "
               f"harmonic = {list(hn.harmonic)}.")

    st.subheader("Gluing 2-cells removes harmonic cycles")
    if not learn_hodge.small_enough(cx):
        st.info(f"This complex has {cx.shape} cells per rank; the step-by-step pictures need at most "
                f"{learn_hodge.DENSE_MAX} per rank. Pick a smaller teaching graph.")
    else:
        frame = learn_hodge.glue_frame(cx)
        glued = (st.slider("2-cells glued", 0, cx.num_cells2, 0, key=f"learn_glue_{gkey}_{tree}")
                 if cx.num_cells2 else 0)
        row = frame.iloc[glued]
        g1, g2 = st.columns(2)
        g1.metric("harmonic 1-cochains (h1)", int(row["h1"]))
        g2.metric("cavities (h2)", int(row["h2"]))
        st.info(learn_hodge.glue_note(cx, frame, glued))
        modes = learn_hodge.harmonic_modes(cx, glued)
        if modes.shape[1]:
            pick_mode = st.radio("Harmonic 1-cochain drawn", list(range(1, modes.shape[1] + 1)), horizontal=True,
                                 key=f"learn_mode_{gkey}_{tree}_{glued}") if modes.shape[1] > 1 else 1
            st.caption("Edge colour: blue where the harmonic flow runs along the 1-cell's orientation (lower id to "
                       "higher), red against it; width by its size. It circulates around holes, never through a "
                       "glued 2-cell (shaded) and never piles up at a node.")
            view = render_view(cx, shade_cells2=list(range(glued)), focus_cells2=[glued - 1] if glued else [],
                               edge_marks=learn_hodge.mode_marks(cx, modes[:, pick_mode - 1]),
                               cap=learn.MAX_TEACHING_NODES)
        else:
            st.success("No harmonic 1-cochain is left: every cycle of the graph is filled by a 2-cell.")
            view = render_view(cx, shade_cells2=list(range(glued)), focus_cells2=[glued - 1] if glued else [],
                               cap=learn.MAX_TEACHING_NODES)
        show_view(view)

        st.subheader("The ring lifting: 2-cells that enclose a cavity")
        ring_graph, ring_cx = graph, get_complex(gkey, "rings", seed, graph)
        # this graph's rings enclose nothing: show the breakfast table's
        if learn_hodge.hodge_numbers(ring_cx).harmonic[2] == 0:
            ring_graph = sources.load_sample("scene")
            ring_cx = get_complex(state.graph_fingerprint(ring_graph), "rings", seed, ring_graph)
            st.caption(f"The ring lifting of {graph.name or 'this graph'} encloses no cavity, so this part shows the "
                       "breakfast table's.")
        rh = learn_hodge.hodge_numbers(ring_cx)
        holes = learn_hodge.cavities(ring_cx) if learn_hodge.small_enough(ring_cx) else []
        st.markdown(
            f"With `--tree rings` every cycle of 3 or 4 edges of **{ring_graph.name}** gets a 2-cell: "
            f"{ring_cx.num_cells2} 2-cells on b1 = {ring_cx.betti1} independent cycles. Counting would give "
            f"{ring_cx.betti1} - {ring_cx.num_cells2} = {ring_cx.betti1 - ring_cx.num_cells2} open cycles, but a "
            "4-cycle with a chord and its two triangles close a pillow: its boundary was already filled, so the "
            f"new 2-cell adds a **cavity** instead. dim ker L0, L1, L2 = **{tuple(rh.harmonic)}**: "
            f"{rh.harmonic[2]} cavit{'y' if rh.harmonic[2] == 1 else 'ies'} and {rh.harmonic[1]} cycle(s) still "
            "open (longer than 4 edges).")
        if holes:
            pick_hole = st.selectbox("Cavity", list(range(len(holes))), key=f"learn_cavity_{gkey}",
                                     format_func=lambda i: f"cavity {i + 1}: 2-cells "
                                     + ", ".join(f"c{f}" for f in holes[i]))
            show_view(render_view(ring_cx, focus_cells2=holes[pick_hole], cap=learn.MAX_TEACHING_NODES))
            st.caption("The picked 2-cells (one colour each) form a closed surface: each of their 1-cells lies on two "
                       "of them with opposite signs, so their boundaries cancel (B2 x = 0).")

        with st.expander("Hodge decomposition of an edge flow"):
            flow_seed = st.number_input("Seed of a random edge flow", 0, 10_000, 0, key="learn_flow_seed")
            table, dec = learn_hodge.decomposition_frame(cx, int(flow_seed))
            st.markdown("Any edge flow f splits into three orthogonal parts: **gradient** B1^T a (downhill along a "
                        "node potential a), **curl** B2 b (around 2-cells) and **harmonic** (around the holes). "
                        "a and b are least-squares fits; the harmonic part is what is left.")
            st.dataframe(table, hide_index=True)
            st.caption(f"Largest inner product between two parts: {learn_hodge.largest_inner_product(dec):.1e} "
                       "(0 up to rounding: the parts are orthogonal, so their squared norms add up).")

# ---------------------------------------------------------------- 5. messages and graph tokens
with tab_msgs:
    if tab_msgs.open is False:
        st.caption("Open this tab to run the checkpoint's encoder.")
    else:
        from toporag_core.studio import ask
        from toporag_core.studio.resources import encoder_choice

        options = {k: v for k, v in ask.checkpoint_options().items() if k != ask.NO_CHECKPOINT}
        if not options:
            st.info("No checkpoint is committed here: the CW encoder needs a trained checkpoint.")
            st.stop()
        ckpt = st.selectbox("Checkpoint whose encoder runs", list(options), key="learn_checkpoint",
                            index=list(options).index(ask.default_checkpoint(options, graph))
                            if ask.default_checkpoint(options, graph) in options else 0, format_func=options.get)
        question = ss.get(f"learn_question_{gkey}", graph.meta.get("question") or "")
        try:
            with st.spinner("Loading the checkpoint (once per server, shared with the Ask page) ..."):
                pipe = ask.get_pipeline(ckpt, ask.default_llm(), encoder_choice())
            ecx = get_embedded(gkey, tree, seed, graph)
            ask.check_compatible(pipe, ecx)
            setting = pipe.default_setting()
            sub = learn_messages.retrieve_for_trace(ecx, question or " ".join(graph.node_text[:3]), setting)
            trace = learn_messages.trace_encoder(pipe, ecx, sub)
        except Exception as e:  # noqa: BLE001 - a checkpoint that cannot run here must leave the page usable
            st.warning(f"The checkpoint's encoder cannot run on this graph: {e}")
            st.stop()
        n, e, f = sub.counts
        st.markdown(
            f"The question of tab 3 (*{question or 'the first node texts, as no question was typed'}*) retrieves, "
            f"with the setting this checkpoint was trained with ({learn_messages.setting_text(setting)}), "
            f"**{n} 0-cells, {e} 1-cells, {f} 2-cells**. The checkpoint's CW network then runs "
            f"{len(trace.layers)} layers on them: " + ", ".join(
                f"layer {lt.index + 1} = stage {lt.stage}" for lt in trace.layers) + ". Stage 1 passes messages "
            "between nodes and 1-cells only; stage 2 adds the 2-cells and upper adjacency, updating 2-cells, then "
            "1-cells, then nodes (each reads the new states of its cofaces).")
        st.markdown("<br>".join(f'<span style="color:{learn_messages.KIND_COLOURS[kind]};font-weight:600">&#9632; '
                                f'{kind}</span>: {words}' for kind, words in learn_messages.KIND_WORDS.items()),
                    unsafe_allow_html=True)  # static text
        labels = [f"layer {lt.index + 1} (stage {lt.stage})" for lt in trace.layers]
        li = st.radio("Layer", list(range(len(labels))), index=len(labels) - 1, horizontal=True,
                      format_func=lambda i: labels[i], key="learn_layer")
        layer = trace.layers[li]
        cells_ids = [f"{'vec'[r]}{int(c)}" for r in range(3) for c in trace.cells[r]]
        who = st.selectbox("Messages received by", ["every cell", *cells_ids], key=f"learn_receiver_{gkey}")
        st.plotly_chart(learn_messages.message_figure(trace, layer, sub.complex,
                                                      None if who == "every cell" else who), key="learn_msgs_fig")
        with st.expander("Messages per layer, receiver and kind"):
            st.dataframe(learn_messages.message_counts(trace), hide_index=True)
        st.markdown(f"**One step on the real numbers (layer {li + 1}).** The norm of each cell's state before the "
                    "layer, of the sum of each kind of message it received, and of its state after "
                    "(h' = ReLU(W [MLP_k((1 + eps_k) h + sum of kind-k messages)]_k)):")
        st.dataframe(learn_messages.step_table(trace, layer), hide_index=True)
        st.markdown(
            "**From cell states to graph tokens.** " + (
                f"Each cell's final state, plus a projection of its own text embedding, goes through the projector. "
                f"There are {trace.num_tokens} slots of {trace.per_cell} token(s) each "
                f"({trace.num_tokens * trace.per_cell} soft tokens before the text): slot 0 holds the whole "
                "subcomplex, the next slots one cell each, in the order the text lists them (1-cells claim slots "
                "first when there are more cells than slots). The LLM reads these tokens in front of the text."
                if trace.graph_path == "cells" else
                f"This checkpoint pools every cell's final state into one mean vector, which an MLP spreads over "
                f"{trace.num_tokens} soft tokens."))
        st.dataframe(trace.slots, hide_index=True)

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
    st.caption("These prizes come from the very step the retrieval runs, and they match the prizes stored in "
               f"its result: {'yes' if same else 'NO'}.")
    n, e, f = sub.counts
    st.markdown("**3. Prize-collecting Steiner tree.** The prize-collecting Steiner tree picks one connected "
                f"subcomplex that collects "
                f"prizes at the least edge cost ({edge_cost:g} per edge, minus its prize); chosen 2-cells bring "
                f"their whole boundary (closure). Result: **{n} 0-cells, {e} 1-cells, {f} 2-cells**.")
    st.markdown(legend_html(retrieval=True), unsafe_allow_html=True)
    show_view(render_view(cx, sub=sub, cap=learn.MAX_TEACHING_NODES))
