"""Big and bad input: memory to reject big files, embedding throughput per backend, resume after a kill.

Three parts (``--only reject|backends|resume``; default all), each a Markdown table:

* **reject**: peak resident memory (``ru_maxrss`` of a fresh child process) of ``load_graph`` rejecting a
  60 MB and a 195 MB triples CSV / csv-pair / JSON list (over ``max_edges`` / ``max_nodes``), against the
  reference "the file's bytes + its decoded text" (what any non-streaming reader holds). Goal: < 300 MB.
* **backends**: texts/s of the packaged all-MiniLM-L6-v2 on one thread with the PyTorch backend
  (SentenceTransformer, the reference), ONNX Runtime fp32 and ONNX Runtime dynamic int8
  (:class:`toporag_core.embed.OnnxEncoder`), the cosine of each to the PyTorch vectors, and whether TopoRAG and
  G-Retriever retrieve the same cells on every WebQSP sample question. Adoption rule: >= 2x faster, min cosine
  >= 0.99 and retrieval unchanged.
* **resume**: a child process embeds N texts through :class:`~toporag_core.embed.CachedEncoder` and is
  killed (SIGKILL) when the progress callback passes 50%; a rerun encodes only what is missing.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import ROOT, SHARED

ORT_PATH = os.environ.get("TOPORAG_ORT_PATH", "")  # a --target folder holding onnxruntime, if not in the venv
MB = 1 << 20


def format_table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table of ``rows`` (lists of cells) under ``headers``."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


# --------------------------------------------------------------------------- reject: peak memory
def _child_peak(code: str) -> tuple[float, str]:
    """Run ``code`` in a fresh interpreter; (peak RSS in MB, its last output line)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code + "\nimport resource,sys\n"
                        "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"],
                       env=env, capture_output=True, text=True, timeout=900)
    lines = (r.stdout + r.stderr).strip().splitlines()
    peak = next((int(x.split()[1]) / 1024 for x in lines if x.startswith("PEAK")), float("nan"))
    return peak, next((x for x in lines if not x.startswith("PEAK")), "")


def _write_triples_csv(path: Path, size: int, unique_rel: bool) -> None:
    """~``size`` bytes of ``head,relation,tail`` rows over 50k node names (so max_edges, not max_nodes, trips)."""
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        f.write("head,relation,tail\n")
        written, i = 0, 0
        while written < size:
            a, b = rng.integers(0, 50_000, 2000), rng.integers(0, 50_000, 2000)
            rows = "".join(f"node {x},{'rel ' + str(i + j) if unique_rel else 'related to'},node {y}\n"
                           for j, (x, y) in enumerate(zip(a, b)))
            f.write(rows)
            written += len(rows)
            i += 2000


def _write_json_triples(path: Path, size: int) -> None:
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        f.write("[")
        written, first = 0, True
        while written < size:
            a, b = rng.integers(0, 50_000, 2000), rng.integers(0, 50_000, 2000)
            rows = ",".join(f'["node {x}","related to","node {y}"]' for x, y in zip(a, b))
            f.write(("" if first else ",") + rows)
            first = False
            written += len(rows)
        f.write("]")


def _write_nodes_csv(folder: Path, size: int) -> None:
    folder.mkdir(exist_ok=True)
    with open(folder / "nodes.csv", "w") as f:
        f.write("node_id,node_attr\n")
        written, i = 0, 0
        while written < size:
            rows = "".join(f"{j},a node named number {j} with some text\n" for j in range(i, i + 5000))
            f.write(rows)
            written += len(rows)
            i += 5000
    (folder / "edges.csv").write_text("src,edge_attr,dst\n0,r,1\n")


def bench_reject(tmp: Path) -> None:
    rows = []
    for mb in (60, 195):
        size = mb * 1_000_000
        cases = [("triples CSV, one relation", f"t{mb}.csv", lambda p, s=size: _write_triples_csv(p, s, False)),
                 ("triples CSV, unique relations", f"u{mb}.csv", lambda p, s=size: _write_triples_csv(p, s, True)),
                 ("csv-pair nodes.csv", f"pair{mb}", lambda p, s=size: _write_nodes_csv(p, s)),
                 ("triples JSON list", f"j{mb}.json", lambda p, s=size: _write_json_triples(p, s))]
        for label, name, write in cases:
            path = tmp / name
            write(path)
            nbytes = sum(f.stat().st_size for f in path.iterdir()) if path.is_dir() else path.stat().st_size
            base, _ = _child_peak("import toporag_core.io")
            code = ("import toporag_core.io as io\n"
                    f"try:\n    io.load_graph({str(path)!r}); print('loaded')\n"
                    "except Exception as e:\n    print(str(e)[:150])")
            peak, msg = _child_peak(code)
            upload = ("import toporag_core.io as io, pathlib\n"
                      f"data = pathlib.Path({str(path / 'nodes.csv') if path.is_dir() else str(path)!r}).read_bytes()\n"
                      f"try:\n    io.load_graph_from_bytes(data, {name!r}); print('loaded')\n"
                      "except Exception as e:\n    print(str(e)[:150])")
            upeak, _ = _child_peak(upload) if not path.is_dir() else (float("nan"), "")
            ref = 2 * nbytes / MB  # bytes + decoded str of a non-streaming reader, before any row is built
            rows.append([label, f"{nbytes / MB:.0f}", f"{base:.0f}", f"{peak:.0f}", f"{upeak:.0f}", f"{ref:.0f}",
                         f"{peak / ref:.2f}", "yes" if peak < 300 else "NO", msg[-90:]])
            if path.is_dir():
                for f in path.iterdir():
                    f.unlink()
                path.rmdir()
            else:
                path.unlink()
    print("### Peak memory to reject a big file (MB; goal < 300; reference = file bytes + decoded text)\n")
    print(format_table(["file", "MiB", "import only", "load_graph peak", "upload path peak", "reference",
                        "peak / ref", "< 300 MB", "message"], rows))


# --------------------------------------------------------------------------- backends: throughput, agreement
def _webqsp_graphs():
    from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph

    path = SHARED / "webqsp_sample.json"
    if not path.exists():
        return []
    return [webqsp_record_to_graph(r, file=str(path), record=i) for i, r in enumerate(read_webqsp(path))]


def bench_backends(n_texts: int) -> None:
    if ORT_PATH:
        sys.path.append(ORT_PATH)
    import torch

    torch.set_num_threads(1)
    from toporag_core.embed import CachedEncoder, OnnxEncoder, SentenceTransformerEncoder
    from toporag_core.retrieval import EmbeddedComplex, retrieve

    graphs = _webqsp_graphs()
    if not graphs:
        print("skipped backends: ../shared/data/webqsp_sample.json is absent")
        return
    texts = list(dict.fromkeys(t for g in graphs for t in g.node_text))[:n_texts]
    backends = [("pytorch fp32 (reference)", lambda: SentenceTransformerEncoder())]
    try:
        import onnxruntime  # noqa: F401
        backends += [("onnxruntime fp32", lambda: OnnxEncoder(threads=1)),
                     ("onnxruntime int8 (dynamic)", lambda: OnnxEncoder("int8", threads=1))]
    except ImportError as e:
        print(f"onnxruntime not importable: {e}")
    ref_vecs, ref_time, ref_sub = None, None, None
    rows = []
    for label, make in backends:
        enc = make()
        enc.encode(texts[:64])  # warm-up
        t = time.perf_counter()
        vecs = enc.encode(texts)
        secs = time.perf_counter() - t
        with tempfile.TemporaryDirectory() as d:
            cached = CachedEncoder(enc, d)
            subs = []
            for g in graphs:
                ecx = EmbeddedComplex.from_graph(g, cached)
                q = g.meta.get("question", "")
                subs.append([(tuple(s.nodes.tolist()), tuple(s.edges.tolist()), tuple(s.cells2.tolist()))
                             for s in (retrieve(ecx, q, "toporag", k0=3, k1=3, k2=3),
                                       retrieve(ecx, q, "g-retriever", k0=3, k1=3))])
        if ref_vecs is None:
            ref_vecs, ref_time, ref_sub = vecs, secs, subs
        cos = (vecs * ref_vecs).sum(1)
        same = sum(a == b for a, b in zip(subs, ref_sub))
        speed = ref_time / secs
        adopt = speed >= 2 and cos.min() >= 0.99 and same == len(graphs)
        rows.append([label, f"{len(texts) / secs:.0f}", f"{speed:.2f}", f"{cos.min():.4f}", f"{cos.mean():.4f}",
                     f"{same}/{len(graphs)}", "reference" if label.startswith("pytorch") else
                     ("adopt" if adopt else "keep PyTorch")])
    print(f"### Embedding throughput, all-MiniLM-L6-v2, 1 thread, {len(texts)} WebQSP node texts\n")
    print(format_table(["backend", "texts/s", "x PyTorch", "min cos", "mean cos",
                        "same TopoRAG+G-Retriever cells", "verdict"], rows))


# --------------------------------------------------------------------------- resume after kill -9 at 50%
_RESUME_CHILD = """
import os, signal, sys
from toporag_core.embed import CachedEncoder, get_encoder
texts = ["resume text number %d about item %d" % (i, i % 97) for i in range({n})]
def cb(done, total, eta):
    if {kill} and done >= total // 2:
        os.kill(os.getpid(), signal.SIGKILL)
enc = CachedEncoder(get_encoder({spec!r}, cached=False), {cache!r}, chunk_size={chunk})
enc.encode(texts, on_progress=cb)
print("ENCODED", enc.encoded_count)
"""


def bench_resume(n: int, spec: str, chunk: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter()
        r1 = subprocess.run([sys.executable, "-c", _RESUME_CHILD.format(n=n, kill=True, spec=spec, cache=cache,
                                                                       chunk=chunk)], env=env, capture_output=True)
        t1 = time.perf_counter() - t
        t = time.perf_counter()
        r2 = subprocess.run([sys.executable, "-c", _RESUME_CHILD.format(n=n, kill=False, spec=spec, cache=cache,
                                                                       chunk=chunk)], env=env, capture_output=True,
                            text=True)
        t2 = time.perf_counter() - t
        encoded = int(next(x.split()[1] for x in r2.stdout.splitlines() if x.startswith("ENCODED")))
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", _RESUME_CHILD.format(n=n, kill=False, spec=spec, cache=cache,
                                                                   chunk=chunk)], env=env, capture_output=True)
        t3 = time.perf_counter() - t
    rows = [["run 1, SIGKILL at 50%", f"{-r1.returncode}" if r1.returncode < 0 else str(r1.returncode), "-",
             f"{t1:.1f}"],
            ["run 2 (resume)", str(r2.returncode), f"{encoded} ({encoded / n:.0%}; ideal <= {1 - (n // 2 // chunk * chunk) / n:.0%})",
             f"{t2:.1f}"],
            ["run 3 (all cached)", "0", "0", f"{t3:.1f}"]]
    print(f"### Resume after kill -9 at 50%: {n} texts, encoder {spec}, chunk {chunk}\n")
    print(format_table(["run", "exit / signal", "texts encoded", "seconds"], rows))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("reject", "backends", "resume"), default=None)
    ap.add_argument("--texts", type=int, default=2000, help="texts for the throughput table")
    ap.add_argument("--resume-n", type=int, default=20000)
    ap.add_argument("--resume-encoder", default="hashing")
    args = ap.parse_args()
    if args.only in (None, "reject"):
        with tempfile.TemporaryDirectory() as d:
            bench_reject(Path(d))
        print()
    if args.only in (None, "backends"):
        bench_backends(args.texts)
        print()
    if args.only in (None, "resume"):
        bench_resume(args.resume_n, args.resume_encoder, 2000)


if __name__ == "__main__":
    main()
