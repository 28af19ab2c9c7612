"""Error analysis: where does the model fail - retrieval or reasoning - and on which examples?"""
import streamlit as st

from toporag_core.studio import ask, errors
from toporag_core.studio.controls import cell_methods, method_label
from toporag_core.studio.graph_view import render_view
from toporag_core.studio.resources import encoder_choice, show_view

st.set_page_config(page_title="Error analysis", layout="wide")
ss = st.session_state

# The run banner belongs to the predictions it describes: ``{"preds": the Predictions loaded from
# the run's file (or those loaded when it wrote nothing), "kind", "text"}``; it is shown only
# while those are the loaded predictions, so loading another file retires it.
# An evaluation started here (finished, or stopped by the Stop button's rerun): its file is the truth.
if ss.get("err_eval_path"):
    path = ss.pop("err_eval_path")
    banner = ss.pop("err_run_banner", None) or {  # the run raised after writing some lines
        "kind": "warning", "text": f"The evaluation stopped with an error; the answers written before it: {path}."}
    try:
        ss["err_preds"] = errors.require_records(errors.load_predictions(path))
        ss["err_preds_error"] = None
    except ValueError:  # stopped before the first line was written
        banner = {"kind": "warning", "text": f"The evaluation was stopped before any prediction was written ({path})."}
    ss["err_banner"] = {**banner, "preds": ss.get("err_preds")}

SLOT_NAMES = {"err_preds": "predictions", "err_preds_b": "second file"}


def load_into(slot: str, loader) -> None:
    """Load a predictions file into ``ss[slot]``. A missing / unreadable file, or one without a
    single valid line, keeps what was loaded (the page says so)."""
    try:
        ss[slot] = errors.require_records(loader())
        ss[f"{slot}_error"] = None
    except ValueError as e:
        ss[f"{slot}_error"] = str(e)


def source_picker(slot: str, prefix: str) -> None:
    """Upload or path inputs that load a predictions JSONL into ``ss[slot]``; the fields it needs
    (and the other names read for them) are said before anything is uploaded."""
    st.caption(errors.ACCEPTED_FIELDS)
    up_col, path_col = st.columns(2)
    up = up_col.file_uploader("Upload a predictions JSONL", type=["jsonl", "json", "txt"], key=f"{prefix}_upload")
    if up_col.button("Load upload", key=f"{prefix}_load_upload", disabled=up is None) and up is not None:
        load_into(slot, lambda: errors.load_predictions(up.getvalue(), up.name))
    path = path_col.text_input("... or a file path", key=f"{prefix}_path", placeholder="runs/eval/predictions.jsonl")
    if path_col.button("Load path", key=f"{prefix}_load_path", disabled=not path.strip()):
        load_into(slot, lambda: errors.load_predictions(path.strip()))
    if ss.get(f"{slot}_error"):
        st.error(f"Could not load that file: {errors.escape_markdown(ss[f'{slot}_error'])}")
        if ss.get(slot) is not None:
            st.info(f"Still using the previously loaded {SLOT_NAMES[slot]}: {errors.escape_markdown(ss[slot].name)}.")


def show_line_errors(preds: errors.Predictions) -> None:
    """One message per bad line (file, line, field), the first 20 of them."""
    if preds.errors:
        shown = "\n".join(f"- {errors.escape_markdown(m)}" for m in preds.messages()[:20])
        more = f"\n- ... and {len(preds.errors) - 20} more" if len(preds.errors) > 20 else ""
        st.warning(f"{errors.escape_markdown(preds.name)}: {len(preds.errors)} bad line(s) skipped, "
                   f"{len(preds.records)} loaded:\n{shown}{more}")


def drill(rec: dict, key: str) -> None:
    """One example: texts, verdict, the retrieved subcomplex drawn, context, exports."""
    st.markdown(errors.verdict_markdown(rec))
    st.text(f"Question:   {errors.user_question(rec['question'])}\n"
            f"Label:      {'|'.join(errors.gold_answers(rec['label']))}\n"
            f"Prediction: {rec['prediction']}\n"
            + (f"Evidence:   {rec['evidence']}\n" if rec.get("evidence") else "")
            + errors.citation_note(rec)
            + f"Method: {rec['method'] or '?'}  Type: {rec['qtype'] or 'untyped'}")
    graph = errors.subcomplex_graph(rec)
    if graph.num_nodes == 0:
        st.info(errors.cells_note(rec))
    else:
        cx = errors.subcomplex_complex(graph)
        gold = errors.gold_nodes(graph.node_text, rec["label"])
        view = render_view(cx, focus_cells2=errors.matching_cells2(cx, rec), cap=200, height_px=420,
                           highlight_nodes={i: f"holds the gold answer {g!r}" for i, g in gold.items()})
        st.caption(f"The retrieved subcomplex, rebuilt from the cell texts stored in the file "
                   f"({graph.num_nodes} nodes, {graph.num_edges} edges, {len(rec['cells']['cells2'])} 2-cells, "
                   "filled). Roles and prizes are not stored in prediction files.")
        st.markdown(errors.escape_markdown(errors.gold_note(graph.node_text, rec["label"], gold)))
        show_view(view)
    with st.expander("Textualized context (what the LLM read)"):
        st.code(rec.get("context") or "(not stored)", language=None)
    a, b = st.columns(2)
    a.download_button("Subcomplex as JSON", errors.subcomplex_json(rec), f"subcomplex_{rec['id']}.json",
                      "application/json", key=f"{key}_json")
    b.download_button("Subcomplex as GraphML", errors.subcomplex_graphml(rec), f"subcomplex_{rec['id']}.graphml",
                      "application/xml", key=f"{key}_graphml")


st.title("Error analysis")
tab_file, tab_run = st.tabs(["Load predictions", "Run an evaluation"])
with tab_file:
    st.caption("A JSONL written by `toporag eval --out ...`, or your own file with the fields below.")
    source_picker("err_preds", "err")

with tab_run:
    opts = ask.checkpoint_options()
    c1, c2, c3 = st.columns(3)
    checkpoint = c1.selectbox("Checkpoint", list(opts), format_func=opts.get, key="err_checkpoint")
    llm = c1.text_input("LLM", value=ask.default_llm(), key="err_llm")
    names = errors.task_names()
    dataset = c2.selectbox("Dataset", names, key="err_dataset",
                           index=names.index("expla_graphs") if "expla_graphs" in names else 0)
    split = c2.selectbox("Split", errors.SPLITS, index=2, key="err_split")
    start = int(c3.number_input("First example", 0, 100_000, 0, key="err_start"))
    count = int(c3.number_input("Examples", 1, 5_000, 20, key="err_count"))
    method = c2.selectbox("Retrieval method", cell_methods(), format_func=method_label, key="err_method")
    if st.button("Run evaluation", key="err_run", type="primary"):
        ss["err_stop_flag"] = False
        st.button("Stop", key="err_stop", on_click=lambda: ss.update(err_stop_flag=True),
                  help="Stops between examples; everything answered so far is kept and shown.")
        out = errors.eval_output_path(dataset, split, start, count, method)
        bar = st.progress(0.0, text="Loading the model ...")
        try:
            pipe = ask.get_pipeline(checkpoint, llm, encoder_choice())
            setting = errors.prep_setting(pipe, method)
            examples = errors.prepare_slice(dataset, split, start, count, pipe.encoder, setting,
                                            on_progress=lambda i, n: bar.progress(i / n, f"Retrieving {i}/{n} ..."))
            if not examples:
                raise ValueError(f"{dataset}/{split} has no examples from {start} on")
            ss["err_eval_path"] = str(out)  # from here on, a stop keeps the file
            ss["err_run_banner"] = {"kind": "warning", "text": f"Stopped: the answers so far are in {out}."}
            res = errors.run_evaluation(pipe.model, examples, dataset, out, method=method,
                                        on_progress=lambda d, n: bar.progress(d / n, f"Answered {d}/{n} ..."),
                                        should_stop=lambda: bool(ss.get("err_stop_flag")),
                                        lock=pipe.lock, calibration=pipe.meta.get("confidence"))
            ss["err_run_banner"] = {"kind": "warning" if res["stopped"] else "success",
                                    "text": f"{'Stopped' if res['stopped'] else 'Finished'}: {res['done']} of "
                                            f"{res['total']} examples answered, written to {res['path']}."}
        except Exception as e:  # noqa: BLE001 - no data / bad model: say so, keep the page (and any lines written)
            ss.pop("err_run_banner", None)
            st.error(f"Could not run the evaluation: {type(e).__name__}: {e}")
        else:
            st.rerun()  # show the new file (loaded at the top of the page)

preds = ss.get("err_preds")
banner = ss.get("err_banner")
if banner and banner["preds"] is preds:  # about the loaded predictions only
    (st.success if banner["kind"] == "success" else st.warning)(banner["text"])
if preds is None:
    st.info("Load a predictions file or run an evaluation to start.")
    st.stop()
show_line_errors(preds)
df = errors.predictions_frame(preds)
if df.empty:
    st.warning(f"{errors.escape_markdown(preds.name)} has no valid predictions.")
    st.stop()

# ---------------------------------------------------------------- sidebar: filters
with st.sidebar:
    st.header("Filter")
    outcome = st.radio("Outcome", ["all", "correct", "wrong"], horizontal=True, key="err_outcome")
    qtypes = st.multiselect("Question type", sorted(df["qtype"].unique()), key="err_qtypes")
    methods = st.multiselect("Method", sorted(df["method"].unique()), key="err_methods")
    verdicts = st.multiselect("Verdict", list(errors.VERDICTS), key="err_verdicts")
    found = sorted(t for t in df["template"].unique() if t)
    templates = st.multiselect("Template (generated scenes)", found, key="err_templates",
                               help="The SceneGraphs generator template that wrote the question: colour, "
                                    "one-hop, same-material, ...") if found else []
view_df = errors.filter_frame(df, outcome, qtypes, methods, verdicts, templates)

counts = errors.verdict_counts(df)
unknown = counts[errors.UNKNOWN]
classified = counts[errors.RETRIEVAL] + counts[errors.REASONING]
cols = st.columns(6 if unknown else 5)
cols[0].metric("Examples", len(df))
cols[1].metric("Accuracy", f"{df['correct'].mean():.1%}")
cols[2].metric("Correct", counts[errors.CORRECT])
cols[3].metric("Retrieval failures", counts[errors.RETRIEVAL] if classified or not unknown else "n/a")
cols[4].metric("Reasoning/generation failures", counts[errors.REASONING] if classified or not unknown else "n/a")
if unknown:
    cols[5].metric("Unknown (no cells recorded)", unknown)
    st.info(errors.verdict_summary(counts))
st.caption(f"{errors.escape_markdown(preds.name)}. {errors.VERDICT_RULE}")
flags = errors.low_confidence_summary(df)
if flags:
    st.caption(flags)

left, right = st.columns([3, 2])
left.plotly_chart(errors.accuracy_chart(errors.accuracy_by_type(view_df)), key="err_acc_chart")
labels = errors.closed_label_set(preds)
with right:
    if labels:
        st.markdown("**Confusion matrix** (rows: gold, columns: predicted)")
        st.dataframe(errors.confusion_matrix(view_df, labels))
    else:
        st.caption("No confusion matrix: the labels are not a closed set.")
    st.dataframe(errors.accuracy_by_type(view_df), hide_index=True)
    by_template = errors.accuracy_by_template(view_df)
    if not by_template.empty:
        st.markdown("**Accuracy by template**")
        st.dataframe(by_template, hide_index=True, key="err_by_template")

st.subheader(f"Predictions ({len(view_df)} of {len(df)} shown)")
st.dataframe(view_df, hide_index=True, key="err_table")
st.download_button("Table as CSV", errors.frame_csv(view_df), "predictions.csv", "text/csv", key="err_csv")

st.subheader("Drill into one example")
if view_df.empty:
    st.info("No example matches the filters.")
else:
    pick = st.selectbox("Example", list(view_df["id"]), key="err_pick",
                        format_func=lambda i: f"{i}: {errors.user_question(preds.by_id()[i]['question'])[:90]}")
    drill(preds.by_id()[pick], "err_drill")

st.subheader("Compare with a second prediction file")
with st.expander("Load the second file (e.g. G-Retriever's predictions on the same examples)",
                 expanded=ss.get("err_preds_b") is None):
    source_picker("err_preds_b", "err_b")
other = ss.get("err_preds_b")
if other is not None:
    show_line_errors(other)
    diff = errors.compare(preds, other)
    st.caption(f"{errors.shared_ids(preds, other)} examples in both files; {len(diff)} where exactly one is right.")
    if not diff.empty:
        st.dataframe(diff, hide_index=True, key="err_diff")
        i = st.selectbox("Disagreement", list(diff["id"]), key="err_diff_pick",
                         format_func=lambda i: f"{i}: {diff.set_index('id').loc[i, 'right']}")
        a, b = st.columns(2)
        with a:
            st.markdown(f"**{errors.escape_markdown(preds.name)}**")
            drill(preds.by_id()[i], "err_cmp_a")
        with b:
            st.markdown(f"**{errors.escape_markdown(other.name)}**")
            drill(other.by_id()[i], "err_cmp_b")
