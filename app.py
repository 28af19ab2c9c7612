"""TopoRAG Studio, Home: which graph am I working on, and what does its cell complex look like?

``streamlit run app.py`` serves this Home page plus every ``pages/<n>_<Name>.py`` (in number order),
so a new page only needs a new file.
"""
from pathlib import Path

import streamlit as st

from toporag_core.studio import resources
from toporag_core.studio import kg_source, state, uploads
from toporag_core.studio import sources
from toporag_core.studio.controls import lifting_label, lifting_names
from toporag_core.studio.figures import boundary_length_histogram
from toporag_core.studio.resources import get_complex


@st.cache_data(show_spinner="Reading ExplaGraphs ...")
def explagraphs_rows():
    return sources.explagraphs_rows()


@st.cache_data(show_spinner="Reading WebQSP ...")
def webqsp_records():
    return sources.webqsp_records()


def knowledge_graph_source(ss) -> None:
    """A question's k-hop subgraph of a DuckDB triple store becomes the current graph (studio/kg_source.py)."""
    st.caption("A knowledge graph too big to lift whole stays in a DuckDB triple store; the question's entities "
               "are linked (exact name, then fuzzy) and their k-hop neighbourhood is loaded as the current graph.")
    where = st.radio("Store", ["File on disk", "Upload triples"], horizontal=True, key="kg_where",
                     help="On disk: a .duckdb store made by `toporag kg import`, or a triple file "
                          "(.csv/.tsv head,relation,tail or .parquet), imported once into a store of its own.")
    up = None
    if where == "File on disk":
        st.text_input("Path", key="kg_path", placeholder="/data/freebase.duckdb or triples.csv")
    else:
        up = st.file_uploader("Triples (CSV/TSV head,relation,tail, or Parquet)", type=["csv", "tsv", "txt", "parquet"],
                              key="kg_upload")
    question = st.text_input("Question", key="kg_question", placeholder="Where is red river 0 located?")
    c1, c2, c3 = st.columns(3)
    hops = int(c1.number_input("Hops", 0, 6, 2, key="kg_hops", help="k of the k-hop neighbourhood (both directions)"))
    link = c2.selectbox("Entity linking", kg_source.LINK_MODES, key="kg_link",
                        help="exact name n-grams; fuzzy (Jaro-Winkler >= 0.92); auto = exact, else fuzzy")
    max_nodes = int(c3.number_input("At most entities", 100, 1_000_000, 50_000, step=1000, key="kg_max_nodes",
                                    help="stop before a hop that would exceed this many entities"))
    entities = st.text_input("Entities (optional; separated by ';')", key="kg_entities",
                             help="seed entities by exact name instead of linking the question")
    if st.button("Extract subgraph", key="load_kg", type="primary", disabled=where != "File on disk" and up is None):
        bar = st.progress(0.0, text="Knowledge graph: starting ...")

        def extract():
            def report(frac: float, text: str) -> None:
                bar.progress(min(max(frac, 0.0), 1.0), text=f"Knowledge graph: {text}")
            db = kg_source.store_from_path(ss.get("kg_path") or "", report) if up is None \
                else kg_source.store_from_upload(up.getvalue(), up.name, report)
            return kg_source.load_kg_subgraph(db, question, hops, link, kg_source.parse_entities(entities),
                                              max_nodes, report)
        try:
            state.try_load(ss, extract, None)
        finally:
            bar.empty()


def home() -> None:
    ss = st.session_state
    st.title("TopoRAG Studio")
    st.caption("Retrieval over textual graphs lifted to cell complexes: load a graph here, then explore its 2-cells, "
               "tune retrieval in the lab, or learn how it works.")
    lifting_sidebar(ss)

    # ---------------------------------------------------------------- loading
    st.subheader("Load a graph")
    tab_samples, tab_bench, tab_upload, tab_paste, tab_kg = st.tabs(
        ["Built-in samples", "Benchmark data", "Upload", "Paste", "Knowledge graph"])
    for tab, source in ((tab_samples, sample_source), (tab_bench, benchmark_source), (tab_upload, upload_source),
                        (tab_paste, paste_source), (tab_kg, knowledge_graph_source)):
        with tab:
            source(ss)
    load_outcome(ss)
    graph_summary(ss)


def lifting_sidebar(ss) -> None:
    """Sidebar: the spanning-tree method (and seed) of the lifting."""
    with st.sidebar:
        st.header("Lifting")
        tree_now, seed_now = state.tree_settings(ss)
        names = lifting_names()  # every registered lifting, rings included
        ss[state.TREE] = st.selectbox("Lifting", names, index=names.index(tree_now) if tree_now in names else 0,
                                      format_func=lifting_label,
                                      help="bfs / dfs / random: one 2-cell on each fundamental cycle of that spanning "
                                           "forest (b1 and the number of 2-cells do not depend on it; which cycles "
                                           "you get does); rings: a 2-cell on every cycle of 3 or 4 edges.")
        ss[state.SEED] = int(st.number_input("Random-tree seed", 0, 10_000, seed_now,
                                             disabled=ss[state.TREE] != "random"))


def sample_source(ss) -> None:
    """A built-in sample graph."""
    key = st.selectbox("Sample", sources.SAMPLE_KEYS, format_func=lambda k: sources.sample(k).title,
                       key="sample_pick")
    st.caption(sources.sample(key).description)
    if st.button("Load sample", key="load_sample", type="primary"):
        state.try_load(ss, lambda: sources.load_sample(key), sources.sample(key).title)


def benchmark_source(ss) -> None:
    """An ExplaGraphs row or a WebQSP question's graph from ../shared/data."""
    if sources.shared_data_dir() is None:
        st.info("No benchmark data on this machine (../shared/data is missing); the built-in samples and "
                "uploads work.")
        return
    rows = explagraphs_rows()
    if rows:
        i = int(st.number_input(f"ExplaGraphs row (0 to {len(rows) - 1})", 0, len(rows) - 1, 0,
                                key="expla_row"))
        st.caption(f"**{rows[i]['label']}** \u2014 {rows[i]['arg1']} / {rows[i]['arg2']}")
        if st.button("Load ExplaGraphs row", key="load_expla"):
            state.try_load(ss, lambda: sources.explagraphs_graph(rows[i]), f"ExplaGraphs row {i}")
    recs = webqsp_records()
    if recs:
        j = st.selectbox("WebQSP question", range(len(recs)), key="webqsp_pick",
                         format_func=lambda j: f"{recs[j].get('id', j)}: {recs[j].get('question', '')}")
        if st.button("Load WebQSP graph", key="load_webqsp"):
            state.try_load(ss, lambda: sources.webqsp_graph(recs[j], j), f"WebQSP {recs[j].get('id', j)}")


def upload_source(ss) -> None:
    """One uploaded file (with a record and a question picker where it has several), or a CSV pair."""
    st.caption("One file in any registered format: "
               + "; ".join(uploads.format_label(n) for n in uploads.format_names()) +
               ". Multi-record files (a WebQSP list, an ExplaGraphs TSV, GQA scene graphs) offer a record "
               "picker. Or G-Retriever's pair: nodes.csv (node_id,node_attr) + edges.csv (src,edge_attr,dst).")
    up = st.file_uploader("Graph file", type=uploads.upload_extensions(), key="upload_one")
    up_format = st.selectbox("Format", ["auto", *uploads.format_names()], key="upload_format")
    records = uploads.upload_records(up.getvalue(), up.name, up_format) if up is not None else []
    record = None
    if len(records) > 1:
        record = st.selectbox(f"Record ({len(records)} in this file)", range(len(records)),
                              format_func=records.__getitem__, key="upload_record")
    up_q = st.file_uploader("questions.csv for GQA scene graphs (optional)", type=["csv"], key="upload_questions")
    qs = (up_q.getvalue(), up_q.name) if up_q is not None else None
    q_pick = upload_question_pick(up, up_format, record, qs)
    if st.button("Load file", key="load_upload", disabled=up is None) and up is not None:
        state.try_load(ss, lambda: uploads.load_upload(up.getvalue(), up.name, up_format, record, qs, q_pick),
                       up.name if record is None else f"{up.name} [{records[record]}]")
    csv_pair_source(ss)


def upload_question_pick(up, up_format: str, record, qs) -> int | None:
    """The picked question of an uploaded questions.csv that has some for the uploaded image, else ``None``."""
    q_options = uploads.upload_questions(up.getvalue(), up.name, up_format, record, qs) if up is not None else []
    if q_options:
        return st.selectbox(f"Question ({len(q_options)} for this image)", range(len(q_options)),
                            format_func=q_options.__getitem__, key="upload_question")
    if qs is not None and up is not None:
        st.caption("No question of questions.csv is about this image.")
    return None


def csv_pair_source(ss) -> None:
    """G-Retriever's nodes.csv + edges.csv pair."""
    c1, c2 = st.columns(2)
    up_nodes = c1.file_uploader("nodes.csv", type=["csv"], key="upload_nodes")
    up_edges = c2.file_uploader("edges.csv", type=["csv"], key="upload_edges")
    if st.button("Load CSV pair", key="load_pair", disabled=up_nodes is None or up_edges is None) \
            and up_nodes is not None and up_edges is not None:
        state.try_load(ss, lambda: uploads.load_csv_pair(up_nodes.getvalue(), up_edges.getvalue(), up_nodes.name,
                                                         up_edges.name), f"{up_nodes.name} + {up_edges.name}")


def paste_source(ss) -> None:
    """Triples pasted as text."""
    fmt = st.selectbox("Format", ["auto", *uploads.format_names()], key="paste_format",
                       help="auto: JSON, an ExplaGraphs '(h; r; t)...' string, or a head,relation,tail table")
    text = st.text_area("Triples", key="paste_text", height=160,
                        placeholder="head,relation,tail\ncup,on,table\nplate,on,table\ncup,left of,plate")
    if st.button("Load pasted graph", key="load_paste"):
        state.try_load(ss, lambda: uploads.load_pasted(text, format=fmt, name="pasted text"), "pasted text")


def load_outcome(ss) -> None:
    """The last load's error (and that the previous graph is still in use), a read without a header
    that waits for confirmation, or its success message."""
    pending = ss.get(state.PENDING)
    if pending:
        st.warning(pending["text"], icon=":material/help:")
        c1, c2, _ = st.columns([1, 1, 3])
        c1.button("Use it anyway", key="confirm_headerless", on_click=state.confirm_pending, args=(ss,))
        c2.button("Keep the loaded graph", key="discard_headerless", on_click=state.discard_pending, args=(ss,))
    elif ss.get(state.ERROR):
        st.error(f"Could not load that graph: {ss[state.ERROR]}")
        if ss.get(state.GRAPH) is not None:
            st.info(f"Still using the previously loaded graph: {ss[state.GRAPH].name or 'unnamed'}.")
    elif ss.get(state.MESSAGE):
        st.success(ss[state.MESSAGE])


def graph_summary(ss) -> None:
    """The current graph's numbers (nodes, 1-cells, b0, b1, 2-cells), its question, and where to go next."""
    graph = resources.page_graph(ss, announce=False)
    if ss.get(state.RESET):
        (st.warning if ss.get(state.LOST) else st.info)(ss[state.RESET], icon=":material/restart_alt:")
    tree, seed = state.tree_settings(ss)
    cx = get_complex(ss[state.GRAPH_KEY], tree, seed, graph)
    summary = cx.summary()
    st.subheader(f"Current graph: {graph.name or 'unnamed'}")
    cols = st.columns(6)
    cols[0].metric("|V| nodes", summary["nodes"])
    cols[1].metric("|E| edges", summary["original_edges"],
                   help="Directed input edges. Parallel edges merge into one 1-cell; self-loops stay on their node.")
    cols[2].metric("1-cells", summary["edges"])
    cols[3].metric("components b0", summary["components"])
    cols[4].metric("b1", summary["betti1"], help="Independent cycles of the graph: 1-cells - nodes + b0.")
    cols[5].metric("2-cells", summary["cells2"], help="One per non-tree edge of the spanning forest.")
    st.caption(f"Spanning tree: {tree}" + (f" (seed {seed})" if tree == "random" else "") +
               f"; B1 @ B2 = 0: {cx.boundary_ok()}" + "".join("; " + note for note in lifting_notes(summary)))
    question = graph.meta.get("question") or ""
    if question:
        st.markdown("**Question that comes with this graph**")
        st.text(question)
    left, right = st.columns([3, 2])
    left.plotly_chart(boundary_length_histogram(cx))
    with right:
        st.markdown("**Next**")
        st.page_link("pages/1_Explore.py", label="Explore the complex: pick a 2-cell, see its cycle")
        st.page_link("pages/2_Retrieval_lab.py", label="Retrieval lab: ask, tune k and C2, compare methods")
        st.page_link("pages/3_Learn.py", label="Learn: the lifting and one retrieval, step by step")
        st.page_link("pages/4_Ask.py", label="Ask: answer a question with a trained model")
        st.page_link("pages/5_Error_analysis.py", label="Error analysis: where predictions fail, and why")
        st.page_link("pages/6_Topology_vs_text.py", label="Topology vs text: do neighbours share meaning?")
        st.page_link("pages/7_Hybrid_tables.py", label="Hybrid tables: retrieve over text and tables together")
        st.page_link("pages/8_Document_graph.py", label="Document graph: multi-hop retrieval across documents")


def lifting_notes(summary: dict) -> list[str]:
    """What the lifting did to the input edges: self-loops kept as node facts, parallel edges merged."""
    notes = []
    if summary["self_loops"]:
        notes.append(f"{summary['self_loops']} self-loop(s) kept as node facts")
    if summary["original_edges"] - summary["self_loops"] > summary["edges"]:
        notes.append(f"{summary['original_edges'] - summary['self_loops'] - summary['edges']} parallel edge(s) merged")
    return notes


def page_list() -> list:
    """Home, then ``pages/*.py`` sorted by their number prefix; titles from the file names."""
    pages = [st.Page(home, title="Home", icon=":material/home:", default=True)]
    for path in sorted((Path(__file__).parent / "pages").glob("[0-9]*_*.py"),
                       key=lambda p: (int(p.stem.split("_", 1)[0]), p.stem)):
        name = path.stem.split("_", 1)[1]
        pages.append(st.Page(str(path), title=name.replace("_", " "), url_path=name))
    return pages


st.set_page_config(page_title="TopoRAG Studio", page_icon="\u25b3", layout="wide")
st.navigation(page_list()).run()
