"""README's "What a newcomer touches to add" table, row by row: register a toy one and see it offered.

Each test adds a toy entry the way its README row says (one registry call or one registry entry), then
checks every place that row names: the CLI's choices (``toporag_core.cli.build_parser()`` reads the
registries each time it is built, so an entry added after import is offered), the library's look-up and
validation, and the function a page or the app lists from. Registries are module-level dicts; each
fixture removes its toy entry again. The page row is checked over the files themselves: a page (and app.py,
the Home page) imports from the package only ``toporag_core.studio`` (and the standard library and streamlit). The LLM row: a
Hugging Face causal-LM folder loaded by ``load_llm`` answers through ``TopoRAGPipeline``.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from toporag_core.cli import build_parser
from toporag_core.graph import TextualGraph

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "pages"
QUESTION = "What is on the table?"


def graph() -> TextualGraph:
    return TextualGraph.from_triples([("cup", "on", "table"), ("table", "next to", "chair"),
                                      ("chair", "behind", "cup"), ("lamp", "above", "table")])


# the arguments each command needs besides the option under test
NEEDS = {"lift": ["g.csv"], "retrieve": ["g.csv", "-q", QUESTION], "ask": ["g.csv", "-q", QUESTION],
         "train": [], "eval": []}


def offers(command: str, option: str, value: str) -> bool:
    """Whether a freshly built parser accepts ``toporag <command> <option> <value>`` (argparse refuses a value
    outside an option's choices with exit status 2)."""
    try:
        args = build_parser(command).parse_args([command, *NEEDS[command], option, value])
    except SystemExit:
        return False
    return getattr(args, option.lstrip("-").replace("-", "_")) == value


# ------------------------------------------------------------------ a retrieval method
@pytest.fixture
def toy_method():
    from toporag_core.retrieval import Param, RetrievalMethod, register_method, unregister_method
    from toporag_core.retrieval.result import make_subcomplex

    def first_nodes(ecx, question, k0: int = 1):
        import numpy as np

        z = (np.zeros(ecx.complex.num_nodes), np.zeros(ecx.complex.num_edges), np.zeros(ecx.complex.num_cells2))
        return make_subcomplex(ecx.complex, np.arange(k0), np.zeros(0, np.int64), np.zeros(0, np.int64), z,
                               "toy-first", {"k0": k0}, {})

    m = register_method(RetrievalMethod("toy-first", "Toy: the first nodes", "cells",
                                        (Param("k0", int, 1, 0, 50, "nodes", ui=(0, 10, 1)),), first_nodes))
    yield m
    unregister_method(m.name)


def test_a_registered_method_is_offered_by_the_cli_the_lab_and_ask(toy_method):
    from toporag_core.embed import HashingEncoder
    from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, method_names, retrieve
    from toporag_core.studio.controls import setting_controls

    assert offers("retrieve", "--method", "toy-first") and not offers("retrieve", "--method", "toy-none")
    assert "toy-first" in method_names("cells")  # the lab's and the Ask page's method selectors list these
    assert setting_controls(["toy-first"], key="toy") == {"toy-first": RetrievalSetting("toy-first", {"k0": 1})}
    ecx = EmbeddedComplex.from_graph(graph(), HashingEncoder())
    assert retrieve(ecx, QUESTION, "toy-first", k0=2).counts[0] == 2


# ------------------------------------------------------------------ a graph format
@pytest.fixture
def toy_format():
    from toporag_core.io import GraphFormat, register_format, unregister_format

    def load(src, record=None) -> TextualGraph:
        rows = [line.split(" > ") for line in src.text.splitlines() if line.strip()]
        return TextualGraph.from_triples([(h, "to", t) for h, t in rows], name=src.name)

    f = register_format(GraphFormat(name="toy-chevrons", label="Toy (a > b lines)", load=load,
                                    detect=lambda s: " > " in s.first_line, extensions=("chev",), priority=5))
    yield f
    unregister_format(f.name)


def test_a_registered_format_is_offered_detected_and_read(toy_format, tmp_path):
    from toporag_core.io import detect_format, load_graph, upload_extensions

    path = tmp_path / "g.chev"
    path.write_text("cup > table\ntable > chair\nchair > cup\n")
    for command in ("lift", "retrieve", "ask"):
        assert offers(command, "--format", "toy-chevrons")
    assert detect_format(path) == "toy-chevrons"
    g = load_graph(path)
    assert (g.num_nodes, g.num_edges) == (3, 3)
    assert load_graph(path, format="toy-chevrons").num_nodes == 3
    assert "chev" in upload_extensions()


# ------------------------------------------------------------------ a lifting
@pytest.fixture
def toy_lifting():
    from toporag_core.cells.lift import LIFTING_SPECS, Lifting

    LIFTING_SPECS["toy-bfs"] = Lifting("toy-bfs", "toy: the bfs 2-cells under another name", "bfs",
                                       LIFTING_SPECS["bfs"].cells)
    yield LIFTING_SPECS["toy-bfs"]
    LIFTING_SPECS.pop("toy-bfs", None)


def test_a_lifting_entry_is_offered_by_the_cli_the_service_checks_and_the_sidebar(toy_lifting):
    from toporag_core.cells.checks import check_lifting
    from toporag_core.cells.lift import LIFTINGS, lift, lifting_names
    from toporag_core.tasks.prep import PrepConfig

    for command in ("lift", "retrieve", "train", "eval"):
        assert offers(command, "--tree", "toy-bfs")
    assert check_lifting("toy-bfs") == "toy-bfs" and "toy-bfs" in LIFTINGS
    assert PrepConfig(tree="toy-bfs").tree == "toy-bfs"
    assert lift(graph(), tree="toy-bfs").num_cells2 == lift(graph(), tree="bfs").num_cells2
    assert "toy-bfs" in lifting_names()  # what app.py's lifting sidebar lists


def test_the_app_sidebar_lists_a_lifting_entry(toy_lifting, monkeypatch):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    lifting = next(s for s in at.sidebar.selectbox if s.label == "Lifting")
    assert toy_lifting.label in lifting.options  # the options show each lifting's label


# ------------------------------------------------------------------ an answer style
@pytest.fixture
def toy_style():
    from toporag_core.model import ANSWER_STYLES, AnswerStyle, register_style

    s = register_style(AnswerStyle("toy-bare", help="toy: the bare answer"))
    yield s
    ANSWER_STYLES.pop(s.name, None)


def test_a_registered_answer_style_is_offered_by_train(toy_style):
    from toporag_core.model import TopoRAGConfig, get_style

    assert offers("train", "--answer-style", "toy-bare")
    assert get_style("toy-bare") is toy_style and TopoRAGConfig(answer_style="toy-bare").answer_style == "toy-bare"


# ------------------------------------------------------------------ a task
@pytest.fixture
def toy_task():
    from toporag_core.tasks import RawExample, Task, register_task, unregister_task

    raw = RawExample("0", graph(), QUESTION, "table", "table")
    t = register_task(Task("toy-one", lambda _: {"train": [raw], "val": [raw], "test": [raw]}))
    yield t
    unregister_task(t.name)


def test_a_registered_task_is_offered_by_train_and_eval(toy_task):
    from toporag_core.tasks import get_task, load_raw

    for command in ("train", "eval"):
        assert offers(command, "--dataset", "toy-one")
    assert get_task("toy-one") is toy_task
    assert (toy_task.metric, toy_task.label, toy_task.prompt) == ("toy-one", "toy-one", "plain")  # the defaults
    assert [len(v) for v in load_raw("toy-one").values()] == [1, 1, 1]


def test_register_task_takes_one_task():
    from toporag_core.tasks import Task, register_task

    with pytest.raises(TypeError):
        register_task("toy-bad", lambda _: {})  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="prompt form 'chat'"):
        Task("toy-bad", lambda _: {}, prompt="chat")


# ------------------------------------------------------------------ a text format
@pytest.fixture
def toy_text():
    from toporag_core.retrieval.textualize import TEXT_FORMATS

    def node_names(sub, include_cells2=True):
        return [(str(t), ("n", int(i))) for i, t in zip(sub.nodes, sub.node_texts())]

    TEXT_FORMATS["toy-names"] = node_names
    yield node_names
    TEXT_FORMATS.pop("toy-names", None)


def test_a_text_format_is_offered_by_retrieve_and_train(toy_text):
    from toporag_core.embed import HashingEncoder
    from toporag_core.retrieval import EmbeddedComplex, retrieve, textualize

    for command in ("retrieve", "train", "eval"):
        assert offers(command, "--text", "toy-names")
    sub = retrieve(EmbeddedComplex.from_graph(graph(), HashingEncoder()), QUESTION, "whole")
    assert textualize(sub, fmt="toy-names").splitlines() == sub.node_texts()


# ------------------------------------------------------------------ a page
ALLOWED_TOP = {"streamlit"}  # besides the standard library and toporag_core.studio


def imports_past_studio(path: Path) -> set[str]:
    """The modules a page file imports that are neither ``toporag_core.studio(.*)``, the standard library nor
    streamlit (every ``import``, at module level or inside a function)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        for name in names:
            top = name.split(".")[0]
            if name == "toporag_core.studio" or name.startswith("toporag_core.studio."):
                continue
            if top in sys.stdlib_module_names or top in ALLOWED_TOP or top == "__future__":
                continue
            out.add(name)
    return out


def test_the_page_check_refuses_a_page_that_imports_past_the_studio(tmp_path):
    good = tmp_path / "9_Toy.py"
    good.write_text("import json\nimport streamlit as st\nfrom toporag_core.studio import state\n"
                    "from toporag_core.studio.graph_view import render_view\n\n"
                    "def f():\n    from toporag_core.studio import ask\n")
    assert imports_past_studio(good) == set()
    bad = tmp_path / "9_Bad.py"
    bad.write_text("import streamlit as st\nfrom toporag_core.studio import state\n\n"
                   "def f():\n    from toporag_core.hybrid import open_index\n")
    assert imports_past_studio(bad) == {"toporag_core.hybrid"}


def test_every_page_calls_the_library_through_the_studio():
    pages = sorted(PAGES.glob("[0-9]*_*.py"))
    assert pages, "no pages found"
    extra = {p.name: sorted(imports_past_studio(p)) for p in [ROOT / "app.py", *pages]}  # app.py: the Home page
    extra = {k: v for k, v in extra.items() if v}
    assert not extra, f"pages that import past toporag_core.studio (add a studio function instead): {extra}"


# ------------------------------------------------------------------ an LLM backend
def test_an_llm_backend_loaded_by_load_llm_answers_through_the_pipeline(tmp_path):
    """A Hugging Face causal-LM folder (here the tiny Llama) given as ``llm=`` is loaded by ``load_llm`` and
    provides what the model reads: input / output embeddings, the decoder body, a tokenizer with EOS."""
    from toporag_core.answering import TopoRAGPipeline
    from toporag_core.embed import HashingEncoder
    from toporag_core.model.llm import llm_name, load_llm
    from toporag_core.model.tiny import build_tiny_checkpoint, save_tiny_llm

    backend = save_tiny_llm(tmp_path / "backend", seed=1)
    llm, tok = load_llm(backend, device="cpu", dtype="float32")
    assert all(callable(getattr(llm, a, None)) for a in ("get_input_embeddings", "get_output_embeddings",
                                                          "get_decoder"))
    assert not llm.training and not any(p.requires_grad for p in llm.parameters())
    assert tok.eos_token is not None and tok.pad_token is not None and tok.padding_side == "left"

    pipe = TopoRAGPipeline.load(build_tiny_checkpoint(tmp_path / "ckpt"), llm=str(backend), device="cpu",
                                encoder=HashingEncoder())
    assert llm_name(pipe.model.llm) == str(backend)
    out = pipe.answer(pipe.prepare(graph()), QUESTION, max_new_tokens=4)
    assert isinstance(out.answer, str) and out.subcomplex.counts[0] > 0
    text = TopoRAGPipeline.text_only(str(backend), device="cpu", max_new_tokens=4)
    assert len(text.answer_texts([QUESTION], ["cup on table"])) == 1
