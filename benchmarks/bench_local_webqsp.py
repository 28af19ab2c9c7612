"""Answer recall of ``toporag-local`` against exact ``toporag`` on the 12 real WebQSP questions (issue 17).

The WebQSP graphs are small (below ``LOCAL_MIN_NODES``), so ``index=auto`` would run the exact path
unchanged; here the local path is forced (``index=flat``: exact prizes + PCST on the hop
neighbourhood; ``index=ivf``: approximate 0-cells from a faiss IVF index) to measure what it changes.
Answer recall = share of questions with a gold answer among the retrieved node texts, after
``metrics.normalize`` (:func:`~toporag_core.retrieval.report.answer_found`). Reference: exact
``toporag`` on the same embeddings, same run; ``same_subcomplex`` counts questions whose retrieved
nodes, 1-cells and 2-cells are identical to the reference's.

    python benchmarks/bench_local_webqsp.py [--encoder default|hashing] [--c2 0.5]
"""
from __future__ import annotations

import argparse

import numpy as np
from _common import webqsp_items

from toporag_core.embed import get_encoder
from toporag_core.retrieval import retrieve
from toporag_core.retrieval.report import answer_found, format_table


def same(a, b) -> bool:
    return (np.array_equal(a.nodes, b.nodes) and np.array_equal(a.edges, b.edges)
            and np.array_equal(a.cells2, b.cells2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", default="default")
    ap.add_argument("--c2", type=float, default=0.5)
    args = ap.parse_args()
    enc = get_encoder(args.encoder)
    items = [(it.ecx, it.q_vec, it.answers) for it in webqsp_items(enc)]
    variants = [("toporag", "-", {}), ("toporag-local", "flat", {"index": "flat"}),
                ("toporag-local", "ivf", {"index": "ivf"})]
    rows = []
    for k in (1, 2, 3):
        ref, ref_recall = None, None
        for method, index, extra in variants:
            subs, found, ms = [], [], []
            for ecx, q, answers in items:
                retrieve(ecx, q, method, k0=k, k1=k, k2=k, c2=args.c2, **extra)  # warm (index build)
                sub = retrieve(ecx, q, method, k0=k, k1=k, k2=k, c2=args.c2, **extra)
                subs.append(sub)
                found.append(answer_found(sub.node_texts(), answers)[0])
                ms.append(sub.timings.get("total", 0.0) * 1000)
            recall = float(np.mean(found))
            if ref is None:
                ref, ref_recall = subs, recall
            rows.append({"method": method, "index": index, "k": k, "questions": len(items),
                         "answer_recall": recall, "recall_diff_vs_toporag": recall - ref_recall,
                         "same_subcomplex": f"{sum(same(a, b) for a, b in zip(ref, subs))}/{len(items)}",
                         "median_ms": float(np.median(ms))})
    print(f"WebQSP sample, encoder {enc.name}, c2={args.c2}; reference: exact toporag (same run)\n")
    print(format_table(rows))


if __name__ == "__main__":
    main()
