"""Evaluate and fit a hybrid index on labelled questions (TAT-QA): hybrid vs BM25 vs dense, one pass.

:func:`run_questions` searches every question once through :meth:`HybridIndex.search` (its wall time
is the latency reported) and keeps each route's raw per-unit scores; everything else is numpy over
the ``(Q, U)`` score matrices of that one pass:

* **hybrid**: the linear fusion (:mod:`~toporag_core.hybrid.fusion`) with the index's fitted weights;
* **bm25**: the lexical route alone (``bm25s`` over the same unit texts);
* **dense**: the MiniLM cosine of every unit alone (same vectors as the hybrid's dense route);
* **ablations**: the fusion with the question router off, with the CALI table route off
  (``w_table = 0``), with document propagation off (``w_doc = 0``), and with the fitted fusion
  replaced by reciprocal-rank fusion of the three routes (``sum_r 1 / (60 + rank_r)``, equal weights).

Gold: a ``(Q, U)`` boolean matrix from each question's gold spans (:mod:`~toporag_core.hybrid.tatqa`:
the table for ``answer_from = table``, the ``rel_paragraphs`` for ``text``, both for ``table-text``).
Paired tests (bootstrap and Wilcoxon, :func:`~toporag_core.hybrid.metrics.paired_bootstrap`) compare
per-question nDCG@10 of the hybrid with each baseline.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from .fusion import FusionWeights, QueryRouter, fit_weights, fuse_scores
from .metrics import ndcg_at_k, paired_bootstrap, recall_at_k
from .search import HybridIndex, SearchConfig


def gold_matrix(index: HybridIndex, questions: list[dict]) -> np.ndarray:
    """``(Q, U)`` bool: unit ``u`` is gold for question ``q`` (same document, overlapping lines).
    A question whose gold is not in the index raises, naming it (the index was built from another file)."""
    by_doc: dict[str, list[int]] = {}
    for i, u in enumerate(index.units):
        by_doc.setdefault(u.doc_id, []).append(i)
    g = np.zeros((len(questions), len(index.units)), bool)
    for qi, q in enumerate(questions):
        for item in q["gold"]:
            hit = [i for i in by_doc.get(item["doc"], []) if index.units[i].start < item["end"]
                   and item["start"] < index.units[i].end]
            if not hit:
                raise ValueError(f"question {q['id']!r}: gold unit {item['doc']}:{item['start'] + 1} is not in the "
                                 "index (index the same TAT-QA file: toporag hybrid index FILE --out DIR)")
            g[qi, hit[0]] = True
    return g


def run_questions(index: HybridIndex, questions: list[dict], cfg: SearchConfig | None = None,
                  progress=None, warm_encoder=None) -> dict:
    """One search per question: ``{"bm25", "dense", "table" (Q, U), "p" (Q, 2), "ranked" (Q, U), "ms" (Q,)}``;
    ``ranked`` is the search's own final ranking as a score (``-rank`` on its top ``k``, ``-inf`` elsewhere),
    for configurations whose fusion is not the linear one (e.g. the earlier two-route fusion).
    ``warm_encoder``: encode every question and term first in one batched call
    (:meth:`HybridIndex.warm_queries`); ``ms`` then times the searches without query encoding."""
    cfg = cfg or SearchConfig()
    n, u = len(questions), len(index.units)
    out = {k: np.zeros((n, u)) for k in ("bm25", "dense", "table")}
    out["ranked"] = np.full((n, u), -np.inf)
    if warm_encoder is not None:
        index.warm_queries([q["question"] for q in questions], warm_encoder)
    out["p"] = np.ones((n, 2))
    out["ms"] = np.zeros(n)
    t_last = time.perf_counter()
    for i, q in enumerate(questions):
        t = time.perf_counter()
        res = index.search(q["question"], cfg)
        out["ms"][i] = (time.perf_counter() - t) * 1000
        rs = res["_routes"]
        for k in ("bm25", "dense", "table"):
            out[k][i] = rs[k]
        out["p"][i] = rs["p"]
        ranking = res["reranked"] or res["fused"]
        out["ranked"][i, [r["unit"] for r in ranking]] = -np.arange(1, len(ranking) + 1)
        if progress is not None and (time.perf_counter() - t_last > 2 or i == n - 1):
            progress(i + 1, n)
            t_last = time.perf_counter()
    return out


def warm_encoder_for(index: HybridIndex):
    """A :class:`~toporag_core.embed.CachedEncoder` around the index's query encoder: the vectors of texts
    seen before (by this model, in any process) come from the on-disk cache, new ones are encoded in batches."""
    from ..embed import CachedEncoder

    return CachedEncoder(index.query_encoder())


def latency(index: HybridIndex, questions: list[dict], cfg: SearchConfig | None = None) -> dict[str, np.ndarray]:
    """Per :meth:`HybridIndex.search` of questions not searched before (query encoding included; terms seen
    in earlier questions come from memory, as in a running service): ``{"wall": (n,) ms, "cpu": (n,) ms}``.
    CPU time (this process, all threads) is what the search costs on an otherwise idle core; wall time
    also holds the waiting on a shared machine."""
    wall, cpu = [], []
    for q in questions:
        t, c = time.perf_counter(), time.process_time()
        index.search(q["question"], cfg)
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return {"wall": np.array(wall), "cpu": np.array(cpu)}


def fused(index: HybridIndex, runs: dict, weights: FusionWeights) -> np.ndarray:
    return fuse_scores(runs["bm25"], runs["dense"], runs["table"], index.is_table, index.groups, weights,
                       runs["p"][:, :1], runs["p"][:, 1:])


def rrf(runs: dict, is_table: np.ndarray, k: float = 60.0) -> np.ndarray:
    """Reciprocal-rank fusion, equal weights, of BM25, dense and CALI (tables only)."""
    total = 0.0
    for name in ("bm25", "dense", "table"):
        s = np.where(np.isfinite(runs[name]), runs[name], -np.inf)
        order = np.argsort(-s, axis=1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(s.shape[1])[None, :], axis=1)
        part = 1.0 / (k + rank + 1)
        total = total + (np.where(is_table[None, :], part, 0.0) if name == "table" else part)
    return total


def method_scores(index: HybridIndex, runs: dict, weights: FusionWeights, ablations: bool = True) -> dict:
    """``name -> (Q, U)`` scores: hybrid, bm25, dense and (optionally) the ablations."""
    out = {"hybrid": fused(index, runs, weights), "bm25": runs["bm25"], "dense": runs["dense"]}
    if ablations:
        out["hybrid - question router"] = fused(index, runs, replace(weights, use_router=False))
        out["hybrid - CALI table route"] = fused(index, runs, replace(weights, w_table=0.0))
        out["hybrid - document propagation"] = fused(index, runs, replace(weights, w_doc=0.0))
        out["hybrid, fusion -> plain RRF"] = rrf(runs, index.is_table)
        out["CALI table route alone"] = np.where(index.is_table[None, :], runs["table"], -np.inf)
    return out


def summarize(scores: dict, gold: np.ndarray, sources: np.ndarray, k: int = 10) -> dict:
    """Per method: nDCG@k, Recall@k overall and per answer source, and the per-question nDCG."""
    out = {}
    for name, s in scores.items():
        nd, rc = ndcg_at_k(s, gold, k), recall_at_k(s, gold, k)
        out[name] = {"ndcg10": float(nd.mean()), "recall10": float(rc.mean()), "per_question": nd,
                     "by_source": {src: {"questions": int((sources == src).sum()),
                                         "ndcg10": float(nd[sources == src].mean()),
                                         "recall10": float(rc[sources == src].mean())}
                                   for src in sorted(set(sources.tolist()))}}
    return out


def evaluation_report(index: HybridIndex, questions: list[dict], runs: dict, weights: FusionWeights,
                      ablations: bool = True) -> dict:
    """The JSON of ``toporag hybrid eval`` (acceptance keys first), from one :func:`run_questions` pass."""
    gold = gold_matrix(index, questions)
    sources = np.array([q["type"] for q in questions])
    table = summarize(method_scores(index, runs, weights, ablations), gold, sources)
    h, b, d = table["hybrid"], table["bm25"], table["dense"]
    by_source = {src: {"questions": h["by_source"][src]["questions"], "ndcg10": h["by_source"][src]["ndcg10"],
                       "bm25_ndcg10": b["by_source"][src]["ndcg10"], "dense_ndcg10": d["by_source"][src]["ndcg10"],
                       "recall10": h["by_source"][src]["recall10"],
                       "bm25_recall10": b["by_source"][src]["recall10"],
                       "dense_recall10": d["by_source"][src]["recall10"]} for src in h["by_source"]}
    paired = {}
    for base in ("bm25", "dense"):
        paired[f"hybrid_vs_{base}"] = paired_bootstrap(h["per_question"], table[base]["per_question"])
        for src in h["by_source"]:
            m = sources == src
            paired[f"hybrid_vs_{base}_{src}"] = paired_bootstrap(h["per_question"][m], table[base]["per_question"][m])
    return {"questions": len(questions), "ndcg10": h["ndcg10"], "recall10": h["recall10"],
            "bm25_ndcg10": b["ndcg10"], "bm25_recall10": b["recall10"], "dense_ndcg10": d["ndcg10"],
            "dense_recall10": d["recall10"], "by_source": by_source,
            "p50_ms": float(np.median(runs["ms"])), "p95_ms": float(np.quantile(runs["ms"], 0.95)),
            "weights": weights.to_dict(), "paired": paired,
            "methods": {name: {k: v for k, v in row.items() if k != "per_question"} for name, row in table.items()}}


MIN_ROUTER_QUESTIONS = 50  # fewer (or one answer source only): no question router is fitted


def fit_fusion(index: HybridIndex, questions: list[dict], runs: dict,
               seed: int = 0) -> tuple[FusionWeights, QueryRouter | None, list]:
    """Fit the question router on ``questions`` and the fusion weights on their route scores (the
    router's probabilities cross-fitted, 5 folds): see :func:`~toporag_core.hybrid.fusion.fit_weights`.
    With fewer than :data:`MIN_ROUTER_QUESTIONS` questions, or one answer source only, no router."""
    texts = [q["question"] for q in questions]
    src = np.array([q["type"] for q in questions])
    needs_table, needs_text = src != "text", src != "table"
    router, p = None, np.ones((len(questions), 2))
    if len(questions) >= MIN_ROUTER_QUESTIONS and all(0 < y.sum() < y.size for y in (needs_table, needs_text)):
        router = QueryRouter.fit(texts, needs_table, needs_text)
        p = QueryRouter.cross_fit(texts, needs_table, needs_text, seed=seed)
    gold = gold_matrix(index, questions)
    weights, grid = fit_weights({k: runs[k] for k in ("bm25", "dense", "table")}, gold, src, index.is_table,
                                index.groups, p)
    return weights, router, grid
