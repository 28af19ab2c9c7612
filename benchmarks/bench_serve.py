"""Load test of the core service (``toporag serve``) on 127.0.0.1: throughput and latency with
dynamic batching on and off, against the in-process pipeline as the reference, in one run.

* **in-process (reference)**: ``TopoRAGPipeline.answer`` called back to back in this process on
  the same requests (one at a time: what one Streamlit session gets without a core);
* **serve, batching off / on**: a ``toporag serve`` subprocess (its own interpreter, as in
  production), ``--clients`` client threads each sending answer requests back to back for
  ``--seconds`` seconds (graphs uploaded once before, then named by hash), then the server is
  stopped. Every request has a deadline (``--timeout``); errors are counted, never waited on.

Columns: requests/s, p50/p95 latency (ms, per request, as a client sees it), errors, mean batch
size the core used, and ratios against the in-process reference (throughput x, p50 x).
Model: the committed ExplaGraphs checkpoint on the packaged SmolLM2-135M (``--checkpoint``,
``--device auto`` = CUDA + bf16 when present), or ``--tiny`` (the random 2-layer test Llama).

    .venv/bin/python benchmarks/bench_serve.py [--clients 8] [--seconds 30] [--max-new-tokens 16] [--tiny]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
ROOT = Path(__file__).resolve().parents[1]

QUESTIONS = {"scene": ["What is the red cup made of?", "What is next to the plate?", "Where is the knife?",
                       "What is on the table?"],
             "kg": ["Which element did Marie Curie discover?", "Who was Pierre Curie married to?",
                    "Which prize did Marie Curie win?"],
             "argument": ["Do argument 1 and argument 2 support or counter each other?"]}


def workload():
    from toporag_core.studio import samples

    graphs = {k: samples.load_sample(k) for k in QUESTIONS}
    return [(graphs[k], q) for k in QUESTIONS for q in QUESTIONS[k]]


def start_server(args, checkpoint: str, batching: bool, env: dict) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "toporag_core.cli", "serve", "--port", "0", "--device", args.device,
           "--checkpoint", checkpoint, "--max-batch", str(args.max_batch), "--batch-wait-ms", str(args.wait_ms)]
    if not batching:
        cmd.append("--no-batching")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    t0, lines = time.time(), []
    while time.time() - t0 < 300:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("toporag serve: listening on "):
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep draining its output
            return proc, line.split()[-1]
    proc.kill()
    raise RuntimeError("the server did not start:\n" + "".join(lines[-20:]))


def load_test(url: str, jobs, setting, args) -> dict:
    from toporag_core.serve.client import CoreClient, CoreError

    with CoreClient(url, timeout=args.timeout) as c:  # upload every graph once, warm up
        for g, q in jobs:
            c.answer(g, q, setting, max_new_tokens=args.max_new_tokens)
    lat: list[float] = []
    batch: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + args.seconds

    def client(i: int) -> None:
        with CoreClient(url, timeout=args.timeout) as c:
            k = i
            while time.perf_counter() < deadline:
                g, q = jobs[k % len(jobs)]
                k += 1
                t = time.perf_counter()
                try:
                    r = c.answer(g, q, setting, max_new_tokens=args.max_new_tokens)
                except CoreError as e:
                    with lock:
                        errors.append(str(e))
                    continue
                with lock:
                    lat.append(time.perf_counter() - t)
                    batch.append(int(r["batch_size"]))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    [t.start() for t in threads]
    [t.join(args.seconds + args.timeout + 30) for t in threads]
    wall = time.perf_counter() - t0
    return {"requests": len(lat), "rps": len(lat) / wall, "p50": np.percentile(lat, 50) * 1000 if lat else float("nan"),
            "p95": np.percentile(lat, 95) * 1000 if lat else float("nan"), "errors": len(errors),
            "batch": float(np.mean(batch)) if batch else float("nan"), "wall": wall, "first_error": errors[:1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--wait-ms", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=60.0, help="deadline of one request (s)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--checkpoint", default=str(ROOT / "assets" / "checkpoints" / "expla_graphs"))
    ap.add_argument("--tiny", action="store_true", help="the random 2-layer test Llama and the hashing encoder")
    ap.add_argument("--reference-requests", type=int, default=24)
    args = ap.parse_args()

    from toporag_core.pipeline import TopoRAGPipeline
    from toporag_core.retrieval import EmbeddedComplex

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    tmp = tempfile.mkdtemp(prefix="bench-serve-")
    checkpoint = args.checkpoint
    if args.tiny:
        from toporag_core.testing import build_tiny_checkpoint

        checkpoint = str(build_tiny_checkpoint(Path(tmp) / "tiny"))
        env["TOPORAG_ENCODER"] = os.environ["TOPORAG_ENCODER"] = "hashing"
    jobs = workload()

    # -- reference: the in-process pipeline, one request at a time
    pipe = TopoRAGPipeline.load(checkpoint, device=args.device)
    setting = pipe.default_setting()
    ecxs = {id(g): EmbeddedComplex.from_graph(g, pipe.encoder) for g, _ in jobs}
    for g, q in jobs:  # warm-up
        pipe.answer(ecxs[id(g)], q, setting, max_new_tokens=args.max_new_tokens)
    ref_lat = []
    t0 = time.perf_counter()
    for i in range(args.reference_requests):
        g, q = jobs[i % len(jobs)]
        t = time.perf_counter()
        pipe.answer(ecxs[id(g)], q, setting, max_new_tokens=args.max_new_tokens)
        ref_lat.append(time.perf_counter() - t)
    ref = {"requests": len(ref_lat), "rps": len(ref_lat) / (time.perf_counter() - t0),
           "p50": np.percentile(ref_lat, 50) * 1000, "p95": np.percentile(ref_lat, 95) * 1000, "errors": 0,
           "batch": 1.0}
    desc = pipe.describe()
    del pipe, ecxs

    rows = [("in-process, 1 client (reference)", ref)]
    for batching in (False, True):
        proc, url = start_server(args, checkpoint, batching, env)
        try:
            rows.append((f"serve, batching {'on' if batching else 'off'}, {args.clients} clients",
                         load_test(url, jobs, setting, args)))
        finally:
            proc.terminate()
            proc.wait(30)

    print(f"\nModel: {desc['checkpoint']} (LLM {desc['llm']}) on {desc['device']} ({desc['dtype']}); "
          f"{len(jobs)} (graph, question) pairs round-robin; max_new_tokens {args.max_new_tokens}; "
          f"{args.clients} clients x {args.seconds:g} s per serve row; batching: max {args.max_batch}, "
          f"wait {args.wait_ms:g} ms; {os.cpu_count()} CPU cores.\n")
    print("| mode | requests | req/s | p50 ms | p95 ms | errors | mean batch | req/s vs in-process (x) "
          "| p50 vs in-process (x) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['requests']} | {r['rps']:.2f} | {r['p50']:.1f} | {r['p95']:.1f} | {r['errors']} | "
              f"{r['batch']:.2f} | {r['rps'] / ref['rps']:.2f} | {r['p50'] / ref['p50']:.2f} |")
    for name, r in rows:
        if r.get("first_error"):
            print(f"first error ({name}): {r['first_error'][0]}")


if __name__ == "__main__":
    main()
