"""Page state that must survive what a user does: a reload after an upload, a table read without a
header, and the question typed on one page carried into the others (AppTest, HashingEncoder).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from toporag_core.graph import TextualGraph  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.studio import graph_store, state  # noqa: E402

from ._apptest import iframes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PEOPLE = b"name,age,city\nAda,36,London\nAlan,41,Wilmslow\n"  # a CSV that is not a triples table


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from toporag_core.model.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny_ckpt") / "ckpt")


@pytest.fixture(autouse=True)
def _fast_models(monkeypatch, tmp_path, checkpoint):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(checkpoint))  # the Ask page loads the tiny model
    monkeypatch.delenv("TOPORAG_LLM", raising=False)


def app(page: str = "app.py") -> AppTest:
    return AppTest.from_file(str(ROOT / page), default_timeout=120)


def address(at: AppTest) -> str:
    value = at.query_params.get("graph")
    return value[0] if isinstance(value, list) else value


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader(key="upload_one").set_value((name, data, "text/csv"))
    at.run()
    at.button(key="load_upload").click()
    return at.run()


def nodes_shown(at: AppTest) -> str:
    return next(m.value for m in at.metric if m.label == "|V| nodes")


# ====================================================================== a read without a header
def test_a_headerless_read_waits_for_confirmation_and_keeps_the_loaded_graph():
    at = app().run()
    before = at.session_state[state.GRAPH_KEY]
    at = upload(at, "people.csv", PEOPLE)
    assert not at.exception and not at.error
    assert at.session_state[state.GRAPH_KEY] == before  # the scene sample is still loaded
    warn = [w.value for w in at.warning if "people.csv" in w.value]
    assert len(warn) == 1 and "name,age,city" in warn[0] and "headerless" in warn[0]
    assert not any("Loaded people.csv" in s.value for s in at.success)
    at.button(key="confirm_headerless").click()
    at.run()
    g = at.session_state[state.GRAPH]
    assert g.num_edges == 3 and ("name", "age", "city") in g.triples() and nodes_shown(at) == "6"
    assert not any("people.csv" in w.value for w in at.warning)
    # again, and keep the loaded graph this time
    kept = at.session_state[state.GRAPH_KEY]
    at = upload(at, "other.csv", b"colour,size,shape\nred,big,round\n")
    assert at.session_state[state.GRAPH_KEY] == kept and any("other.csv" in w.value for w in at.warning)
    at.button(key="discard_headerless").click()
    at.run()
    assert at.session_state[state.GRAPH_KEY] == kept and not any("other.csv" in w.value for w in at.warning)
    assert any("other.csv was not loaded" in s.value for s in at.success)


def test_a_headerless_read_with_nothing_loaded_loads_and_a_header_never_asks():
    ss: dict = {}
    from toporag_core.io import load_graph_from_bytes

    assert state.try_load(ss, lambda: load_graph_from_bytes(PEOPLE, "people.csv"), "people.csv") is None
    assert ss[state.GRAPH].num_edges == 3 and not ss.get(state.PENDING)  # nothing was loaded: nothing to keep
    assert state.try_load(ss, lambda: load_graph_from_bytes(b"head,relation,tail\na,r,b\n", "t.csv"), "t.csv") is None
    assert ss[state.GRAPH].num_edges == 1 and not ss.get(state.PENDING)
    state.try_load(ss, lambda: load_graph_from_bytes(b"*x*,[y](z),w\n", "evil.csv"), "evil.csv")
    assert ss[state.GRAPH].num_edges == 1 and r"\*x\*,\[y\]" in ss[state.PENDING]["text"]  # Markdown escaped


# ====================================================================== a reload keeps an upload
def test_graph_store_round_trip_bounds_and_bad_names(monkeypatch):
    g = TextualGraph.from_triples([("Rijksmuseum", "exhibits", "The Night Watch"), ("a", "r", "b")], name="museum")
    g.meta.update(question="Which museum?", warnings=["w"], odd=np.int64(3))
    fp = state.graph_fingerprint(g)
    assert graph_store.save(g, fp)
    back = state.restore_graph(graph_store.source_of(fp))
    assert state.graph_fingerprint(back) == fp and back.name == "museum" and back.meta["question"] == "Which museum?"
    assert not list(graph_store.store_dir().glob("*.tmp"))  # written atomically: no temporary file left
    with pytest.raises(LookupError):
        state.restore_graph("upload:../../etc/passwd")
    with pytest.raises(LookupError, match="no graph"):
        state.restore_graph(graph_store.source_of("0" * 20))
    (graph_store.store_dir() / f"{fp}.json").write_text(json.dumps(
        {**json.loads(graph_store.graph_to_json(g)), "node_text": ["x", "y", "z", "w"]}))
    with pytest.raises(LookupError, match="does not match"):
        state.restore_graph(graph_store.source_of(fp))
    monkeypatch.setattr(graph_store, "MAX_GRAPHS", 2)
    for i in range(4):
        h = TextualGraph.from_triples([(f"n{i}", "r", "m")])
        assert graph_store.save(h, state.graph_fingerprint(h))
    assert len(list(graph_store.store_dir().glob("*.json"))) == 2


def test_a_reload_of_any_page_keeps_the_uploaded_graph_or_says_it_was_lost():
    home = upload(app().run(), "museum.csv", b"head,relation,tail\nRijksmuseum,exhibits,The Night Watch\n"
                                             b"Mauritshuis,exhibits,Girl with a Pearl Earring\n"
                                             b"Rijksmuseum,in,Amsterdam\n")
    fp = home.session_state[state.GRAPH_KEY]
    assert address(home) == f"upload:{fp}" and graph_store.is_kept(fp)
    for page in ("pages/4_Ask.py", "pages/2_Retrieval_lab.py", "pages/1_Explore.py"):
        again = app(page)
        again.query_params["graph"] = f"upload:{fp}"
        again.run()
        assert not again.exception, page
        assert again.session_state[state.GRAPH_KEY] == fp, page
        assert any("Restored museum" in i.value for i in again.info), page
    (graph_store.store_dir() / f"{fp}.json").unlink()  # the cache was cleared
    lost = app("pages/2_Retrieval_lab.py")
    lost.query_params["graph"] = f"upload:{fp}"
    lost.run()
    assert not lost.exception
    note = [w.value for w in lost.warning if "was lost" in w.value]
    assert len(note) == 1 and f"upload:{fp}" in note[0] and samples.sample("scene").title in note[0]
    assert lost.session_state[state.GRAPH].meta["source"] == "sample:scene"
    assert address(lost) == "sample:scene"


def test_the_lab_shows_an_uploaded_graph_without_a_question_at_once():
    g = TextualGraph.from_triples([("Rijksmuseum", "exhibits", "The Night Watch"), ("Rijksmuseum", "in", "Amsterdam"),
                                   ("Mauritshuis", "in", "The Hague")], name="museum")
    at = app("pages/2_Retrieval_lab.py")
    at.session_state[state.GRAPH] = g
    at.session_state[state.GRAPH_KEY] = state.graph_fingerprint(g)
    at.run()
    assert not at.exception and not at.warning
    box = at.text_area(key=f"lab_question_{state.graph_fingerprint(g)}")
    assert box.value == "What is Rijksmuseum connected to?" == state.suggested_question(g)
    assert any("came without a question" in c.value for c in at.caption)
    assert iframes(at)  # the retrieved subcomplex is drawn
    assert not at.dataframe[0].value.empty


# ====================================================================== the question carried to the lab
def test_the_question_typed_on_ask_is_carried_into_the_lab_and_the_labs_edits_win():
    scene = samples.load_sample("scene")
    key = state.graph_fingerprint(scene)
    asked = app("pages/4_Ask.py").run()
    asked.text_area(key=f"ask_question_{key}").set_value("Which fruit is in the bowl?").run()
    shared = asked.session_state[state.QUESTION]
    assert shared["text"] == "Which fruit is in the bowl?" and shared["graph"] == key
    lab = app("pages/2_Retrieval_lab.py")
    lab.session_state[state.GRAPH] = scene
    lab.session_state[state.GRAPH_KEY] = key
    lab.session_state[state.QUESTION] = shared
    lab.run()
    box = lab.text_area(key=f"lab_question_{key}")
    assert box.value == "Which fruit is in the bowl?"
    box.set_value("What is the vase made of?").run()  # the lab's own edit
    lab.run()
    assert lab.text_area(key=f"lab_question_{key}").value == "What is the vase made of?"
    # a question asked about another graph is not carried
    ss = {state.GRAPH_KEY: "other", "ask_question_other": "Who?"}
    state.share_question(ss, "ask_question_other")
    ss[state.GRAPH_KEY] = key
    state.question_box(ss, f"lab_question_{key}", "own", graph_key=key)
    assert ss[f"lab_question_{key}"] == "own"
    # a box without a graph (the hybrid index search) takes the last question
    state.question_box(ss, "hy_index_question")
    assert ss["hy_index_question"] == "Who?"
