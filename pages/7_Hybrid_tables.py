"""Hybrid tables: route a document into prose and tables, search both routes, see which cell
matched which query term, and (on request) answer with the frozen LLM. Or open an index folder
written by `toporag hybrid index CORPUS --out DIR` (a user's corpus, TAT-QA) and search it."""
import streamlit as st

from toporag_core.hybrid import (
    DocumentError,
    GeneratorConfig,
    HybridIndex,
    RouterConfig,
    SearchConfig,
    generate,
    parse_document,
    read_upload,
    view,
)
from toporag_core.hybrid.search import open_index
from toporag_core.studio import state
from toporag_core.studio.resources import encoder_choice, get_encoder

st.set_page_config(page_title="Hybrid tables", layout="wide")
ss = st.session_state


@st.cache_resource(max_entries=2, show_spinner="Generating the sample corpus ...")
def sample_corpus(n_docs: int, seed: int):
    return generate(GeneratorConfig(n_docs=n_docs, n_questions=max(6, n_docs // 4), seed=seed))


@st.cache_resource(max_entries=2, show_spinner="Opening the index ...")
def saved_index(path: str, mtime: float, choice: str):
    try:
        return open_index(path)  # a MiniLM index: queried with the numpy MiniLM, no model to load
    except ValueError:
        return open_index(path, get_encoder(choice))


@st.cache_resource(max_entries=4, show_spinner="Indexing (cells embedded once) ...")
def corpus_index(key: str, choice: str, tau: float, _texts: dict):
    docs = [parse_document(t, d, RouterConfig(tau=tau)) for d, t in _texts.items()]
    return HybridIndex.build(docs, get_encoder(choice))


with st.sidebar:
    st.header("Corpus")
    folder = st.text_input("Index folder (from `toporag hybrid index CORPUS --out DIR`); empty: sample corpus",
                           "", key="hy_index").strip()

if folder:
    from pathlib import Path

    with st.sidebar:
        k = st.slider("k", 1, 20, 10, key="hy_k")
    st.title("Hybrid tables")
    try:
        mtime = (Path(folder) / "index.json").stat().st_mtime if (Path(folder) / "index.json").is_file() else 0.0
        idx = saved_index(folder, mtime, encoder_choice())
    except (FileNotFoundError, ValueError, OSError) as e:
        st.error(f"Index not opened: {e}")
        st.stop()
    d = idx.describe()
    st.caption(f"Index {folder}: {d['units']} units ({d['narrative']} text, {d['tables']} tables), "
               f"{d['cali']['cells_kept']} cells, encoder {d['encoder']}; fusion: "
               + ("fitted weights " + str(d["fitted_fusion"]) if d["fitted_fusion"] else "default weights")
               + (", question router on" if d["router"] else ", no question router") + ".")
    state.question_box(ss, "hy_index_question")  # the question typed on Home / Ask / the lab, if any
    question = st.text_input("Question", key="hy_index_question", on_change=state.share_question,
                             args=(ss, "hy_index_question"))
    if not question.strip():
        st.info("Type a question to search the index.")
        st.stop()
    res = idx.search(question, SearchConfig(k=k))
    st.subheader("Fused ranking")
    st.dataframe(view.fused_frame(idx, res), hide_index=True)
    cols = st.columns(3)
    for col, (title, key) in zip(cols, [("BM25 (lexical)", "lexical"), ("Dense (MiniLM)", "dense"),
                                        ("Tables (CALI)", "table")]):
        with col:
            st.subheader(title)
            st.dataframe(view.route_frame(idx, res[key]), hide_index=True)
    st.caption(f"Question router: p(table) = {res['router']['p_table']:.2f}, p(text) = {res['router']['p_text']:.2f}."
               f" Query terms: {', '.join(res['terms'])}. Search took {res['timings']['total'] * 1000:.0f} ms.")
    if res["table"]:
        opts = [h["uid"] for h in res["table"]]
        view.follow_top(ss, "hy_index_table", opts)
        pick = st.selectbox("Table to inspect", opts, key="hy_index_table")
        ex = idx.explain_table(res, res["table"][opts.index(pick)]["unit"])
        st.plotly_chart(view.cell_heatmap(ex), key="hy_index_heat")
        st.dataframe(view.best_cell_frame(ex), hide_index=True)
    st.stop()

with st.sidebar:
    st.header("Document")
    n_docs = st.select_slider("Sample corpus size", [30, 60, 120], value=60, key="hy_n_docs")
    ds = sample_corpus(n_docs, 0)
    upload = st.file_uploader("Or upload a document (Markdown, HTML, TSV, CSV, text)", key="hy_upload")
    tau = st.slider("tau (SDS threshold)", 0.1, 0.9, 0.4, 0.05, key="hy_tau")
    k = st.slider("k per route", 1, 20, 10, key="hy_k")
    score = st.radio("Table score", ["rowaware", "maxsim"], key="hy_score", horizontal=True)

texts = dict(ds.docs)
picked = None
if upload is not None:
    try:
        texts[upload.name] = read_upload(upload.getvalue(), upload.name)
        picked = upload.name
    except DocumentError as e:
        st.error(f"Upload not used: {e}. The sample corpus is still searchable.")
mixed = [d for d in ds.docs if d.startswith("mixed")]
choices = ([picked] if picked else []) + mixed + [d for d in ds.docs if d not in mixed]
view.follow_top(ss, "hy_doc", choices)  # a new upload is the document shown
doc_id = st.sidebar.selectbox("Show document", choices, key="hy_doc")

st.title("Hybrid tables")
st.caption("Router: SDS = (numbers + separators + entity-like tokens) / tokens over 5-line windows; a line is a "
           "table line when most windows covering it have SDS > tau. Tables: CALI cells [COL: h] [VAL: v], "
           "MaxSim or the row-aware score; prose: one embedding per block. "
           f"Encoder: {get_encoder(encoder_choice()).name}.")

try:
    doc = parse_document(texts[doc_id], doc_id, RouterConfig(tau=tau))
except DocumentError as e:
    st.error(str(e))
    st.stop()
st.subheader(f"SDS per line: {doc_id}")
st.plotly_chart(view.sds_strip(doc.routing, tau), key="hy_strip")
for w in doc.warnings:
    st.warning(w)
with st.expander("Blocks of this document"):
    st.dataframe([{"lines": f"{u.start + 1}-{u.end}", "kind": u.kind, "SDS": u.sds,
                   "shape": "" if u.table is None else f"{u.table.shape[0]} x {u.table.shape[1]} ({u.table.fmt})",
                   "text": u.text[:120]} for u in doc.units], hide_index=True)

default_q = next((q["question"] for q in ds.questions if q["type"] == "B"), "")
question = st.text_input("Question", default_q, key="hy_question")
if not question.strip():
    st.info("Type a question to search the corpus.")
    st.stop()
idx = corpus_index(f"{n_docs}|{picked}|{len(texts)}", encoder_choice(), tau, texts)
res = idx.search(question, SearchConfig(k=k, table_score=score))

left, right = st.columns(2)
with left:
    st.subheader("Route A: narrative")
    st.dataframe(view.route_frame(idx, res["narrative"]), hide_index=True)
with right:
    st.subheader("Route B: tables (CALI)")
    st.dataframe(view.route_frame(idx, res["table"]), hide_index=True)
st.subheader("Ranks before and after fusion")
st.dataframe(view.rank_frame(res), hide_index=True)
st.caption(f"Query terms: {', '.join(res['terms'])}. Retrieval took {res['timings']['total'] * 1000:.1f} ms.")

if res["table"]:
    opts = [h["uid"] for h in res["table"]]
    view.follow_top(ss, "hy_table", opts)  # a new ranking shows its top-ranked table
    pick = st.selectbox("Table to inspect", opts, key="hy_table")
    unit = res["table"][opts.index(pick)]["unit"]
    ex = idx.explain_table(res, unit)
    st.plotly_chart(view.cell_heatmap(ex), key="hy_heat")
    st.dataframe(view.best_cell_frame(ex), hide_index=True)

st.subheader("Answer")
context = idx.context(res)
with st.expander("Context handed to the LLM"):
    st.text(context)
if st.button("Answer with the frozen LLM", key="hy_answer"):
    from toporag_core.hybrid.answer import answer_from_context, frozen_reader

    try:
        with st.spinner("Loading the LLM and generating ..."):
            out = answer_from_context(question, context, frozen_reader())
        st.text(out["answer"] or "(empty answer)")
    except (ValueError, FileNotFoundError, OSError) as e:
        st.error(f"The LLM could not answer: {e}")
