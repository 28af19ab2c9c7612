"""Document-graph retrieval over a stored corpus index: memory and time at 1k / 10k / 100k
paragraphs, and recall at equal budget against BM25, dense and the no-graph title rule.

Data: :func:`toporag_core.datagen.docgraph_corpus.generate_corpus`, a generated world with one article
(two sections, one paragraph each) per entity and HotpotQA-format bridge / comparison questions
asked against the *whole* corpus (no real HotpotQA file is available here). Seed 1 is reported;
the search defaults were chosen on seed 0.

* ``scale`` (one subprocess per size, so each peak RSS is its own): the model-free hashing encoder
  (256-d) stands in for MiniLM, which would need ~1 h for 100k paragraphs on 2 shared cores: index
  build time per stage, index size on disk, load time, p50 / p95 per question, the time to add 1%
  new documents incrementally, peak RSS.
* ``recall`` (10k paragraphs, all-MiniLM-L6-v2): the document graph against BM25 (bm25s) and dense
  (MiniLM, best paragraph per document) at the same number of articles ``A`` per question, and the
  title rule (dense top-1 + titles the question or that paragraph names) at its own count and cut to
  ``A``; exact McNemar tests, paired per question.
* ``answers`` (``--llm-n`` questions): EM / F1 of the packaged LLM reading the graph's context and the
  dense top-``A`` articles.

    python benchmarks/bench_docgraph_corpus.py --work WORKDIR [--sizes 1000 10000 100000]
        [--questions 200] [--llm-n 40] [--skip-scale] [--skip-recall]

``WORKDIR`` keeps the generated corpora and indexes: a second run re-encodes nothing (the index is
incremental) and only measures again.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]


def table(header: list[str], rows: list[list]) -> str:
    def f(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(f(v) for v in r) + " |" for r in rows])


def corpus_docs(paragraphs: int, questions: int, seed: int):
    from toporag_core.corpus import Corpus, Document
    from toporag_core.datagen.docgraph_corpus import generate_corpus

    recs, docs = generate_corpus(paragraphs // 2, questions, seed)
    return recs, Corpus([Document(d["id"], d["title"], d["text"], "generated") for d in docs])


NEIGHBOUR_SAMPLE = 2000  # above EXACT_NEIGHBOURS paragraphs, neighbour lists are timed on this many rows
EXACT_NEIGHBOURS = 20_000


def scale_worker(paragraphs: int, work: Path, questions: int) -> dict:
    """One size, in its own process: build (or reuse), load, query, add 1%."""
    from toporag_core.corpus import Corpus
    from toporag_core.docgraph.corpus_eval import iter_rows, peak_rss_mb, summarize
    from toporag_core.docgraph.corpus_search import CorpusSearcher
    from toporag_core.docgraph.index import DocGraphIndex, IndexConfig, build_index, top_neighbours
    from toporag_core.embed import get_encoder

    enc = get_encoder("hashing", cached=False)
    recs, corpus = corpus_docs(int(paragraphs * 1.01), questions, seed=1)
    base = Corpus(corpus.documents[: paragraphs // 2])  # then 1% more documents are added incrementally
    out = work / f"scale-{paragraphs}"
    exact = paragraphs <= EXACT_NEIGHBOURS
    cfg = IndexConfig(neighbours=4 if exact else 0)
    _, rep = build_index(base, enc, out, cfg, rebuild=True)
    if not exact:  # the O(P^2 d) neighbour pass, timed on a sample of rows and scaled to all of them
        idx = DocGraphIndex.load(out)
        p = idx.paragraph_rows()
        xp, dp = idx.x[p], idx.doc[p]
        t = time.perf_counter()
        top_neighbours(xp[:NEIGHBOUR_SAMPLE], dp[:NEIGHBOUR_SAMPLE], xp, dp, 4)
        rep["seconds"]["neighbours"] = (time.perf_counter() - t) * p.size / NEIGHBOUR_SAMPLE
        rep["seconds"]["total"] += rep["seconds"]["neighbours"]
        del idx, xp
    rss_build = peak_rss_mb()
    size_mb = sum(f.stat().st_size for f in out.iterdir()) / 2**20
    t = time.perf_counter()
    index = DocGraphIndex.load(out)
    t_load = time.perf_counter() - t
    s = CorpusSearcher(index, enc)
    s.search(recs[0]["question"])  # warm-up
    rows = list(iter_rows(recs, s))
    summ = summarize(rows)
    _, add = build_index(corpus, enc, out, cfg)  # +1% documents, incrementally (same neighbour setting)
    return {"paragraphs": rep["paragraphs"], "documents": rep["documents"], "nodes": rep["nodes"],
            "build_s": rep["seconds"], "index_mb": size_mb, "load_s": t_load, "p50_ms": summ["p50_ms"],
            "p95_ms": summ["p95_ms"], "add_docs": add["added"], "add_s": add["seconds"]["total"],
            "add_embed_s": add["seconds"]["embed"], "rss_build_mb": rss_build, "peak_rss_mb": peak_rss_mb(),
            "hashing_recall_both": summ["recall_both"], "hashing_bm25_recall_both": summ["bm25_recall_both"]}


def run_scale(sizes: list[int], work: Path, questions: int) -> None:
    rows = []
    for n in sizes:
        t = time.perf_counter()
        cmd = [sys.executable, __file__, "--worker-scale", str(n), "--work", str(work), "--scale-questions",
               str(questions)]
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if out.returncode != 0:
            print(f"size {n} failed: {out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  {n:,} paragraphs done in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        b = r["build_s"]
        rows.append([f"{r['paragraphs']:,}", f"{r['documents']:,}", f"{r['nodes']:,}", f"{b['embed']:.1f}",
                     f"{b['neighbours']:.1f}", f"{b['bm25']:.1f}", f"{b['total']:.1f}", f"{r['index_mb']:.0f}",
                     f"{r['load_s']:.2f}", f"{r['p50_ms']:.0f}", f"{r['p95_ms']:.0f}",
                     f"{r['add_docs']:,} docs in {r['add_s']:.1f} s", f"{r['peak_rss_mb']:.0f}"])
    print("\n### Scale (hashing encoder, 256-d; build = one run from scratch; neighbour lists above "
          f"{EXACT_NEIGHBOURS:,} paragraphs timed on {NEIGHBOUR_SAMPLE:,} rows and scaled)\n")
    print(table(["paragraphs", "documents", "nodes", "embed s", "neighbours s", "BM25 s", "build s", "index MB",
                 "load s", "p50 ms", "p95 ms", "incremental add (+1%)", "peak RSS MB"], rows))


def dense_context(s, ranking: list[int]) -> str:
    return "\n".join(f"# {s.index.titles[i]}\n{s.doc_text(i)}" for i in ranking)


def run_recall(work: Path, n_questions: int, llm_n: int, encoder: str | None) -> None:
    from toporag_core.docgraph.corpus_eval import iter_rows, peak_rss_mb, summarize
    from toporag_core.docgraph.corpus_search import CorpusSearcher
    from toporag_core.docgraph.index import DocGraphIndex, build_index
    from toporag_core.embed import encoder_spec, get_encoder, stderr_progress
    from toporag_core.metrics import mcnemar_exact

    recs, corpus = corpus_docs(10_000, n_questions, seed=1)
    spec = encoder_spec(encoder)
    enc = get_encoder(spec, cached=False)
    out = work / "recall-10000"
    t = time.perf_counter()
    _, rep = build_index(corpus, enc, out, on_progress=stderr_progress, encoder_spec=spec)
    print(f"  index: {rep['texts_encoded']:,} texts encoded, {time.perf_counter() - t:.0f} s", file=sys.stderr)
    index = DocGraphIndex.load(out)
    s = CorpusSearcher(index, enc)
    s.search(recs[0]["question"])
    rows = []
    for i, row in enumerate(iter_rows(recs, s, keep_context=llm_n > 0)):
        rows.append(row)
        if (i + 1) % 20 == 0:
            print(f"  recall {i + 1}/{len(recs)}", file=sys.stderr)
    summ = summarize(rows)
    types = ["all", *summ.get("by_type", {})]
    print(f"\n### Recall at equal budget, {index.num_docs:,} articles / {index.stats['paragraphs']:,} paragraphs, "
          f"{len(rows)} questions (encoder {index.encoder_name})\n")
    tab = []
    for t_ in types:
        rs = rows if t_ == "all" else [r for r in rows if r["type"] == t_]
        a = float(np.mean([r["articles"] for r in rs]))
        tab.append([t_, len(rs), round(a, 2)] + [float(np.mean([r[k] for r in rs])) for k in (
            "recall_both", "bm25_recall_both", "dense_recall_both", "title_rule_recall_both_at_budget",
            "title_rule_recall_both")] + [round(float(np.mean([r["title_rule_articles"] for r in rs])), 2)])
    print(table(["questions", "n", "articles A", "document graph", "BM25 @A", "dense @A", "title rule @A",
                 "title rule (own count)", "title rule articles"], tab))
    g = [r["recall_both"] for r in rows]
    print("\nPaired (exact McNemar on both-supporting recall):\n")
    pt = []
    for name, key in (("BM25 @A", "bm25_recall_both"), ("dense @A", "dense_recall_both"),
                      ("title rule @A", "title_rule_recall_both_at_budget"),
                      ("title rule (own count)", "title_rule_recall_both")):
        b, c, p = mcnemar_exact(g, [r[key] for r in rows])
        pt.append([name, float(np.mean(g)) - float(np.mean([r[key] for r in rows])), b, c, f"{p:.2g}"])
    print(table(["graph vs", "difference", "only graph", "only baseline", "p"], pt))
    print(f"\np50 {summ['p50_ms']} ms, p95 {summ['p95_ms']} ms per question; recall_any {summ['recall_any']}; "
          f"peak RSS {peak_rss_mb():.0f} MB (encoder and index loaded)")
    stage = {k: float(np.median([r["timings_ms"][k] for r in rows])) for k in rows[0]["timings_ms"]}
    print("median stage ms: " + ", ".join(f"{k} {v:.1f}" for k, v in stage.items()))
    if llm_n:
        run_answers(s, recs, rows, llm_n)


def run_answers(s, recs: list[dict], rows: list[dict], n: int) -> None:
    from toporag_core.docgraph.evaluate import LLMAnswerer, count_tokens, exact_match, f1_score
    from toporag_core.metrics import mcnemar_exact

    ans = LLMAnswerer(max_input_tokens=1024)
    sub = list(zip(recs, rows))[:n]
    t = time.perf_counter()
    qs = [r["question"] for r, _ in sub]
    golds = [r["answer"] for r, _ in sub]
    ctx_g = [row["context"] for _, row in sub]
    ctx_d = [dense_context(s, s.dense_ranking(s.question_vector(r["question"]), row["articles"])) for r, row in sub]
    out = {}
    for name, ctx in (("document graph", ctx_g), ("dense @A", ctx_d)):
        preds = ans.answer(ctx, qs)
        out[name] = ([exact_match(p, a) for p, a in zip(preds, golds)], [f1_score(p, a) for p, a in zip(preds, golds)],
                     float(np.mean([count_tokens(c, ans.tokenizer) for c in ctx])))
    print(f"\n### Answers, first {len(sub)} questions, packaged LLM ({time.perf_counter() - t:.0f} s)\n")
    print(table(["context", "EM", "F1", "context tokens (mean)"],
                [[k, float(np.mean(v[0])), float(np.mean(v[1])), round(v[2])] for k, v in out.items()]))
    b, c, p = mcnemar_exact([x > 0.5 for x in out["document graph"][1]], [x > 0.5 for x in out["dense @A"][1]])
    print(f"\npaired (F1 > 0.5): only graph {b}, only dense {c}, p = {p:.2g}")


def run_ablation(work: Path, n: int, encoder: str | None) -> None:
    """The fused node's vector: re-encoded text vs members' mean, the same questions interleaved (so both
    see the same machine load)."""
    from dataclasses import replace

    from toporag_core.docgraph.corpus_eval import iter_rows
    from toporag_core.docgraph.corpus_search import CorpusSearcher, SearchConfig
    from toporag_core.docgraph.index import DocGraphIndex
    from toporag_core.embed import encoder_spec, get_encoder
    from toporag_core.metrics import mcnemar_exact

    recs, _ = corpus_docs(10_000, n, seed=1)
    index = DocGraphIndex.load(work / "recall-10000")
    enc = get_encoder(encoder_spec(encoder), cached=False)
    base = SearchConfig()
    variants = {v: CorpusSearcher(index, enc, replace(base, traversal=replace(base.traversal, fuse_embedding=v)))
                for v in ("reencode", "mean")}
    variants["mean"].search(recs[0]["question"])
    rows: dict[str, list] = {v: [] for v in variants}
    for r in recs:
        for v, s in variants.items():
            rows[v].extend(iter_rows([r], s))
    print(f"\n### Fused-node vector, {n} questions interleaved (same index)\n")
    tab = [[v, float(np.mean([x["recall_both"] for x in rs])), float(np.mean([x["articles"] for x in rs])),
            f"{np.median([x['ms'] for x in rs]):.0f}", f"{np.median([x['timings_ms']['fgw'] for x in rs]):.0f}"]
           for v, rs in rows.items()]
    print(table(["fuse_embedding", "recall_both", "articles A", "p50 ms", "FGW ms (median)"], tab))
    b, c, p = mcnemar_exact([x["recall_both"] for x in rows["mean"]], [x["recall_both"] for x in rows["reencode"]])
    print(f"\npaired: only mean {b}, only reencode {c}, p = {p:.2g}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True, help="folder for the generated corpora and indexes")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000], help="paragraphs")
    ap.add_argument("--questions", type=int, default=200, help="recall questions (10k corpus)")
    ap.add_argument("--scale-questions", type=int, default=40)
    ap.add_argument("--llm-n", type=int, default=40, help="questions answered by the LLM (0: skip)")
    ap.add_argument("--encoder", default=None, help="recall encoder (default all-MiniLM-L6-v2)")
    ap.add_argument("--ablate-n", type=int, default=0, help="questions of the fused-vector ablation (0: skip)")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--worker-scale", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.worker_scale:
        print(json.dumps(scale_worker(args.worker_scale, work, args.scale_questions)))
        return
    if not args.skip_recall:
        run_recall(work, args.questions, args.llm_n, args.encoder)
    if args.ablate_n:
        run_ablation(work, args.ablate_n, args.encoder)
    if not args.skip_scale:
        run_scale(args.sizes, work, args.scale_questions)


if __name__ == "__main__":
    main()
