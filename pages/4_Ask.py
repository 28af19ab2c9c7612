"""Ask: what does the trained model answer about this graph, from which cells, and how fast?"""
import streamlit as st

from toporag_core.studio import resources
from toporag_core.studio import ask, claim, errors, remote_core, state
from toporag_core.studio.ask_inputs import AskInputs
from toporag_core.studio.controls import cell_methods, method_label, setting_controls
from toporag_core.studio.graph_view import DEFAULT_CAP, legend_html, render_view
from toporag_core.studio.resources import encoder_choice, get_complex, get_embedded, show_view

st.set_page_config(page_title="Ask", layout="wide")

ss = st.session_state
graph = resources.page_graph(ss)
tree, seed = state.tree_settings(ss)
key = ss[state.GRAPH_KEY]

# ---------------------------------------------------------------- sidebar: model
with st.sidebar:
    st.header("Model")
    options = ask.checkpoint_options()
    # widget state is dropped when the page is left: restore the choice kept under a plain key,
    # else default to the checkpoint trained on the graph's task
    state.restore_widgets(ss, ("ask_checkpoint", "ask_checkpoint_dir", "ask_llm"))
    if ss.get("ask_checkpoint") not in (*options, "folder"):
        ss["ask_checkpoint"] = ask.default_checkpoint(options, graph)
    pick = st.selectbox("Checkpoint", [*options, "folder"], key="ask_checkpoint",
                        format_func=lambda v: options.get(v, "Another checkpoint folder ..."))
    checkpoint = st.text_input("Checkpoint folder", key="ask_checkpoint_dir").strip() if pick == "folder" else pick
    if "ask_llm" not in ss:
        ss["ask_llm"] = ask.default_llm()
    llm = st.text_input("LLM", key="ask_llm",
                        help=f"'{ask.PACKAGED_LLM}' = the packaged SmolLM2 (or the checkpoint's own LLM); or a "
                             "local Hugging Face folder / hub id already in the local cache (e.g. Llama-2-7B "
                             "on a GPU machine). It must have the hidden size the checkpoint was trained for.")
    state.keep_widgets(ss, ("ask_checkpoint", "ask_checkpoint_dir", "ask_llm"))

st.title("Ask")
if not checkpoint:
    st.info("Type the path of a checkpoint folder (config.json + model.safetensors) in the sidebar.")
    st.stop()
pipe = remote = None
try:
    remote = remote_core.remote_client()  # $TOPORAG_CORE_URL: answer on a remote core (e.g. a GPU machine)
    if remote is not None:
        rmodel = remote_core.remote_model(remote)
        summary, trained, dataset, default_max_new = (rmodel.summary(), rmodel.default_setting, rmodel.dataset,
                                                      rmodel.max_new_tokens)
        st.caption(rmodel.status.caption())
    else:
        with st.spinner("Loading the model (once per server; later questions reuse it) ..."):
            pipe = ask.get_pipeline(checkpoint, llm, encoder_choice())
        summary, trained, dataset = ask.model_summary(pipe), pipe.default_setting(), pipe.meta.get("dataset")
        default_max_new = int(pipe.model.config.max_new_tokens)
except remote_core.CoreError as e:  # the remote core is down, slow or refused: say so, keep the page
    st.error(f"The core at {remote_core.core_url()} cannot answer: {e}")
    st.stop()
except Exception as e:  # noqa: BLE001 - a bad folder / LLM id / URL must leave the page usable
    st.error(f"Could not load the model: {type(e).__name__}: {e}")
    st.stop()
mismatch = ask.task_warning(dataset, graph) if remote is not None else None  # a remote core answers with its own
if mismatch:
    st.warning(mismatch)
# trained: the checkpoint's training setting; the controls start from it
METHODS = cell_methods()

# ---------------------------------------------------------------- sidebar: retrieval (the lab's controls)
with st.sidebar:
    st.caption(" \u00b7 ".join(f"**{k}**: {v}" for k, v in summary.items()))
    st.header("Retrieval")
    method = st.selectbox("Method", METHODS, format_func=method_label, key="ask_method",
                          index=METHODS.index(trained.method) if trained.method in METHODS else 0)
    compare = st.toggle("Compare two methods", key="ask_compare")
    other = st.selectbox("Second method", [m for m in METHODS if m != method], format_func=method_label,
                         key="ask_method_b", disabled=not compare)
    methods = [method, other] if compare else [method]
    st.caption("The controls start from the setting the checkpoint was trained with.")
    settings = setting_controls(methods, "ask", base=trained)
    max_new = st.slider("Max new tokens", 1, 128, default_max_new, key="ask_max_new")
    cap = st.slider("Node cap of the view", 30, 500, DEFAULT_CAP, step=10, key="ask_cap")

st.caption(f"{graph.name or 'unnamed graph'} ({graph.num_nodes} nodes, {graph.num_edges} edges; load another "
           f"on Home). Model on **{summary['device']}**: {summary['checkpoint']}"
           + (f", LLM {summary['LLM']}." if "LLM" in summary else f", remote core {summary.get('core')}."))
question = st.text_area("Question", value=graph.meta.get("question") or "", key=f"ask_question_{key}", height=90,
                        on_change=state.share_question, args=(ss, f"ask_question_{key}"))  # carried to the lab
query = ask.retrieval_query(graph, question)
if query:
    st.caption("Retrieval uses both arguments as its query, as in the ExplaGraphs training data.")
questions = [q for q in (graph.meta.get("questions") or []) if q.get("question")]
if questions:
    st.caption(f"This scene comes with {len(questions)} question(s) (pick one on Home); any of them, typed here, "
               "is judged against its gold answer.")
task = ask.task_of_graph(graph)
gold = ask.gold_for(graph, question)
decision = ask.route(checkpoint, graph, question, options) if remote is None else None
if decision is not None and question.strip():
    (st.warning if decision.rerouted else st.caption)(decision.line())
inputs = AskInputs(graph_key=key, tree=tree, seed=seed, checkpoint=checkpoint, llm=llm, question=question,
                   settings=tuple(settings.values()), max_new_tokens=max_new)
ARMS_NOTE = ("Own = the answer's graph tokens; zeroed = none (the text alone); permuted = the same cells with each "
             "rank's features moved by a seeded derangement. Same text and question in every column.")


EFFECT_COST = ("Re-scores this answer (and its gold answer, when known) with zeroed and with permuted graph tokens: "
               "three more LLM passes, so it runs only when asked.")


def measure_effect(m, a) -> None:
    """Answer ``a`` under own / zeroed / permuted graph tokens, kept with the answer (``ask_last``: the same
    question, graph, checkpoint and controls) so a rerun reuses it; an error text when it cannot be measured."""
    asker = ask.get_pipeline(last.get("answerer", checkpoint), last["inputs"].llm, encoder_choice())
    asked = last["inputs"].question
    try:
        last["effects"][m] = ask.graph_effect(asker, get_embedded(key, tree, seed, graph), asked, a,
                                              max_new_tokens=last["inputs"].max_new_tokens,
                                              gold=ask.gold_for(graph, asked))
    except Exception as e:  # noqa: BLE001 - the answer stands without its measurement
        last["effects"][m] = f"{type(e).__name__}: {e}"


def show_claim_evidence(m, ev) -> None:
    """A yes/no answer's evidence: the retrieved facts about the question's claim (:mod:`.claim`)."""
    st.markdown(claim.evidence_markdown(ev))
    if ev.facts:
        with st.container(key=f"ask_claim_{m}"):
            st.code("\n".join(f for f, _ in ev.facts), language=None, wrap_lines=True)
    note = claim.sentence_note(ev)
    if note:
        st.caption(note)
        if ev.backed:
            st.code(ev.sentence, language=None, wrap_lines=True)


def show_graph_effect(m, a, effects) -> None:
    """The "What the graph tokens did" section of one answer: on demand the 3 arms and their directions, then
    on demand the cells (unless the attribution did not beat random for this checkpoint)."""
    if effects is None:
        st.caption("Not measured: a remote core answered (it sends no graph tokens back).")
        return
    effect = effects.get(m)
    if effect is None:
        st.caption(EFFECT_COST)
        if st.button("Measure what the graph tokens did", key=f"ask_effect_{m}"):
            with st.spinner("Scoring the answer with its own, zeroed and permuted graph tokens ..."):
                measure_effect(m, a)
            st.rerun()
        return
    if isinstance(effect, str):
        st.warning(f"Could not measure the graph tokens: {effect}")
        return
    st.info(errors.escape_markdown(effect.verdict()))
    if not effect.has_graph:
        return
    st.dataframe(ask.arms_frame(effect), hide_index=True, key=f"ask_arms_{m}")
    st.caption(ARMS_NOTE)
    asker = ask.get_pipeline(last.get("answerer", checkpoint), last["inputs"].llm, encoder_choice())
    note = ask.token_text_note(asker)
    if note:
        st.caption(note)
    show, line = ask.attribution_note(last.get("answerer", checkpoint))
    if not show:  # measured, and its top cell was no nearer the answer than a random retrieved cell
        st.caption(line)
        return
    if effect.cells is None:
        if st.button("Explain the answer (which cells mattered)", key=f"ask_explain_{m}"):
            with st.spinner("Leaving out one cell at a time (its graph tokens and its context lines) ..."):
                ask.explain_cells(asker, get_embedded(key, tree, seed, graph), last["inputs"].question, a, effect)
            st.rerun()
        return
    st.markdown("**Cells by attribution**: the change in the answer's log-probability when the cell (and what is "
                "on it) is left out of both the graph tokens and the context text; negative = the cell supported "
                "the answer")
    st.caption(line)
    st.dataframe(ask.cells_effect_frame(effect), hide_index=True, key=f"ask_cells_effect_{m}")


if st.button("Ask", key="ask_go", type="primary"):
    try:
        answers = {}
        # a first embedding draws its progress bar here, in view (not inside the collapsed status)
        ecx = get_embedded(key, tree, seed, graph) if remote is None else None
        with st.status("Answering ...", expanded=False) as status:
            if remote is not None:  # the core lifts/embeds on its side; subcomplexes come back on our complex
                cx = get_complex(key, tree, seed, graph)
                answers = remote_core.ask_via_core(remote, graph, cx, question, [settings[m] for m in methods],
                                                   tree=tree, seed=seed, max_new_tokens=max_new, query=query)
            else:
                if decision.checkpoint != checkpoint:
                    status.update(label=f"Loading {decision.model} (once per server) ...")
                answerer = pipe if decision.checkpoint == checkpoint else \
                    ask.get_pipeline(decision.checkpoint, llm, encoder_choice())
                for m in methods:
                    status.update(label=f"Retrieving with {method_label(m)} and generating ...")
                    answers.update(ask.ask(answerer, ecx, question, [settings[m]], max_new_tokens=max_new,
                                           query=query))
            effects = {} if remote is None else None  # measured per answer when asked (show_graph_effect)
            status.update(label="Answered", state="complete")
        ss["ask_last"] = {"inputs": inputs, "answers": answers, "route": decision, "effects": effects,
                          "answerer": decision.checkpoint if decision is not None else checkpoint}
    except remote_core.CoreError as e:
        st.error(f"The core could not answer: {e}")
    except ValueError as e:
        st.warning(str(e))

last = ss.get("ask_last")
if not last or not last["inputs"].same_graph(inputs):
    st.info("Type a question and press **Ask**.")
    st.stop()
if last["inputs"] != inputs:
    st.info("The question or the controls changed since this answer: press **Ask** to answer again.")
answers = last["answers"]
if last.get("route") is not None:
    st.markdown(last["route"].line())

asked = last["inputs"].question
gold = ask.gold_for(graph, asked)
cols = st.columns(len(answers))
for col, (m, a) in zip(cols, answers.items()):
    with col:
        n, e, f = a.subcomplex.counts
        st.markdown(f"**{method_label(m)}**: {n} 0-cells, {e} 1-cells, {f} 2-cells retrieved")
        with st.container(key=f"ask_answer_{m}"):
            st.code(a.answer if a.answer else "(empty answer)", language=None, wrap_lines=True)
        conf = ask.answer_confidence(a)  # calibrated on the checkpoint's validation split
        if conf.low:
            st.warning(ask.confidence_markdown(conf), icon=":material/warning:")
        else:
            st.caption(ask.confidence_markdown(conf))
        if gold is not None:
            right = ask.judge(task, a.answer, gold)
            (st.success if right else st.error)(
                f"{'Correct' if right else 'Wrong'} ({task or 'containment'} metric). Gold answer: "
                f"{ask.gold_text(gold)}", icon=":material/check:" if right else ":material/close:")
        else:
            st.caption(ask.gold_note(graph, asked))
        occurs = ask.occurrence_note(a)
        if occurs:
            st.caption(occurs)
        if claim.is_yes_no_answer(a):  # evidence read from the retrieved facts, never the model's sentence
            show_claim_evidence(m, claim.claim_evidence(asked, a.subcomplex, a.evidence, a.unsupported_claims))
        elif a.evidence is not None:
            st.markdown(ask.evidence_heading(a, errors.is_citation(a.evidence)))
            with st.container(key=f"ask_evidence_{m}"):
                st.code(a.evidence or "(no evidence written)", language=None, wrap_lines=True)
            note = errors.citation_note({"evidence": a.evidence, "context": a.context})
            if note:
                st.caption(note.strip())
        cand = ask.candidates_frame(a)
        if cand is not None:
            st.markdown("**Candidate answers** (the retrieved entities' names, scored by the model; highlighted in "
                        "the graph below)")
            st.dataframe(cand, hide_index=True, key=f"ask_candidates_{m}",
                         column_config={"probability": st.column_config.ProgressColumn(
                             "probability", min_value=0.0, max_value=1.0, format="%.3f")})
        if a.label_probs:
            st.markdown("**Label probabilities** (closed answer set, scored by likelihood)")
            st.dataframe(ask.label_probs_frame(a.label_probs), hide_index=True, key=f"ask_probs_{m}",
                         column_config={"probability": st.column_config.ProgressColumn(
                             "probability", min_value=0.0, max_value=1.0, format="%.3f")})
        with st.expander("What the graph tokens did", expanded=True):
            show_graph_effect(m, a, last.get("effects", {}))
        cut = ask.cut_message(a)
        if cut is not None:
            st.warning(cut)
            dropped = ask.dropped_frame(a)
            if not dropped.empty:
                with st.expander(f"Cells dropped from the context ({len(dropped)})"):
                    st.dataframe(dropped, hide_index=True, key=f"ask_dropped_{m}")
st.markdown(legend_html(retrieval=True), unsafe_allow_html=True)
for col, (m, a) in zip(st.columns(len(answers)), answers.items()):
    with col:
        view = render_view(a.subcomplex.complex, sub=a.subcomplex, cap=cap, height_px=480 if compare else 560,
                           highlight_nodes={**ask.candidate_nodes(a), **ask.cited_nodes(a)})
        st.caption(view.caption())
        show_view(view)

tab_cells, tab_context, tab_prompt, tab_time = st.tabs(["Retrieved cells", "Context", "Prompt layout", "Timings"])
with tab_cells:
    for col, (m, a) in zip(st.columns(len(answers)), answers.items()):
        col.markdown(f"**{method_label(m)}**")
        col.dataframe(ask.cells_frame(a.subcomplex), hide_index=True, key=f"ask_cells_{m}")
with tab_context:
    for col, (m, a) in zip(st.columns(len(answers)), answers.items()):
        col.markdown(f"**{method_label(m)}**: the textualized subcomplex, as the LLM read it"
                     + (" (cut by prize to its input limit)" if ask.context_cut(a) else ""))
        col.code(a.context, language=None)
with tab_prompt:
    for col, (m, a) in zip(st.columns(len(answers)), answers.items()):
        col.markdown(f"**{method_label(m)}**: {a.prompt.get('input_tokens', '?')} input tokens, "
                     f"{a.prompt.get('soft_tokens', 0)} of them soft")
        col.dataframe(ask.prompt_layout_frame(a.prompt), hide_index=True)
        col.code(ask.prompt_text(a.prompt), language=None)
with tab_time:
    st.dataframe(ask.timings_frame(answers), hide_index=True)
    st.caption("Milliseconds: retrieve = similarities + prizes + PCST; encode = cell-complex encoder + projector "
               "(soft prompt); generate = greedy decoding. The graph's cell embeddings were computed once.")
