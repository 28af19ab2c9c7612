"""The Ask page (AppTest) and its support library, on a tiny trained-format checkpoint.

The checkpoint comes from :func:`toporag_core.testing.build_tiny_checkpoint` (a random 2-layer
Llama + a cell-complex encoder for the 256-d hashing encoder): its answers are gibberish but
deterministic (greedy decoding), so every check compares the page with the pipeline run
in-process on the same input.
"""
from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from toporag_core.embed import CachedEncoder, HashingEncoder  # noqa: E402
from toporag_core.graph import TextualGraph  # noqa: E402
from toporag_core.pipeline import TopoRAGPipeline  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex  # noqa: E402
from toporag_core.studio import ask, samples, state  # noqa: E402
from toporag_core.retrieval import RetrievalSetting  # noqa: E402
from toporag_core.testing import build_tiny_checkpoint  # noqa: E402

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
    cells = at.dataframe[0].value
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
    assert len(at.dataframe[0].value) == sum(a["subcomplex"].counts)
    assert len(at.dataframe[1].value) == sum(b["subcomplex"].counts)


def test_ask_controls_change_the_retrieval_and_stale_answers_are_flagged(pipe):
    at = ask_question(ask_page(), QUESTION)
    at.slider(key="ask_k").set_value(1).run()
    assert any("changed since this answer" in i.value for i in at.info)
    at.button(key="ask_go").click()
    at.run()
    want = reference(pipe, samples.load_sample("scene"), QUESTION, k0=1, k1=1, k2=1)
    assert answer_codes(at) == [want["answer"]]
    assert len(at.dataframe[0].value) == sum(want["subcomplex"].counts)
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
