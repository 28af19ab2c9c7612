"""The Ask page (AppTest) and its support library, on a tiny trained-format checkpoint.

The checkpoint comes from :func:`toporag_core.model.tiny.build_tiny_checkpoint` (a random 2-layer
Llama + a cell-complex encoder for the 256-d hashing encoder): its answers are gibberish but
deterministic (greedy decoding), so every check compares the page with the pipeline run
in-process on the same input.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from toporag_core.embed import CachedEncoder, HashingEncoder  # noqa: E402
from toporag_core.graph import TextualGraph  # noqa: E402
from toporag_core.answering.pipeline import TopoRAGPipeline  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.studio import ask, state  # noqa: E402
from toporag_core.retrieval import RetrievalSetting  # noqa: E402
from toporag_core.model.tiny import build_tiny_checkpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "What is on the table next to the cup?"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny_ckpt") / "ckpt")


@pytest.fixture(autouse=True)
def _test_mode(monkeypatch, checkpoint, tmp_path):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(checkpoint))
    monkeypatch.delenv("TOPORAG_LLM", raising=False)


@pytest.fixture(scope="module")
def pipe(checkpoint) -> TopoRAGPipeline:
    """An independent in-process pipeline on the same checkpoint (the reference answers)."""
    return TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())


def reference(pipe, graph: TextualGraph, question: str, method: str = "toporag", **kw) -> dict:
    ecx = EmbeddedComplex.from_graph(graph, HashingEncoder())
    return pipe.answer(ecx, question, RetrievalSetting.make(method, **kw))


def ask_page() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "4_Ask.py"), default_timeout=120)


def answer_codes(at: AppTest) -> list[str]:
    """The answer blocks (first ``st.code`` of each method column, before the tabs)."""
    n = 2 if at.session_state["ask_compare"] else 1
    return [c.value for c in at.code[:n]]


def frame_with(at: AppTest, column: str, nth: int = 0) -> pd.DataFrame:
    """The ``nth`` table of the page with ``column`` (the retrieved cells have ``role``)."""
    return [d.value for d in at.dataframe if column in d.value.columns][nth]


def ask_question(at: AppTest, question: str) -> AppTest:
    at.run()
    at.text_area(key=f"ask_question_{at.session_state[state.GRAPH_KEY]}").set_value(question)
    at.button(key="ask_go").click()
    return at.run()


# ====================================================================== page
def test_ask_shows_the_answer_the_retrieved_cells_and_the_prompt(pipe):
    at = ask_question(ask_page(), QUESTION)
    assert not at.exception and not at.error and not at.warning
    want = reference(pipe, samples.load_sample("scene"), QUESTION)
    assert want["answer"]  # a non-empty answer, or the check below could not tell pages apart
    assert answer_codes(at) == [want["answer"]]
    cells = frame_with(at, "role")
    assert list(cells["text"][cells["dim"] == 0]) == want["subcomplex"].node_texts()
    assert (cells["dim"] == 1).sum() == want["subcomplex"].counts[1]
    assert (cells["dim"] == 2).sum() == want["subcomplex"].counts[2]
    codes = [c.value for c in at.code]
    assert want["context"] in codes  # the Context tab: exactly the text the LLM reads
    prompt = ask.prompt_text(want["prompt"])
    assert prompt in codes and "<graph token x 1>" in prompt and QUESTION in prompt
    timings = at.dataframe[-1].value
    assert list(timings.columns) == ["method", *ask.TIMING_STAGES] and (timings["generate"] > 0).all()
    n, m, f = want["subcomplex"].counts
    assert any(f"{n} 0-cells, {m} 1-cells, {f} 2-cells retrieved" in md.value for md in at.markdown)
    assert any("cpu" in c.value for c in at.sidebar.caption)  # the device in use is shown


def test_ask_compare_answers_with_two_methods(pipe):
    at = ask_page().run()
    at.toggle(key="ask_compare").set_value(True).run()
    at.selectbox(key="ask_method_b").set_value("topk-triples")
    at = ask_question(at, QUESTION)
    assert not at.exception and not at.warning
    graph = samples.load_sample("scene")
    a, b = (reference(pipe, graph, QUESTION, m) for m in ("toporag", "topk-triples"))
    assert a["context"] != b["context"]  # the two methods really retrieve different cells
    assert answer_codes(at) == [a["answer"], b["answer"]]
    assert len(frame_with(at, "role")) == sum(a["subcomplex"].counts)
    assert len(frame_with(at, "role", 1)) == sum(b["subcomplex"].counts)


def test_ask_controls_change_the_retrieval_and_stale_answers_are_flagged(pipe):
    at = ask_question(ask_page(), QUESTION)
    at.slider(key="ask_k").set_value(1).run()
    assert any("changed since this answer" in i.value for i in at.info)
    at.button(key="ask_go").click()
    at.run()
    want = reference(pipe, samples.load_sample("scene"), QUESTION, k0=1, k1=1, k2=1)
    assert answer_codes(at) == [want["answer"]]
    assert len(frame_with(at, "role")) == sum(want["subcomplex"].counts)
    assert not any("changed since this answer" in i.value for i in at.info)


def test_ask_bad_checkpoint_folder_shows_an_error(tmp_path):
    at = ask_page().run()
    at.selectbox(key="ask_checkpoint").set_value("folder").run()
    at.text_input(key="ask_checkpoint_dir").set_value(str(tmp_path / "nope")).run()
    assert not at.exception
    assert "not a TopoRAG checkpoint folder" in at.error[0].value


def test_ask_empty_question_warns():
    at = ask_question(ask_page(), "   ")
    assert not at.exception
    assert "type a question first" in at.warning[0].value


# Two sessions at once: Streamlit runs every browser session's script in its own thread and
# st.cache_resource hands them the same pipeline object, so the concurrency that matters is
# several threads answering on one pipeline: test_pipeline_threads_match_single_threaded_answers.
# (Two AppTest instances cannot run in parallel threads: the testing harness keeps widget
# state in a process-global and fails at random with KeyError, so such a test would be flaky.)


# ====================================================================== library
def test_pipeline_threads_match_single_threaded_answers(checkpoint):
    """One shared pipeline, four threads, two graphs: every answer equals the sequential one."""
    pipe = ask.load_pipeline(str(checkpoint), ask.PACKAGED_LLM, encoder=CachedEncoder(HashingEncoder()))
    graphs = {s: EmbeddedComplex.from_graph(samples.load_sample(s), HashingEncoder()) for s in ("scene", "kg")}
    jobs = [("scene", QUESTION), ("kg", "Who discovered polonium?"), ("scene", "Is the bowl ceramic?"),
            ("kg", "Where did Marie Curie study?")]
    want = [ask.ask(pipe, graphs[g], q, [RetrievalSetting()])["toporag"].answer for g, q in jobs]
    assert len(set(want)) > 1
    got: dict[int, str] = {}
    barrier = threading.Barrier(len(jobs))

    def run(i: int) -> None:
        barrier.wait()
        g, q = jobs[i]
        got[i] = ask.ask(pipe, graphs[g], q, [RetrievalSetting()])["toporag"].answer

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert [got[i] for i in range(len(jobs))] == want


def test_checkpoint_options_follow_the_environment(monkeypatch, checkpoint):
    opts = ask.checkpoint_options()
    assert next(iter(opts)) == str(checkpoint) and ask.NO_CHECKPOINT in opts
    monkeypatch.setenv("TOPORAG_CHECKPOINT", "none")
    assert next(iter(ask.checkpoint_options())) == ask.NO_CHECKPOINT
    monkeypatch.setenv("TOPORAG_LLM", "/some/folder")
    assert ask.default_llm() == "/some/folder"


def test_explagraphs_rows_retrieve_with_both_arguments(pipe):
    g = TextualGraph.from_triples([("guns", "causes", "harm"), ("harm", "capable of", "death")],
                                  meta={"arg1": "Guns are dangerous.", "arg2": "Ban guns.", "question": "Q?"})
    assert ask.retrieval_query(g, "Q?") == "Guns are dangerous. Ban guns."
    assert ask.retrieval_query(g, "another question") is None
    assert ask.retrieval_query(samples.load_sample("scene"), QUESTION) is None
    scene = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(scene, HashingEncoder())
    by_query = ask.ask(pipe, ecx, QUESTION, [RetrievalSetting.make(k=1)], query="yellow banana")["toporag"]
    want = reference(pipe, scene, "yellow banana", k0=1, k1=1, k2=1)["subcomplex"].node_texts()
    assert by_query.subcomplex.node_texts() == want
    assert want != reference(pipe, scene, QUESTION, k0=1, k1=1, k2=1)["subcomplex"].node_texts()
    assert by_query.prompt["question"] == QUESTION


def test_embedding_width_mismatch_is_a_clear_error(pipe):
    ecx = EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder(dim=64))
    with pytest.raises(ValueError, match="256-d cell embeddings.*64-d"):
        ask.ask(pipe, ecx, QUESTION, [RetrievalSetting()])


def test_settings_and_tables_from_a_checkpoint(tmp_path, pipe):
    ckpt = build_tiny_checkpoint(tmp_path / "c", retrieval={"k0": 2, "k1": 4, "k2": 1, "c2": 1.5})
    p = ask.load_pipeline(str(ckpt), "", encoder=HashingEncoder())
    s = p.default_setting()
    assert (s.method, s.params["k0"], s.params["k1"], s.params["k2"], s.params["c2"]) == ("toporag", 2, 4, 1, 1.5)
    assert p.default_setting(k=5, c2=0.25).params["k1"] == 5 and p.default_setting(k2=0).params["k0"] == 2
    out = ask.ask(pipe, EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder()), QUESTION,
                  [RetrievalSetting(), RetrievalSetting("shortest-path")])
    t = ask.timings_frame(out)
    assert isinstance(t, pd.DataFrame) and len(t) == 2
    layout = ask.prompt_layout_frame(out["toporag"].prompt)
    assert list(layout["part"])[:2] == ["chat prefix", "soft prompt"] and "1 graph token" in layout["content"][1]
    cells = ask.cells_frame(out["toporag"].subcomplex)
    assert set(cells["role"]) <= {"terminal", "steiner", "closure"}


def test_prompt_view_puts_the_soft_prompt_where_the_layout_does():
    base = {"prefix": "<s>", "context": "ctx", "question": "q?", "suffix": "</s>", "graph_tokens": 4}
    order = {pos: [p.split(" (")[0] for p in ask.prompt_layout_frame({**base, "graph_position": pos})["part"]]
             for pos in ("prefix", "before_question")}
    assert order["prefix"] == ["chat prefix", "soft prompt", "context", "question", "chat suffix"]
    assert order["before_question"] == ["chat prefix", "context", "soft prompt", "question", "chat suffix"]
    first = ask.prompt_layout_frame({**base, "graph_position": "before_question", "question_first": True})
    assert list(first["part"]) == ["chat prefix", "question (read first)", "context", "soft prompt", "question",
                                   "chat suffix"]
    # the one-string view reads in the same order, soft tokens where the layout puts them
    assert ask.prompt_text({**base, "graph_position": "before_question", "question_first": True}) == \
        "<s>q?\nctx\n<graph token x 4>q?</s>"
    assert ask.prompt_text({**base, "graph_position": "prefix"}) == "<s><graph token x 4>ctx\nq?</s>"


# ====================================================================== issue 12: answers the user can judge
def argument_page(monkeypatch=None) -> AppTest:
    at = ask_page()
    at.session_state[state.GRAPH] = samples.load_sample("argument")
    at.session_state[state.GRAPH_KEY] = state.graph_fingerprint(at.session_state[state.GRAPH])
    return at


def test_ask_shows_gold_verdict_and_whether_the_answer_is_in_the_context(pipe):
    g = samples.load_sample("argument")
    at = argument_page()
    at.run()
    q = g.meta["question"]
    at.text_area(key=f"ask_question_{at.session_state[state.GRAPH_KEY]}").set_value(q)
    at.button(key="ask_go").click()
    at.run()
    assert not at.exception
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    choices = ask.answer_choices(pipe, g, q)
    assert choices == ("support", "counter")  # the row's own question: the task's closed answer set is scored
    want = pipe.answer(ecx, q, pipe.default_setting(), query=ask.retrieval_query(g, q), choices=choices)
    assert answer_codes(at) == [want["answer"]] and want["answer"] in choices
    right = ask.judge("expla_graphs", want["answer"], "support")
    box = (at.success if right else at.error)
    assert any(f"Gold answer: {g.meta['label']}" in b.value and ("Correct" if right else "Wrong") in b.value
               for b in box)
    # a label picked from a fixed set: whether its text occurs in the context says nothing, so it is not shown
    assert not any("in the retrieved context" in c.value for c in at.caption)
    # another question has no gold answer: no verdict
    at.text_area(key=f"ask_question_{at.session_state[state.GRAPH_KEY]}").set_value("Who runs libraries?")
    at.button(key="ask_go").click()
    at.run()
    assert not any("Gold answer" in b.value for b in [*at.success, *at.error])
    assert any("No gold answer for this question (it is not the example's own question)" in c.value
               for c in at.caption)
    # an open answer: the page says whether its text occurs in the retrieved context
    a = at.session_state["ask_last"]["answers"]["toporag"]
    assert a.choices is None and not a.closed
    occurs = ask.answer_in_context(a.answer, a.context)
    assert any(("**occurs**" if occurs else "does **not** occur") in c.value for c in at.caption)


def test_every_built_in_samples_own_question_is_judged(pipe):
    """Each built-in sample's own question has a gold answer (the scene's two-part question needs both
    parts), and the Ask page shows the verdict for the scene's own question."""
    for key in samples.SAMPLE_KEYS:
        g = samples.load_sample(key)
        assert ask.gold_for(g, g.meta["question"]) is not None, key
        assert ask.task_of_graph(g) != "webqsp", key  # the gold does not make a sample look like a WebQSP row
    scene = samples.load_sample("scene")
    gold = ask.gold_for(scene, scene.meta["question"])
    assert list(gold) == ["ceramic", "plate"] and ask.gold_text(gold).startswith("ceramic and plate")
    assert not ask.judge(None, "table", gold) and not ask.judge(None, "ceramic", gold)
    assert ask.judge(None, "It is ceramic, next to the plate.", gold)
    kg = samples.load_sample("kg")
    assert ask.judge(None, "Polonium.", ask.gold_for(kg, kg.meta["question"]))
    at = ask_question(ask_page(), scene.meta["question"])
    assert not at.exception
    want = reference(pipe, scene, scene.meta["question"])
    assert answer_codes(at) == [want["answer"]]
    right = ask.judge(ask.task_of_graph(scene), want["answer"], gold)
    verdicts = [b.value for b in [*at.success, *at.error] if "Gold answer: ceramic and plate" in b.value]
    assert len(verdicts) == 1 and verdicts[0].startswith("Correct" if right else "Wrong")
    assert not any("comes without one" in c.value for c in at.caption)


def test_gold_judge_and_occurrence_rules():
    g = TextualGraph.from_triples([("a", "r", "b")], name="w")
    g.meta.update(question="Where?", answers=["Paris", "France"])
    assert ask.gold_for(g, " Where? ") == ["Paris", "France"] and ask.gold_for(g, "When?") is None
    assert ask.judge("webqsp", "It is in paris.", ["Paris"]) and not ask.judge("webqsp", "Lyon", ["Paris"])
    assert ask.judge(None, "the answer is red", "Red") and not ask.judge(None, "blue", "red")
    assert ask.judge("scene_graphs", "a red cup", ["blue", "red"]) and not ask.judge("scene_graphs", "cup", ["red"])
    s = TextualGraph.from_triples([("cup", "on", "table")], name="s")
    s.meta.update(image_id="1", questions=[{"question": "What is on the table?", "answer": "cup"},
                                           {"question": "Is the cup red?", "answer": "no"}])
    assert ask.gold_for(s, "Is the cup red?") == "no"
    assert ask.answer_in_context("red cup", "node_attr\nthe Red  Cup!\n") and not ask.answer_in_context("cu", "cup")


def test_ask_shows_label_probabilities_when_the_pipeline_returns_them(monkeypatch):
    real = TopoRAGPipeline.answer

    def with_probs(self, *a, **kw):
        out = real(self, *a, **kw)
        out.label_probs = {"counter": 0.25, "support": 0.75}
        return out

    monkeypatch.setattr(TopoRAGPipeline, "answer", with_probs)
    at = ask_question(ask_page(), QUESTION)
    assert not at.exception
    probs = next(d.value for d in at.dataframe if list(d.value.columns) == ["label", "probability"])
    assert probs["label"].tolist() == ["support", "counter"] and probs["probability"].tolist() == [0.75, 0.25]
    assert any("Label probabilities" in m.value for m in at.markdown)


def test_ask_without_label_probabilities_shows_none():
    at = ask_question(ask_page(), QUESTION)
    assert not any("Label probabilities" in m.value for m in at.markdown)
    assert not any("Evidence the model wrote" in m.value for m in at.markdown)


def test_ask_shows_the_evidence_an_evidence_first_checkpoint_wrote(monkeypatch):
    """The page shows what the pipeline returns as ``evidence`` (the text an evidence-first checkpoint
    wrote before scoring yes / no) as text, never as HTML."""
    real = TopoRAGPipeline.answer

    def with_evidence(self, *a, **kw):
        out = real(self, *a, **kw)
        out.evidence = "The <b>metal</b> cup is orange"
        return out

    monkeypatch.setattr(TopoRAGPipeline, "answer", with_evidence)
    at = ask_question(ask_page(), QUESTION)
    assert not at.exception
    # the tiny checkpoint reads the CSV format, which the claims check cannot read: the heading says so
    assert any("Evidence the model wrote first" in m.value and "could not be checked against this context" in m.value
               for m in at.markdown)
    assert not any("claims of the evidence" in c.value for c in at.caption)
    assert any(c.value == "The <b>metal</b> cup is orange" for c in at.code)


def test_checkpoint_task_warning_and_default(tmp_path, monkeypatch):
    web = build_tiny_checkpoint(tmp_path / "web", dataset="webqsp")
    expla = build_tiny_checkpoint(tmp_path / "expla", dataset="expla_graphs")
    assert ask.checkpoint_task(str(web)) == "webqsp" and ask.checkpoint_task(ask.NO_CHECKPOINT) is None
    options = {str(expla): "E", str(web): "W", ask.NO_CHECKPOINT: "none"}
    wg = TextualGraph.from_triples([("jfk", "born in", "brookline")], name="w")
    wg.meta.update(question="Where was JFK born?", answers=["Brookline"])
    monkeypatch.delenv("TOPORAG_CHECKPOINT")
    assert ask.default_checkpoint(options, wg) == str(web)
    assert ask.default_checkpoint(options, samples.load_sample("argument")) == str(expla)
    assert ask.task_warning("expla_graphs", wg) and "webqsp" in ask.task_warning("expla_graphs", wg)
    assert ask.task_warning("webqsp", wg) is None and ask.task_warning("expla_graphs", samples.load_sample("scene")) \
        is None
    # the page: an ExplaGraphs checkpoint on a WebQSP graph warns
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(expla))
    at = ask_page()
    at.session_state[state.GRAPH] = wg
    at.session_state[state.GRAPH_KEY] = state.graph_fingerprint(wg)
    at.run()
    assert not at.exception
    assert any("trained on **expla_graphs**" in w.value and "**webqsp**" in w.value for w in at.warning)


def test_checkpoint_choice_survives_leaving_the_page(tmp_path, checkpoint):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/4_Ask.py").run()
    at.sidebar.selectbox(key="ask_checkpoint").set_value("folder").run()
    at.sidebar.text_input(key="ask_checkpoint_dir").set_value(str(checkpoint)).run()
    at.switch_page("pages/1_Explore.py").run()
    assert "ask_checkpoint" not in at.session_state or at.session_state["ask_checkpoint"] == "folder"
    at.switch_page("pages/4_Ask.py").run()
    assert not at.exception
    assert at.sidebar.selectbox(key="ask_checkpoint").value == "folder"
    assert at.sidebar.text_input(key="ask_checkpoint_dir").value == str(checkpoint)


def test_answers_wrap():
    at = ask_question(ask_page(), QUESTION)
    assert at.code[0].proto.wrap_lines


def test_fit_context_keeps_2_cells_where_a_prefix_cut_loses_them(pipe):
    from toporag_core.retrieval import textualize
    from toporag_core.retrieval.budget import fit_context, prefix_cut

    g = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    out = pipe.answer(ecx, QUESTION, RetrievalSetting.make("toporag", k=6, c2=0.1))
    sub = out["subcomplex"]
    assert sub.cells2.size >= 1
    tok = pipe.model.tokenizer

    def count(t):
        return len(tok(t, add_special_tokens=False)["input_ids"])

    context = textualize(sub)  # in full (the answer's own context is already fitted to the model's limit)
    full = count(context)
    lines = context.split("\n")
    section = lines.index("2-cells (closed loops)")
    # room for the headers, the 2-cells and a few tokens more: a prefix cut would lose every 2-cell
    headers = ["node_id,node_attr", "", "src,edge_attr,dst", ""]
    budget = sum(count(t) + 1 for t in headers + lines[section:]) + 8
    assert budget < full
    fit = fit_context(sub, budget, count)
    assert fit.truncated and fit.tokens <= budget
    assert not fit.dropped_cells2  # 2-cells are kept first
    kept = tok.decode(tok(context, add_special_tokens=False)["input_ids"][:budget])
    assert prefix_cut(sub, kept, budget, full).dropped_cells2  # a prefix cut to the same budget loses 2-cells
    assert set(fit.text.split("\n")) <= set(lines)  # a subset of textualize's own lines
    kept_nodes = [n for n in sub.nodes.tolist() if n not in fit.dropped_nodes]
    p0 = sub.prizes[0]
    if fit.dropped_nodes and kept_nodes:
        assert max(p0[fit.dropped_nodes]) <= max(p0[kept_nodes])
    assert fit_context(sub, 10 ** 6, count).text == context
    # a checkpoint without 2-cells: none is written, so none counts as dropped
    no2 = fit_context(sub, 10 ** 6, count, include_cells2=False)
    assert no2.text == textualize(sub, include_cells2=False) and not no2.truncated
    cut2 = fit_context(sub, no2.tokens // 2, count, include_cells2=False)
    assert cut2.truncated and not cut2.dropped_cells2 and "2-cells" not in cut2.text


def _set_context_budget(pipe, question: str, budget: int) -> int:
    """Set the model's input limit so that exactly ``budget`` context tokens fit beside ``question``;
    returns the old limit."""
    cfg = pipe.model.config
    old = cfg.max_input_tokens
    fixed = old - pipe.model.context_budget(question)
    cfg.max_input_tokens = fixed + budget
    assert pipe.model.context_budget(question) == budget
    return old


def test_answer_over_budget_keeps_2_cells_and_highest_prizes_and_reports_what_was_dropped(pipe):
    from toporag_core.retrieval import textualize

    g = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    setting = RetrievalSetting.make("toporag", k=6, c2=0.1)
    old = _set_context_budget(pipe, QUESTION, 10 ** 5)
    try:
        full_out = pipe.answer(ecx, QUESTION, setting)
    finally:
        pipe.model.config.max_input_tokens = old
    sub = full_out["subcomplex"]
    full = textualize(sub)
    assert sub.cells2.size >= 1 and full_out["context"] == full and not full_out["context_fit"].truncated
    assert full_out["prompt"]["context_cut"]["truncated"] is False and not full_out["prompt"]["context_truncated"]
    count = pipe.model.count_tokens
    lines = full.split("\n")
    section = lines.index("2-cells (closed loops)")
    headers = ["node_id,node_attr", "", "src,edge_attr,dst", ""]
    budget = sum(count(t) + 1 for t in headers + lines[section:]) + 8  # the 2-cells and a few tokens more
    assert budget < count(full)
    old = _set_context_budget(pipe, QUESTION, budget)
    try:
        out = pipe.answer(ecx, QUESTION, setting)
        ids, _ = pipe.model.context_ids(out["context"], QUESTION)
    finally:
        pipe.model.config.max_input_tokens = old
    fit, cut = out["context_fit"], out["prompt"]["context_cut"]
    assert fit.truncated and fit.tokens <= budget and fit.full_tokens == count(full)
    assert len(ids) == count(out["context"])  # the LLM read the whole fitted context: no prefix cut after it
    assert not fit.dropped_cells2 and all(f"c{f}: " in out["context"] for f in sub.cells2.tolist())
    assert fit.dropped_nodes or fit.dropped_edges
    assert set(out["context"].split("\n")) <= set(lines)  # a subset of textualize's own lines
    p0, p1 = sub.prizes[0], sub.prizes[1]
    kept_nodes = [n for n in sub.nodes.tolist() if n not in fit.dropped_nodes]
    if fit.dropped_nodes and kept_nodes:  # no dropped 0-cell outranks a kept one
        assert max(p0[fit.dropped_nodes]) <= max(p0[kept_nodes])
    kept_edges = [e for e in sub.edges.tolist() if e not in fit.dropped_edges]
    if fit.dropped_edges and kept_edges:
        assert max(p1[fit.dropped_edges]) <= max(p1[kept_edges])
    # the answer carries the same cut, JSON-able, for the page and the core service
    assert cut == {**fit.to_dict()} and out["prompt"]["context_truncated"]
    assert cut["summary"].startswith("dropped ") and cut["dropped_cells2"] == []
    assert out["prompt"]["context"] == out["context"]
    # what the Ask page shows from it
    a = ask.Answer("toporag", out["answer"], sub, out["context"], out["prompt"], out["timings"])
    msg = ask.cut_message(a)
    assert f"({fit.full_tokens} tokens)" in msg and cut["summary"] in msg and "2-cells dropped: none" in msg
    dropped = ask.dropped_frame(a)
    assert sorted(dropped[dropped["dim"] == 0]["cell"]) == sorted(fit.dropped_nodes)
    assert sorted(dropped[dropped["dim"] == 1]["cell"]) == sorted(fit.dropped_edges)
    assert ask.prompt_layout_frame(out["prompt"])["part"].tolist()[2].startswith("context (cut by prize to ")


def test_ask_reports_a_cut_context_and_the_dropped_cells(checkpoint):
    at = ask_page()
    at.run()
    pipe_app = ask.get_pipeline(str(checkpoint), at.sidebar.text_input(key="ask_llm").value, "hashing")
    old = _set_context_budget(pipe_app, QUESTION, 120)
    try:
        ask_question(at, QUESTION)
        assert not at.exception
        warn = [w.value for w in at.warning if "did not fit the model's input limit (120 tokens" in w.value]
        assert warn and "cut by prize, keeping the 2-cells and the highest-prize cells - dropped " in warn[0]
        a = at.session_state["ask_last"]["answers"]["toporag"]
        cut = a.prompt["context_cut"]
        assert cut["truncated"] and cut["tokens"] <= 120
        shown = next(d.value for d in at.dataframe if list(d.value.columns) == ["dim", "cell", "text", "role", "prize"]
                     and len(d.value) == len(cut["dropped_nodes"]) + len(cut["dropped_edges"])
                     + len(cut["dropped_cells2"]))
        assert sorted(shown[shown["dim"] == 0]["cell"]) == sorted(cut["dropped_nodes"])
    finally:
        pipe_app.model.config.max_input_tokens = old


def test_a_compact_checkpoint_reads_compact_contexts(pipe):
    """A checkpoint trained with ``--text compact`` (its saved retrieval setting says so) answers from
    the compact text, fitted by prize like the CSV one; a checkpoint without the key reads CSV."""
    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.retrieval import textualize

    meta = {**pipe.meta, "retrieval": {**pipe.meta.get("retrieval", {}), "text": "compact"}}
    compact = TopoRAGPipeline(pipe.model, HashingEncoder(), None, meta)
    assert compact.text_format == "compact" and TopoRAGPipeline(pipe.model, HashingEncoder()).text_format == "csv"
    ecx = EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder())
    setting = RetrievalSetting.make("toporag", k=3)
    out = compact.answer(ecx, QUESTION, setting)
    assert out["context"].startswith("nodes\n") and "node_id,node_attr" not in out["context"]
    assert set(out["context"].split("\n")) <= set(textualize(out["subcomplex"], fmt="compact").split("\n"))
    assert pipe.answer(ecx, QUESTION, setting)["context"].startswith("node_id,node_attr")


def test_a_checkpoint_with_an_unknown_text_format_is_refused_before_the_llm_loads(tmp_path, monkeypatch):
    """A hand-edited or newer ``config.json`` whose ``retrieval.text`` is not registered fails at load with
    one message naming the file, the field and the registered formats, and no LLM is loaded first."""
    import json

    import toporag_core.model.llm as llm_mod
    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.model.tiny import build_tiny_checkpoint

    folder = build_tiny_checkpoint(tmp_path / "ckpt")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.setdefault("retrieval", {})["text"] = "yaml"
    (folder / "config.json").write_text(json.dumps(cfg))

    def no_llm(*a, **k):
        raise AssertionError("the LLM was loaded before the config was checked")

    monkeypatch.setattr(llm_mod, "load_llm", no_llm)
    with pytest.raises(ValueError, match=r"config\.json: retrieval\.text: unknown text format 'yaml'; "
                                         r"registered: csv, compact"):
        TopoRAGPipeline.load(folder, device="cpu", encoder=HashingEncoder())


def test_ask_highlights_the_nodes_a_cited_answer_names(monkeypatch):
    """An open answer with cited context lines: the page says they are citations, says how many are
    really in the context, and draws the cited nodes ([k] = the k-th retrieved 0-cell) highlighted in
    the picture; an id outside the subcomplex highlights nothing."""
    import re

    from tests._apptest import iframes
    from toporag_core.studio import graph_view

    real = TopoRAGPipeline.answer
    seen = {}

    def cited(self, *a, **kw):
        out = real(self, *a, **kw)
        out.evidence = "table [0]: made up; table [0] next to thing [1]; ghost [999]: nowhere"
        seen["out"] = out
        return out

    monkeypatch.setattr(TopoRAGPipeline, "answer", cited)
    at = ask_question(ask_page(), QUESTION)
    assert not at.exception
    assert any("Context lines the model cited before its answer" in m.value for m in at.markdown)
    assert any(c.value.startswith("Citations:  0 of 3 cited lines are in the context; not in the context: ")
               for c in at.caption)
    page_html = iframes(at)[0]
    nodes = {n["id"]: n for n in json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", page_html).group(1))}
    lit = {i for i, n in nodes.items() if n["color"] == graph_view.NODE_HIGHLIGHT}
    sub_nodes = seen["out"]["subcomplex"].nodes.tolist()
    assert lit == {sub_nodes[0], sub_nodes[1]} and all("cited by the model as [" in nodes[i]["title"] for i in lit)


# ====================================================================== which model answers
CURIE_QUESTION = "Which element named after Poland did Marie Curie discover?"


def shipped(name: str) -> str:
    folder = ROOT / "assets" / "checkpoints" / name
    if not (folder / "config.json").is_file():
        pytest.skip(f"{name} checkpoint not shipped in this checkout")
    return str(folder)


def label_checkpoint(folder: Path, dataset: str = "expla_graphs") -> Path:
    """A tiny checkpoint with ExplaGraphs' label set in its config (as the shipped one has)."""
    build_tiny_checkpoint(folder, dataset=dataset)
    meta = json.loads((folder / "config.json").read_text())
    meta["config"]["answer_set"] = ["counter", "support"]
    (folder / "config.json").write_text(json.dumps(meta))
    return folder


def test_route_picks_the_model_per_graph_and_question(tmp_path):
    from toporag_core.answering import route

    expla, scene = shipped("expla_graphs"), shipped("scene_graphs")
    options = {expla: "ExplaGraphs (committed)", scene: "SceneGraphs (committed)", ask.NO_CHECKPOINT: "none"}
    empty = tmp_path / "no_general"
    empty.mkdir()
    arg, kg, sc = (samples.load_sample(k) for k in ("argument", "kg", "scene"))
    # ExplaGraphs graph + its argument question -> the ExplaGraphs checkpoint, selected or not
    r = route.route(expla, arg, arg.meta["question"], options, root=empty)
    assert (r.checkpoint, r.rerouted) == (expla, False) and "expla_graphs" in r.reason
    r = route.route(scene, arg, arg.meta["question"], options, root=empty)
    assert (r.checkpoint, r.rerouted, r.model) == (expla, True, "the ExplaGraphs checkpoint")
    # the Curie KG + an open question -> not the label-set checkpoint: the zero-shot LLM (no general one ships)
    r = route.route(expla, kg, CURIE_QUESTION, options, root=empty)
    assert (r.checkpoint, r.rerouted, r.model) == (ask.NO_CHECKPOINT, True, "the zero-shot LLM")
    assert "counter / support" in r.reason and "no graph tokens" in r.reason
    assert r.line().startswith("Answering model: **the zero-shot LLM** - the ExplaGraphs checkpoint was trained on")
    # ExplaGraphs graph + a question of another kind -> not the label set either
    r = route.route(expla, arg, "Who runs libraries?", options, root=empty)
    assert r.checkpoint == ask.NO_CHECKPOINT and "asks for neither" in r.reason
    # the scene sample + an open question -> the SceneGraphs checkpoint, selected or not
    q = "What is on the table next to the cup?"
    assert route.route(scene, sc, q, options, root=empty) == route.Route(
        scene, "the SceneGraphs checkpoint", "trained on **scene_graphs**, the loaded graph's task.")
    assert route.route(expla, sc, q, options, root=empty).checkpoint == scene
    # the zero-shot LLM chosen in the sidebar answers as chosen
    assert route.route(ask.NO_CHECKPOINT, kg, CURIE_QUESTION, options, root=empty).rerouted is False
    # a general checkpoint (open answers, "dataset": "general") under the root is preferred to the zero-shot LLM
    general = build_tiny_checkpoint(tmp_path / "ckpts" / "general_qa", dataset="general")
    label_checkpoint(tmp_path / "ckpts" / "a_labels", dataset="general")  # a label set is never general
    r = route.route(expla, kg, CURIE_QUESTION, options, root=tmp_path / "ckpts")
    assert (r.checkpoint, r.model) == (str(general), "the general checkpoint general_qa")
    assert route.general_checkpoint(empty) is None


def test_a_label_set_checkpoint_never_answers_another_kind_of_question(tmp_path, checkpoint):
    """The tiny label-set checkpoint scores support / counter for its own kind of question, refuses the
    Curie question; the zero-shot LLM the route picks answers it openly (no label set, no probabilities)."""
    labels = ask.load_pipeline(str(label_checkpoint(tmp_path / "expla")), "", encoder=HashingEncoder())
    arg, kg = samples.load_sample("argument"), samples.load_sample("kg")
    own = ask.ask(labels, EmbeddedComplex.from_graph(arg, HashingEncoder()), arg.meta["question"],
                  [RetrievalSetting()])["toporag"]
    assert own.answer in ("counter", "support") and own.closed
    kg_ecx = EmbeddedComplex.from_graph(kg, HashingEncoder())
    with pytest.raises(ValueError, match="answers only counter / support and this question asks for neither"):
        ask.ask(labels, kg_ecx, CURIE_QUESTION, [RetrievalSetting()])
    r = ask.route(str(tmp_path / "expla"), kg, CURIE_QUESTION, {str(tmp_path / "expla"): "E"}, root=tmp_path)
    assert r.checkpoint == ask.NO_CHECKPOINT
    zero = ask.load_pipeline(r.checkpoint, str(checkpoint / "llm"), encoder=HashingEncoder())
    a = ask.ask(zero, kg_ecx, CURIE_QUESTION, [RetrievalSetting()])["toporag"]
    assert a.choices is None and a.label_probs is None and a.prompt.get("graph_tokens", 0) == 0
    assert a.answer.strip().lower() not in ("counter", "support")


def test_ask_page_routes_the_curie_question_to_the_zero_shot_llm(tmp_path, monkeypatch, checkpoint):
    """A label-set checkpoint selected, the Curie KG loaded: the page says before and after asking that
    the zero-shot LLM answers and why, shows its answer (no label probabilities), and does not call the
    Home example's own question "not the example's own question"."""
    from toporag_core.answering import route

    expla = label_checkpoint(tmp_path / "expla")
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(expla))
    monkeypatch.setenv("TOPORAG_LLM", str(checkpoint / "llm"))
    monkeypatch.setattr(route, "CHECKPOINT_ROOT", tmp_path / "no_committed")  # no general checkpoint to route to
    kg = samples.load_sample("kg")
    at = ask_page()
    at.session_state[state.GRAPH] = kg
    at.session_state[state.GRAPH_KEY] = state.graph_fingerprint(kg)
    at.run()
    assert not at.exception
    assert any(w.value.startswith("Answering model: **the zero-shot LLM**") and "counter / support" in w.value
               for w in at.warning)
    at.button(key="ask_go").click()
    at.run()
    assert not at.exception and not [e for e in at.error if "Gold answer" not in e.value]
    zero = ask.load_pipeline(ask.NO_CHECKPOINT, str(checkpoint / "llm"), encoder=HashingEncoder())
    want = ask.ask(zero, EmbeddedComplex.from_graph(kg, HashingEncoder()), CURIE_QUESTION, [RetrievalSetting()],
                   max_new_tokens=at.sidebar.slider(key="ask_max_new").value)
    assert answer_codes(at) == [want["toporag"].answer]
    assert any(m.value.startswith("Answering model: **the zero-shot LLM**") for m in at.markdown)
    assert not any("Label probabilities" in m.value for m in at.markdown)
    # the sample's own question has a gold answer: the answer is judged against it
    right = ask.judge(None, want["toporag"].answer, ["polonium"])
    assert [b.value for b in (at.success if right else at.error) if "Gold answer: polonium" in b.value]
    assert not any("not the example's own question" in c.value or "comes without one" in c.value for c in at.caption)


def test_ask_shows_what_the_graph_tokens_did_and_explains_the_cells(pipe):
    at = ask_question(ask_page(), QUESTION)
    assert not at.exception and not at.error
    section = [e for e in at.expander if e.label == "What the graph tokens did"]
    assert len(section) == 1
    # the arms are not computed with the answer: the section offers a button until it is pressed
    assert at.session_state["ask_last"]["effects"] == {}
    assert not any("Your graph tokens made" in x.value for x in at.info)
    assert not [d for d in at.dataframe if "generated" in d.value.columns]
    assert any("runs only when asked" in c.value for c in at.caption)
    at.button(key="ask_effect_toporag").click()
    at = at.run()
    assert not at.exception and not at.error
    effect = at.session_state["ask_last"]["effects"]["toporag"]
    lines = [x.value for x in at.info]
    assert any(v.startswith("Your graph tokens made the answer") for v in lines), lines
    for arm in ("zeroed", "permuted"):  # the direction the page states is the measured one
        word = {1: "more likely than", -1: "less likely than", 0: "about as likely as"}[effect.direction(arm)]
        assert any(f"{word} {arm} tokens" in v for v in lines), lines
    at.run()  # a rerun reuses the measurement kept with the answer
    assert at.session_state["ask_last"]["effects"]["toporag"] is effect
    arms = frame_with(at, "generated")
    assert list(arms["answer"]) == ["own tokens", "zeroed tokens", "permuted tokens"]
    want = reference(pipe, samples.load_sample("scene"), QUESTION)
    assert arms["generated"].iloc[0] == want["answer"]
    at.button(key="ask_explain_toporag").click()
    at = at.run()
    assert not at.exception
    col = "change in log P(answer) without it"
    cells = frame_with(at, col)
    assert 0 < len(cells) <= 10 and list(cells[col]) == sorted(cells[col])  # the most supportive cell first
    assert (cells["context lines removed"] >= 1).all()  # each cell left the text too
    assert any("was not measured against a random retrieved cell" in c.value for c in at.caption)


def test_the_gold_answer_to_score_and_its_direction(pipe):
    assert ask.gold_target("it is on a plate", ["cup", "plate"]) == "plate"
    assert ask.gold_target("table", ["cup", "plate"]) == "cup" and ask.gold_target("x", "support") == "support"
    assert ask.gold_target("x", None) is None and ask.gold_target("x", ["", " "]) is None
    ecx = EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder())
    a = ask.ask(pipe, ecx, QUESTION, [RetrievalSetting()])["toporag"]
    e = ask.graph_effect(pipe, ecx, QUESTION, a, gold=["ceramic plate"])
    assert e.gold == "ceramic plate" and set(e.gold_logp) == {"own", "zeroed", "permuted"}
    assert "the gold answer 'ceramic plate'" in e.verdict()
    cells = ask.explain_cells(pipe, ecx, QUESTION, a, cap=4)  # no arms needed for the attribution alone
    assert len(cells) == 4 and all(c.lines >= 1 for c in cells)
