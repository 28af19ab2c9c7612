"""Hybrid text-and-table retrieval on real data: TAT-QA test contexts (issue 35).

Builds (or opens) the index of the shared TAT-QA test file, fits the fusion weights and question
router on a seeded half of its contexts (unless the index is already fitted), and reports on the
other half: nDCG@10 / Recall@10 of the hybrid against BM25 (bm25s) and dense MiniLM measured in the
same run over the same units, overall and per answer source, with ratios; the ablations (question
router, CALI table route, document propagation, fusion replaced by plain RRF, the earlier two-route
fusion); paired tests on per-question nDCG@10; warm latency (p50/p95) and first-query latency, in
process (open the index folder -> first ranking) and as a fresh ``toporag hybrid search`` process.

    python benchmarks/bench_hybrid_tatqa.py --index DIR [--data ../shared/data/tatqa/tatqa_dataset_test_gold.json]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from toporag_core.hybrid.corpus import tatqa_questions  # noqa: E402
from toporag_core.hybrid.labelled import (  # noqa: E402
    evaluation_report,
    gold_matrix,
    latency,
    run_questions,
    warm_encoder_for,
)
from toporag_core.hybrid.metrics import ndcg_at_k, paired_bootstrap, recall_at_k  # noqa: E402
from toporag_core.hybrid.search import HybridIndex, SearchConfig  # noqa: E402

SOURCES = ("table", "text", "table-text")


def cli(*args: str) -> float:
    """Run ``toporag hybrid ARGS`` in a fresh process; returns its CPU seconds (user + system)."""
    import resource

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "toporag_core.cli", "hybrid", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "tatqa" / "tatqa_dataset_test_gold.json"))
    ap.add_argument("--index", required=True, help="index folder (built and fitted here when absent)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ix = Path(args.index)
    if not (ix / "index.json").is_file():
        cli("index", args.data, "--out", str(ix))
    if not (ix / "fusion.json").is_file():
        cli("fit", args.data, "--index", str(ix), "--seed", str(args.seed))

    t0, c0 = time.perf_counter(), time.process_time()
    idx = HybridIndex.load(ix)
    questions = tatqa_questions(args.data)
    fitted = set(idx.fusion["fit"]["contexts"])
    report = [q for q in questions if q["context"] not in fitted]
    idx.search(report[0]["question"])
    first_ms, first_cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    lat = latency(idx, report[1:101])
    warm = warm_encoder_for(idx)
    runs = run_questions(idx, report, warm_encoder=warm)
    weights = idx.fusion_weights(SearchConfig())
    rep = evaluation_report(idx, report, runs, weights)
    rep["p50_ms"], rep["p95_ms"] = float(np.median(lat["wall"])), float(np.quantile(lat["wall"], 0.95))
    old = run_questions(idx, report, SearchConfig(fusion="weighted"))  # the earlier default: dense prose + CALI
    gold = gold_matrix(idx, report)
    src = np.array([q["type"] for q in report])
    nd_old, rc_old = ndcg_at_k(old["ranked"], gold), recall_at_k(old["ranked"], gold)

    t = time.perf_counter()
    fresh_cpu = cli("search", str(ix), "-q", report[1]["question"], "--json") * 1000
    fresh_ms = (time.perf_counter() - t) * 1000

    fit = idx.fusion["fit"]
    print(f"TAT-QA test file: {len(questions)} questions, {len(idx.units)} units ({int(idx.is_table.sum())} tables); "
          f"fusion fitted on {fit['fit_questions']} questions of {fit['fit_contexts']} contexts (seed {fit['seed']}); "
          f"reported on the other {len(report)} questions ({len(set(q['context'] for q in report))} contexts).")
    print(f"weights: {weights.to_dict()}\n")
    m = rep["methods"]
    print("| method | nDCG@10 | R@10 | " + " | ".join(f"nDCG@10 {s} ({(src == s).sum()})" for s in SOURCES)
          + " | x BM25 | x dense |")
    print("|---|---|---|---|---|---|---|---|")
    rows = list(m.items()) + [("earlier default (dense prose + CALI, weighted)",
                               {"ndcg10": float(nd_old.mean()), "recall10": float(rc_old.mean()),
                                "by_source": {s: {"ndcg10": float(nd_old[src == s].mean())} for s in SOURCES}})]
    for name, r in rows:
        print(f"| {name} | {r['ndcg10']:.3f} | {r['recall10']:.3f} | "
              + " | ".join(f"{r['by_source'][s]['ndcg10']:.3f}" for s in SOURCES)
              + f" | {r['ndcg10'] / m['bm25']['ndcg10']:.2f} | {r['ndcg10'] / m['dense']['ndcg10']:.2f} |")
    print("\nPaired tests on per-question nDCG@10 (hybrid minus baseline; bootstrap 10,000 resamples, Wilcoxon):\n")
    print("| comparison | questions | mean diff | 95% CI | p (bootstrap, one-sided) | p (Wilcoxon) |")
    print("|---|---|---|---|---|---|")
    for k, v in rep["paired"].items():
        print(f"| {k} | {v['n']} | {v['mean_diff']:+.3f} | [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}] | "
              f"{v['p_boot']:.4f} | {v['p_wilcoxon']:.2g} |")
    old_vs = paired_bootstrap(np.asarray(ndcg_at_k(rep_scores(idx, runs, weights), gold)), nd_old)
    print(f"| hybrid_vs_earlier_default | {old_vs['n']} | {old_vs['mean_diff']:+.3f} | "
          f"[{old_vs['ci95'][0]:+.3f}, {old_vs['ci95'][1]:+.3f}] | {old_vs['p_boot']:.4f} | {old_vs['p_wilcoxon']:.2g} |")
    print("\nLatency: wall time on this shared machine, and CPU time of the process (what the same work costs "
          "on an idle core; the machine's load average is below).\n")
    print("| latency | wall ms | CPU ms |\n|---|---|---|")
    print(f"| search p50 (warm process, {lat['wall'].size} new questions, query encoding included) | "
          f"{np.median(lat['wall']):.0f} | {np.median(lat['cpu']):.0f} |")
    print(f"| search p95 | {np.quantile(lat['wall'], 0.95):.0f} | {np.quantile(lat['cpu'], 0.95):.0f} |")
    print(f"| search p50 without query encoding (vectors given; {len(report)} questions) | "
          f"{float(np.median(runs['ms'])):.0f} | |")
    print(f"| first query in process (open index folder + encoder + first ranking) | {first_ms:.0f} | "
          f"{first_cpu:.0f} |")
    print(f"| first query as a fresh `toporag hybrid search --json` process (Python start-up and imports included) "
          f"| {fresh_ms:.0f} | {fresh_cpu:.0f} |")
    print(f"\nload average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def rep_scores(idx, runs, weights):
    from toporag_core.hybrid.labelled import fused

    return fused(idx, runs, weights)


if __name__ == "__main__":
    main()
