"""Load-and-abuse benchmark of the core service (``toporag serve``), on 127.0.0.1 only.

Two ``toporag serve`` subprocesses (their own interpreters, as in production), each with a token:

* **abuse server**: the tiny test checkpoint and the hashing encoder (``TOPORAG_ENCODER=hashing``,
  so a 20k-node / 100k-edge upload embeds in seconds instead of ~100 s with all-MiniLM-L6-v2 on a
  CPU: what is measured is whether a query waits for an upload, not the encoder's speed), short
  read deadlines (``--header-timeout``, ``--body-timeout``). Tables:

  1. the bad-input battery (the issue's cases) plus ``--fuzz`` random bodies: status counts, 5xx must be 0;
  2. ``--big-bodies`` unauthenticated 15 MB bodies at once: 401s, seconds, server RSS before/after;
  3. ``--slow`` half-sent requests (headers or body never finished): how many the server dropped
     within its deadline (+ 2 s slack);
  4. a retrieve on a small cached graph, idle and while a 20k-node / 100k-edge upload embeds
     (p50 ratio).

* **answer servers**: the committed ExplaGraphs checkpoint (``--checkpoint``; ``--tiny``: the test
  Llama) with its encoder, one server per ``--answer-configs`` entry (extra ``toporag serve``
  options; ``default`` = none): answer throughput at the ``--levels`` concurrencies (req/s,
  p50/p95/p99, errors, mean batch, server RSS, the load average at the start and end of the level:
  the machine may be shared), then ``--repeat`` more c1 / c16 pairs, and per server the ratio
  c16 / c1 of each pair and its context-store hits. c1 and c16 always run against the same server.
  ``--workloads``: ``repeated`` (6 sample requests cycled) and ``distinct`` (every request a new
  graph variant, so a new context); ``--baseline-root``: a checkout of older code whose server runs
  first in each workload (before / after in one run). Every level is bounded by ``--seconds`` and
  ``--max-requests``; every request by ``--timeout``.

Finally an in-process **profile** (:func:`decode_profile`): seconds per row of the frozen pass, the
tail + label scoring in two passes and in one, and the whole ``decode`` without and with a warm
context store, for 1 row and 16 rows, which says where a batch is cheaper per row.

    .venv/bin/python benchmarks/bench_serve.py [--tiny] [--seconds 15] [--fuzz 300]
    .venv/bin/python benchmarks/bench_serve.py --only-answers --answer-configs "default;--kv-cache-mb 0"
    .venv/bin/python benchmarks/bench_serve.py --only-answers --baseline-root ../before --answer-configs default
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"  # never any other address
TOKEN = "bench-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUESTIONS = {"scene": ["What is the red cup made of?", "What is next to the plate?", "Where is the knife?"],
             "kg": ["Which element did Marie Curie discover?", "Who was Pierre Curie married to?"],
             "argument": ["Do argument 1 and argument 2 support or counter each other?"]}


# ----------------------------------------------------------------------------- servers
def start_server(checkpoint: str, env: dict, extra: list[str], root: Path = ROOT) -> tuple[subprocess.Popen, str]:
    """A ``toporag serve`` subprocess on 127.0.0.1 running the code of the checkout ``root``."""
    cmd = [sys.executable, "-m", "toporag_core.cli", "serve", "--host", HOST, "--port", "0", "--device", "cpu",
           "--checkpoint", checkpoint, *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**env, "TOPORAG_CORE_TOKEN": TOKEN, "PYTHONPATH": str(root)}, cwd=root)
    t0, lines = time.time(), []
    while time.time() - t0 < 300:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("toporag serve: listening on "):
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            url = line.split()[-1]
            assert url.startswith(f"http://{HOST}:"), url
            return proc, url
    proc.kill()
    raise RuntimeError("the server did not start:\n" + "".join(lines[-20:]))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def percentiles(lat: list[float]) -> tuple[float, float, float]:
    if not lat:
        return (float("nan"),) * 3
    p = np.percentile(np.asarray(lat) * 1000, [50, 95, 99])
    return float(p[0]), float(p[1]), float(p[2])


# ----------------------------------------------------------------------------- 1. bad inputs + fuzz
def battery() -> list[tuple[str, str, bytes]]:
    g = {"nodes": ["owl", "mouse", "seed"], "edges": [[0, 1, "hunts"], [1, 2, "eats"]]}

    def j(path: str, body) -> tuple[str, str, bytes]:
        return path, json.dumps(body)[:60], json.dumps(body).encode()
    return [
        j("/v1/retrieve", {"graph": {"nodes": ["a", "b"]}, "question": "a"}),  # no edges (was KeyError: 500)
        ("/v1/retrieve", "lone surrogate in a node", b'{"graph": {"nodes": ["a\\ud800"], "edges": []}, "question": "a"}'),
        j("/v1/retrieve", {"graph": g, "question": "owl", "tree": "random", "seed": -1}),  # was ValueError: 500
        j("/v1/retrieve", {"graph": {"nodes": ["a", ""], "edges": []}, "question": "a"}),
        j("/v1/retrieve", {"graph": g, "question": "owl", "k": True}),
        j("/v1/retrieve", {"graph": g, "question": "owl", "k": "3"}),
        j("/v1/retrieve", {"graph": g, "question": "owl", "k": 10 ** 30}),
        j("/v1/retrieve", {"graph": g, "question": "   "}),
        j("/v1/retrieve", {"graph": g, "question": "owl", "tree": "../../etc/passwd"}),
        j("/v1/answer", {"graph": g, "question": "owl", "max_new_tokens": 1e9}),
        j("/v1/answer", {"graph": g, "question": "owl", "params": {"k0": float("nan")}}),
        j("/v1/graphs", {"graph": {"nodes": ["a"], "edges": [[0, 9, "r"]]}}),
        j("/v1/graphs", {"graph": [1, 2]}),
        j("/v1/retrieve", {"graph_id": "\\ud800" * 3, "question": "q"}),
        ("/v1/answer", "malformed JSON", b"{not json"),
    ]


def fuzz_value(rng: random.Random, depth: int = 0):
    kinds = ["none", "bool", "int", "bigint", "float", "str", "weird"] + (["list", "dict"] if depth < 2 else [])
    k = rng.choice(kinds)
    simple = {"none": None, "bool": rng.random() < 0.5, "int": rng.randint(-5, 50), "bigint": rng.randint(-2**70, 2**70),
              "float": rng.choice([0.5, -1.0, 1e308, 3.0]), "str": rng.choice(["", " ", "owl", "bfs", "rings", "x" * 50]),
              "weird": rng.choice(["\u0000", "\u202e", "0" * 64, "toporag", "\U0001f600"])}
    if k in simple:
        return simple[k]
    if k == "list":
        return [fuzz_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["nodes", "edges", "k0", "x", "name"]): fuzz_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def fuzz_body(rng: random.Random) -> dict:
    fields = ["graph_id", "graph", "tree", "seed", "question", "query", "method", "params", "k", "max_new_tokens"]
    body = {f: fuzz_value(rng) for f in rng.sample(fields, rng.randint(0, len(fields)))}
    if rng.random() < 0.5:
        body["graph"] = {"nodes": [fuzz_value(rng) if rng.random() < 0.2 else f"n{i}" for i in range(3)],
                         "edges": [[rng.choice([0, 1, 2, -1, 7, True, "1"]), 1, rng.choice(["r", "", 3])]]}
    return body


def bad_inputs(url: str, n_fuzz: int) -> dict:
    import httpx

    counts: dict[int, int] = {}
    worst = []
    rng = random.Random(0)
    cases = battery() + [(rng.choice(["/v1/retrieve", "/v1/answer", "/v1/graphs"]), "fuzz",
                          json.dumps(fuzz_body(rng)).encode()) for _ in range(n_fuzz)]
    with httpx.Client(headers={**AUTH, "content-type": "application/json"}, timeout=60, trust_env=False) as c:
        for path, label, body in cases:
            r = c.post(url + path, content=body)
            counts[r.status_code] = counts.get(r.status_code, 0) + 1
            if r.status_code >= 500:
                worst.append((path, label, r.status_code, r.text[:200]))
    return {"cases": len(cases), "battery": len(battery()), "counts": dict(sorted(counts.items())),
            "5xx": sum(v for k, v in counts.items() if k >= 500), "examples": worst[:3]}


# ----------------------------------------------------------------------------- 2. unauthenticated big bodies
def big_bodies(url: str, pid: int, n: int, mb: int) -> dict:
    before = rss_mb(pid)
    statuses: list[int] = []
    lock = threading.Lock()
    payload = b"x" * (mb * 2 ** 20)

    def one() -> None:
        with socket.create_connection((HOST, port_of(url)), timeout=30) as s:
            s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(payload))
            try:
                s.sendall(payload)
            except OSError:  # the server answered and closed before the body was all sent
                pass
            try:
                reply = s.recv(4096)
            except OSError:
                reply = b""
        with lock:
            statuses.append(int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else 0)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(n)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    return {"n": n, "mb": mb, "401": statuses.count(401), "other": [s for s in statuses if s != 401],
            "seconds": time.perf_counter() - t0, "rss_before": before, "rss_after": rss_mb(pid)}


# ----------------------------------------------------------------------------- 3. slow clients
def slow_clients(url: str, n: int, deadline_s: float) -> dict:
    socks = []
    for i in range(n):
        s = socket.create_connection((HOST, port_of(url)), timeout=10)
        if i % 2:  # headers never finished
            s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: x\r\n")
        else:  # half a body
            s.sendall(b"POST /v1/graphs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                      b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"graph\": ")
        socks.append(s)
    t0 = time.perf_counter()
    dropped: dict[int, float] = {}
    while len(dropped) < n and time.perf_counter() - t0 < deadline_s + 2:
        ready, _, _ = select.select([s for i, s in enumerate(socks) if i not in dropped], [], [], 0.2)
        for s in ready:
            i = socks.index(s)
            try:
                while s.recv(65536):
                    pass
            except OSError:
                pass
            dropped[i] = time.perf_counter() - t0
    for s in socks:
        s.close()
    times = list(dropped.values())
    return {"n": n, "dropped": len(dropped), "max_s": max(times) if times else float("nan"),
            "window_s": deadline_s + 2}


# ----------------------------------------------------------------------------- 4. retrieve during an upload
def big_graph(nodes: int, edges: int) -> dict:
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)
    rel = [f"relation {i % 50}" for i in range(edges)]
    return {"nodes": [f"entity {i} of the big graph" for i in range(nodes)],
            "edges": [[int(a), int(b), r] for a, b, r in zip(src, dst, rel)]}


def retrieve_during_upload(url: str, n_idle: int, nodes: int, edges: int) -> dict:
    from toporag_core.serve.client import CoreClient
    from toporag_core.io import samples

    small = samples.load_sample("kg")
    with CoreClient(url, token=TOKEN, timeout=300) as c:
        c.upload(small)

        def timed(i: int) -> float:
            t = time.perf_counter()
            c.retrieve(small, f"Which element did Marie Curie discover? ({i})")  # a new question: encoded
            return time.perf_counter() - t
        idle = [timed(i) for i in range(n_idle)]
        graph = big_graph(nodes, edges)
        t0 = time.perf_counter()
        job = c.request("POST", "/v1/graphs", {"graph": graph})
        post_s = time.perf_counter() - t0
        busy, i = [], 0
        while c.job(job["job_id"])["status"] in ("queued", "running") and i < 500:
            busy.append(timed(10_000 + i))
            i += 1
        done = c.wait_job(c.job(job["job_id"]))
        upload_s = time.perf_counter() - t0
    return {"idle": percentiles(idle), "busy": percentiles(busy), "n_busy": len(busy), "post_s": post_s,
            "upload_s": upload_s, "cells2": done["cells2"], "nodes": nodes, "edges": edges}


# ----------------------------------------------------------------------------- 5. answer throughput
def answer_level(url: str, pid: int, jobs, clients: int, seconds: float, max_requests: int, timeout: float,
                 order=None) -> dict:
    """``clients`` threads sending answers for ``seconds`` (at most ``max_requests``); each request
    takes the next job of ``order`` (an iterator of indices into ``jobs`` shared by the levels of
    one server, so a "distinct" workload never repeats a request)."""
    from toporag_core.serve.client import CoreClient, CoreError

    lat, batch, errors = [], [], []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds
    count = iter(range(max_requests))
    order = itertools.count() if order is None else order

    def client(i: int) -> None:
        with CoreClient(url, token=TOKEN, timeout=timeout) as c:
            while time.perf_counter() < deadline and next(count, None) is not None:
                g, q = jobs[next(order) % len(jobs)]
                t = time.perf_counter()
                try:
                    r = c.answer(g, q, max_new_tokens=16)
                except CoreError as e:
                    with lock:
                        errors.append(str(e))
                    continue
                with lock:
                    lat.append(time.perf_counter() - t)
                    batch.append(int(r["batch_size"]))

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    [t.start() for t in threads]
    [t.join(seconds + timeout + 30) for t in threads]
    wall = time.perf_counter() - t0
    return {"clients": clients, "requests": len(lat), "rps": len(lat) / wall, "p": percentiles(lat),
            "errors": len(errors), "batch": float(np.mean(batch)) if batch else float("nan"), "rss": rss_mb(pid),
            "first_error": errors[:1], "load": (load0, os.getloadavg()[0])}


def answer_config(checkpoint: str, env: dict, extra: list[str], jobs, args, root: Path = ROOT,
                  label: str | None = None) -> dict:
    """One answer server (``extra`` options, the code of ``root``): the ``--levels``, then ``--repeat``
    more c1 / c16 pairs. ``jobs``: the workload (:func:`workload`); its first 6 are the warm-up."""
    from toporag_core.serve.client import CoreClient

    proc, url = start_server(checkpoint, env, extra, root)
    try:
        with CoreClient(url, token=TOKEN, timeout=args.timeout) as c:  # upload + warm up
            for g, q in jobs[:6]:
                c.answer(g, q, max_new_tokens=16)
            info = c.info()
        levels = [int(n) for n in args.levels.split(",")] + [1, 16] * args.repeat
        order = itertools.count(6)
        rows = [answer_level(url, proc.pid, jobs, n, args.seconds, args.max_requests, args.timeout, order)
                for n in levels]
        with CoreClient(url, token=TOKEN, timeout=args.timeout) as c:
            kv = c.info().get("kv_store")
    finally:
        proc.terminate()
        proc.wait(30)
    return {"desc": f"{info['checkpoint']} on {info['device']} ({info['dtype']})", "rows": rows,
            "workers": info["batching"].get("workers", 1), "options": label or " ".join(extra) or "default",
            "kv": kv, "sent": next(order) - 6}


def pair_ratios(rows: list[dict]) -> list[float]:
    """c16 / c1 of each c1 run and the next c16 run after it (the same server)."""
    out, c1 = [], None
    for r in rows:
        if r["clients"] == 1:
            c1 = r["rps"]
        elif r["clients"] == 16 and c1:
            out.append(r["rps"] / c1)
            c1 = None
    return out


def workload(distinct: int = 0):
    """The answer requests: the 6 sample (graph, question) pairs, cycled by the clients
    (``distinct=0``: "repeated", 6 contexts, which a context cache holds after the warm-up), or
    ``distinct`` rounds of them over graph variants whose node texts carry the round number
    (``"cup (r17)"``): every request a new graph and so a new context ("distinct", nothing to reuse;
    each variant is embedded when first sent, inline)."""
    from toporag_core.graph import TextualGraph
    from toporag_core.io import samples

    graphs = {k: samples.load_sample(k) for k in QUESTIONS}
    base = [(graphs[k], q) for k in QUESTIONS for q in QUESTIONS[k]]
    if not distinct:
        return base
    return [(TextualGraph([f"{t} (r{r})" for t in g.node_text], g.edge_index, g.edge_text, name=g.name), q)
            for r in range(distinct) for g, q in base]


def decode_profile(checkpoint: str, jobs, sizes=(1, 16)) -> list[dict]:
    """Where an answer's neural time goes, one row against a batch (in process, torch on one thread,
    the service's default on 2 cores; best of 2 for one row, 1 for a batch), seconds per row of:

    * ``frozen``: the frozen part's pass (chat prefix + context, :func:`~toporag_core.model.frozen_kv.context_kv`;
      cacheable layouts only);
    * ``two_pass``: tail + label scoring as before this change (``prompt_pass``, then the candidates as
      ``B x C`` rows over a repeated cache), from precomputed frozen caches;
    * ``fused``: the same scores in one pass (:func:`~toporag_core.model.decode.score_choices` without
      a prompt), from precomputed frozen caches;
    * ``decode``: the whole ``TopoRAGPipeline.decode`` without a context store (every frozen part
      computed) and ``decode_warm`` with a warm :class:`~toporag_core.model.FrozenKVStore`."""
    import torch

    from toporag_core.model import FrozenKVStore, QABatch
    from toporag_core.model.frozen_kv import context_kv
    from toporag_core.nn import collate, subcomplex_tensors
    from toporag_core.answering.pipeline import DecodeJob, TopoRAGPipeline
    from toporag_core.retrieval import EmbeddedComplex, retrieve

    torch.set_num_threads(1)
    pipe = TopoRAGPipeline.load(checkpoint, device="cpu")
    m, setting = pipe.model, pipe.default_setting()
    djobs = []
    for g, q in jobs[:6]:
        ecx = EmbeddedComplex.from_graph(g, pipe.encoder)
        sub = retrieve(ecx, q, setting=setting)
        question = pipe.prompt_for(q)
        djobs.append(DecodeJob(sub, ecx, question, pipe.fit_context(sub, question).text, pipe.choices_for(question)))

    def best(fn, n: int) -> float:
        out = float("inf")
        for _ in range(n):
            t = time.perf_counter()
            fn()
            out = min(out, time.perf_counter() - t)
        return out

    rows = []
    for b in sizes:
        n = 2 if b == 1 else 1
        part = [djobs[i % len(djobs)] for i in range(b)]
        cands = part[0].choices or ("yes", "no")
        qs, cs = [j.question for j in part], [j.context for j in part]
        with torch.no_grad():
            soft = m.graph_tokens(collate([subcomplex_tensors(j.sub, j.ecx.emb, use_cells2=pipe.use_cells2)
                                           for j in part])) if m.config.use_graph else None
            row = {"b": b, "frozen": float("nan"), "two_pass": float("nan"), "fused": float("nan")}
            if m.cacheable:
                row["frozen"] = best(lambda: context_kv(m, QABatch(None, qs, cs)), n) / b
                kvs = context_kv(m, QABatch(None, qs, cs))
                row["two_pass"] = best(lambda: m.score_choices(QABatch(None, qs, cs, kv=kvs), cands, prompt=m.prompt_pass(
                    QABatch(None, qs, cs, kv=kvs), soft)), n) / b
                row["fused"] = best(lambda: m.score_choices(QABatch(None, qs, cs, kv=kvs), cands, soft=soft), n) / b
        pipe.kv_store = None
        row["decode"] = best(lambda: pipe.decode(part, max_new_tokens=16), n) / b
        pipe.kv_store = FrozenKVStore()
        pipe.decode(part, max_new_tokens=16)
        row["decode_warm"] = best(lambda: pipe.decode(part, max_new_tokens=16), n) / b
        row["load"] = os.getloadavg()[0]
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- report
def report_answers(configs: list[dict]) -> None:
    print(f"\n### 5. Answer throughput ({configs[0]['desc']})\n")
    print("| workload | server | workers | concurrency | requests | req/s | p50 ms | p95 ms | p99 ms | errors | "
          "mean batch | server RSS MB | load avg start -> end |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cfg in configs:
        for r in cfg["rows"]:
            print(f"| {cfg['workload']} | {cfg['options']} | {cfg['workers']} | {r['clients']} | {r['requests']} | "
                  f"{r['rps']:.2f} | {r['p'][0]:.0f} | {r['p'][1]:.0f} | {r['p'][2]:.0f} | {r['errors']} | "
                  f"{r['batch']:.2f} | {r['rss']:.0f} | {r['load'][0]:.1f} -> {r['load'][1]:.1f} |")
    print("\n| workload | server | req/s c16 / c1 of each pair (same server) | context store hits / misses / "
          "shared in a batch |\n|---|---|---|---|")
    for cfg in configs:
        kv = cfg.get("kv")
        kvs = f"{kv['hits']} / {kv['misses']} / {kv['shared_in_batch']}" if kv else "off"
        print(f"| {cfg['workload']} | {cfg['options']} | {', '.join(f'{x:.2f}' for x in pair_ratios(cfg['rows']))} "
              f"| {kvs} |")
    for cfg in configs:
        for r in cfg["rows"]:
            if r["first_error"]:
                print(f"first error ({cfg['workload']}, {cfg['options']}, c{r['clients']}): {r['first_error'][0]}")


def report_profile(profile: list[dict]) -> None:
    print("\n### 6. Where the neural time goes (in process, torch 1 thread; seconds per row)\n")
    print("| rows per call | frozen part (prefix + context) | tail + scoring, two passes (before) | "
          "tail + scoring, one fused pass | decode, no context store | decode, warm context store | load avg |")
    print("|---|---|---|---|---|---|---|")
    for r in profile:
        print(f"| {r['b']} | {r['frozen']:.3f} | {r['two_pass']:.3f} | {r['fused']:.3f} | {r['decode']:.3f} | "
              f"{r['decode_warm']:.3f} | {r['load']:.1f} |")
    if len(profile) > 1:
        a, b = profile[0], profile[-1]
        print(f"\nper-row cost, {b['b']} rows against 1: frozen {b['frozen'] / a['frozen']:.2f}, fused tail + "
              f"scoring {b['fused'] / a['fused']:.2f}, decode without store {b['decode'] / a['decode']:.2f}, "
              f"with a warm store {b['decode_warm'] / a['decode_warm']:.2f}")


def report(bad, big, slow, upl, args) -> None:
    print("\n### 1. Bad-input battery and fuzz\n")
    print("| cases (battery + fuzz) | status counts | 5xx |\n|---|---|---|")
    print(f"| {bad['cases']} ({bad['battery']} + {bad['cases'] - bad['battery']}) | "
          f"{', '.join(f'{k}: {v}' for k, v in bad['counts'].items())} | {bad['5xx']} |")
    for e in bad["examples"]:
        print(f"5xx example: {e}")
    print(f"\n### 2. Unauthenticated {big['mb']} MB bodies, {big['n']} at once\n")
    print("| requests | 401 | other | seconds | server RSS before MB | after MB |\n|---|---|---|---|---|---|")
    print(f"| {big['n']} | {big['401']} | {big['other'] or '-'} | {big['seconds']:.2f} | {big['rss_before']:.0f} | "
          f"{big['rss_after']:.0f} |")
    print(f"\n### 3. Half-sent requests (header and body deadlines {args.deadline:g} s)\n")
    print("| connections | dropped by the server | last dropped after s | window s |\n|---|---|---|---|")
    print(f"| {slow['n']} | {slow['dropped']} | {slow['max_s']:.2f} | {slow['window_s']:.0f} |")
    print(f"\n### 4. Retrieve on a cached graph during a {upl['nodes']:,}-node / {upl['edges']:,}-edge upload "
          "(hashing encoder)\n")
    print("| when | retrieves | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|")
    print(f"| idle | {args.idle} | {upl['idle'][0]:.1f} | {upl['idle'][1]:.1f} | {upl['idle'][2]:.1f} |")
    print(f"| during the upload | {upl['n_busy']} | {upl['busy'][0]:.1f} | {upl['busy'][1]:.1f} | {upl['busy'][2]:.1f} |")
    print(f"\nupload POST answered in {upl['post_s'] * 1000:.0f} ms (202, job id); embedded in {upl['upload_s']:.1f} s; "
          f"p50 ratio during/idle = {upl['busy'][0] / upl['idle'][0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="answers with the random 2-layer test Llama + hashing")
    ap.add_argument("--checkpoint", default=str(ROOT / "assets" / "checkpoints" / "expla_graphs"))
    ap.add_argument("--fuzz", type=int, default=300)
    ap.add_argument("--big-bodies", type=int, default=8)
    ap.add_argument("--big-mb", type=int, default=15)
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--deadline", type=float, default=3.0, help="header and body deadline of the abuse server (s)")
    ap.add_argument("--idle", type=int, default=20, help="idle retrieves (the reference latency)")
    ap.add_argument("--upload-nodes", type=int, default=20_000)
    ap.add_argument("--upload-edges", type=int, default=100_000)
    ap.add_argument("--levels", default="1,4,16,64")
    ap.add_argument("--seconds", type=float, default=15.0, help="time bound of one concurrency level")
    ap.add_argument("--max-requests", type=int, default=400, help="request bound of one concurrency level")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--repeat", type=int, default=1, help="more c1 / c16 pairs after the levels, per server")
    ap.add_argument("--answer-configs", default="default;--kv-cache-mb 0",
                    help="answer servers to compare, ';'-separated extra toporag serve options (default: none)")
    ap.add_argument("--only-answers", action="store_true", help="tables 5 (and 6 unless --no-profile) only")
    ap.add_argument("--workloads", default="repeated,distinct",
                    help="answer workloads: repeated (6 sample requests cycled), distinct (every request a new "
                         "graph variant, so a new context)")
    ap.add_argument("--baseline-root", default=None,
                    help="another checkout (the code before a change): its server runs first in every workload")
    ap.add_argument("--baseline-label", default="before", help="the baseline server's name in the tables")
    ap.add_argument("--no-profile", dest="profile", action="store_false", help="skip the decode profile")
    args = ap.parse_args()

    from toporag_core.model.tiny import build_tiny_checkpoint

    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    tiny = str(build_tiny_checkpoint(tmp / "tiny"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOPORAG_CACHE": str(tmp / "cache")}
    hashing_env = {**env, "TOPORAG_ENCODER": "hashing"}
    print(f"{os.cpu_count()} CPU cores; every address 127.0.0.1; load average at the start "
          f"{os.getloadavg()[0]:.1f}.", flush=True)
    if not args.only_answers:
        abuse(tiny, hashing_env, args)

    checkpoint = tiny if args.tiny else args.checkpoint
    answer_env = hashing_env if args.tiny else {k: v for k, v in env.items() if k != "TOPORAG_CACHE"}
    if args.tiny:
        os.environ["TOPORAG_ENCODER"] = "hashing"
    configs = []
    for name in args.workloads.split(","):
        jobs = workload(distinct=120 if name == "distinct" else 0)
        runs = [(ROOT, c, None) for c in args.answer_configs.split(";")]
        if args.baseline_root:
            root = Path(args.baseline_root).resolve()
            runs.insert(0, (root, "default", args.baseline_label))
        for root, c, label in runs:
            cfg = answer_config(checkpoint, answer_env, [] if c.strip() == "default" else c.split(), jobs, args,
                                root, label)
            configs.append({**cfg, "workload": name})
            print(f"done: {name} / {cfg['options']}: c16/c1 {pair_ratios(cfg['rows'])}", flush=True)
    report_answers(configs)
    if args.profile:
        report_profile(decode_profile(checkpoint, workload()))
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}.")


def abuse(tiny: str, hashing_env: dict, args) -> None:
    """Tables 1-4 against the abuse server (printed as soon as measured)."""
    proc, url = start_server(tiny, hashing_env, ["--header-timeout", str(args.deadline), "--body-timeout",
                                                 str(args.deadline), "--max-nodes", str(args.upload_nodes),
                                                 "--max-edges", str(args.upload_edges)])
    try:
        bad = bad_inputs(url, args.fuzz)
        big = big_bodies(url, proc.pid, args.big_bodies, args.big_mb)
        slow = slow_clients(url, args.slow, args.deadline)
        upl = retrieve_during_upload(url, args.idle, args.upload_nodes, args.upload_edges)
    finally:
        proc.terminate()
        proc.wait(30)
    report(bad, big, slow, upl, args)


if __name__ == "__main__":
    main()
