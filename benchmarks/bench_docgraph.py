"""Document-graph retrieval with FGW constraints (KURISU-G2) on generated HotpotQA-format data.

Reference measured in the same run: dense top-k sentences (all-MiniLM-L6-v2 cosine) at the
*same context-token budget* (SmolLM2 tokenizer) as the traversal's context, per question.

    python benchmarks/bench_docgraph.py [--n 200] [--llm-n 200] [--encoder default]

Tables: retrieval quality per variant, EM/F1 with the packaged SmolLM2-135M (next to the
source's HotpotQA numbers with Llama3-8B: different data and model), prefix monotonicity
under both node-mass choices, FGW time against graph size.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")

from toporag_core.docgraph import BuildConfig, FGWConfig, GraphState, TraversalConfig, Traverser, build_docgraph
from toporag_core.docgraph.evaluate import LLMAnswerer, evaluate_records, llm_scores, summarize
from toporag_core.docgraph.fgw import fgw_between, structure_matrix
from toporag_core.datagen.docgraph import generate
from toporag_core.docgraph.records import record_articles
from toporag_core.docgraph.traverse import fuse, prefix_curve
from toporag_core.embed import get_encoder, single_thread_blas

SOURCE_EM = {"RAG": 0.24, "ToG-2.0": 0.34, "KURISU-G2": 0.39}  # HotpotQA, Llama3-8B (source paper)


def table(header: list[str], rows: list[list]) -> str:
    def f(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(f(v) for v in r) + " |" for r in rows])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--llm-n", type=int, default=200, help="questions answered by the LLM (0: skip)")
    ap.add_argument("--encoder", default=None)
    ap.add_argument("--mono-n", type=int, default=60)
    args = ap.parse_args()
    enc = get_encoder(args.encoder)
    recs, _ = generate(args.n, seed=0)
    answerer = LLMAnswerer() if args.llm_n else None
    tok = answerer.tokenizer if answerer else None
    if tok is None:
        from transformers import AutoTokenizer

        from toporag_core.model.llm import ensure_default_llm
        tok = AutoTokenizer.from_pretrained(str(ensure_default_llm()))
    t0 = time.perf_counter()
    for r in recs:  # embed every text once (cache), so timings below are with cached embeddings
        build_docgraph(record_articles(r), enc)
    print(f"embedded {args.n} graphs in {time.perf_counter() - t0:.1f} s\n")
    theta5 = BuildConfig(sim_threshold=0.5)
    before = dict(mention_bonus=0.0, graft_mentions=False)  # the scoring before title mentions (question only)
    variants = {  # name -> (traversal settings, graph settings)
        "default (eps 0.05, title mentions, semantic grafts)": (TraversalConfig(), None),
        "before: question-only scores, no mention grafts": (TraversalConfig(**before), None),
        "no mention bonus (mention grafts only)": (TraversalConfig(mention_bonus=0.0), None),
        "no mention grafts (mention bonus only)": (TraversalConfig(graft_mentions=False), None),
        "query update 0.5": (TraversalConfig(query_update=0.5), None),
        "literal (question-only scores, tree grandchildren only)": (
            TraversalConfig(graft_semantic=False, **before), None),
        "uniform node mass": (TraversalConfig(fgw=FGWConfig(node_mass="uniform")), None),
        "structure from embeddings only": (TraversalConfig(fgw=FGWConfig(structure="embedding")), None),
        "keep_ratio 0.6": (TraversalConfig(keep_ratio=0.6), None),
        "theta 0.5": (TraversalConfig(), theta5),
        "theta 0.5, keep_ratio 0.6": (TraversalConfig(keep_ratio=0.6), theta5),
        "before, theta 0.5, keep_ratio 0.6": (TraversalConfig(keep_ratio=0.6, **before), theta5),
        "epsilon 0 (greedy path)": (TraversalConfig(epsilon=0.0), None),
    }
    rows, all_rows = [], {}
    with single_thread_blas():
        for name, (cfg, bcfg) in variants.items():
            rr = evaluate_records(recs, enc, cfg, bcfg, tokenizer=tok)
            all_rows[name] = rr
            s = summarize(rr)
            rows.append([name, s["questions"], s["mean_nodes"], s["tokens"], s["recall_both"], s["dense_recall_both"],
                         s["recall_both"] - s["dense_recall_both"], s["answer_in_context"],
                         s["dense_answer_in_context"], s["median_ms"], s["fgw_calls"], s["fgw_within_bound"],
                         s["fusions"], s["grafts"]])
    print("**Retrieval** (recall = both gold articles have a paragraph/sentence in the context; dense = top "
          "sentences by cosine at the same SmolLM2-token budget per question):\n")
    print(table(["variant", "questions", "nodes", "tokens", "recall_both", "dense_recall_both", "delta",
                 "answer_in_ctx", "dense_answer_in_ctx", "median_ms", "fgw_calls", "calls<=bound", "fusions",
                 "grafts"], rows))
    by_type = []
    for name in [*list(variants)[:2], "literal (question-only scores, tree grandchildren only)"]:
        for t in ("bridge", "comparison"):
            rr = [r for r in all_rows[name] if r.type == t]
            by_type.append([name, t, len(rr), float(np.mean([r.recall_both for r in rr])),
                            float(np.mean([r.dense_recall_both for r in rr])),
                            float(np.mean([r.answer_in_context for r in rr])),
                            float(np.mean([r.dense_answer_in_context for r in rr]))])
    print("\nBy question type:\n")
    print(table(["variant", "type", "questions", "recall_both", "dense_recall_both", "answer_in_ctx",
                 "dense_answer_in_ctx"], by_type))
    if answerer is not None:
        k = min(args.llm_n, args.n)
        default = all_rows[next(iter(variants))][:k]
        t = time.perf_counter()
        sc = llm_scores(default, recs[:k], answerer)
        print(f"\n**Answers with SmolLM2-135M-Instruct** ({k} questions, greedy, {time.perf_counter() - t:.0f} s; "
              "the source's HotpotQA EM with Llama3-8B beside it - different data and a 60x larger model):\n")
        print(table(["context", "EM", "F1", "source EM (HotpotQA, Llama3-8B)"],
                    [["docgraph traversal (default)", sc["docgraph_em"], sc["docgraph_f1"],
                      f"KURISU-G2 {SOURCE_EM['KURISU-G2']:.2f}"],
                     ["dense top-k sentences, same budget", sc["dense_em"], sc["dense_f1"],
                      f"RAG {SOURCE_EM['RAG']:.2f}"], ["-", "-", "-", f"ToG-2.0 {SOURCE_EM['ToG-2.0']:.2f}"]]))
        print("\nexamples (question, prediction, gold):", sc["docgraph_examples"][:2])
    # prefix monotonicity: FGW over every prefix size, both node-mass choices
    mono = []
    for mass in ("fused", "uniform"):
        cfg = TraversalConfig(fgw=FGWConfig(node_mass=mass))
        curves = 0
        monotone = 0
        agree = 0
        for r in recs[: args.mono_n]:
            g = build_docgraph(record_articles(r), enc)
            res = Traverser(g, enc, cfg).run(r["question"])
            for st in res.steps:
                if len(st.kept) < 3:
                    continue
                cur = [v for _, v in prefix_curve(res, st.depth, enc, cfg)]
                curves += 1
                monotone += bool(np.all(np.diff(cur) >= -1e-12))
                lin = next((m for m in range(2, len(cur) + 1) if cur[m - 1] > cfg.epsilon), len(cur) + 1) - 1
                # binary search's choice on this curve
                a, b = 1, len(cur)
                while a < b:
                    mid = (a + b + 1) // 2
                    a, b = (mid, b) if cur[mid - 1] <= cfg.epsilon else (a, mid - 1)
                agree += a == lin
        mono.append([mass, curves, monotone / max(curves, 1), agree / max(curves, 1)])
    print(f"\n**FGW against the fusion prefix size** (steps with >= 3 kept children, first {args.mono_n} questions):\n")
    print(table(["node_mass", "curves", "monotone share", "binary == linear share"], mono))
    # FGW time vs graph size
    pool = [a for r in recs for a in record_articles(r)]
    seen, arts = set(), []
    for a in pool:
        if a.title not in seen:
            seen.add(a.title)
            arts.append(a)
    sizes = []
    for target in (60, 120, 250, 500):
        chosen, n = [], 1
        for a in arts:
            cnt = 1 + sum(1 + len(p) + sum(len(x) for x in p) for _, p in a.sections)
            if n + cnt > target and chosen:
                break
            chosen.append(a)
            n += cnt
        g = build_docgraph(chosen, enc)
        cfg = FGWConfig()
        base = GraphState.from_graph(g)
        d1, scale = structure_matrix(base, cfg)
        fused, _ = fuse(base, g.children(0)[:2].tolist(), enc)
        ts, tsd = [], []
        for _ in range(5):
            t = time.perf_counter()
            d2, _ = structure_matrix(fused, cfg, scale)
            tsd.append(time.perf_counter() - t)
            res = fgw_between(base, d1, fused, d2, cfg)
            ts.append(res.seconds)
        sizes.append([target, g.num_nodes, 1000 * float(np.median(tsd)), 1000 * float(np.median(ts)), res.value])
    base_ms = sizes[0][3]
    print("\n**FGW time vs graph size** (fusing two documents; median of 5; POT conditional gradient, "
          "started at the natural coupling):\n")
    print(table(["target", "nodes", "structure_ms", "fgw_ms", "fgw_value", "time vs 60 (x)"],
                [r + [r[3] / base_ms] for r in sizes]))


if __name__ == "__main__":
    main()
