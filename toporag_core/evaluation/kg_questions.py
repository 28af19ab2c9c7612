"""Knowledge-graph question files: read them, answer every question from a store, score the answers.

``toporag kg eval DB QUESTIONS.jsonl --out preds.jsonl`` runs :func:`evaluate_store`. A question file has
one JSON object per line, ``{"id", "question", "answers": [...], "topic": optional}`` (``topic``: the
entity name or names the question is about; without it the question is linked). :func:`read_questions`
checks every line before any work: a bad line is one ``ValueError`` naming the file, the line and the
field. Each question is answered by :func:`toporag_core.kg.answer.ask_store`; the record written per
question is a ``toporag eval`` predictions record (:func:`~toporag_core.predictions.eval_record`) plus
``hit``, ``hit1``, ``coverage`` (answer in the subcomplex, per retrieval method), ``subgraph_covered``,
``confidence``, ``low_confidence``, ``candidates``, ``topic``, ``links`` and ``error``.

Metrics: **Hit** (WebQSP's: a normalised gold answer occurs in the normalised prediction), **Hit@1**
(the first name of the answer equals a gold answer), **coverage** (a gold answer equals a retrieved
node's text).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..kg.answer import ask_store, links_json
from ..kg.link import with_seeds
from ..kg.store import KGStore
from ..metrics import answer_items, normalize


@dataclass
class KGQuestion:
    """One line of a question file."""

    id: str
    question: str
    answers: list[str] = field(default_factory=list)
    topic: list[str] = field(default_factory=list)


def read_questions(path: str | os.PathLike) -> list[KGQuestion]:
    """Every question of a JSONL question file (see the module docstring); ``ValueError`` naming the
    file, line and field of the first bad line, before anything is answered."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such question file")
    out: list[KGQuestion] = []
    seen: set[str] = set()
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise ValueError(f"{path}: line {n}: not UTF-8 text") from None
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {n}: not a JSON object ({e.msg})") from None
            if not isinstance(obj, dict):
                raise ValueError(f"{path}: line {n}: not a JSON object")
            q = obj.get("question")
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"{path}: line {n}: field 'question': needs non-empty text")
            answers = obj.get("answers", [])
            if isinstance(answers, str):
                answers = [answers]
            if not isinstance(answers, list) or not all(isinstance(a, (str, int, float)) for a in answers):
                raise ValueError(f"{path}: line {n}: field 'answers': needs a list of texts")
            topic = obj.get("topic") or []
            if isinstance(topic, str):
                topic = [topic]
            if not isinstance(topic, list) or not all(isinstance(t, str) and t.strip() for t in topic):
                raise ValueError(f"{path}: line {n}: field 'topic': needs an entity name or a list of names")
            qid = str(obj.get("id", n))
            if qid in seen:
                raise ValueError(f"{path}: line {n}: field 'id': {qid!r} repeats an earlier line's id")
            seen.add(qid)
            out.append(KGQuestion(qid, q.strip(), [str(a) for a in answers], list(topic)))
    if not out:
        raise ValueError(f"{path}: no questions (one JSON object per line: id, question, answers, topic)")
    return out


def coverage(node_texts: Sequence[str], answers: Sequence[str]) -> bool:
    """True when a normalised gold answer equals a normalised retrieved node text."""
    got = {normalize(t) for t in node_texts}
    return any(normalize(a) in got for a in answers if normalize(a))


def hit(prediction: str, answers: Sequence[str]) -> bool:
    """WebQSP's Hit: a normalised gold answer occurs in the normalised prediction."""
    p = normalize(prediction)
    return any(normalize(a) and normalize(a) in p for a in answers)


def hit1(prediction: str, answers: Sequence[str]) -> bool:
    """The first name of the answer (:func:`~toporag_core.metrics.answer_items`: a number's commas do not
    split it) equals a gold answer (normalised)."""
    items = answer_items(prediction)
    first = normalize(items[0]) if items else ""
    return bool(first) and any(normalize(a) == first for a in answers)


def _record(q: KGQuestion, res: Any | None, cov: dict[str, bool], sub_cov: bool | None, seconds: float,
            dataset: str, error: str | None = None) -> dict[str, Any]:
    """One predictions record (:func:`~toporag_core.predictions.eval_record`'s keys, then the KG ones) of
    a :class:`~toporag_core.kg.answer.StoreAnswer` (``None``: the question was not answered)."""
    from ..predictions import eval_record

    a = res.reply if res else None
    answer = a.answer if a else ""
    rec = eval_record(id=q.id, qtype=None, question=q.question, gold=q.answers, answer=answer,
                      probability=a.probability if a else None, correct=hit(answer, q.answers),
                      clean=bool(a.get("clean", True)) if a else False, seconds=seconds,
                      raw=a.raw if a else None, cells=a.cells if a else None,
                      context=a.context if a else "", method=a.method if a else "", dataset=dataset)
    rec.update(hit=rec["correct"], hit1=hit1(answer, q.answers), coverage=cov, subgraph_covered=sub_cov,
               confidence=a.confidence if a else None, low_confidence=a.low_confidence if a else None,
               candidates=a.candidates if a else None, topic=q.topic,
               links=links_json(res.links) if res else [], error=error)
    return rec


def evaluate_store(store: KGStore, pipe, questions: Sequence[KGQuestion], setting, methods: Sequence[str] = (),
                   out: str | os.PathLike | None = None, hops: int = 2, link: str = "auto",
                   max_nodes: int | None = 50_000, max_new_tokens: int | None = None, on_warning=None
                   ) -> dict[str, Any]:
    """Answer every question (:func:`ask_store`; a question's ``topic`` names its seeds), measure answer
    coverage of the answering retrieval and of each of ``methods`` on the same subgraph, write the
    predictions records to ``out`` (atomic) and return the summary: ``questions, hit, hit1, coverage
    {method: share}, subgraph_coverage, p50_s, low_confidence, unanswered``. A question that links no
    entity is answered ``""`` (a miss) and reported through ``on_warning(line)``."""
    import numpy as np

    from ..predictions import write_predictions
    from ..retrieval import RetrievalSetting, get_method, retrieve

    for m in methods:
        get_method(m)  # an unknown name fails here, before any question
    setting = setting or pipe.default_setting()
    names = list(dict.fromkeys([setting.method, *methods]))
    recs, secs = [], []
    for q in questions:
        t = time.perf_counter()
        try:
            res = ask_store(store, pipe, q.question, setting, entities=q.topic or None, link=link, hops=hops,
                            max_nodes=max_nodes, max_new_tokens=max_new_tokens)
        except ValueError as e:
            if on_warning is not None:
                on_warning(f"question {q.id}: {e}")
            recs.append(_record(q, None, {m: False for m in names}, None, time.perf_counter() - t, store.path.name,
                                error=str(e)))
            continue
        cov = {setting.method: coverage(res.reply.subcomplex.node_texts(), q.answers)}
        for m in methods:
            if m not in cov:
                sub = retrieve(res.ecx, q.question, setting=with_seeds(RetrievalSetting.make(m), res.links))
                cov[m] = coverage(sub.node_texts(), q.answers)
        secs.append(time.perf_counter() - t)
        recs.append(_record(q, res, cov, coverage(res.neighbourhood.graph.node_text, q.answers), secs[-1],
                            store.path.name))
    if out is not None:
        write_predictions(out, recs)
    n = max(len(recs), 1)
    return {"questions": len(recs), "hit": sum(r["hit"] for r in recs) / n, "hit1": sum(r["hit1"] for r in recs) / n,
            "coverage": {m: sum(bool(r["coverage"].get(m)) for r in recs) / n for m in names},
            "subgraph_coverage": sum(bool(r["subgraph_covered"]) for r in recs) / n,
            "p50_s": float(np.median(secs)) if secs else 0.0,
            "low_confidence": sum(bool(r["low_confidence"]) for r in recs) / n,
            "unanswered": sum(r["error"] is not None for r in recs), "method": setting.method}
