"""One retrieval vocabulary: a method or a graph format registered in one call is everywhere.

A toy retrieval method with a parameter of its own (``radius``) and a toy graph format
(``a -> b : relation`` lines) are registered by a fixture; every place that lists methods or
formats must then offer them: ``toporag retrieve --help`` and its validation, ``retrieve(...)``,
the lab's and the Ask page's selectors and sliders (AppTest), auto-detection, the CLI's
``--format`` choices and the app's uploader types. And ``TOPORAG_ENCODER=hashing`` gives the same
vectors in the app, the CLI's encoder factory and preprocessing.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from toporag_core.cli import main
from toporag_core.embed import get_encoder
from toporag_core.graph import GraphFormatError, TextualGraph
from toporag_core.io import (FORMATS, GraphFormat, detect_format, format_names, load_graph, register_format,
                             unregister_format, upload_extensions)
from toporag_core.retrieval import (METHODS, EmbeddedComplex, Param, RetrievalMethod, RetrievalSetting,
                                    register_method, retrieve, unregister_method)
from toporag_core.retrieval.result import make_subcomplex

ROOT = Path(__file__).resolve().parents[1]
SCENE = ROOT / "assets" / "samples" / "scene_breakfast.csv"
QUESTION = "What is the red cup made of?"


def toy_near(ecx: EmbeddedComplex, question, k0: int = 1, radius: int = 1):
    """The top-k0 nodes and every node within ``radius`` hops (and the edges among them)."""
    cx = ecx.complex
    s0 = ecx.similarities(question)[0]
    nodes = np.argsort(-s0, kind="stable")[:k0]
    for _ in range(radius):
        touch = np.isin(cx.edges, nodes).any(axis=1)
        nodes = np.union1d(nodes, cx.edges[touch].reshape(-1))
    edges = np.flatnonzero(np.isin(cx.edges, nodes).all(axis=1))
    z = (np.zeros(cx.num_nodes), np.zeros(cx.num_edges), np.zeros(cx.num_cells2))
    return make_subcomplex(cx, nodes, edges, np.zeros(0, np.int64), z, "toy-near", {"radius": radius}, {})


@pytest.fixture
def toy_method():
    m = register_method(RetrievalMethod(
        "toy-near", "Toy: neighbourhood", "cells",
        (Param("k0", int, 1, 0, 50, "seed nodes", ui=(0, 10, 1)),
         Param("radius", int, 1, 0, 5, "hops around the seeds", ui=(0, 5, 1))), toy_near))
    yield m
    unregister_method("toy-near")


def parse_toy(src, record=None) -> TextualGraph:
    triples = []
    for i, line in enumerate(src.text.splitlines(), 1):
        if not line.strip():
            continue
        m = re.fullmatch(r"\s*(.+?)\s*->\s*(.+?)\s*:\s*(.+?)\s*", line)
        if m is None:
            raise GraphFormatError("expected 'head -> tail : relation'", file=src.file, line=i)
        triples.append((m[1], m[3], m[2]))
    return TextualGraph.from_triples(triples, name=src.name)


@pytest.fixture
def toy_format():
    f = register_format(GraphFormat(name="toy-arrows", label="Toy arrows (a -> b : rel)", load=parse_toy,
                                    detect=lambda s: " -> " in s.first_line and ":" in s.first_line,
                                    extensions=("arrows",), priority=5))
    yield f
    unregister_format("toy-arrows")


# ------------------------------------------------------------------ the method, everywhere
def test_registered_method_is_retrievable_with_its_own_parameter(toy_method):
    ecx = EmbeddedComplex.from_graph(load_graph(SCENE), get_encoder("hashing"))
    near = retrieve(ecx, QUESTION, "toy-near", radius=0)
    far = retrieve(ecx, QUESTION, "toy-near", radius=2)
    assert near.counts[0] == 1 and far.counts[0] > near.counts[0]
    assert retrieve(ecx, QUESTION, setting=RetrievalSetting("toy-near", {"radius": 2})).counts == far.counts
    with pytest.raises(ValueError, match="'radius' must be <= 5"):
        retrieve(ecx, QUESTION, "toy-near", radius=9)
    with pytest.raises(ValueError, match="no parameter 'c2'"):
        retrieve(ecx, QUESTION, "toy-near", c2=0.5)


def test_cli_offers_the_method_and_validates_its_option(toy_method, capsys, monkeypatch):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    with pytest.raises(SystemExit):
        main(["retrieve", "--help"])
    help_text = capsys.readouterr().out
    assert "toy-near" in help_text and "--radius" in help_text
    assert main(["retrieve", str(SCENE), "-q", QUESTION, "--method", "toy-near", "--radius", "2", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    ecx = EmbeddedComplex.from_graph(load_graph(SCENE), get_encoder("hashing"))
    assert got["nodes"] == retrieve(ecx, QUESTION, "toy-near", radius=2).node_texts()
    with pytest.raises(SystemExit) as e:
        main(["retrieve", str(SCENE), "-q", QUESTION, "--method", "toy-near", "--radius", "9"])
    assert e.value.code == 2 and "--radius" in capsys.readouterr().err
    assert main(["retrieve", str(SCENE), "-q", QUESTION, "--method", "toy-near", "--c2", "0.3"]) == 2
    assert "--c2 is not a parameter of method 'toy-near'" in capsys.readouterr().err


def test_lab_and_ask_pages_offer_the_method_and_its_slider(toy_method, monkeypatch, tmp_path):
    st = pytest.importorskip("streamlit")  # noqa: F841
    from streamlit.testing.v1 import AppTest

    from toporag_core.model.tiny import build_tiny_checkpoint

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    lab = AppTest.from_file(str(ROOT / "pages" / "2_Retrieval_lab.py"), default_timeout=120).run()
    assert "Toy: neighbourhood" in lab.sidebar.selectbox(key="lab_method").options  # options show labels
    lab.sidebar.selectbox(key="lab_method").set_value("toy-near").run()
    lab.sidebar.slider(key="lab_radius").set_value(2).run()
    assert not lab.exception
    counts = lab.dataframe[0].value.iloc[0]
    ecx = EmbeddedComplex.from_graph(lab.session_state["graph"], get_encoder("hashing"))
    question = lab.text_area(key=f"lab_question_{lab.session_state['graph_key']}").value
    want = retrieve(ecx, question, "toy-near", k0=3, radius=2)  # the lab's single k (3) fills k0
    assert (counts["0-cells"], counts["1-cells"]) == want.counts[:2]

    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(build_tiny_checkpoint(tmp_path / "ckpt")))
    ask = AppTest.from_file(str(ROOT / "pages" / "4_Ask.py"), default_timeout=120).run()
    assert not ask.exception
    assert "Toy: neighbourhood" in ask.sidebar.selectbox(key="ask_method").options
    ask.sidebar.selectbox(key="ask_method").set_value("toy-near").run()
    assert ask.sidebar.slider(key="ask_radius").value == 1 and not ask.exception


def test_every_registered_method_has_a_label_and_valid_defaults():
    for name, m in METHODS.items():
        assert m.label and m.dimension in ("cells", "nodes")
        RetrievalSetting(name)  # the defaults validate


def test_k_rule_and_checkpoint_defaults_live_in_the_setting():
    s = RetrievalSetting.make("toporag", k=2, k2=0)
    assert dict(s.params) == {"k0": 2, "k1": 2, "k2": 0, "c2": 0.5, "edge_cost": 0.5}
    assert RetrievalSetting.make("topk-triples", k=4).params["k"] == 4
    old = {"method": "toporag", "k0": 1, "k1": 5, "k2": 2, "c2": 0.1, "edge_cost": 0.5, "use_cells2": True}
    s = RetrievalSetting.from_dict(old, c2=None, k1=7)
    assert (s.params["k0"], s.params["k1"], s.params["c2"]) == (1, 7, 0.1)
    assert RetrievalSetting.from_dict(s.to_dict()) == s and hash(RetrievalSetting.from_dict(s.to_dict())) == hash(s)
    assert RetrievalSetting.from_dict(old, method="g-retriever").params == {"k0": 1, "k1": 5, "edge_cost": 0.5}
    assert s.without_cells2().params["k2"] == 0
    with pytest.raises(TypeError):
        s.params["k0"] = 9  # type: ignore[index]
    for bad in ({"k0": -1}, {"c2": float("nan")}, {"k0": 1.5}, {"k0": "3"}):
        with pytest.raises(ValueError):
            RetrievalSetting("toporag", bad)


# ------------------------------------------------------------------ the format, everywhere
def test_registered_format_is_detected_listed_and_uploadable(toy_format, tmp_path, capsys):
    path = tmp_path / "g.arrows"
    path.write_text("cup -> table : on\nplate -> table : on\ncup -> plate : left of\n")
    assert detect_format(path) == "toy-arrows" and "toy-arrows" in format_names()
    g = load_graph(path)
    assert g.num_nodes == 3 and sorted(g.edge_text) == ["left of", "on", "on"]
    with pytest.raises(SystemExit):
        main(["lift", "--help"])
    assert "toy-arrows" in capsys.readouterr().out
    assert main(["lift", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cells2"] == 1
    assert "arrows" in upload_extensions()
    st = pytest.importorskip("streamlit")  # noqa: F841
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    uploader = [e for e in at.get("file_uploader") if e.proto.label == "Graph file"][0]
    assert ".arrows" in list(uploader.proto.type)
    assert "toy-arrows" in at.selectbox(key="upload_format").options
    bad = tmp_path / "bad.arrows"
    bad.write_text("cup -> table : on\nnot an arrow line\n")
    with pytest.raises(GraphFormatError, match="line 2"):
        load_graph(bad, format="toy-arrows")


def test_builtin_formats_are_all_registered():
    assert {"csv-pair", "triples", "explagraphs", "webqsp", "gqa"} <= set(FORMATS)


# ------------------------------------------------------------------ one encoder factory
def test_hashing_encoder_gives_the_same_vectors_in_app_cli_and_preprocessing(monkeypatch, tmp_path):
    pytest.importorskip("streamlit")
    from toporag_core.retrieval import RetrievalSetting as RS
    from toporag_core.studio import resources, state
    from toporag_core.tasks import RawExample
    from toporag_core.tasks.prep import PrepConfig, prepare_dataset, prepare_example

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    graph = load_graph(SCENE)
    app_ecx = resources.get_embedded(state.graph_fingerprint(graph), "bfs", 0, graph)   # the app
    cli_enc = get_encoder(None)                                                           # what every command calls
    raw = RawExample("0", graph, QUESTION, "x", "x")
    prep = prepare_example(raw, get_encoder(), PrepConfig(RS("whole")))                   # preprocessing
    assert app_ecx.encoder.name == cli_enc.name == "hashing-256"
    np.testing.assert_array_equal(app_ecx.emb.x0, cli_enc.encode(list(graph.node_text)))
    np.testing.assert_array_equal(prep.tensors.x0.numpy(), app_ecx.emb.x0)
    assert prep.tensors.x0.shape[1] == 256
    # prepare_dataset without an encoder uses the same factory (its cache folder is keyed by the name)
    from toporag_core.tasks import Task, register_task, unregister_task

    register_task(Task("one_graph", lambda _: {"train": [raw], "val": [raw], "test": [raw]}))
    try:
        data = prepare_dataset("one_graph", PrepConfig(RS("whole")), cache_dir=tmp_path / "prep", show_progress=False)
        np.testing.assert_array_equal(data["test"][0].tensors.x0.numpy(), app_ecx.emb.x0)
    finally:
        unregister_task("one_graph")
    with pytest.raises(ValueError, match="hashing-0"):
        get_encoder("hashing-0")


def test_a_task_checkpoint_reads_a_users_question_in_its_training_prompt_form(tmp_path):
    """Scene and WebQSP examples are phrased "Question: ...\\nAnswer:" in training; their tasks name that
    form, training stores it in the checkpoint's config (``question_form``), and the pipeline phrases a
    user's bare question the same way (once: an already phrased question is kept), retrieves with the
    user's own words, and leaves a "plain" checkpoint's questions alone - with no task registry at answer
    time (the layering test checks that the pipeline does not import it)."""
    from toporag_core.embed import HashingEncoder
    from toporag_core.graph import TextualGraph
    from toporag_core.model import QUESTION_FORMS, TopoRAGConfig
    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.tasks import Task, get_task, register_task, unregister_task
    from toporag_core.model.tiny import build_tiny_checkpoint

    q, form = "What is on the table?", "Question: What is on the table?\nAnswer:"
    assert get_task("scene_graphs").prompt == get_task("webqsp").prompt == "graphqa"
    assert get_task("expla_graphs").prompt == "plain"
    graphqa = QUESTION_FORMS["graphqa"]
    assert graphqa(q) == form == graphqa(form) and QUESTION_FORMS["plain"](q) == q
    with pytest.raises(ValueError, match="prompt form 'chat'"):
        register_task(Task("bad_form", lambda d: {}, prompt="chat"))
    unregister_task("bad_form")
    with pytest.raises(ValueError, match="question_form"):
        TopoRAGConfig(question_form="chat")
    assert TopoRAGConfig.from_dict({k: v for k, v in TopoRAGConfig().to_dict().items()
                                    if k != "question_form"}).question_form == "plain"  # older checkpoints
    g = TextualGraph.from_triples([("cup", "on", "table"), ("table", "next to", "chair"), ("chair", "behind", "cup")])
    scene = TopoRAGPipeline.load(build_tiny_checkpoint(tmp_path / "s", dataset="scene_graphs", question_form="graphqa"),
                                 device="cpu", encoder=HashingEncoder())
    ecx = scene.prepare(g)
    out = scene.answer(ecx, q)
    assert out["prompt"]["question"] == form
    same = scene.answer(ecx, form, query=q)  # the prompt form, retrieving with the user's words
    assert out["raw"] == same["raw"] and out["subcomplex"].nodes.tolist() == same["subcomplex"].nodes.tolist()
    other = TopoRAGPipeline.load(build_tiny_checkpoint(tmp_path / "t", dataset="tiny"), device="cpu",
                                 encoder=HashingEncoder())
    assert other.answer(other.prepare(g), q)["prompt"]["question"] == q
