"""Hybrid tables: route a document into prose and tables, search both routes, see which cell
matched which query term, and (on request) answer with the frozen LLM. Or open an index folder
written by `toporag hybrid index CORPUS --out DIR` (a user's corpus, TAT-QA) and search it."""
import streamlit as st

from toporag_core.studio import hybrid_page
from toporag_core.studio import state
from toporag_core.studio.resources import encoder_choice, app_encoder

st.set_page_config(page_title="Hybrid tables", layout="wide")
ss = st.session_state

with st.sidebar:
    st.header("Corpus")
    folder = st.text_input("Index folder (from `toporag hybrid index CORPUS --out DIR`); empty: sample corpus",
                           "", key="hy_index").strip()

if folder:
    with st.sidebar:
        k = st.slider("k", 1, 20, 10, key="hy_k")
    st.title("Hybrid tables")
    try:
        idx = hybrid_page.saved_index(folder, hybrid_page.index_mtime(folder), encoder_choice())
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
    res = hybrid_page.search(idx, question, k)
    st.subheader("Fused ranking")
    st.dataframe(hybrid_page.fused_frame(idx, res), hide_index=True)
    cols = st.columns(3)
    for col, (title, key) in zip(cols, [("BM25 (lexical)", "lexical"), ("Dense (MiniLM)", "dense"),
                                        ("Tables (CALI)", "table")]):
        with col:
            st.subheader(title)
            st.dataframe(hybrid_page.route_frame(idx, res[key]), hide_index=True)
    st.caption(f"Question router: p(table) = {res['router']['p_table']:.2f}, p(text) = {res['router']['p_text']:.2f}."
               f" Query terms: {', '.join(res['terms'])}. Search took {res['timings']['total'] * 1000:.0f} ms.")
    if res["table"]:
        opts = [h["uid"] for h in res["table"]]
        hybrid_page.follow_top(ss, "hy_index_table", opts)
        pick = st.selectbox("Table to inspect", opts, key="hy_index_table")
        ex = idx.explain_table(res, res["table"][opts.index(pick)]["unit"])
        st.plotly_chart(hybrid_page.cell_heatmap(ex), key="hy_index_heat")
        st.dataframe(hybrid_page.best_cell_frame(ex), hide_index=True)
    st.stop()

with st.sidebar:
    st.header("Document")
    n_docs = st.select_slider("Sample corpus size", [30, 60, 120], value=60, key="hy_n_docs")
    ds = hybrid_page.sample_corpus(n_docs, 0)
    upload = st.file_uploader("Or upload a document (Markdown, HTML, TSV, CSV, text)", key="hy_upload")
    tau = st.slider("tau (SDS threshold)", 0.1, 0.9, 0.4, 0.05, key="hy_tau")
    k = st.slider("k per route", 1, 20, 10, key="hy_k")
    score = st.radio("Table score", ["rowaware", "maxsim"], key="hy_score", horizontal=True)

texts = dict(ds.docs)
picked = None
if upload is not None:
    try:
        texts[upload.name] = hybrid_page.read_upload(upload.getvalue(), upload.name)
        picked = upload.name
    except hybrid_page.DocumentError as e:
        st.error(f"Upload not used: {e}. The sample corpus is still searchable.")
choices = hybrid_page.document_choices(ds, picked)
hybrid_page.follow_top(ss, "hy_doc", choices)  # a new upload is the document shown
doc_id = st.sidebar.selectbox("Show document", choices, key="hy_doc")

st.title("Hybrid tables")
st.caption("Router: SDS = (numbers + separators + entity-like tokens) / tokens over 5-line windows; a line is a "
           "table line when most windows covering it have SDS > tau. Tables: CALI cells [COL: h] [VAL: v], "
           "MaxSim or the row-aware score; prose: one embedding per block. "
           f"Encoder: {app_encoder(encoder_choice()).name}.")

try:
    doc = hybrid_page.parse(texts[doc_id], doc_id, tau)
except hybrid_page.DocumentError as e:
    st.error(str(e))
    st.stop()
st.subheader(f"SDS per line: {doc_id}")
st.plotly_chart(hybrid_page.sds_strip(doc.routing, tau), key="hy_strip")
for w in doc.warnings:
    st.warning(w)
with st.expander("Blocks of this document"):
    st.dataframe(hybrid_page.blocks_rows(doc), hide_index=True)

question = st.text_input("Question", hybrid_page.default_question(ds), key="hy_question")
if not question.strip():
    st.info("Type a question to search the corpus.")
    st.stop()
idx = hybrid_page.corpus_index(f"{n_docs}|{picked}|{len(texts)}", encoder_choice(), tau, texts)
res = hybrid_page.search(idx, question, k, table_score=score)

left, right = st.columns(2)
with left:
    st.subheader("Route A: narrative")
    st.dataframe(hybrid_page.route_frame(idx, res["narrative"]), hide_index=True)
with right:
    st.subheader("Route B: tables (CALI)")
    st.dataframe(hybrid_page.route_frame(idx, res["table"]), hide_index=True)
st.subheader("Ranks before and after fusion")
st.dataframe(hybrid_page.rank_frame(res), hide_index=True)
st.caption(f"Query terms: {', '.join(res['terms'])}. Retrieval took {res['timings']['total'] * 1000:.1f} ms.")

if res["table"]:
    opts = [h["uid"] for h in res["table"]]
    hybrid_page.follow_top(ss, "hy_table", opts)  # a new ranking shows its top-ranked table
    pick = st.selectbox("Table to inspect", opts, key="hy_table")
    unit = res["table"][opts.index(pick)]["unit"]
    ex = idx.explain_table(res, unit)
    st.plotly_chart(hybrid_page.cell_heatmap(ex), key="hy_heat")
    st.dataframe(hybrid_page.best_cell_frame(ex), hide_index=True)

st.subheader("Answer")
context = idx.context(res)
with st.expander("Context handed to the LLM"):
    st.text(context)
if st.button("Answer with the frozen LLM", key="hy_answer"):
    try:
        with st.spinner("Loading the LLM and generating ..."):
            out = hybrid_page.answer(question, context)
        st.text(out["answer"] or "(empty answer)")
    except (ValueError, FileNotFoundError, OSError) as e:
        st.error(f"The LLM could not answer: {e}")
