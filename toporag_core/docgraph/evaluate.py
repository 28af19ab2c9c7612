"""Evaluation of document-graph retrieval against a dense sentence baseline.

Per question (one graph per HotpotQA-distractor record):

* **recall of both gold articles**: both gold titles have a paragraph or sentence in the
  context (a title or heading alone does not count);
* **answer in context**: the normalised answer string occurs in the normalised context;
* **EM / F1** of an LLM's answer (HotpotQA's normalisation: lower case, no punctuation, no
  articles; token F1), when an LLM is given;
* **dense baseline**: sentences ranked by ``cos(q, sentence)``, taken best first while the
  context (``title: sentence`` lines) stays within the *same token budget* as the
  traversal's context for that question (a sentence that does not fit is skipped, the
  fill goes on with the next ones).

Tokens are counted by the LLM tokenizer when one is given, else by ``\\w+|[^\\w\\s]``.
"""
from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..metrics import normalize
from .build import PARAGRAPH, SENTENCE, BuildConfig, DocGraph, build_docgraph
from .context import context_nodes
from .records import gold_titles, record_articles
from .traverse import TraversalConfig, Traverser

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str, tokenizer=None) -> int:
    """Tokens of ``text``: the tokenizer's (no special tokens) or a word/punctuation count."""
    if not text:
        return 0
    if tokenizer is not None:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])
    return len(_TOKEN.findall(text))


def exact_match(prediction: str, answer: str) -> float:
    return float(normalize(prediction) == normalize(answer))


def f1_score(prediction: str, answer: str) -> float:
    """HotpotQA token F1 over normalised tokens."""
    p, g = normalize(prediction).split(), normalize(answer).split()
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p), same / len(g)
    return 2 * prec * rec / (prec + rec)


def answer_in(context: str, answer: str) -> bool:
    a = normalize(answer)
    return bool(a) and f" {a} " in f" {normalize(context)} "


def articles_of(graph: DocGraph, nodes: Iterable[int]) -> set[str]:
    """Titles of the articles that have a paragraph or sentence among ``nodes``."""
    nodes = np.asarray(list(nodes), np.int64)
    if nodes.size == 0:
        return set()
    deep = nodes[graph.level[nodes] >= PARAGRAPH]
    return {graph.titles[int(d)] for d in np.unique(graph.doc[deep])}


def dense_context(graph: DocGraph, qvec: np.ndarray, budget: int, tokenizer=None) -> tuple[str, np.ndarray]:
    """``(context, sentence ids)``: top sentences by cosine within ``budget`` tokens."""
    sents = np.flatnonzero(graph.level == SENTENCE)
    order = sents[np.lexsort((sents, -(graph.x[sents].astype(np.float64) @ qvec)))]
    lines, chosen, used = [], [], 0
    for i in order:
        line = f"{graph.titles[int(graph.doc[i])]}: {graph.text[i]}"
        cost = count_tokens(line, tokenizer) + (1 if lines else 0)
        if used + cost > budget:
            continue
        lines.append(line)
        chosen.append(int(i))
        used += cost
    return "\n".join(lines), np.asarray(chosen, np.int64)


class LLMAnswerer:
    """Answers a question from a context text with the project's frozen LLM: the answering layer's
    text-only pipeline (:meth:`toporag_core.answering.pipeline.TopoRAGPipeline.text_only`: chat template,
    context truncated to ``max_input_tokens``, greedy decoding), the question followed by
    ``instruction``."""

    def __init__(self, llm=None, tokenizer=None, max_new_tokens: int = 16, max_input_tokens: int = 512,
                 instruction: str = "Answer with a short phrase only.") -> None:
        from ..answering.pipeline import TopoRAGPipeline

        self.instruction = instruction
        self.pipeline = TopoRAGPipeline.text_only(model=llm, tokenizer=tokenizer, max_new_tokens=max_new_tokens,
                                                  max_input_tokens=max_input_tokens)
        self.tokenizer = self.pipeline.tokenizer

    def answer(self, contexts: list[str], questions: list[str], batch_size: int = 8) -> list[str]:
        qs = [f"{q} {self.instruction}".strip() for q in questions]
        return self.pipeline.answer_texts(qs, contexts, batch_size=batch_size)


@dataclass
class QuestionRow:
    id: str
    type: str
    nodes: int
    tokens: int
    recall_both: bool
    answer_in_context: bool
    dense_tokens: int
    dense_recall_both: bool
    dense_answer_in_context: bool
    ms: float
    fgw_calls: int
    fgw_bound: int
    fusions: int
    grafts: int
    context: str
    dense: str


def evaluate_records(records: list[dict], encoder, config: TraversalConfig | None = None,
                     build: BuildConfig | None = None, tokenizer=None, repeat_timing: bool = True) -> list[QuestionRow]:
    """One :class:`QuestionRow` per record. With ``repeat_timing`` each question is traversed
    twice and the second (embeddings of fused texts cached) is timed."""
    from .traverse import fgw_call_bound

    cfg = config or TraversalConfig()
    rows = []
    for k, r in enumerate(records):
        g = build_docgraph(record_articles(r, where=f"record {k}"), encoder, build)
        tr = Traverser(g, encoder, cfg)
        q = tr.question_vector(r["question"])
        res = tr.run(r["question"], q)
        if repeat_timing:
            t = time.perf_counter()
            res = tr.run(r["question"], q)
            ms = 1000 * (time.perf_counter() - t)
        else:
            ms = 1000 * res.timings["total"]
        gold = set(gold_titles(r))
        budget = count_tokens(res.context, tokenizer)
        dctx, dsel = dense_context(g, q, budget, tokenizer)
        kmax = max([s.candidates for s in res.steps] or [1])
        rows.append(QuestionRow(
            id=str(r.get("_id", k)), type=str(r.get("type", "")), nodes=g.num_nodes, tokens=budget,
            recall_both=gold <= articles_of(g, context_nodes(g, res.selected)),
            answer_in_context=answer_in(res.context, r["answer"]),
            dense_tokens=count_tokens(dctx, tokenizer), dense_recall_both=gold <= articles_of(g, dsel),
            dense_answer_in_context=answer_in(dctx, r["answer"]), ms=ms, fgw_calls=res.fgw_calls,
            fgw_bound=fgw_call_bound(cfg.max_depth, kmax), fusions=len(res.fusions()), grafts=len(res.grafts()),
            context=res.context, dense=dctx))
    return rows


def summarize(rows: list[QuestionRow]) -> dict[str, Any]:
    """Means over the rows (and medians of time)."""
    def mean(key: str) -> float:
        return float(np.mean([float(getattr(r, key)) for r in rows])) if rows else float("nan")

    return {"questions": len(rows), "mean_nodes": mean("nodes"), "recall_both": mean("recall_both"),
            "dense_recall_both": mean("dense_recall_both"), "answer_in_context": mean("answer_in_context"),
            "dense_answer_in_context": mean("dense_answer_in_context"), "tokens": mean("tokens"),
            "dense_tokens": mean("dense_tokens"), "median_ms": float(np.median([r.ms for r in rows])) if rows else 0.0,
            "fgw_calls": mean("fgw_calls"), "fgw_within_bound": float(np.mean([r.fgw_calls <= r.fgw_bound
                                                                                for r in rows])) if rows else 0.0,
            "fusions": mean("fusions"), "grafts": mean("grafts")}


def llm_scores(rows: list[QuestionRow], records: list[dict], answerer: LLMAnswerer) -> dict[str, float]:
    """EM / F1 of the LLM reading the traversal's context and the dense context."""
    by_id = {str(r.get("_id", k)): r for k, r in enumerate(records)}
    qs = [by_id[row.id]["question"] for row in rows]
    golds = [by_id[row.id]["answer"] for row in rows]
    out = {}
    for name, ctx in (("docgraph", [row.context for row in rows]), ("dense", [row.dense for row in rows])):
        preds = answerer.answer(ctx, qs)
        out[f"{name}_em"] = float(np.mean([exact_match(p, a) for p, a in zip(preds, golds)]))
        out[f"{name}_f1"] = float(np.mean([f1_score(p, a) for p, a in zip(preds, golds)]))
        out[f"{name}_examples"] = list(zip(qs[:3], preds[:3], golds[:3]))
    return out
