"""Benchmark: proximity and GraphWave role embeddings on the 12 WebQSP sample subgraphs.

For each graph (1-2K nodes) it measures wall time and peak traced memory (tracemalloc:
numpy/scipy buffers; LAPACK's internal workspace is not traced) of

* proximity, sparse ``K`` sparse-dense products (ours) vs the named reference
  **dense matrix powers** (``Ahat^k`` formed densely, then ``@ R``), same ``R``;
* role, GraphWave with **Chebyshev** heat kernels in column blocks (ours) vs the named
  reference **exact eigendecomposition** (``numpy.linalg.eigh``), same scales;
* the top-K dictionary built from each embedding (``TopoNodeIndex``, K=20);

and checks that each pair agrees (max abs difference). Prints a table with the ratio
reference / ours; asserts nothing about time.

Usage: ``python benchmarks/bench_topo.py [--graphs 12] [--data PATH]``
(data: ``$TOPORAG_SHARED_DATA`` or ``../shared/data`` next to the repository).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from toporag_core.graph import TextualGraph
from toporag_core.topo.proximity import default_alpha, graph_adjacency, proximity_embedding, row_normalized
from toporag_core.topo.retriever import _top_k
from toporag_core.topo.role import graphwave_scales, role_embedding


def measure(fn):
    """``(result, seconds, peak MiB)`` of one call."""
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    sec = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return out, sec, peak


def proximity_dense_reference(adj, K: int = 3, d: int = 64, seed: int = 0) -> np.ndarray:
    """The textbook formula: dense ``Ahat^k`` for each ``k``, then ``sum_k alpha_k Ahat^k R``."""
    ahat = row_normalized(adj).toarray()
    r = np.random.default_rng(seed).standard_normal((adj.shape[0], d)) / np.sqrt(d)
    power, total = np.eye(adj.shape[0]), np.zeros((adj.shape[0], adj.shape[0]))
    for w in default_alpha(K):
        power = power @ ahat
        total += w * power
    return total @ r


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("TOPORAG_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=12, help="how many WebQSP graphs (default all 12)")
    ap.add_argument("--data", default=None, help="folder holding webqsp_sample.json")
    args = ap.parse_args(argv)
    path = data_dir(args.data) / "webqsp_sample.json"
    if not path.exists():
        print(f"skipped: {path} not found (set TOPORAG_SHARED_DATA)")
        return 0
    records = json.loads(path.read_text())[: args.graphs]

    rows = []
    hdr = (f"{'graph':>5} {'N':>5} {'E':>5} | {'prox ms':>8} {'dense ms':>9} {'x':>6} {'MiB':>5} {'dMiB':>6} "
           f"{'|d|':>7} | {'cheb s':>7} {'eigh s':>7} {'x':>5} {'MiB':>5} {'eMiB':>6} {'|d|':>7} | "
           f"{'topK p ms':>9} {'topK r ms':>9}")
    print(hdr)
    print("-" * len(hdr))
    for gi, rec in enumerate(records):
        graph = TextualGraph.from_triples(rec["edges"], name=str(rec.get("id", gi)))
        adj = graph_adjacency(graph)
        p, tp, mp = measure(lambda: proximity_embedding(adj))
        pd_, tpd, mpd = measure(lambda: proximity_dense_reference(adj))
        scales = graphwave_scales(adj)  # shared, so both role variants compute the same thing
        rc, trc, mrc = measure(lambda: role_embedding(adj, scales=scales, method="chebyshev"))
        re_, tre, mre = measure(lambda: role_embedding(adj, scales=scales, method="exact"))
        unit = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-300)
        _, tkp, _ = measure(lambda: _top_k("proximity", unit, 20, 0))
        _, tkr, _ = measure(lambda: _top_k("role", rc, 20, 0))
        row = dict(N=graph.num_nodes, E=int(adj.nnz // 2), tp=tp, tpd=tpd, mp=mp, mpd=mpd,
                   dp=float(np.abs(p - pd_).max()), trc=trc, tre=tre, mrc=mrc, mre=mre,
                   dr=float(np.abs(rc - re_).max()), tkp=tkp, tkr=tkr)
        rows.append(row)
        print(f"{gi:>5} {row['N']:>5} {row['E']:>5} | {tp * 1e3:>8.1f} {tpd * 1e3:>9.1f} {tpd / tp:>6.0f} {mp:>5.1f} "
              f"{mpd:>6.1f} {row['dp']:>7.1e} | {trc:>7.2f} {tre:>7.2f} {tre / trc:>5.1f} {mrc:>5.1f} {mre:>6.1f} "
              f"{row['dr']:>7.1e} | {tkp * 1e3:>9.1f} {tkr * 1e3:>9.1f}", flush=True)
    print("-" * len(hdr))
    for name, agg in [("median", statistics.median), ("max", max)]:
        a = {k: agg([r[k] for r in rows]) for k in rows[0]}
        ratio_p = agg([r["tpd"] / r["tp"] for r in rows])
        ratio_r = agg([r["tre"] / r["trc"] for r in rows])
        print(f"{name:>5} {a['N']:>5.0f} {a['E']:>5.0f} | {a['tp'] * 1e3:>8.1f} {a['tpd'] * 1e3:>9.1f} {ratio_p:>6.0f} "
              f"{a['mp']:>5.1f} {a['mpd']:>6.1f} {a['dp']:>7.1e} | {a['trc']:>7.2f} {a['tre']:>7.2f} {ratio_r:>5.1f} "
              f"{a['mrc']:>5.1f} {a['mre']:>6.1f} {a['dr']:>7.1e} | {a['tkp'] * 1e3:>9.1f} {a['tkr'] * 1e3:>9.1f}")
    print("\nprox: sparse products (ours) vs dense Ahat^k reference; x = reference time / ours.")
    print("cheb: GraphWave with Chebyshev heat kernels in column blocks (ours) vs exact eigh reference; x = eigh / cheb.")
    print("|d|: max abs difference between ours and the reference; MiB: tracemalloc peak.")
    print("topK: building the K=20 dictionary from the embedding (proximity / role).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
