"""The app's remote core (``TOPORAG_CORE_URL``) against a running ``toporag serve`` on 127.0.0.1.

Remote answers and retrievals, rebuilt on the app's own lifted complex, must equal the in-process
ones; a stopped or silent core must show an error (quickly), not hang.
"""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("fastapi")
from streamlit.testing.v1 import AppTest  # noqa: E402

from toporag_core.embed import HashingEncoder  # noqa: E402
from toporag_core.answering.pipeline import TopoRAGPipeline  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve  # noqa: E402
from toporag_core.serve.server import ServeConfig, load_engine, start_background  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.studio import remote_core as core  # noqa: E402
from toporag_core.model.tiny import build_tiny_checkpoint  # noqa: E402

QUESTION = "What is the red cup made of?"
METHODS = ("toporag", "g-retriever")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("serve_app_ckpt") / "ckpt")


@pytest.fixture(scope="module")
def ref(checkpoint):
    return TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())


@pytest.fixture(scope="module")
def server(checkpoint):
    pipe = TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())
    srv = start_background(load_engine(ServeConfig(port=0), pipe=pipe))
    yield srv
    srv.stop()


def panel_script():
    from toporag_core.cells.lift import lift
    from toporag_core.retrieval import RetrievalSetting
    from toporag_core.io import samples
    from toporag_core.studio import remote_core as core

    graph = samples.load_sample("scene")
    core.answer_panel(graph, lift(graph), "What is the red cup made of?",
                      [RetrievalSetting.make(m, k=2) for m in ("toporag", "g-retriever")])


def run_panel(monkeypatch, url: str, timeout: str = "30") -> tuple[AppTest, float]:
    monkeypatch.setenv(core.URL_ENV, url)
    monkeypatch.setenv(core.TIMEOUT_ENV, timeout)
    at = AppTest.from_function(panel_script, default_timeout=60)
    t0 = time.perf_counter()
    at.run()
    return at, time.perf_counter() - t0


def test_app_panel_answers_like_the_in_process_pipeline(monkeypatch, server, ref):
    at, _ = run_panel(monkeypatch, server.url)
    assert not at.exception and not at.error
    assert any("remote core" in c.value and "on cpu" in c.value for c in at.caption), [c.value for c in at.caption]
    graph = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(graph, HashingEncoder())
    for m in METHODS:
        want = ref.answer(ecx, QUESTION, RetrievalSetting.make(m, k=2))["answer"]
        shown = at.get("code")
        assert any(c.value == (want or "(empty answer)") for c in shown), (m, want, [c.value for c in shown])


def test_app_panel_with_the_core_stopped_shows_an_error_not_a_hang(monkeypatch, checkpoint):
    pipe = TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())
    srv = start_background(load_engine(ServeConfig(port=0), pipe=pipe))
    url = srv.url
    srv.stop()
    at, seconds = run_panel(monkeypatch, url)
    assert not at.exception
    assert at.error and "not reachable" in at.error[0].value and url in at.error[0].value
    assert seconds < 20
    assert not at.get("code")


def test_app_panel_with_a_silent_core_times_out(monkeypatch):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        at, seconds = run_panel(monkeypatch, f"http://127.0.0.1:{silent.getsockname()[1]}", timeout="1")
    assert at.error and "in time" in at.error[0].value
    assert seconds < 20


def test_remote_ask_and_retrieve_equal_in_process(server, ref):
    graph = samples.load_sample("kg")
    ecx = EmbeddedComplex.from_graph(graph, HashingEncoder())
    q = "Which element did Marie Curie discover?"
    with core.CoreClient(server.url) as client:
        settings = [RetrievalSetting.make(m, k=2) for m in METHODS]
        got = core.ask_via_core(client, graph, ecx.complex, q, settings)
        for s in settings:
            want = ref.answer(ecx, q, s)
            a = got[s.method]
            assert a.answer == want["answer"] and a.context == want["context"] and a.prompt == want["prompt"]
            assert a.subcomplex.nodes.tolist() == want["subcomplex"].nodes.tolist()
            assert a.subcomplex.edges.tolist() == want["subcomplex"].edges.tolist()
            assert a.subcomplex.complex is ecx.complex
            assert "remote core" in a.timings["answered_by"]
        for s in (RetrievalSetting.make("toporag", k=3), RetrievalSetting.make("proximity", k=3, target=1)):
            sub = core.retrieve_via_core(client, graph, ecx.complex, q, s)
            want = retrieve(ecx, q, setting=s)
            if s.method == "proximity":
                assert sub.nodes == want.nodes and sub.texts == want.texts
            else:
                assert sub.nodes.tolist() == want.nodes.tolist() and sub.cells2.tolist() == want.cells2.tolist()
        assert client.graphs_sent == 1
    st_in = core.core_status(None, ref)
    assert st_in.mode == core.IN_PROCESS and st_in.device == "cpu" and st_in.ok


ROOT = Path(__file__).resolve().parents[1]


def ask_page_answer(monkeypatch, url: str, checkpoint: Path, tmp_path) -> tuple[AppTest, float]:
    """The real Ask page with ``TOPORAG_CORE_URL`` set: ask the scene sample's own question."""
    monkeypatch.setenv(core.URL_ENV, url)
    monkeypatch.setenv(core.TIMEOUT_ENV, "30")
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(checkpoint))
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    t0 = time.perf_counter()
    at = AppTest.from_file(str(ROOT / "pages" / "4_Ask.py"), default_timeout=120).run()
    if not at.error:
        at.text_area(key=f"ask_question_{at.session_state['graph_key']}").set_value(QUESTION)
        at.button(key="ask_go").click()
        at.run()
    return at, time.perf_counter() - t0


def test_ask_page_answers_on_the_remote_core_like_in_process(monkeypatch, server, ref, checkpoint, tmp_path):
    at, _ = ask_page_answer(monkeypatch, server.url, checkpoint, tmp_path)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("remote core" in c.value for c in at.caption)
    graph = samples.load_sample("scene")
    want = ref.answer(EmbeddedComplex.from_graph(graph, HashingEncoder()), QUESTION, ref.default_setting())
    assert any(c.value == (want["answer"] or "(empty answer)") for c in at.code), [c.value for c in at.code]


def test_ask_page_with_the_core_stopped_shows_an_error_not_a_hang(monkeypatch, checkpoint, tmp_path):
    pipe = TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())
    srv = start_background(load_engine(ServeConfig(port=0), pipe=pipe))
    url = srv.url
    srv.stop()
    at, seconds = ask_page_answer(monkeypatch, url, checkpoint, tmp_path)
    assert not at.exception and at.error and url in at.error[0].value
    assert seconds < 30
