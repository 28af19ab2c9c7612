"""Multi-hop questions answered against a corpus index, with baselines at equal budget.

Per question (gold: the record's gold titles, i.e. the supporting facts' articles), with ``A`` the
number of articles the document graph's context shows:

* ``recall_both`` / ``recall_any``: both / at least one gold article among those ``A``;
* ``bm25_*``, ``dense_*``: the same for BM25's and dense's top ``A`` (equal budget);
* ``title_rule_*``: the no-graph rule (dense top-1 plus the titles the question or that paragraph
  names) with its own count (``title_rule_articles``) and cut to ``A`` (``title_rule_recall_both_at_budget``);
  ``recall_both_at_title_rule_count``: the graph's ranking cut to the title rule's own count;
* ``ms``: wall time of the document-graph search (question encoding included).

Rows are produced one at a time (:func:`iter_rows`) so a caller streams them and a stopped run keeps
what it did; :func:`summarize` turns any prefix of them into the summary (p50 / p95 of ``ms``,
peak resident memory of the process).
"""
from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..corpus import gold_titles
from .corpus_search import CorpusSearcher

RATES = ("recall_both", "recall_any", "bm25_recall_both", "bm25_recall_any", "dense_recall_both",
         "dense_recall_any", "title_rule_recall_both", "title_rule_recall_any", "title_rule_recall_both_at_budget",
         "recall_both_at_title_rule_count")


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports KiB, macOS bytes)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1 << 20) if sys.platform == "darwin" else r / 1024


def _hits(ranked: list[int], gold: set[int]) -> tuple[bool, bool]:
    got = gold & set(ranked)
    return bool(gold) and got == gold, bool(got)


def iter_rows(records: list[dict], searcher: CorpusSearcher, keep_context: bool = False) -> Iterator[dict[str, Any]]:
    """One row per record (see the module docstring)."""
    for k, r in enumerate(records):
        titles = gold_titles(r)
        gold = {searcher.title_of[t] for t in titles if t in searcher.title_of}
        t = time.perf_counter()
        res = searcher.search(r["question"])
        ms = 1000 * (time.perf_counter() - t)
        q = searcher.question_vector(r["question"])
        a = max(res.articles, 1)
        mine = res.ranking[: res.articles]
        bm = searcher.bm25_ranking(r["question"], a)
        de = searcher.dense_ranking(q, a)
        tr = searcher.title_rule(r["question"], q)
        row = {"id": str(r.get("_id", k)), "type": str(r.get("type", "")), "gold": titles,
               "gold_in_index": len(gold) == len(titles), "articles": res.articles, "ms": ms,
               "timings_ms": {n: round(1000 * v, 2) for n, v in res.timings.items()},
               "ranking": [searcher.index.titles[i] for i in res.ranking[: max(a, 5)]],
               "title_rule_articles": len(tr)}
        for name, ranked in (("", mine), ("bm25_", bm), ("dense_", de), ("title_rule_", tr)):
            both, anyhit = _hits(ranked, gold)
            row[f"{name}recall_both"], row[f"{name}recall_any"] = both, anyhit
        row["title_rule_recall_both_at_budget"] = _hits(tr[:a], gold)[0]
        row["recall_both_at_title_rule_count"] = _hits(res.ranking[: len(tr)], gold)[0]
        if keep_context:
            row["context"] = res.context
        yield row


def summarize(rows: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Means of the rates, articles per question, p50 / p95 ms, peak RSS, per question type."""
    def block(rs: list[dict]) -> dict[str, Any]:
        if not rs:
            return {"questions": 0}
        ms = np.array([x["ms"] for x in rs])
        out = {"questions": len(rs)}
        out.update({k: round(float(np.mean([x[k] for x in rs])), 4) for k in RATES})
        out["articles_per_question"] = round(float(np.mean([x["articles"] for x in rs])), 3)
        out["title_rule_articles_per_question"] = round(float(np.mean([x["title_rule_articles"] for x in rs])), 3)
        out["p50_ms"], out["p95_ms"] = round(float(np.percentile(ms, 50)), 1), round(float(np.percentile(ms, 95)), 1)
        out["gold_in_index"] = round(float(np.mean([x["gold_in_index"] for x in rs])), 4)
        return out

    out = block(rows)
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    types = sorted({x["type"] for x in rows if x["type"]})
    if types:
        out["by_type"] = {t: {k: v for k, v in block([x for x in rows if x["type"] == t]).items()
                              if k in ("questions", "recall_both", "bm25_recall_both", "dense_recall_both",
                                       "title_rule_recall_both", "articles_per_question")} for t in types}
    out.update(extra or {})
    return out
