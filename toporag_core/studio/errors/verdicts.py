"""Failure verdicts of the Error-analysis page: was a wrong answer a retrieval or a reasoning failure?

:func:`verdict`, for a wrong prediction:

* **the file records no retrieved cells** (no ``cells`` / ``retrieved`` field on the line, and no
  ``support_covered``): *unknown (no cells recorded)*. Nothing on the line says what retrieval found,
  so neither failure can be told (an empty subcomplex that *was* recorded is a retrieval failure);
* **the data names the answer-bearing objects** (SceneGraphs ``support``; the record carries
  ``support_covered``, written by ``toporag eval``): *retrieval failure* when retrieval missed one of
  them, else *reasoning/generation failure*. This is exact, and it comes first: a loop question's
  gold colour often occurs in the context on some other object, which the text rules below would
  count as "the evidence was there".
* **entity labels** (WebQSP answers, SceneGraphs objects / colours / materials): *retrieval
  failure* when no gold answer occurs (normalised, as whole words) in any retrieved cell text -
  node, edge triple or 2-cell - else *reasoning/generation failure* (the evidence was there).
* **non-entity labels** (ExplaGraphs ``support`` / ``counter``, ``yes`` / ``no``, numbers): the
  label can never be "in the retrieved cells", so the rule asks whether retrieval found
  anything *about the question*: *retrieval failure* when no retrieved node text occurs in the
  question (for ExplaGraphs: in either argument) - an empty subcomplex included - else
  *reasoning/generation failure*. This is a proxy, and the drill-down says which rule was used.

Records are the clean records of :mod:`toporag_core.predictions.lenient`.
"""
from __future__ import annotations

import re
from typing import Any

from ...metrics import normalize

CORRECT, RETRIEVAL, REASONING = "correct", "retrieval failure", "reasoning/generation failure"
UNKNOWN = "unknown (no cells recorded)"
VERDICTS = (CORRECT, RETRIEVAL, REASONING, UNKNOWN)
NON_ENTITY = {"support", "counter", "yes", "no", "true", "false"}
VERDICT_RULE = ("Where the data names the answer-bearing objects (SceneGraphs), a wrong answer is a retrieval failure "
                "when retrieval missed one of them, else a reasoning/generation failure. Otherwise: a retrieval "
                "failure when no gold answer occurs in the retrieved cells, else a reasoning/generation failure; "
                "labels that are not graph entities (ExplaGraphs support/counter, yes/no, numbers): a retrieval "
                "failure when no retrieved node occurs in the question. A wrong answer whose line records no "
                "retrieved cells is neither: unknown.")


def gold_answers(label: Any) -> list[str]:
    """The label as a list of gold answer strings."""
    return [str(a) for a in label] if isinstance(label, list) else [str(label)]


def label_is_entity(label: Any) -> bool:
    """Whether a gold answer could be a graph entity (not a stance, a yes/no or a number)."""
    golds = [normalize(a) for a in gold_answers(label)]
    return any(g and g not in NON_ENTITY and not re.fullmatch(r"\d+(\s*\d+)*", g) for g in golds)


def _cell_texts(rec: dict[str, Any]) -> list[str]:
    c = rec["cells"]
    return [*c["nodes"], *(" ".join(t) for t in c["edges"]), *(" ".join(cyc) for cyc in c["cells2"])]


def _occurs(needle: str, hay: str) -> bool:
    """``needle`` in ``hay`` as whole words, both normalised."""
    n, h = normalize(needle), normalize(hay)
    return bool(n) and f" {n} " in f" {h} "


def verdict(rec: dict[str, Any]) -> tuple[str, str]:
    """``(verdict, reason)`` of one record (see the module docstring for the rules)."""
    if rec["correct"]:
        return CORRECT, "the prediction is correct"
    covered = rec.get("support_covered")
    if covered is False:
        return RETRIEVAL, "an answer-bearing object (the question's support) was not retrieved"
    if covered is True:
        return REASONING, "every answer-bearing object was retrieved, the answer is still wrong"
    if not rec.get("cells_recorded", True):
        return UNKNOWN, ("the file records no retrieved cells for this example, so it cannot tell a retrieval "
                         "failure from a reasoning failure")
    if label_is_entity(rec["label"]):
        texts = _cell_texts(rec)
        hits = [a for a in gold_answers(rec["label"]) if any(_occurs(a, t) for t in texts)]
        if not hits:
            return RETRIEVAL, "no gold answer occurs in the retrieved cells"
        return REASONING, f"the gold answer {hits[0]!r} is in the retrieved cells, the answer is still wrong"
    anchored = [n for n in rec["cells"]["nodes"] if _occurs(n, rec.get("question", ""))]
    if not anchored:
        why = "nothing was retrieved" if not rec["cells"]["nodes"] else "no retrieved node occurs in the question"
        return RETRIEVAL, f"label is not a graph entity; {why}"
    return REASONING, (f"label is not a graph entity; retrieval found question concepts ({', '.join(anchored[:3])})"
                       ", the answer is still wrong")


def verdict_summary(counts: dict[str, int]) -> str | None:
    """What the page says when some wrong answers have no retrieved cells (``None`` when all have):
    how many could not be classified, and that the failure counts cover only the rest."""
    unknown = counts.get(UNKNOWN, 0)
    if not unknown:
        return None
    wrong = unknown + counts.get(RETRIEVAL, 0) + counts.get(REASONING, 0)
    if unknown == wrong:
        return (f"This file records no retrieved cells (no `cells` or `retrieved` field) for any of its {wrong} wrong "
                "answer(s), so it cannot tell retrieval failures from reasoning failures: they are counted as "
                f"'{UNKNOWN}'.")
    return (f"{unknown} of {wrong} wrong answers have no retrieved cells in the file: counted as '{UNKNOWN}'; "
            f"the retrieval and reasoning counts cover the other {wrong - unknown}.")
