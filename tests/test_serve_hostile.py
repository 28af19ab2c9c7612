"""The core service under hostile and heavy use (127.0.0.1, the tiny in-process Llama).

Token before any work, body limits while streaming, read deadlines, every bad input a 4xx naming
its field (a hypothesis fuzz of the endpoints finds no 5xx), uploads as jobs that never block a
query on another graph, one LLM conversion per cache, and the CLI's refusals by the same rules.
Behaviour only: no assertion on how long anything took (timings are in benchmarks/bench_serve.py).
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toporag_core.embed import CachedEncoder, HashingEncoder  # noqa: E402
from toporag_core.answering.pipeline import TopoRAGPipeline  # noqa: E402
from toporag_core.serve import BatchConfig, Limits, graph_to_json  # noqa: E402
from toporag_core.serve.client import CoreClient  # noqa: E402
from toporag_core.serve.server import ServeConfig, load_engine, start_background  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.model.tiny import build_tiny_checkpoint  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TINY = {"nodes": ["owl", "mouse", "seed"], "edges": [[0, 1, "hunts"], [1, 2, "eats"], [0, 2, "ignores"]]}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("hostile_ckpt") / "ckpt")


def make_server(checkpoint, encoder=None, **cfg):
    pipe = TopoRAGPipeline.load(checkpoint, device="cpu", encoder=encoder or HashingEncoder())
    config = ServeConfig(port=0, batch=BatchConfig(max_wait_ms=5.0), **cfg)
    return start_background(load_engine(config, pipe=pipe), config)


@pytest.fixture(scope="module")
def locked(checkpoint):
    srv = make_server(checkpoint, token=TOKEN, limits=Limits(max_body_bytes=200_000),
                      header_timeout_s=1.0, body_timeout_s=1.0)
    yield srv
    srv.stop()


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def raw(url: str) -> socket.socket:
    s = socket.create_connection(host_port(url), timeout=30)
    return s


def read_reply(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        out += chunk
    return out


def status_of(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


# ----------------------------------------------------------------------------- token before body
def test_an_unauthenticated_request_is_401_whatever_its_body(locked):
    for body in (b"{not json", b"\xff\xfe garbage", json.dumps({"graph": TINY, "question": "q"}).encode()):
        r = httpx.post(f"{locked.url}/v1/answer", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized", r.text
        assert r.headers["www-authenticate"] == "Bearer"
    r = httpx.post(f"{locked.url}/v1/answer", content=b"{not json", headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 400  # with the token, the same body reaches the JSON parser


def test_401_is_sent_before_the_body_is_read(locked):
    """Headers announce 150 kB; only 1 kB is sent; the 401 comes back without the rest."""
    with raw(locked.url) as s:
        s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 150000\r\n\r\n" + b"x" * 1000)
        reply = read_reply(s)
    assert status_of(reply) == 401 and b"missing bearer token" in reply


def test_python_clients_sending_15_mb_unauthenticated_get_the_401_not_a_reset(locked):
    """urllib, httpx and http.client write the whole body before they read: the server answers 401 at
    once, then reads and drops the rest of the body (lingering close), so each sees the 401."""
    import http.client
    import urllib.error
    import urllib.request

    body = b"x" * (15 * 1024 * 1024)
    for _ in range(2):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(urllib.request.Request(f"{locked.url}/v1/answer", data=body,
                                                          headers={"Content-Type": "application/json"}), timeout=60)
        assert err.value.code == 401 and b"missing bearer token" in err.value.read()
        r = httpx.post(f"{locked.url}/v1/graphs", content=body, headers={"content-type": "application/json"},
                       timeout=60)
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
        conn = http.client.HTTPConnection(*host_port(locked.url), timeout=60)
        conn.request("POST", "/v1/retrieve", body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        assert reply.status == 401 and reply.getheader("Connection") == "close"
        conn.close()
    # with the token, the same 15 MB is over the 200 kB limit: 413, seen by urllib too
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(f"{locked.url}/v1/answer", data=body,
                                                      headers={**AUTH, "Content-Type": "application/json"}), timeout=60)
    assert err.value.code == 413
    assert httpx.get(f"{locked.url}/v1/health").status_code == 200
    for bad in ({"linger_s": 0}, {"linger_max_bytes": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ServeConfig(**bad)


def test_a_chunked_body_over_the_limit_is_413_before_it_ends(locked):
    with raw(locked.url) as s:
        s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                  b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 50_000
        for _ in range(5):  # 250 kB of a body that never ends, over the 200 kB limit
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        reply = read_reply(s)
    assert status_of(reply) == 413 and b"too_large" in reply


def test_half_sent_requests_are_dropped(locked):
    with raw(locked.url) as s:  # headers never finished: the connection is closed
        s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: x\r\n")
        assert read_reply(s) == b""
    with raw(locked.url) as s:  # half a body: 408, then closed
        s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                  b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"graph\": ")
        reply = read_reply(s)
    assert status_of(reply) == 408 and b"did not arrive" in reply
    assert httpx.get(f"{locked.url}/v1/health").status_code == 200


# ----------------------------------------------------------------------------- every bad input a 4xx
def post(url: str, body, path: str = "/v1/retrieve") -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{url}{path}", content=data, headers={**AUTH, "content-type": "application/json"}, timeout=60)


def assert_4xx(r: httpx.Response, field: str) -> None:
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    msg = r.json()["error"]["message"]
    assert field in msg, msg
    assert "Error" not in msg and "Traceback" not in msg, msg  # no exception class or text


def test_the_three_former_500s_are_4xx_naming_the_field(locked):
    url = locked.url
    assert_4xx(post(url, {"graph": {"nodes": ["a", "b"]}, "question": "a"}), "graph.edges")
    assert_4xx(post(url, b'{"graph": {"nodes": ["a\\ud800", "b"], "edges": []}, "question": "a"}'), "graph.nodes[0]")
    assert_4xx(post(url, {"graph": TINY, "question": "owl", "tree": "random", "seed": -1}), "seed")


def test_serve_takes_the_clis_rules(locked):
    url = locked.url
    assert_4xx(post(url, {"graph": {"nodes": ["a", ""], "edges": []}, "question": "a"}), "graph.nodes[1]")
    assert_4xx(post(url, {"graph": {"nodes": ["a", "b"], "edges": [[0, 1, " "]]}, "question": "a"}), "graph.edges[0][2]")
    assert_4xx(post(url, {"graph": TINY, "question": "owl", "k": True}), "k")
    assert_4xx(post(url, {"graph": TINY, "question": "owl", "k": "3"}), "k")
    assert_4xx(post(url, {"graph": TINY, "question": "owl", "seed": "1"}), "seed")
    assert_4xx(post(url, {"graph": TINY, "question": "owl", "method": "toporag", "params": {"k0": True}}), "k0")
    assert_4xx(post(url, {"graph": TINY, "question": "owl", "tree": "spiral"}), "tree")
    assert_4xx(post(url, {"graph": TINY, "question": " \t "}), "question")
    assert_4xx(post(url, {"graph": {"nodes": ["a", 1], "edges": []}, "question": "a"}), "graph.nodes[1]")
    assert_4xx(post(url, {"graph": {"nodes": ["a"], "edges": [[0, True, "r"]]}, "question": "a"}), "graph.edges[0][1]")
    r = post(url, {"graph": TINY, "question": "what does the owl hunt?", "tree": "rings"})  # rings, as in the CLI
    assert r.status_code == 200 and r.json()["subcomplex"]["complex"]["cells2"] == 1, r.text


JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                       | st.text(max_size=8), lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
FIELDS = {"graph_id": JSONISH | st.just("0" * 64), "question": JSONISH | st.just("owl?"), "query": JSONISH,
          "tree": JSONISH | st.sampled_from(["bfs", "dfs", "random", "rings"]), "seed": JSONISH,
          "method": JSONISH | st.sampled_from(["toporag", "g-retriever", "proximity", "text", "nope"]),
          "params": st.dictionaries(st.sampled_from(["k0", "k1", "k2", "c2", "k", "target", "x"]), JSONISH, max_size=3),
          "k": JSONISH, "max_new_tokens": JSONISH,
          "graph": JSONISH | st.fixed_dictionaries({"nodes": st.lists(JSONISH | st.just("owl"), max_size=4),
                                                    "edges": st.lists(st.lists(JSONISH | st.integers(0, 3),
                                                                               max_size=4), max_size=4)})}
BODIES = st.fixed_dictionaries({}, optional=FIELDS) | JSONISH


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(["/v1/retrieve", "/v1/answer", "/v1/graphs"]), body=BODIES)
def test_fuzzed_requests_never_get_a_5xx(locked, path, body):
    r = post(locked.url, body, path)
    assert r.status_code < 500, (path, body, r.status_code, r.text)
    if r.status_code >= 400:
        assert set(r.json()["error"]) == {"code", "message"}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(["/v1/retrieve", "/v1/answer", "/v1/graphs", "/v1/jobs/x", "/v1/graphs/x"]),
       data=st.binary(max_size=64))
def test_fuzzed_bytes_never_get_a_5xx(locked, path, data):
    r = post(locked.url, data, path) if not path.endswith("/x") else \
        httpx.get(f"{locked.url}{path}", params={"seed": data.decode("latin-1")}, headers=AUTH)
    assert r.status_code < 500, (path, data, r.status_code, r.text)


# ----------------------------------------------------------------------------- uploads off the request path
class GatedEncoder(HashingEncoder):
    """Hashing vectors; a call with more than one text (an upload's chunk) waits for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.waiting = threading.Event(), threading.Event()

    def encode(self, texts, show_progress: bool = False) -> np.ndarray:
        if len(texts) > 1:
            self.waiting.set()
            assert self.gate.wait(60)
        return super().encode(texts, show_progress)


def test_an_upload_is_a_job_and_never_blocks_a_retrieve_on_another_graph(checkpoint, tmp_path):
    inner = GatedEncoder()
    srv = make_server(checkpoint, encoder=CachedEncoder(inner, tmp_path / "cache"), upload_chunk=4)
    try:
        with CoreClient(srv.url, timeout=60) as c:
            inner.gate.set()
            small = samples.load_sample("kg")
            c.upload(small)  # cached before the big upload starts
            inner.gate.clear()
            big = {"nodes": [f"node number {i}" for i in range(200)], "edges": [[i, i + 1, f"r{i % 7}"]
                                                                                for i in range(199)]}
            r = httpx.post(f"{srv.url}/v1/graphs", json={"graph": big})
            assert r.status_code == 202 and r.json()["status"] in ("queued", "running"), r.text
            job_id = r.json()["job_id"]
            assert inner.waiting.wait(60)  # the job is inside the encoder now, and stays there
            # a new question on the cached graph is embedded and answered while the upload is stuck
            got = c.retrieve(small, "Which element did Marie Curie discover, and when?")
            assert got["subcomplex"]["node_ids"]
            status = c.job(job_id)
            assert status["status"] == "running" and status["progress"]["done"] < 200
            inner.gate.set()
            done = c.wait_job(status)
            assert done["nodes"] == 200 and done["graph_id"] == r.json()["graph_id"]
            assert c.job(job_id)["progress"]["done"] == c.job(job_id)["progress"]["total"] > 0
            assert httpx.get(f"{srv.url}/v1/jobs/{'f' * 32}").status_code == 404
    finally:
        inner.gate.set()
        srv.stop()


def test_two_uploads_of_one_graph_share_a_job(checkpoint, tmp_path):
    inner = GatedEncoder()
    srv = make_server(checkpoint, encoder=CachedEncoder(inner, tmp_path / "cache"))
    try:
        body = {"graph": graph_to_json(samples.load_sample("scene"))}
        a = httpx.post(f"{srv.url}/v1/graphs", json=body).json()
        b = httpx.post(f"{srv.url}/v1/graphs", json=body).json()
        assert a["job_id"] == b["job_id"]
        inner.gate.set()
        with CoreClient(srv.url) as c:
            c.wait_job(a)
        again = httpx.post(f"{srv.url}/v1/graphs", json=body)
        assert again.status_code == 200 and again.json()["cached"] is True
    finally:
        inner.gate.set()
        srv.stop()


# ----------------------------------------------------------------------------- one conversion per cache
HOLDER = """
import sys
from pathlib import Path
from toporag_core.model.llm import conversion_lock
with conversion_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_second_process_waits_for_the_conversion_and_reuses_it(tmp_path, monkeypatch):
    from toporag_core.model import llm

    target = tmp_path / "llm" / llm.DEFAULT_LLM
    target.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(target)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        assert holder.stdout.readline().strip() == "held"
        converted: list[str] = []
        monkeypatch.setitem(llm.PACKAGED_LLMS, llm.DEFAULT_LLM, llm.PackagedLLM(
            llm.DEFAULT_LLM, "none", lambda: converted.append("converted") or (_ for _ in ()).throw(
                AssertionError("converted a second time")), "test"))
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(llm.ensure_default_llm(target)))
        waiter.start()
        # the other process finishes its conversion while this one waits on the lock
        target.mkdir()
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            (target / name).write_text("{}")
        holder.stdin.write("\n")
        holder.stdin.flush()
        waiter.join(60)
        assert got == [target] and converted == []
    finally:
        holder.kill()
        holder.wait(10)


def test_validation_liftings_are_the_lifts():
    from toporag_core.cells.lift import LIFTINGS as LIFT, lifting_names
    from toporag_core.cells.checks import LIFTINGS, check_lifting

    assert LIFTINGS is LIFT and list(LIFTINGS) == lifting_names()
    assert all(check_lifting(name) == name for name in LIFTINGS)
    with pytest.raises(ValueError, match="tree"):
        check_lifting("spiral")


# ----------------------------------------------------------------------------- the CLI's refusals
def cli(capsys, *argv: str) -> tuple[int, str]:
    from toporag_core.cli import main

    code = main(list(argv))
    return code, capsys.readouterr().err


def test_cli_refuses_a_blank_question_and_a_record_out_of_range(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    tsv = tmp_path / "g.tsv"
    tsv.write_text("owl\thunts\tmouse\nmouse\teats\tseed\n")
    code, err = cli(capsys, "retrieve", str(tsv), "-q", "   ")
    assert code == 2 and "--question: must be a non-empty string" in err
    code, err = cli(capsys, "ask", str(tsv), "-q", " \t")
    assert code == 2 and "--question: must be a non-empty string" in err
    code, err = cli(capsys, "retrieve", str(tsv), "-q", "owl", "--record", "5")
    assert code == 2 and "--record: 5: this file holds one graph" in err
    rows = tmp_path / "rows.tsv"
    rows.write_text("arg1\targ2\tlabel\tgraph\n"
                    "Cats are good pets.\tCats are calm.\tsupport\t(cats; capable of; calm)(calm; is a; good pet)\n"
                    "Dogs are safe.\tDogs bite.\tcounter\t(dogs; capable of; biting)(biting; not part of; safe)\n")
    code, err = cli(capsys, "retrieve", str(rows), "-q", "cat", "--record", "7")
    assert code == 2 and "--record: 7 is out of range: the file has 2 records" in err, err
    code, _ = cli(capsys, "retrieve", str(rows), "-q", "cat", "--record", "1")
    assert code == 0
