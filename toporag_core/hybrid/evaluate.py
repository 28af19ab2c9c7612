"""Evaluation of hybrid retrieval: nDCG@k / Recall@k per question type, against three baselines.

**Relevance.** A question's gold is a list of line spans ``(doc, start, end)`` from the generator.
A retrieved unit is a hit for gold item ``g`` when it is in the same document and its lines
overlap ``g``'s; each gold item is credited once (the first unit hitting it), so a method that
cuts a table into pieces cannot collect the same gold twice. With ``rel_i`` the credit at rank
``i`` (0/1) and ``G`` gold items::

    DCG@k = sum_{i<=k} rel_i / log2(i + 1),  nDCG@k = DCG@k / sum_{i<=min(G,k)} 1 / log2(i + 1)
    Recall@k = (credited gold items in the top k) / G

**Methods** (same units, same encoder):

* ``naive``: one embedding per unit of its flattened text (tables: header and rows joined with
  spaces, no structure), cosine;
* ``parent-child``: children are sentences (narrative) and rows written ``header: value; ...``
  (tables); a unit scores the max over its children;
* ``bm25``: BM25 (``bm25s``, ``k1 = 1.5``, ``b = 0.75``) over the flattened unit texts
  (:class:`~toporag_core.hybrid.lexical.Lexical`);
* ``hybrid`` variants: route A + CALI (MaxSim, ``[ROW]`` tag, row-aware) fused (see
  :mod:`toporag_core.hybrid.search`).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np

from .documents import ParsedDocument, Unit, parse_document
from .dataset import HybridDataset
from .lexical import Lexical
from .router import RouterConfig, line_f1
from .search import HybridIndex, SearchConfig, top_k

_TOK = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?")
_SENT = re.compile(r"(?<=[.!?])\s+")


def tokenize(text: str) -> list[str]:
    return _TOK.findall(text.lower())


# ----------------------------------------------------------------------------- metrics
def credits(units: list[Unit], ranked: list[int], gold: list[dict], k: int = 10) -> np.ndarray:
    """``(k,)`` 0/1 credit per rank (see the module docstring)."""
    rel = np.zeros(k)
    done = set()
    for r, ui in enumerate(ranked[:k]):
        u = units[ui]
        for gi, g in enumerate(gold):
            if gi not in done and g["doc"] == u.doc_id and u.start < g["end"] and g["start"] < u.end:
                done.add(gi)
                rel[r] = 1.0
                break
    return rel


def ndcg_recall(units: list[Unit], ranked: list[int], gold: list[dict], k: int = 10) -> tuple[float, float]:
    rel = credits(units, ranked, gold, k)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = disc[:min(len(gold), k)].sum()
    return float((rel * disc).sum() / ideal) if ideal else 0.0, float(rel.sum() / max(len(gold), 1))


# ----------------------------------------------------------------------------- baselines
@dataclass
class Baselines:
    """Naive flattening, parent-child chunking and BM25 over the units of a corpus."""

    units: list[Unit]
    naive: np.ndarray  # (U, d)
    child: np.ndarray  # (Ch, d)
    child_parent: np.ndarray  # (Ch,) sorted
    bm25: Lexical
    encoder: object

    @classmethod
    def build(cls, units: list[Unit], encoder) -> "Baselines":
        naive = encoder.encode([u.flat_text() for u in units])
        texts, parent = [], []
        for i, u in enumerate(units):
            if u.table is not None:
                kids = [u.table.row_text(r) for r in range(len(u.table.rows))]
            else:
                kids = [s for s in _SENT.split(u.text) if s.strip()]
            kids = kids or [u.flat_text()]
            texts += kids
            parent += [i] * len(kids)
        child = encoder.encode(texts)
        bm = Lexical.build([u.flat_text() for u in units])
        return cls(units, naive, child, np.array(parent), bm, encoder)

    def rank(self, method: str, question: str, k: int = 10, qvec: np.ndarray | None = None) -> list[int]:
        if method == "bm25":
            return top_k(self.bm25.scores(question), k).tolist()
        q = self.encoder.encode([question])[0] if qvec is None else qvec
        if method == "naive":
            return top_k(self.naive @ q, k).tolist()
        if method == "parent-child":
            s = self.child @ q
            starts = np.flatnonzero(np.r_[True, self.child_parent[1:] != self.child_parent[:-1]])
            unit_s = np.full(len(self.units), -np.inf)
            unit_s[self.child_parent[starts]] = np.maximum.reduceat(s, starts)
            return top_k(unit_s, k).tolist()
        raise ValueError(f"unknown baseline {method!r}")


# ----------------------------------------------------------------------------- runs
def parse_corpus(ds: HybridDataset, router: RouterConfig | None = None) -> list[ParsedDocument]:
    return [parse_document(text, doc_id, router) for doc_id, text in ds.docs.items()]


def router_f1(ds: HybridDataset, kinds: tuple[str, ...] = ("mixed",), router: RouterConfig | None = None) -> dict:
    """Per-line F1 of the router against the generator's labels (blank lines excluded)."""
    from .router import route_lines

    pred, gold, blank = [], [], []
    for doc_id, text in ds.docs.items():
        if ds.kinds.get(doc_id) not in kinds:
            continue
        lab = np.array(ds.labels[doc_id])
        r = route_lines(text.splitlines(), router)
        pred.append(r.structured[:lab.size])
        gold.append(lab == 1)
        blank.append(lab == -1)
    if not pred:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 0.0, "lines": 0}
    return line_f1(np.concatenate(pred), np.concatenate(gold), np.concatenate(blank))


def hybrid_ranking(index: HybridIndex, question: str, cfg: SearchConfig) -> tuple[list[int], dict]:
    res = index.search(question, cfg)
    ranking = res["reranked"] or res["fused"]
    return [r["unit"] for r in ranking], res


def evaluate(questions: list[dict], rankers: dict, units: list[Unit], k: int = 10) -> list[dict]:
    """Per-question nDCG/Recall and time for each ``name -> fn(question) -> ranked unit ids``."""
    out = []
    for q in questions:
        for name, fn in rankers.items():
            t = time.perf_counter()
            ranked = fn(q["question"])
            ms = (time.perf_counter() - t) * 1000
            nd, rc = ndcg_recall(units, ranked, q["gold"], k)
            out.append({"id": q["id"], "type": q["type"], "split": q.get("split", "test"), "method": name,
                        "ndcg": nd, "recall": rc, "ms": ms})
    return out


def summarize(rows: list[dict], methods: list[str], types: tuple[str, ...] = ("A", "B", "C")) -> list[dict]:
    """Mean nDCG/Recall per method and type (plus ``all``) and median ms."""
    table = []
    for m in methods:
        mine = [r for r in rows if r["method"] == m]
        row = {"method": m}
        for t in types + ("all",):
            sel = [r for r in mine if t == "all" or r["type"] == t]
            row[f"ndcg_{t}"] = float(np.mean([r["ndcg"] for r in sel])) if sel else float("nan")
            row[f"recall_{t}"] = float(np.mean([r["recall"] for r in sel])) if sel else float("nan")
        row["median_ms"] = float(np.median([r["ms"] for r in mine])) if mine else float("nan")
        table.append(row)
    return table


def standard_rankers(index: HybridIndex, base: Baselines, k: int = 10, variants: dict | None = None) -> dict:
    """The baselines plus one hybrid ranker per ``name -> (index, SearchConfig)`` in ``variants``."""
    rankers = {m: (lambda q, m=m: base.rank(m, q, k)) for m in ("naive", "parent-child", "bm25")}
    for name, (idx, cfg) in (variants or {"hybrid": (index, SearchConfig(k=k))}).items():
        rankers[name] = lambda q, idx=idx, cfg=cfg: hybrid_ranking(idx, q, cfg)[0]
    return rankers
