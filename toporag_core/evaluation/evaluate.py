"""GraphQA evaluation: answer with the task decoding, score with the benchmark's metric, stream JSONL.

Answers come from :meth:`~toporag_core.model.TopoRAGModel.answer`: label scoring over the model's
closed ``answer_set`` (or ``choices``) when it has one, or over yes/no for a polar question, else
greedy generation cut to a short phrase (the pipeline's rule,
:func:`~toporag_core.model.choices_for`). Every prediction is written as one JSON line
the moment its batch is done (and flushed), so a killed run keeps what it had; ``resume=True`` skips
ids already in the file. Line fields: ``id, qtype, question, gold, answer, probability, correct,
clean, seconds`` (per example: the batch's wall time divided by its size), plus ``prediction`` (=
answer), ``label`` (= gold), ``cells {nodes, edges, cells2, counts}``, ``context``, ``method``,
``dataset``, ``margin`` (lead over the runner-up label), ``answer_kind`` (``label`` / ``generated``:
what the confidence threshold is calibrated per) - what the error-analysis page reads
(:mod:`toporag_core.predictions` documents each field and holds every reader and writer of these files).
The summary counts unclean answers (context dumps,
repeated questions, see :func:`~toporag_core.model.is_clean`) and reports the spread of the graph
tokens across examples (``graph_token_rel_std``: norm of the per-coordinate standard deviation over
the norm of the mean token; near 0 means the soft prompt is the same for every example).
``graph_tokens`` picks an ablation arm of :mod:`toporag_core.evaluation.arms` (``zero``, ``permute``, ``mean``,
``only``); every line records it, so ``toporag compare`` pairs the arms question by question.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..tasks import metric_of
from ..tasks.prep import Example
from ..metrics import is_correct
from ..model import TopoRAGModel
from ..tasks.batching import make_batch
from .arms import GraphTokenArm, check_arm
from ..predictions import eval_record, read_predictions, read_records, record_line, write_predictions
from ..predictions.calibrate import context_check, is_low


def score(dataset: str, prediction: str, label: Any) -> bool:
    """The dataset's GraphQA metric (the registered task's ``metric``; an unregistered name is a metric name)."""
    return bool(is_correct(metric_of(dataset), prediction, label))


def _resume(path: Path) -> tuple[set[str], int, int]:
    """Ids, correct count and record count of a (possibly truncated) predictions file, which is
    rewritten without its unparsable lines (a line cut by a kill: it is redone)."""
    if not path.is_file():
        return set(), 0, 0
    recs = read_records(path, ("id",), skip_cut=True)
    write_predictions(path, recs)
    return {str(r["id"]) for r in recs}, sum(bool(r.get("correct")) for r in recs), len(recs)


def _margin(pred: dict[str, Any]) -> float | None:
    """The answer's probability lead over the runner-up: the name reader's ``margin``, else from the
    label scores (softmax over the candidates), ``None`` for a generated answer."""
    if pred.get("margin") is not None:
        return float(pred["margin"])
    if not pred.get("scores"):
        return None
    import torch

    top = torch.tensor(list(pred["scores"].values()), dtype=torch.float64).softmax(0).sort(descending=True).values
    return float(top[0] - (top[1] if len(top) > 1 else 0.0))


class _Tally:
    """Running counts of one evaluation: right answers in all, per question type and per support coverage,
    unclean answers, and the sums of the graph tokens and of their squares (for their spread)."""

    def __init__(self, correct: int = 0, n: int = 0) -> None:
        self.correct, self.n, self.unclean = correct, n, 0
        self.by_type: dict[str, list[int]] = {}
        self.by_cov: dict[bool, list[int]] = {}
        self.soft_sum = self.soft_sq = None
        self.n_soft = 0

    def add(self, qtype: str | None, covered: bool | None, ok: bool, clean: bool) -> None:
        """One answer: ``ok`` (scored right), ``clean``, its question type and support coverage."""
        self.correct += ok
        self.n += 1
        self.unclean += not clean
        self.by_type.setdefault(qtype or "all", [0, 0])
        self.by_type[qtype or "all"][0] += ok
        self.by_type[qtype or "all"][1] += 1
        if covered is not None:
            self.by_cov.setdefault(covered, [0, 0])
            self.by_cov[covered][0] += ok
            self.by_cov[covered][1] += 1

    def add_tokens(self, soft) -> None:
        """A batch's graph tokens ``(B, T, H)``, flattened to ``(B, T * H)`` into the running moments."""
        flat = soft.float().flatten(1)
        self.soft_sum = flat.sum(0) if self.soft_sum is None else self.soft_sum + flat.sum(0)
        self.soft_sq = (flat ** 2).sum(0) if self.soft_sq is None else self.soft_sq + (flat ** 2).sum(0)
        self.n_soft += flat.shape[0]

    def recount(self, path: Path) -> None:
        """The answer counts again from the predictions file (the truth: it includes lines from before a
        resume); the graph tokens' moments stay those of this run."""
        self.by_type, self.by_cov = {}, {}
        self.unclean = 0
        for rec in read_records(path, ("id", "correct")):
            self.unclean += not rec.get("clean", True)
            if isinstance(rec.get("support_covered"), bool):
                self.by_cov.setdefault(rec["support_covered"], [0, 0])
                self.by_cov[rec["support_covered"]][0] += bool(rec["correct"])
                self.by_cov[rec["support_covered"]][1] += 1
            self.by_type.setdefault(rec.get("qtype") or "all", [0, 0])
            self.by_type[rec.get("qtype") or "all"][0] += bool(rec["correct"])
            self.by_type[rec.get("qtype") or "all"][1] += 1
        self.correct = sum(v[0] for v in self.by_type.values())
        self.n = sum(v[1] for v in self.by_type.values())

    def spread(self) -> float | None:
        """``||std|| / ||mean||`` of the graph tokens seen (``None`` below two examples)."""
        if self.n_soft <= 1:
            return None
        mean = self.soft_sum / self.n_soft
        std = (self.soft_sq / self.n_soft - mean ** 2).clamp(min=0).sqrt()
        return float(std.norm() / mean.norm().clamp(min=1e-12))

    def summary(self, secs: float, answered: int) -> dict[str, Any]:
        """:func:`evaluate`'s result (``answered``: examples answered by this run, for its speed)."""
        return {"accuracy": self.correct / max(self.n, 1), "correct": self.correct, "n": self.n,
                "unclean": self.unclean, "seconds": secs, "examples_per_s": answered / max(secs, 1e-9),
                "by_type": {k: v[0] / v[1] for k, v in self.by_type.items()}, "graph_token_rel_std": self.spread(),
                "by_coverage": {COVERAGE_GROUPS[k]: {"n": v[1], "accuracy": v[0] / v[1]}
                                for k, v in sorted(self.by_cov.items())}}


def _open_predictions(path: Path | None, resume: bool) -> tuple[set[str], _Tally]:
    """The ids already answered and the starting counts: with ``resume``, those of the existing file
    (:func:`_resume`); else the file is removed."""
    done, correct, n = (_resume(path) if (path is not None and resume) else (set(), 0, 0))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not resume and path.exists():
            path.unlink()
    return done, _Tally(correct, n)


def _answer_batch(model: TopoRAGModel, arm: GraphTokenArm, chunk: list[Example], choices,
                  tally: _Tally) -> tuple[list[dict[str, Any]], float]:
    """The predictions of one batch (with the arm's graph tokens, else the model's own) and the batch's
    seconds per example; the graph tokens go into ``tally``."""
    import torch

    tb = time.perf_counter()
    batch = make_batch(chunk, with_answers=False, use_graph=model.config.use_graph).to(model.device)
    with torch.no_grad():
        soft = arm.tokens(model, batch, chunk)
        if soft is None and model.config.use_graph:
            soft = model.graph_tokens(batch.cells)
        preds = model.answer(batch, choices=choices, soft=soft)
    secs_each = (time.perf_counter() - tb) / len(chunk)
    if soft is not None:
        tally.add_tokens(soft)
    return preds, secs_each


def _record(ex: Example, pred: dict[str, Any], ok: bool, secs_each: float, method: str, dataset: str,
            graph_tokens: str, calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """One predictions line (:func:`~toporag_core.predictions.eval_record`); with the checkpoint's
    ``calibration`` (its ``"confidence"`` entry) also ``low_confidence`` and, for a label answer after
    evidence, ``unsupported_claims``, as Ask flags the same answer
    (:func:`~toporag_core.predictions.calibrate.is_low`)."""
    kind = pred.get("kind")
    conf = pred["probability"] if pred.get("confidence") is None else pred["confidence"]
    unsupported = context_check(kind, ex.question, pred["answer"], pred.get("evidence"), ex.context)
    return eval_record(
        id=ex.id, qtype=ex.qtype, question=ex.question, gold=ex.label, answer=pred["answer"],
        probability=pred["probability"], correct=ok, clean=pred["clean"], seconds=secs_each,
        raw=pred["raw"], evidence=pred.get("evidence"), support_covered=ex.covered,
        cells=ex.cells, context=ex.context, method=method, dataset=dataset,
        graph_tokens=graph_tokens, margin=_margin(pred), answer_kind=kind,
        confidence=pred.get("confidence"), unsupported_claims=unsupported,
        low_confidence=is_low(calibration, kind, conf, unsupported) if calibration else None)


def evaluate(model: TopoRAGModel, examples: list[Example], dataset: str, out: str | os.PathLike | None = None,
             batch_size: int = 8, method: str = "toporag", resume: bool = False,
             show_progress: bool = True, choices=None, graph_tokens: str = "normal",
             arm_seed: int = 0, calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """Answer every example, score it, stream predictions to ``out`` (JSONL).

    ``choices``: passed to :meth:`TopoRAGModel.answer` (``None``: per question, the model's
    ``answer_set``, else yes/no for a polar question, else open).
    Returns ``{"accuracy", "correct", "n", "unclean", "seconds", "examples_per_s", "by_type": {qtype:
    acc}, "graph_token_rel_std", "by_coverage"}`` over all examples in the file (earlier lines included
    when resuming). ``by_coverage``: where the data names each question's answer-bearing objects
    (SceneGraphs), ``{"answer objects retrieved" | "answer objects missed": {"n", "accuracy"}}``, which
    separates retrieval misses from reading mistakes; empty otherwise. ``graph_tokens``/``arm_seed``:
    the ablation arm (:class:`~toporag_core.evaluation.arms.GraphTokenArm`) and its derangement seed.
    ``calibration``: the checkpoint's ``"confidence"`` entry; each record then says whether its answer is
    low confidence (``low_confidence``), as the Ask page would flag it.
    """
    from tqdm.auto import tqdm

    path = Path(out) if out is not None else None
    done, tally = _open_predictions(path, resume)
    arm = GraphTokenArm(check_arm(graph_tokens, model.config.use_graph), examples, seed=arm_seed,
                        batch_size=batch_size)
    todo = [e for e in examples if str(e.id) not in done]
    fh = open(path, "a") if path is not None else None
    model.eval()
    t0 = time.perf_counter()
    bar = tqdm(total=len(todo), disable=not show_progress, desc="eval")
    try:
        for i in range(0, len(todo), batch_size):
            chunk = arm.inputs(todo[i:i + batch_size])
            preds, secs_each = _answer_batch(model, arm, chunk, choices, tally)
            for ex, pred in zip(chunk, preds):
                ok = score(dataset, pred["answer"], ex.label)
                tally.add(ex.qtype, ex.covered, ok, pred["clean"])
                if fh is not None:
                    fh.write(record_line(_record(ex, pred, ok, secs_each, method, dataset, graph_tokens,
                                                 calibration)))
                    fh.flush()
            bar.update(len(chunk))
            bar.set_postfix(acc=f"{tally.correct / max(tally.n, 1):.3f}")
    finally:
        bar.close()
        if fh is not None:
            fh.close()
    secs = time.perf_counter() - t0
    if path is not None:
        tally.recount(path)
    return tally.summary(secs, len(todo))


COVERAGE_GROUPS = {True: "answer objects retrieved", False: "answer objects missed"}


def prediction_group(by: str) -> Callable[[dict[str, Any]], str | None]:
    """The grouping of ``toporag compare --by``: ``"qtype"`` (the record's question type),
    ``"template"`` (type and generator template of a SceneGraphs question, ``"1-cell/two-hop"``:
    :func:`~toporag_core.tasks.scenes.question_template`) or ``"coverage"`` (whether the record's
    retrieval kept every answer-bearing object, its ``support_covered``: :data:`COVERAGE_GROUPS`).
    A record outside every group gives ``None``."""
    if by == "qtype":
        return lambda r: r.get("qtype") or None
    if by == "coverage":
        return lambda r: (COVERAGE_GROUPS[r["support_covered"]] if isinstance(r.get("support_covered"), bool)
                          else None)  # absent or malformed: outside every group
    if by == "template":
        from ..tasks.scenes.dataset import record_template

        return record_template
    raise ValueError(f"unknown grouping {by!r}; choose qtype, template or coverage")


def read_pooled(paths: Sequence[str | os.PathLike]) -> dict[str, dict[str, Any]]:
    """Several samples' predictions as one: the records of ``paths[k]`` keyed ``"k:id"`` (ids repeat
    across independently generated samples, so the sample's position is part of the key). One path
    reads as :func:`read_predictions` (keys unchanged)."""
    if len(paths) == 1:
        return read_predictions(paths[0])
    return {f"{k}:{i}": rec for k, path in enumerate(paths) for i, rec in read_predictions(path).items()}


def paired_table(runs: dict[str, str | os.PathLike | Sequence[str | os.PathLike]], reference: str,
                 group: Callable[[dict[str, Any]], str | None] | None = None) -> list[dict[str, Any]]:
    """One row per run: accuracy on the examples every run answered, and the exact McNemar test
    against ``reference`` (only-run-right, only-reference-right, p). Also a majority row (the most
    frequent gold answer of those examples, when the files carry ``gold``).

    A run given as a list of files pools several samples (:func:`read_pooled`): every run must then
    list the same number of files, sample ``k`` of one run paired with sample ``k`` of the others, and
    the test runs on the discordant pairs of all samples together.

    ``group`` (:func:`prediction_group`, applied to the reference's record): the same rows once for
    all examples (``group: "all"``), then once per group, in sorted order; every row has a ``group`` key.
    """
    from collections import Counter

    from ..metrics import mcnemar_exact

    if reference not in runs:
        raise ValueError(f"reference {reference!r} is not one of the runs {sorted(runs)}")
    files = {name: [p] if isinstance(p, (str, os.PathLike)) else list(p) for name, p in runs.items()}
    counts = {name: len(f) for name, f in files.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"pooled runs must list the same number of sample files, got {counts}")
    preds = {name: read_pooled(f) for name, f in files.items()}
    common = sorted(set.intersection(*(set(p) for p in preds.values())))
    if not common:
        raise ValueError("the prediction files share no example id")
    groups: dict[str, list[str]] = {"all": common}
    if group is not None:
        for i in common:
            g = group(preds[reference][i])
            if g:
                groups.setdefault(str(g), []).append(i)
    rows = []
    for gname in ["all", *sorted(k for k in groups if k != "all")]:
        ids = groups[gname]
        ref = [preds[reference][i]["correct"] for i in ids]
        for name, p in preds.items():
            mine = [p[i]["correct"] for i in ids]
            x, y, pv = mcnemar_exact(mine, ref)
            rows.append({"group": gname, "run": name, "n": len(ids), "accuracy": sum(mine) / len(ids),
                         "only_this_right": x, "only_reference_right": y, "p_value": pv,
                         "reference": name == reference, "answered": len(p)})
        golds = [str(preds[reference][i].get("gold", "")) for i in ids]
        if all(golds):
            label, count = Counter(golds).most_common(1)[0]
            maj = [g == label for g in golds]
            x, y, pv = mcnemar_exact(maj, ref)
            rows.append({"group": gname, "run": f"majority ({label})", "n": len(ids), "accuracy": count / len(ids),
                         "only_this_right": x, "only_reference_right": y, "p_value": pv, "reference": False,
                         "answered": len(ids)})
    return rows


def paired_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """:func:`paired_table`'s rows as a markdown table (one string per line; what ``toporag compare``
    prints and the benchmarks paste into docs/results)."""
    out = ["| group | run | n | accuracy | only this right | only reference right | McNemar p |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        p = "(reference)" if r["reference"] else f"{r['p_value']:.3g}"
        out.append(f"| {r['group']} | {r['run']} | {r['n']} | {r['accuracy']:.3f} | {r['only_this_right']} | "
                   f"{r['only_reference_right']} | {p} |")
    return out
