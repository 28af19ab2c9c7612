"""The fields of a predictions record, as ``toporag eval`` writes them, and the names a user's own
file may give them (read by :mod:`.lenient`).

One record per question, one JSON object per line; see the package docstring for each field.
:func:`eval_record` is the one place that builds a record, so the key order of every written
line is the same.
"""
from __future__ import annotations

import json
from typing import Any

# Every key `toporag eval` writes, in the order it writes them (`evidence` and `support_covered`
# only where the model / the data has them).
FIELDS = ("id", "qtype", "question", "gold", "answer", "probability", "correct", "clean", "seconds", "prediction",
          "label", "raw", "evidence", "support_covered", "cells", "context", "method", "dataset",
          "graph_tokens", "margin", "answer_kind", "confidence", "unsupported_claims", "low_confidence")
OPTIONAL_FIELDS = ("evidence", "support_covered", "unsupported_claims", "low_confidence")

# The lenient reader's canonical fields and, for each, the keys it accepts, first found wins.
ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "qid", "question_id", "example_id", "uid"),
    "prediction": ("prediction", "answer", "pred", "predicted", "output", "response", "model_answer"),
    "label": ("label", "gold", "answers", "target", "gold_answer", "gold_answers", "ground_truth", "reference",
              "expected"),
    "question": ("question", "query"),
}
REQUIRED = ("prediction", "label")  # a line without an id is known by its line number


def eval_record(*, id: Any, qtype: Any, question: str, gold: Any, answer: str, probability: Any, correct: bool,
                clean: bool, seconds: float, raw: Any, cells: Any, context: str, method: str, dataset: str,
                evidence: str | None = None, support_covered: bool | None = None,
                graph_tokens: str = "normal", margin: float | None = None,
                answer_kind: str | None = None, confidence: float | None = None,
                unsupported_claims: list[str] | None = None, low_confidence: bool | None = None) -> dict[str, Any]:
    """One ``toporag eval`` record, keys in :data:`FIELDS` order (``prediction`` repeats ``answer``,
    ``label`` repeats ``gold``; ``evidence`` / ``support_covered`` only when not ``None``;
    ``graph_tokens``: the ablation arm of :mod:`toporag_core.evaluation.arms` the answer was given under; ``margin``:
    the answer's probability lead over the runner-up candidate, ``None`` for a generated answer;
    ``answer_kind``: ``"label"`` / ``"names"`` / ``"generated"``, what the confidence is calibrated per;
    ``confidence``: the number its threshold judges, ``probability`` unless the decoder gives another:
    docs/results/confidence.md; ``unsupported_claims`` (a label answer after evidence: the claims of that
    evidence its context does not hold) and ``low_confidence`` (under the checkpoint's calibration) only when
    not ``None``)."""
    return {"id": id, "qtype": qtype, "question": question, "gold": gold, "answer": answer,
            "probability": probability, "correct": correct, "clean": clean, "seconds": seconds,
            "prediction": answer, "label": gold, "raw": raw,
            **({"evidence": evidence} if evidence is not None else {}),
            **({"support_covered": support_covered} if support_covered is not None else {}),
            "cells": cells, "context": context, "method": method, "dataset": dataset,
            "graph_tokens": graph_tokens, "margin": margin, "answer_kind": answer_kind,
            "confidence": probability if confidence is None else confidence,
            **({"unsupported_claims": unsupported_claims} if unsupported_claims is not None else {}),
            **({"low_confidence": low_confidence} if low_confidence is not None else {})}


def record_line(record: dict[str, Any]) -> str:
    """One record as one JSONL line (newline included)."""
    return json.dumps(record) + "\n"


def field_names(canonical: str) -> str:
    """``"label (or gold, answers, target)"``: a canonical field and the other keys read for it."""
    others = [k for k in ALIASES.get(canonical, (canonical,)) if k != canonical]
    return f"{canonical} (or {', '.join(others)})" if others else canonical


def accepted_fields() -> str:
    """One sentence naming the fields an uploaded predictions file needs and the aliases read for them."""
    required = " and ".join(field_names(k) for k in REQUIRED)
    return (f"One JSON object per line with {required} (with prediction present, answer is read as the label); "
            f"optional: {field_names('id')} (else the line number), correct (or hit; true/false, scored "
            f"with the dataset's metric when absent), {field_names('question')}, cells (or retrieved) "
            f"{{nodes, edges, cells2}} (without them a wrong answer is not split into retrieval and reasoning "
            f"failures), context, qtype, method, dataset, evidence, support_covered. "
            f"`toporag eval --out` writes all of them.")
