"""Hybrid text-and-table retrieval on the generated fact-store corpus (issue 14).

Prints Markdown tables: router per-line F1, nDCG@10 / Recall@10 per question type against naive
flattening, parent-child chunking and BM25 (measured in the same run, same encoder), the seed
paper's own table for reference (different data), the table-width sweep (5..50 columns), index
reduction (size and nDCG) and median retrieval time.

    python benchmarks/bench_hybrid.py [--n-docs 400] [--n-questions 150] [--encoder default] [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toporag_core.datagen.hybrid_width import generate_width_corpus  # noqa: E402
from toporag_core.datagen.hybrid import GeneratorConfig, generate  # noqa: E402
from toporag_core.embed import get_encoder, single_thread_blas  # noqa: E402
from toporag_core.hybrid import HybridIndex, ReductionConfig, SearchConfig  # noqa: E402
from toporag_core.hybrid.evaluate import (  # noqa: E402
    Baselines,
    evaluate,
    hybrid_ranking,
    parse_corpus,
    router_f1,
    standard_rankers,
    summarize,
)

SEED_TABLE = {"Naive": (0.882, 0.451, 0.410, 0.581), "Topo-RAG": (0.891, 0.842, 0.796, 0.843)}


def md(rows: list[dict], cols: list[str]) -> str:
    def f(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
                     + ["| " + " | ".join(f(r[c]) for c in cols) + " |" for r in rows])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-docs", type=int, default=400)
    ap.add_argument("--n-questions", type=int, default=150)
    ap.add_argument("--encoder", default=None)
    ap.add_argument("--split", default="test", choices=("test", "val", "all"))
    ap.add_argument("--widths", default="5,10,20,30,40,50")
    ap.add_argument("--width-tables", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="small corpus, hashing encoder (smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.n_docs, args.n_questions, args.encoder, args.widths, args.width_tables = 60, 15, "hashing", "5,50", 8
    enc = get_encoder(args.encoder)
    print(f"encoder: {enc.name}; corpus: n_docs={args.n_docs}, n_questions={args.n_questions}, seed=0; "
          f"questions of split {args.split!r}; CPU threads: {os.cpu_count()}\n")

    ds = generate(GeneratorConfig(n_docs=args.n_docs, n_questions=args.n_questions, seed=0))
    # -- router
    rows = []
    for tau in (0.3, 0.4, 0.5):
        from toporag_core.hybrid import RouterConfig

        for kinds, name in ((("mixed",), "mixed"), (("mixed", "table", "narrative"), "all")):
            r = router_f1(ds, kinds, RouterConfig(tau=tau))
            rows.append({"tau": tau, "documents": name, "lines": r["lines"], "precision": r["precision"],
                         "recall": r["recall"], "f1": r["f1"]})
    print("### Router: per-line F1 (structured = table line), goal F1 >= 0.95 on mixed documents at tau = 0.4\n")
    print(md(rows, ["tau", "documents", "lines", "precision", "recall", "f1"]) + "\n")

    # -- retrieval quality
    t = time.perf_counter()
    docs = parse_corpus(ds)
    units = [u for d in docs for u in d.units]
    idx = HybridIndex.build(docs, enc)
    idx_tag = HybridIndex.build(docs, enc, row_tag=True)
    base = Baselines.build(units, enc)
    build_s = time.perf_counter() - t
    qs = [q for q in ds.questions if args.split == "all" or q["split"] == args.split]
    w = "weighted"  # the two-route fusion these tables measure; the linear BM25+dense+CALI fusion is in
    # benchmarks/bench_hybrid_tatqa.py (weights fitted on real tables)
    variants = {"hybrid (row-aware, weighted fusion)": (idx, SearchConfig(fusion=w)),
                "hybrid, linear fusion (TAT-QA-fitted defaults)": (idx, SearchConfig()),
                "hybrid, plain MaxSim": (idx, SearchConfig(table_score="maxsim", fusion=w)),
                "hybrid, [ROW] tag + MaxSim": (idx_tag, SearchConfig(table_score="maxsim", fusion=w)),
                "hybrid, [ROW] tag + row-aware": (idx_tag, SearchConfig(fusion=w)),
                "hybrid, plain min-max fusion": (idx, SearchConfig(fusion="minmax")),
                "table route only (row-aware)": (idx, SearchConfig(route="table"))}
    rankers = standard_rankers(idx, base, 10, variants)
    with single_thread_blas():
        per_q = evaluate(qs, rankers, units, 10)
    table = summarize(per_q, list(rankers))
    naive = table[0]
    for r in table:
        for tt in ("A", "B", "C", "all"):
            r[f"dN_{tt}"] = r[f"ndcg_{tt}"] - naive[f"ndcg_{tt}"]
    per_type = ", ".join(f"{t}: {sum(q['type'] == t for q in qs)}" for t in "ABC")
    print(f"### Retrieval, {len(qs)} questions ({per_type}),"
          f" {len(units)} units ({int(idx.narr_idx.size)} narrative, {int(idx.table_idx.size)} tables); "
          f"index + baselines built in {build_s:.0f} s\n")
    print("nDCG@10 (dN = difference to naive flattening, same encoder, same run):\n")
    print(md(table, ["method", "ndcg_A", "ndcg_B", "ndcg_C", "ndcg_all", "dN_A", "dN_B", "dN_C"]) + "\n")
    print("Recall@10:\n")
    print(md(table, ["method", "recall_A", "recall_B", "recall_C", "recall_all"]) + "\n")
    h = table[3]
    goals = [("B: hybrid - naive nDCG >= +0.10", h["dN_B"], h["dN_B"] >= 0.10),
             ("C: hybrid - naive nDCG >= +0.05", h["dN_C"], h["dN_C"] >= 0.05),
             ("A: |hybrid - naive| nDCG <= 0.02", h["dN_A"], abs(h["dN_A"]) <= 0.02 or h["dN_A"] > 0)]
    print(md([{"goal": g, "value": v, "met": "yes" if ok else "NO"} for g, v, ok in goals], ["goal", "value", "met"]))
    print("\nSeed paper's own table (nDCG@10; its corpus is synthetic and unreleased: the data differ, "
          "reference only):\n")
    print(md([{"method": k, "A": v[0], "B": v[1], "C": v[2], "overall": v[3]} for k, v in SEED_TABLE.items()],
             ["method", "A", "B", "C", "overall"]) + "\n")

    # -- timing (cached cell embeddings; the question's terms are encoded per query)
    ms_total, ms_ret = [], []
    with single_thread_blas():
        for q in qs:
            res = idx.search(q["question"])  # warm: term embeddings cached after the first call
            ms_total.append(res["timings"]["total"] * 1000)
            ms_ret.append(res["timings"]["retrieve"] * 1000)
    enc_ms = []
    for q in qs[:20]:  # query-term encoding when the terms are new (not in the encoder cache)
        t = time.perf_counter()
        getattr(enc, "encoder", enc).encode([q["question"] + " x"] + [w + " x" for w in q["question"].split()[:12]])
        enc_ms.append((time.perf_counter() - t) * 1000)
    naive_ms = float(np.median([r["ms"] for r in per_q if r["method"] == "naive"]))
    print("### Retrieval time per question (ms, median; goal <= 150 ms with cached cell embeddings)\n")
    print(md([{"what": "hybrid search, all steps (terms from the encoder cache)",
               "median_ms": float(np.median(ms_total))},
              {"what": "hybrid search without query encoding (routes + fusion)", "median_ms": float(np.median(ms_ret))},
              {"what": "query encoding, uncached (question + ~12 terms, MiniLM)",
               "median_ms": float(np.median(enc_ms))},
              {"what": "naive flattening (reference, incl. cached query encoding)", "median_ms": naive_ms}],
             ["what", "median_ms"]) + "\n")

    # -- reduction
    red_rows = []
    for name, red in (("plain CALI (every cell, float32)", ReductionConfig(drop_stop_cells=False)),
                      ("- stop cells + exact duplicates", ReductionConfig()),
                      ("+ near duplicates (cos >= 0.98)", ReductionConfig(near_duplicate=0.98)),
                      ("+ PQ 48 x 16 (full)", ReductionConfig.full())):
        t = time.perf_counter()
        ix = HybridIndex.build(docs, enc, reduction=red)
        bs = time.perf_counter() - t
        rank = {"h": lambda q, ix=ix: hybrid_ranking(ix, q, SearchConfig(fusion="weighted"))[0]}
        rr = summarize(evaluate(qs, rank, units, 10), ["h"])[0]
        st = ix.cali.stats
        red_rows.append({"index": name, "cells": st["cells_kept"], "vectors": st["vectors_after_merge"],
                         "MB": ix.cali.nbytes() / 1e6, "ndcg_all": rr["ndcg_all"], "ndcg_B": rr["ndcg_B"],
                         "build_s": bs})
    plain_mb = red_rows[0]["MB"]
    plain_nd = red_rows[0]["ndcg_all"]
    stored_mb = idx.cali.stats["bytes_plain"] / 1e6
    for r in red_rows:
        r["smaller_vs_plain (x)"] = plain_mb / r["MB"]
        r["smaller_vs_one_vector_per_cell (x)"] = stored_mb / r["MB"]
        r["ndcg_drop"] = plain_nd - r["ndcg_all"]
    print("### Index reduction (table route; goal >= 4x smaller for an nDCG@10 drop <= 0.02)\n")
    print("'plain' stores one float32 vector per distinct cell text (identical cells share a vector); "
          f"'one vector per cell' = {stored_mb:.2f} MB (every cell its own float32 vector).\n")
    print(md(red_rows, ["index", "cells", "vectors", "MB", "smaller_vs_plain (x)",
                        "smaller_vs_one_vector_per_cell (x)", "ndcg_all", "ndcg_B", "ndcg_drop", "build_s"]) + "\n")

    # -- width sweep
    wrows = []
    for w in [int(x) for x in args.widths.split(",")]:
        wd = generate_width_corpus(w, n_tables=args.width_tables, n_questions=30, seed=0)
        wdocs = parse_corpus(wd)
        wunits = [u for d in wdocs for u in d.units]
        wix = HybridIndex.build(wdocs, enc)
        wb = Baselines.build(wunits, enc)
        rk = standard_rankers(wix, wb, 10, {"cali": (wix, SearchConfig(fusion="weighted")),
                                            "cali_maxsim": (wix, SearchConfig(table_score="maxsim"))})
        s = {r["method"]: r for r in summarize(evaluate(wd.questions, rk, wunits, 10), list(rk))}
        wrows.append({"columns": w, "tables": int(wix.table_idx.size), "cells": wix.cali.stats["cells_kept"],
                      "CALI_recall": s["cali"]["recall_all"], "CALI_maxsim_recall": s["cali_maxsim"]["recall_all"],
                      "naive_recall": s["naive"]["recall_all"], "parent_child_recall": s["parent-child"]["recall_all"],
                      "bm25_recall": s["bm25"]["recall_all"], "CALI_ndcg": s["cali"]["ndcg_all"],
                      "naive_ndcg": s["naive"]["ndcg_all"]})
    print(f"### Table-width sweep (B questions, Recall@10; {args.width_tables} Markdown tables x 8 rows per width, "
          "30 questions; goal: CALI drops by at most 0.10 from 5 to 50 columns)\n")
    print(md(wrows, ["columns", "tables", "cells", "CALI_recall", "CALI_maxsim_recall", "naive_recall",
                     "parent_child_recall", "bm25_recall", "CALI_ndcg", "naive_ndcg"]))
    drop = wrows[0]["CALI_recall"] - wrows[-1]["CALI_recall"]
    print(f"\nCALI Recall@10 drop {wrows[0]['columns']} -> {wrows[-1]['columns']} columns: {drop:+.3f} "
          f"({'met' if drop <= 0.10 else 'NOT met'}); naive: "
          f"{wrows[0]['naive_recall'] - wrows[-1]['naive_recall']:+.3f}")


if __name__ == "__main__":
    main()
