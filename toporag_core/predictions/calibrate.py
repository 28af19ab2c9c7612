"""Confidence calibration: the probability below which an answer is flagged "low confidence".

An answer's probability (``probability`` of a predictions record) means different things per
*answer kind*: a softmax over a closed label set (``"label"``: support / counter, yes / no), the
model's probability that the answer is the chosen candidate name against its probability with the question
left out (``"names"``: the name reader, :func:`~toporag_core.metrics.name_confidence`; its softmax over the
names does not separate right from wrong answers) or the per-token geometric mean of a
generated phrase (``"generated"``). So each kind gets its own threshold, fitted on the validation split of the
checkpoint:

    t* = max { t : |{right answers with p < t}| <= rate * n_right }
    rate = r - z sqrt(r (1 - r) / n_right)          (r = 0.25, z = 1)

With the right answers' probabilities sorted, ``p_(1) <= ... <= p_(m)``, that is ``t* = p_(k+1)``
for ``k = floor(rate * m)``: every ``t <= p_(k+1)`` flags at most ``k`` right answers, any larger
``t`` also flags ``p_(k+1)``. An answer is flagged when ``p < t*``; what matters is then the share of
*wrong* answers it flags (the target is at least 60%), measured on validation and on test.

**The margin** ``z`` (:data:`MARGIN_SE`, :func:`fit_rate`): a threshold fitted at exactly ``r`` flags more than
``r`` of the right answers of new questions about half the time, since the validation share is itself an
estimate with standard error ``sqrt(r (1 - r) / m)``. Fitting one standard error below ``r`` (22.9% for
``m = 406``, 21.1% for ``m = 125``) keeps a held-out split at or below ``r`` about five times in six when it
is drawn like the validation split. The ExplaGraphs and SceneGraphs thresholds were fitted before the margin
(``z = 0``); the general checkpoint's with it (docs/results/confidence.md).

**Evidence that the context does not hold.** A label answer after evidence the model wrote (the scene
checkpoint's yes / no) is also flagged when a claim of that evidence is not a fact of the context it read
(:func:`~toporag_core.retrieval.claims.unsupported_claims`), whatever its probability. For those kinds
(:data:`EVIDENCE_CHECKED`) the threshold is fitted on what the check leaves: with ``f`` right answers
flagged by the check, ``t*`` is the ``(k - f + 1)``-th smallest probability of the other right answers
(``0``, flagging by probability nothing, when ``f >= k``), so at most ``k`` right answers are flagged in all.

* :func:`answer_kind` - the kind of one record (``answer_kind`` when written, else inferred from its
  margin and candidate names, for older files).
* :func:`fit_threshold`, :func:`flag_rates`, :func:`calibrate` - the fit and the measurements.
* :func:`unsupported_of` - a record's evidence claims its context does not hold (the check above).
* :func:`threshold_for`, :func:`is_low` - the stored calibration read back: the one rule by which an answer is
  flagged, for the pipeline (Ask, ``toporag ask``, ``kg ask``) and ``toporag eval``'s records alike.
* :func:`write_confidence` - the fitted thresholds into a checkpoint's ``config.json`` (key
  ``"confidence"``, written atomically), which :meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.confidence_of`
  reads.
"""
from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..metrics import name_confidence
from ..retrieval.claims import ungrounded_answer, unsupported_claims

KINDS = ("label", "names", "generated")
# kinds checked against the context: a label's evidence (a label after evidence), a generated answer itself
EVIDENCE_CHECKED = ("label", "generated")
MAX_RIGHT_FLAGGED = 0.25  # the target: at most this share of right answers is flagged
MARGIN_SE = 1.0  # the fit stays this many standard errors of the validation share below the target


def fit_rate(n_right: int, target: float = MAX_RIGHT_FLAGGED, margin: float = MARGIN_SE) -> float:
    """The share of right validation answers the threshold may flag: ``target - margin x`` the standard
    error of a share ``target`` over ``n_right`` answers (the module docstring), at least 0."""
    if n_right <= 0:
        return target
    return max(0.0, target - margin * float(np.sqrt(target * (1.0 - target) / n_right)))


def answer_kind(rec: dict[str, Any]) -> str:
    """``"label"``, ``"names"`` or ``"generated"``: the record's ``answer_kind`` when it has one; else
    ``"names"`` when it lists the name reader's candidate names, ``"label"`` when it has a margin
    (a scored label set), ``"generated"`` otherwise."""
    kind = rec.get("answer_kind")
    if kind in KINDS:
        return str(kind)
    if rec.get("names"):
        return "names"
    return "label" if rec.get("margin") is not None else "generated"


def chosen_name_scores(rec: dict[str, Any]) -> tuple[list[float], int] | None:
    """A name-reader record's per-name log-likelihoods and the index of its chosen name (the first of
    ``candidates``, which are ordered best first), or ``None`` when the record does not say them."""
    ll, names, cands = rec.get("name_scores"), rec.get("names") or [], rec.get("candidates") or []
    if answer_kind(rec) == "names" and ll and cands and cands[0].get("name") in names:
        return ll, names.index(cands[0]["name"])
    return None


def confidence_of(rec: dict[str, Any]) -> float | None:
    """The number a record's answer is judged by: its ``confidence`` when written; for a name-reader
    record with per-name scores, :func:`~toporag_core.metrics.name_confidence` of the chosen name (the first
    of ``candidates``, which are ordered best first) and its ``name_free`` when recorded; else its
    ``probability``."""
    if rec.get("confidence") is not None:
        return float(rec["confidence"])
    chosen = chosen_name_scores(rec)
    if chosen is not None:
        return name_confidence(*chosen, rec.get("name_free"))
    return None if rec.get("probability") is None else float(rec["probability"])


def context_check(kind: str | None, question: str, answer: str | None, evidence: str | None,
                  context: str | None) -> list[str] | None:
    """What of an answer its context does not hold, per answer kind (:data:`EVIDENCE_CHECKED`): for a label
    answer the claims of the evidence the model wrote before it
    (:func:`~toporag_core.retrieval.claims.unsupported_claims`), for a generated answer the answer itself when
    the context does not state it beside the question's words
    (:func:`~toporag_core.retrieval.claims.ungrounded_answer`); ``[]`` when all is held, ``None`` when
    nothing was checked (another kind, no evidence, a context without node lines). The one check the
    pipeline, ``toporag eval`` and the calibration share."""
    if kind == "label":
        return unsupported_claims(evidence, context)
    if kind == "generated":
        return ungrounded_answer(question, answer, context)
    return None


def unsupported_of(rec: dict[str, Any]) -> list[str] | None:
    """What a record's context does not hold of its answer: its ``unsupported_claims`` when written, else
    :func:`context_check` of its ``question``, ``answer``, ``evidence`` and ``context``; ``None`` (nothing
    checked) for kinds outside :data:`EVIDENCE_CHECKED`."""
    kind = answer_kind(rec)
    if kind not in EVIDENCE_CHECKED:
        return None
    if "unsupported_claims" in rec:
        return rec["unsupported_claims"]
    return context_check(kind, str(rec.get("question") or ""), rec.get("answer"), rec.get("evidence"),
                         rec.get("context"))


def threshold_for(calibration: dict[str, Any] | None, kind: str | None) -> float | None:
    """The threshold of answers of ``kind`` in a checkpoint's ``"confidence"`` entry (``{"threshold": {kind: t}}``;
    a single number applies to every kind); ``None`` when it has none for ``kind``."""
    thr = (calibration or {}).get("threshold")
    if isinstance(thr, dict):
        thr = thr.get(kind) if kind is not None else None
    return None if thr is None else float(thr)


def is_low(calibration: dict[str, Any] | None, kind: str | None, confidence: float | None,
           unsupported: list[str] | None = None) -> bool | None:
    """Whether an answer is low confidence under a checkpoint's ``"confidence"`` entry: its ``confidence``
    below the kind's threshold, or (for a kind in the entry's ``evidence_check``) a claim of its evidence that
    its context does not hold (``unsupported`` not empty); ``None`` without a confidence or a threshold."""
    thr = threshold_for(calibration, kind)
    if confidence is None or thr is None:
        return None
    checked = kind in ((calibration or {}).get("evidence_check") or ())
    return bool(confidence < thr or (checked and unsupported))


def correct_of(rec: dict[str, Any]) -> bool:
    """The record's verdict: ``correct`` (``toporag eval``), else ``hit`` (knowledge-graph answer records)."""
    return bool(rec["correct"] if "correct" in rec else rec.get("hit"))


def auroc(score: Iterable[float], right: Iterable[bool]) -> float | None:
    """How well ``score`` separates right from wrong answers: the chance that a right answer scores above a
    wrong one (ties count half; the Mann-Whitney U over ``n_right x n_wrong``), from mid-ranks; ``None``
    without both."""
    from scipy.stats import rankdata

    s, ok = np.asarray(list(score), np.float64), np.asarray(list(right), bool)
    n1, n0 = int(ok.sum()), int((~ok).sum())
    if not n1 or not n0:
        return None
    return float((rankdata(s)[ok].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def names_separation(records: Iterable[dict[str, Any]], weights: Iterable[float]) -> dict[str, Any]:
    """AUROC (:func:`auroc`) of the names confidence :func:`~toporag_core.metrics.name_confidence` at each
    question-free weight ``w`` over the name-reader records that carry ``name_scores``, ``candidates`` and
    ``name_free`` (``{"n", "n_wrong", "auroc": {w: value}}``): how the shipped weight was chosen."""
    rows = []
    for r in records:
        chosen = chosen_name_scores(r)
        if chosen is not None and r.get("name_free") is not None:
            rows.append((*chosen, float(r["name_free"]), correct_of(r)))
    ok = [x[3] for x in rows]
    return {"n": len(rows), "n_wrong": len(ok) - sum(ok),
            "auroc": {float(w): auroc([name_confidence(ll, i, free, weight=w) for ll, i, free, _ in rows], ok)
                      for w in weights}}


def fit_threshold(p_right: Iterable[float], rate: float = MAX_RIGHT_FLAGGED,
                  forced: Iterable[bool] | None = None) -> float | None:
    """The largest ``t`` with at most ``rate`` of ``p_right`` below it (``p_(k+1)``, ``k = floor(rate m)``);
    ``None`` without right answers. ``forced``: per right answer, whether it is flagged anyway (its evidence
    failed the check); the threshold then flags at most ``k`` minus those among the others (``0`` when none)."""
    p = np.asarray(list(p_right), dtype=np.float64)
    if not len(p):
        return None
    k = int(np.floor(rate * len(p) + 1e-9))
    if forced is not None:
        f = np.asarray(list(forced), dtype=bool)
        k, p = k - int(f.sum()), p[~f]
        if k < 0 or not len(p):
            return 0.0
    p = np.sort(p)
    return float(p[min(k, len(p) - 1)])


def flag_rates(p: Iterable[float], correct: Iterable[bool], t: float | None,
               forced: Iterable[bool] | None = None) -> dict[str, Any]:
    """What threshold ``t`` does to answers with probabilities ``p`` and verdicts ``correct`` (and
    ``forced``: flagged whatever their probability, :func:`unsupported_of`):
    ``{"n", "n_right", "n_wrong", "accuracy", "wrong_flagged", "right_flagged", "flagged",
    "kept_accuracy", "unsupported"}`` (shares; ``kept_accuracy``: accuracy of the answers not flagged;
    ``unsupported``: how many were flagged by their evidence; a share is ``None`` when it has no answers
    to count)."""
    p = np.asarray(list(p), dtype=np.float64)
    ok = np.asarray(list(correct), dtype=bool)
    forced_ = np.zeros(len(p), bool) if forced is None else np.asarray(list(forced), dtype=bool)
    flag = (p < t if t is not None else np.zeros(len(p), bool)) | forced_

    def share(x: np.ndarray) -> float | None:
        return float(x.mean()) if len(x) else None

    return {"n": int(len(p)), "n_right": int(ok.sum()), "n_wrong": int((~ok).sum()), "accuracy": share(ok),
            "wrong_flagged": share(flag[~ok]), "right_flagged": share(flag[ok]), "flagged": share(flag),
            "kept_accuracy": share(ok[~flag]), "unsupported": int(forced_.sum())}


def by_kind(records: Iterable[dict[str, Any]], check_evidence: bool = True
            ) -> dict[str, tuple[np.ndarray, np.ndarray, list[Any], np.ndarray]]:
    """``{kind: (confidences, verdicts, gold answers, unsupported)}`` of the records that have a confidence
    (:func:`confidence_of`); ``unsupported``: the evidence check failed (:func:`unsupported_of`; all
    ``False`` with ``check_evidence=False``)."""
    out: dict[str, tuple[list, list, list, list]] = {}
    for r in records:
        c = confidence_of(r)
        if c is None:
            continue
        p, ok, gold, bad = out.setdefault(answer_kind(r), ([], [], [], []))
        p.append(c)
        ok.append(correct_of(r))
        gold.append(r.get("gold", r.get("answers")))
        bad.append(bool(unsupported_of(r)) if check_evidence else False)
    return {k: (np.asarray(p, np.float64), np.asarray(ok, bool), g, np.asarray(b, bool))
            for k, (p, ok, g, b) in out.items()}


def majority_accuracy(gold: list[Any]) -> float | None:
    """The accuracy of always answering the most common gold answer (a list of golds counts by its
    first), the baseline beside a label set's accuracy."""
    keys = [json.dumps(g[0] if isinstance(g, list) and g else g, sort_keys=True) for g in gold]
    return Counter(keys).most_common(1)[0][1] / len(keys) if keys else None


def calibrate(records: Iterable[dict[str, Any]], rate: float = MAX_RIGHT_FLAGGED,
              check_evidence: bool = True, margin: float = MARGIN_SE) -> dict[str, dict[str, Any]]:
    """Per answer kind: the fitted threshold (:func:`fit_threshold` on the right answers, beside the ones the
    evidence check flags, at :func:`fit_rate` of ``rate`` and ``margin``) and what it flags on these records
    (:func:`flag_rates`, plus ``majority_accuracy``, ``evidence_checked``: whether any of the kind's evidence
    failed the check, and ``fit_rate``)."""
    out = {}
    for kind, (p, ok, gold, bad) in by_kind(records, check_evidence).items():
        share = fit_rate(int(ok.sum()), rate, margin)
        t = fit_threshold(p[ok], share, bad[ok] if bad.any() else None)
        out[kind] = {"threshold": t, **flag_rates(p, ok, t, bad), "majority_accuracy": majority_accuracy(gold),
                     "evidence_checked": bool(bad.any()), "fit_rate": share}
    return out


def measure(records: Iterable[dict[str, Any]], thresholds: dict[str, float | None],
            checked: Iterable[str] = EVIDENCE_CHECKED) -> dict[str, dict[str, Any]]:
    """Per answer kind, what the given thresholds (fitted elsewhere: on validation) flag on these records,
    the evidence check applied to the kinds in ``checked``."""
    checked = set(checked)
    return {kind: {"threshold": thresholds.get(kind), **flag_rates(p, ok, thresholds.get(kind),
                                                                   bad if kind in checked else None),
                   "majority_accuracy": majority_accuracy(gold)}
            for kind, (p, ok, gold, bad) in by_kind(records).items()}


def write_confidence(folder: str | os.PathLike, thresholds: dict[str, float | None], fitted_on: str,
                     n: dict[str, int], evidence_checked: Iterable[str] = ()) -> Path:
    """Store ``{"threshold": {kind: t}, "fitted_on", "n"}`` (and ``"evidence_check": [kind, ...]``, the kinds
    whose thresholds were fitted beside the evidence check, when there are any) as ``"confidence"`` in
    ``folder/config.json`` (every other key kept), written next to it and moved into place."""
    path = Path(folder) / "config.json"
    text = path.read_text()
    meta = json.loads(text)
    meta["confidence"] = {"threshold": {k: t for k, t in thresholds.items() if t is not None},
                          "fitted_on": fitted_on, "n": n,
                          **({"evidence_check": sorted(evidence_checked)} if evidence_checked else {})}
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(json.dumps(meta, indent=2) + ("\n" if text.endswith("\n") else ""))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
