"""Document graph: a question walks down document -> section -> paragraph -> sentence; siblings
that answer it together are fused and far nodes grafted, while the deformed graph stays within
an FGW distance epsilon of the original (KURISU-G2). A corpus index (`toporag docgraph index`)
opens too: the question's neighbourhood graph is walked, and the page shows the ranking.
Logic lives in toporag_core.docgraph (reached through toporag_core.studio.docgraph_page)."""
import streamlit as st

from toporag_core.studio import docgraph_page as dg
from toporag_core.studio import state
from toporag_core.studio.resources import encoder_choice, app_encoder

st.set_page_config(page_title="Document graph", layout="wide")
ss = st.session_state
enc = app_encoder(encoder_choice())

with st.sidebar:
    st.header("Documents")
    source = st.radio("Source", ["Generated question", "Paste documents", "Corpus index"], key="dg_source")
    rec, index_dir = None, ""
    if source == "Corpus index":
        default_q = ""
        index_dir = st.text_input("Index folder (made by `toporag docgraph index CORPUS --out DIR`)",
                                  key="dg_index").strip()
    elif source == "Generated question":
        recs = dg.sample_records(20, 0)
        idx = int(st.number_input("Question #", 0, len(recs) - 1, 0, key="dg_record"))
        rec = recs[idx]
        default_q = rec["question"]
    else:
        default_q = ""
        pasted = st.text_area("Documents (Markdown: '# title', '## section', blank line between paragraphs; "
                              "separate documents with a line '---')", key="dg_pasted", height=200,
                              value="# Alpha\n\n## History\n\nAlpha was founded in 1200. It grew on the river.\n"
                                    "---\n# Beta\n\n## History\n\nBeta was founded in 1500 by traders.")
    st.header("Traversal")
    epsilon = st.number_input("epsilon (FGW budget)", value=0.05, step=0.01, format="%.3f", key="dg_eps")
    max_depth = int(st.number_input("max depth", value=3, step=1, key="dg_depth"))
    keep_ratio = st.slider("keep ratio tau", 0.1, 1.0, 0.8, 0.05, key="dg_tau")
    feature_weight = st.slider("feature weight alpha", 0.0, 1.0, 0.5, 0.05, key="dg_alpha")
    theta = st.slider("semantic edge threshold theta", 0.0, 1.0, 0.6, 0.05, key="dg_theta")
    semantic_graft = st.checkbox("graft far (semantic) nodes", True, key="dg_semgraft")
    mention_graft = st.checkbox("graft documents named on the path (title mentions)", True, key="dg_mentgraft")

st.title("Document graph")
st.caption("Hierarchical document graph with semantic edges; traversal with fusion and grafting under a fused "
           "Gromov-Wasserstein budget. Node colour = level; red rings = path; gold diamonds = fused super-nodes; "
           "dashed purple = grafted edges; edge width = existence weight p.")

try:
    cfg = dg.traversal_config(max_depth=max_depth, keep_ratio=keep_ratio, epsilon=epsilon,
                              graft_semantic=semantic_graft, graft_mentions=mention_graft,
                              feature_weight=feature_weight, corpus=source == "Corpus index")
    if source == "Corpus index":
        if not index_dir:
            st.info("Type the folder of a corpus index (`toporag docgraph index CORPUS --out DIR`).")
            st.stop()
        searcher = dg.open_index(index_dir, dg.index_stamp(index_dir))
        graph = None
    elif rec is not None:
        articles = dg.record_articles(rec)
    else:
        articles = dg.pasted_articles(pasted)
    if source != "Corpus index":
        graph = dg.document_graph(articles, enc, theta, name=str(rec["_id"]) if rec else "pasted documents")
except (dg.GraphFormatError, ValueError, FileNotFoundError) as e:
    st.error(f"Cannot run: {e}")
    st.stop()

if not default_q:  # pasted documents or a corpus index: the question typed on Home / Ask / the lab, if any
    state.question_box(ss, "dg_q_")
    question = st.text_input("Question", key="dg_q_", on_change=state.share_question, args=(ss, "dg_q_"))
else:  # a generated record asks its own question
    question = st.text_input("Question", value=default_q, key=f"dg_q_{default_q}")
if not question.strip():
    st.info("Type a question.")
    st.stop()
if graph is None:  # a corpus index: the question's neighbourhood graph
    enc = searcher.encoder
    ranked = dg.search_index(searcher, question, theta, cfg)
    graph, result = ranked.graph, ranked.result
    st.caption(f"Index {index_dir}: {searcher.index.num_docs:,} documents; the walk ran on a neighbourhood of "
               f"{len(ranked.neighbourhood)} (BM25 + dense candidates, titles the question and their texts name).")
    st.dataframe(dg.ranking(searcher, ranked), hide_index=True)
tr = dg.traverser(graph, enc, cfg)
if source != "Corpus index":
    result = tr.run(question)

c = st.columns(5)
c[0].metric("nodes", graph.num_nodes)
c[1].metric("FGW calls", result.fgw_calls)
c[2].metric("fusions", len(result.fusions()))
c[3].metric("grafts", len(result.grafts()))
c[4].metric("time (ms)", f"{1000 * result.timings['total']:.0f}")
if rec is not None:
    st.caption(f"Gold articles: {', '.join(dg.gold_titles(rec))}; answer: {rec['answer']}")

if st.button("Open this document graph in Explore and the Retrieval lab", key="dg_open"):
    state.set_graph(ss, dg.as_textual_graph(graph), label=f"document graph {graph.name}")
    st.success(ss[state.MESSAGE])

n_steps = len(result.steps)
depth = st.slider("Depth along the path", 1, max(n_steps, 1), max(n_steps, 1), key="dg_step",
                  disabled=n_steps <= 1) if n_steps else 0
evolved = dg.evolved(graph, result, tr, question)
view = st.radio("Edge width", ["before evolution", "after evolution"], horizontal=True, key="dg_view")
p = graph.p if view == "before evolution" else evolved.p
st.plotly_chart(dg.tree_figure(graph, result, depth, p=p, title=f"path to depth {depth}"), key="dg_tree")

if n_steps:
    step = result.steps[depth - 1]
    left, right = st.columns(2)
    with left:
        st.subheader(f"FGW against fusion prefix size (depth {depth})")
        curve = dg.prefix_curve(result, depth, enc, cfg) if len(step.kept) > 1 else [(1, 0.0)]
        st.plotly_chart(dg.fgw_curve_figure(curve, cfg.epsilon, len(step.fused) or 1), key="dg_curve")
        st.dataframe(dg.evaluations_rows(result), hide_index=True)
    with right:
        st.subheader("Coupling of the final deformed graph")
        f = result.final_fgw
        st.plotly_chart(dg.coupling_figure(f.coupling, f.mu, f.nu), key="dg_coupling")
        st.caption(f"FGW = {f.value:.5f}; rows: original nodes, columns: deformed nodes; bars: marginals, "
                   "red dots: the prescribed masses.")

st.subheader("Context the LLM would read")
st.code(result.context or "(empty)", language=None)
