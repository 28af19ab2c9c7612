"""The core service (``toporag serve``) on 127.0.0.1 with the tiny in-process Llama.

The reference is the same checkpoint loaded in-process: every answer, retrieved subcomplex and
context the service returns must equal what :class:`TopoRAGPipeline` and ``retrieve`` give here
(greedy decoding makes the tiny model's gibberish answers deterministic).
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from toporag_core.embed import HashingEncoder  # noqa: E402
from toporag_core.graph import TextualGraph  # noqa: E402
from toporag_core.answering.pipeline import TopoRAGPipeline  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, method_names, retrieve, textualize  # noqa: E402
from toporag_core.serve import BatchConfig, Limits, graph_id, graph_to_json  # noqa: E402
from toporag_core.serve.client import CoreClient, CoreError, CoreUnavailable  # noqa: E402
from toporag_core.serve.server import ServeConfig, load_engine, start_background  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.model.tiny import build_tiny_checkpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "s3cret-token-for-tests"
QUESTIONS = {"scene": ["What is the red cup made of?", "What is next to the plate?", "Where is the knife?"],
             "kg": ["Which element did Marie Curie discover?", "Who was Pierre Curie married to?"],
             "argument": ["Do the arguments support or counter each other?"]}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("serve_ckpt") / "ckpt")


@pytest.fixture(scope="module")
def ref(checkpoint) -> TopoRAGPipeline:
    """The in-process reference pipeline (its own copy of the model)."""
    return TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())


def make_server(checkpoint, **cfg):
    pipe = TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())
    batch = cfg.pop("batch", BatchConfig(max_wait_ms=20.0))
    config = ServeConfig(port=0, batch=batch, **cfg)
    return start_background(load_engine(config, pipe=pipe), config)


@pytest.fixture(scope="module")
def server(checkpoint):
    srv = make_server(checkpoint, limits=Limits(max_nodes=200, max_body_bytes=200_000, max_question_chars=500))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def locked(checkpoint):
    srv = make_server(checkpoint, token=TOKEN)
    yield srv
    srv.stop()


@pytest.fixture()
def client(server):
    with CoreClient(server.url, timeout=60) as c:
        yield c


def graphs() -> dict[str, TextualGraph]:
    return {k: samples.load_sample(k) for k in QUESTIONS}


def subcomplex_key(sub) -> tuple:
    return (sub.nodes.tolist(), sub.edges.tolist(), sub.cells2.tolist(), sub.node_roles.tolist(),
            sub.edge_roles.tolist(), sub.cell2_roles.tolist())


# ----------------------------------------------------------------------------- equality with in-process
def test_answers_and_subcomplexes_equal_the_in_process_pipeline(client, ref):
    for name, graph in graphs().items():
        ecx = EmbeddedComplex.from_graph(graph, HashingEncoder())
        for q in QUESTIONS[name]:
            for method in method_names("cells"):
                setting = RetrievalSetting.make(method, k=2)
                want = ref.answer(ecx, q, setting)
                got = client.answer(graph, q, setting)
                sub = client.subcomplex(got, ecx.complex)
                assert got["answer"] == want["answer"], (name, q, method)
                assert subcomplex_key(sub) == subcomplex_key(want["subcomplex"]), (name, q, method)
                assert got["context"] == want["context"]
                assert got["prompt"] == want["prompt"]
                assert got["cells"] == json.loads(json.dumps(want["cells"]))
                for a, b in zip(sub.prizes, want["subcomplex"].prizes):
                    np.testing.assert_allclose(a, b)
                assert got["device"] == "cpu" and got["core"]


def test_default_setting_is_the_checkpoints(client, ref):
    graph = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(graph, HashingEncoder())
    got = client.answer(graph, QUESTIONS["scene"][0])
    want = ref.answer(ecx, QUESTIONS["scene"][0])
    assert got["answer"] == want["answer"] and got["setting"] == want["setting"].to_dict()


def test_retrieve_every_registered_method(client):
    graph = samples.load_sample("kg")
    ecx = EmbeddedComplex.from_graph(graph, HashingEncoder())
    q = QUESTIONS["kg"][0]
    for method in method_names():
        spec = RetrievalSetting.make(method).spec
        params = {"target": 0} if "target" in spec.param_names else {}
        setting = RetrievalSetting.make(method, k=3, **params)
        got = client.retrieve(graph, q, setting)
        want = retrieve(ecx, q, setting=setting)
        assert got["setting"] == setting.to_dict()
        if spec.dimension == "cells":
            assert subcomplex_key(client.subcomplex(got, ecx.complex)) == subcomplex_key(want), method
            assert got["context"] == textualize(want)
        else:
            w = want.to_dict()
            assert got["result"]["nodes"] == w["nodes"] and got["result"]["texts"] == w["texts"], method
            np.testing.assert_allclose(got["result"]["scores"], w["scores"], rtol=1e-6)


# ----------------------------------------------------------------------------- graphs by hash
def test_a_graph_is_sent_once_then_used_by_hash(server):
    graph = TextualGraph.from_triples([("owl", "hunts", "mouse"), ("mouse", "eats", "seed"), ("owl", "sits on", "tree"),
                                       ("tree", "drops", "seed")], name="fresh")
    gid = graph_id(graph)
    with CoreClient(server.url) as c:
        assert not c.has_graph(graph)
        for q in ("what does the owl hunt?", "what eats seeds?", "where does the owl sit?"):
            c.answer(graph, q, RetrievalSetting.make("toporag", k=1))
            c.retrieve(graph, q, RetrievalSetting.make("g-retriever", k=2))
        assert c.graphs_sent == 1  # the first call uploaded it; five more named it by hash
        assert c.has_graph(graph)
    # by hash alone, without the graph, from a raw HTTP client
    r = httpx.post(f"{server.url}/v1/retrieve", json={"graph_id": gid, "question": "what does the owl hunt?"})
    assert r.status_code == 200 and r.json()["graph_id"] == gid and r.json()["cached"] is True
    r = httpx.post(f"{server.url}/v1/retrieve", json={"graph_id": "0" * 64, "question": "q"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_graph"
    # the same content under another name is the same graph
    renamed = TextualGraph(graph.node_text, graph.edge_index, graph.edge_text, name="other name")
    assert graph_id(renamed) == gid


def test_graph_cache_is_a_bounded_lru(checkpoint):
    srv = make_server(checkpoint, max_graphs=2)
    try:
        with CoreClient(srv.url) as c:
            gs = [TextualGraph.from_triples([(f"a{i}", "r", f"b{i}"), (f"b{i}", "r", f"c{i}")]) for i in range(3)]
            for g in gs:
                c.upload(g)
            assert not c.has_graph(gs[0]) and c.has_graph(gs[1]) and c.has_graph(gs[2])
            assert c.info()["cache"]["evictions"] == 1
            c.retrieve(gs[0], "a0", RetrievalSetting.make("toporag", k=1))  # evicted: sent again, transparently
            assert c.graphs_sent == 4
    finally:
        srv.stop()


# ----------------------------------------------------------------------------- bad requests
def assert_error(r: httpx.Response, status: int, words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    msg = r.json()["error"]["message"]
    assert words.lower() in msg.lower(), msg


def still_serving(server, ref) -> None:
    graph = samples.load_sample("argument")
    with CoreClient(server.url) as c:
        got = c.answer(graph, QUESTIONS["argument"][0], RetrievalSetting.make("toporag", k=2))
    want = ref.answer(EmbeddedComplex.from_graph(graph, HashingEncoder()), QUESTIONS["argument"][0],
                      RetrievalSetting.make("toporag", k=2))
    assert got["answer"] == want["answer"]


def test_bad_requests_get_4xx_json_and_the_service_keeps_serving(server, ref):
    url = server.url
    graph = samples.load_sample("scene")
    body = {"graph": graph_to_json(graph), "question": "what is on the table?"}
    post = httpx.post
    assert_error(post(f"{url}/v1/answer", content=b"{not json", headers={"content-type": "application/json"}),
                 400, "not valid JSON")
    assert_error(post(f"{url}/v1/answer", json={**body, "method": "no-such-method"}), 422, "unknown retrieval method")
    assert_error(post(f"{url}/v1/retrieve", json={**body, "method": "toporag", "params": {"k9": 1}}), 422, "k9")
    assert_error(post(f"{url}/v1/retrieve", json={**body, "method": "toporag", "params": {"k0": -1}}), 422, "k0")
    assert_error(post(f"{url}/v1/answer", json={**body, "method": "proximity", "params": {"target": 0}}), 422,
                 "cell method")
    assert_error(post(f"{url}/v1/answer", json={**body, "question": "  "}), 422, "question")
    assert_error(post(f"{url}/v1/answer", json={**body, "question": "x" * 600}), 413, "question")
    assert_error(post(f"{url}/v1/answer", json={**body, "bogus": 1}), 422, "bogus")
    big = {"nodes": [f"n{i}" for i in range(300)], "edges": [[i, i + 1, "r"] for i in range(299)]}
    assert_error(post(f"{url}/v1/answer", json={**body, "graph": big}), 413, "300 nodes")
    assert_error(post(f"{url}/v1/graphs", json={"graph": {"nodes": ["a"], "edges": [[0, 5, "r"]]}}), 422,
                 "graph.edges[0][1]")
    assert_error(post(f"{url}/v1/graphs", json={"graph": {"nodes": ["a" * 300_000], "edges": []}}), 413, "bytes")
    assert_error(post(f"{url}/v1/retrieve", json={**body, "graph_id": "f" * 64}), 422, "does not match")
    assert_error(httpx.get(f"{url}/v1/nothing-here"), 404, "/v1/nothing-here")
    for _ in range(3):  # and the service keeps serving, correctly
        assert httpx.get(f"{url}/v1/health").json()["status"] == "ok"
    still_serving(server, ref)


def test_bearer_token(locked, ref):
    url = locked.url
    graph = samples.load_sample("scene")
    assert httpx.get(f"{url}/v1/health").status_code == 200  # liveness needs no token
    r = httpx.get(f"{url}/v1/info")
    assert_error(r, 401, "missing bearer token")
    assert r.headers["www-authenticate"] == "Bearer"
    assert_error(httpx.get(f"{url}/v1/info", headers={"Authorization": "Bearer wrong-token"}), 401, "wrong")
    assert_error(httpx.post(f"{url}/v1/answer", json={"graph": graph_to_json(graph), "question": "q"}), 401, "token")
    with CoreClient(url) as c, pytest.raises(CoreError, match="401"):
        c.answer(graph, "what is on the table?")
    with CoreClient(url, token=TOKEN) as c:
        got = c.answer(graph, "what is on the table?", RetrievalSetting.make("toporag", k=2))
    want = ref.answer(EmbeddedComplex.from_graph(graph, HashingEncoder()), "what is on the table?",
                      RetrievalSetting.make("toporag", k=2))
    assert got["answer"] == want["answer"]


# ----------------------------------------------------------------------------- batching
def concurrent_answers(url: str, jobs: list[tuple[TextualGraph, str]], setting) -> list[dict]:
    out: list = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def run(i: int) -> None:
        with CoreClient(url) as c:
            c.upload(jobs[i][0]) if not c.has_graph(jobs[i][0]) else None
            barrier.wait()
            out[i] = c.answer(jobs[i][0], jobs[i][1], setting)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    [t.start() for t in threads]
    [t.join(120) for t in threads]
    return out


def submit_concurrently(engine, jobs: list, n: int = 12, timeout: float = 60) -> list:
    """``n`` batcher submissions at once, thread ``i`` asking ``jobs[i % len(jobs)]``: their results in order."""
    got: list = [None] * n
    ts = [threading.Thread(target=lambda i=i: got.__setitem__(i, engine.batcher.submit((jobs[i % len(jobs)], None),
                                                                                     timeout=timeout)))
          for i in range(n)]
    [t.start() for t in ts]
    [t.join(timeout) for t in ts]
    return got


def answers_equal_in_process(url: str, ref) -> list[dict]:
    """Every sample question sent at once to the core at ``url``: each answer equals the in-process
    pipeline ``ref``'s on the same graph and setting; returns the service's replies."""
    jobs = [(g, q) for name, g in graphs().items() for q in QUESTIONS[name]]
    setting = RetrievalSetting.make("toporag", k=2)
    got = concurrent_answers(url, jobs, setting)
    for (g, q), r in zip(jobs, got):
        want = ref.answer(EmbeddedComplex.from_graph(g, HashingEncoder()), q, setting)
        assert r["answer"] == want["answer"], (q, r["batch_size"])
    return got


@pytest.mark.parametrize("enabled", [True, False])
def test_dynamic_batching_gives_the_unbatched_answers(checkpoint, ref, enabled):
    srv = make_server(checkpoint, batch=BatchConfig(enabled=enabled, max_batch=8, max_wait_ms=200.0))
    try:
        got = answers_equal_in_process(srv.url, ref)
        sizes = [r["batch_size"] for r in got]
        if enabled:
            assert max(sizes) > 1, sizes  # 6 requests released together share forward passes
        else:
            assert sizes == [1] * len(got)
        assert len({a["answer"] for a in got}) > 1  # the test is not vacuous: answers differ by input
    finally:
        srv.stop()


def test_different_answer_lengths_are_never_batched_together(checkpoint, ref):
    from toporag_core.serve import DynamicBatcher

    seen = []
    b = DynamicBatcher(lambda xs: (seen.append(list(xs)), xs)[1], BatchConfig(max_batch=8, max_wait_ms=100.0))
    try:
        res: dict = {}
        ts = [threading.Thread(target=lambda i=i: res.__setitem__(i, b.submit(i, group=i % 2))) for i in range(6)]
        [t.start() for t in ts]
        [t.join(10) for t in ts]
        assert res == {i: i for i in range(6)}
        assert all(len({x % 2 for x in batch}) == 1 for batch in seen), seen
    finally:
        b.close()


# ----------------------------------------------------------------------------- failures never hang
def test_core_down_or_slow_is_a_clear_error_not_a_hang():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    with CoreClient(f"http://127.0.0.1:{port}", timeout=2, connect_timeout=1) as c, \
            pytest.raises(CoreUnavailable, match="not reachable"):
        c.info()
    assert time.perf_counter() - t0 < 5
    with socket.socket() as slow:  # accepts connections, never answers
        slow.bind(("127.0.0.1", 0))
        slow.listen(8)
        t0 = time.perf_counter()
        with CoreClient(f"http://127.0.0.1:{slow.getsockname()[1]}", timeout=0.5, connect_timeout=0.5) as c, \
                pytest.raises(CoreUnavailable, match="in time"):
            c.answer(samples.load_sample("scene"), "what is on the table?")
        assert time.perf_counter() - t0 < 5


@pytest.mark.slow
def test_toporag_serve_command(checkpoint, tmp_path):
    env = {"PYTHONPATH": str(ROOT), "TOPORAG_ENCODER": "hashing", "PATH": "/usr/bin:/bin",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOPORAG_CACHE": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "toporag_core.cli", "serve", "--checkpoint", str(checkpoint),
                             "--port", "0", "--device", "cpu", "--no-batching"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        url = None
        t0 = time.time()
        lines = []
        while time.time() - t0 < 120 and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("toporag serve: listening on "):
                url = line.split()[-1]
        assert url and url.startswith("http://127.0.0.1:"), "".join(lines)
        with CoreClient(url) as c:
            info = c.info()
            assert info["device"] == "cpu" and info["batching"]["enabled"] is False
            assert info["checkpoint"] == str(checkpoint)
            assert c.answer(samples.load_sample("scene"), "what is on the table?")["answer"] is not None
    finally:
        proc.terminate()
        proc.wait(20)
