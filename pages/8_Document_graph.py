"""Document graph: a question walks down document -> section -> paragraph -> sentence; siblings
that answer it together are fused and far nodes grafted, while the deformed graph stays within
an FGW distance epsilon of the original (KURISU-G2). A corpus index (`toporag docgraph index`)
opens too: the question's neighbourhood graph is walked, and the page shows the ranking.
Logic lives in toporag_core.docgraph."""
import copy
from pathlib import Path

import streamlit as st

from toporag_core.docgraph import BuildConfig, FGWConfig, TraversalConfig, Traverser, build_docgraph, parse_text
from toporag_core.docgraph.build import docgraph_to_textual_graph
from toporag_core.docgraph.corpus_search import CorpusSearcher, SearchConfig
from toporag_core.docgraph.index import DocGraphIndex
from toporag_core.docgraph.evolve import evolve
from toporag_core.docgraph.generate import generate, gold_titles, record_articles
from toporag_core.docgraph.traverse import prefix_curve
from toporag_core.docgraph.views import coupling_figure, fgw_curve_figure, tree_figure
from toporag_core.graph import GraphFormatError
from toporag_core.studio import state
from toporag_core.studio.resources import encoder_choice, get_encoder

st.set_page_config(page_title="Document graph", layout="wide")
ss = st.session_state
enc = get_encoder(encoder_choice())


@st.cache_data(show_spinner=False)
def sample_records(n: int, seed: int):
    return generate(n, seed=seed)[0]


@st.cache_resource(max_entries=4, show_spinner="Loading the corpus index ...")
def open_index(folder: str, stamp: float) -> CorpusSearcher:
    """The searcher of an index folder (``stamp``: its manifest's modification time, so a rebuilt
    index is loaded again), with the encoder the index was built with."""
    index = DocGraphIndex.load(folder)
    return CorpusSearcher(index, get_encoder(index.stats.get("encoder_spec") or encoder_choice()))


def index_stamp(folder: str) -> float:
    f = Path(folder) / "index.json"
    return f.stat().st_mtime if f.is_file() else 0.0


with st.sidebar:
    st.header("Documents")
    source = st.radio("Source", ["Generated question", "Paste documents", "Corpus index"], key="dg_source")
    rec, index_dir = None, ""
    if source == "Corpus index":
        default_q = ""
        index_dir = st.text_input("Index folder (made by `toporag docgraph index CORPUS --out DIR`)",
                                  key="dg_index").strip()
    elif source == "Generated question":
        recs = sample_records(20, 0)
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
    cfg = TraversalConfig(max_depth=max_depth, keep_ratio=keep_ratio, epsilon=epsilon, graft_semantic=semantic_graft,
                          graft_mentions=mention_graft, fgw=FGWConfig(feature_weight=feature_weight),
                          mention_scope="content" if source == "Corpus index" else "own")
    bcfg = BuildConfig(sim_threshold=theta)
    if source == "Corpus index":
        if not index_dir:
            st.info("Type the folder of a corpus index (`toporag docgraph index CORPUS --out DIR`).")
            st.stop()
        searcher = open_index(index_dir, index_stamp(index_dir))
        graph = None
    elif rec is not None:
        articles = record_articles(rec)
    else:
        parts = [p for p in pasted.split("\n---\n") if p.strip()]
        if not parts:
            raise GraphFormatError("empty document: paste at least one document", file="pasted text")
        articles = [parse_text(p, source=f"pasted document {i + 1}", title=f"document {i + 1}")
                    for i, p in enumerate(parts)]
    if source != "Corpus index":
        graph = build_docgraph(articles, enc, bcfg, name=str(rec["_id"]) if rec else "pasted documents")
except (GraphFormatError, ValueError, FileNotFoundError) as e:
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
    ranked = searcher.search(question, config=SearchConfig(theta=theta, traversal=cfg))
    graph, result = ranked.graph, ranked.result
    st.caption(f"Index {index_dir}: {searcher.index.num_docs:,} documents; the walk ran on a neighbourhood of "
               f"{len(ranked.neighbourhood)} (BM25 + dense candidates, titles the question and their texts name).")
    st.dataframe(ranked.to_dict(searcher.index)["ranking"], hide_index=True)
tr = Traverser(graph, enc, cfg)
if source != "Corpus index":
    result = tr.run(question)

c = st.columns(5)
c[0].metric("nodes", graph.num_nodes)
c[1].metric("FGW calls", result.fgw_calls)
c[2].metric("fusions", len(result.fusions()))
c[3].metric("grafts", len(result.grafts()))
c[4].metric("time (ms)", f"{1000 * result.timings['total']:.0f}")
if rec is not None:
    st.caption(f"Gold articles: {', '.join(gold_titles(rec))}; answer: {rec['answer']}")

if st.button("Open this document graph in Explore and the Retrieval lab", key="dg_open"):
    state.set_graph(ss, docgraph_to_textual_graph(graph), label=f"document graph {graph.name}")
    st.success(ss[state.MESSAGE])

n_steps = len(result.steps)
depth = st.slider("Depth along the path", 1, max(n_steps, 1), max(n_steps, 1), key="dg_step",
                  disabled=n_steps <= 1) if n_steps else 0
evolved = copy.deepcopy(graph)
evolve(evolved, result, tr.question_vector(question))
view = st.radio("Edge width", ["before evolution", "after evolution"], horizontal=True, key="dg_view")
p = graph.p if view == "before evolution" else evolved.p
st.plotly_chart(tree_figure(graph, result, depth, p=p, title=f"path to depth {depth}"), key="dg_tree")

if n_steps:
    step = result.steps[depth - 1]
    left, right = st.columns(2)
    with left:
        st.subheader(f"FGW against fusion prefix size (depth {depth})")
        curve = prefix_curve(result, depth, enc, cfg) if len(step.kept) > 1 else [(1, 0.0)]
        st.plotly_chart(fgw_curve_figure(curve, cfg.epsilon, len(step.fused) or 1), key="dg_curve")
        st.dataframe([{"op": e.op, "depth": e.depth, "size": e.size, "FGW": round(e.value, 5),
                       "<= epsilon": e.ok} for e in result.evaluations], hide_index=True)
    with right:
        st.subheader("Coupling of the final deformed graph")
        f = result.final_fgw
        st.plotly_chart(coupling_figure(f.coupling, f.mu, f.nu), key="dg_coupling")
        st.caption(f"FGW = {f.value:.5f}; rows: original nodes, columns: deformed nodes; bars: marginals, "
                   "red dots: the prescribed masses.")

st.subheader("Context the LLM would read")
st.code(result.context or "(empty)", language=None)
