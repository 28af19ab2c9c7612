"""What an answer's confidence tells the user: the notice of ``toporag ask`` and the Ask page.

An answer is *low confidence* when its probability is below the threshold calibrated for its answer
kind on the checkpoint's validation split (:meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.confidence_of`,
fitted by ``benchmarks/bench_confidence.py``: at most 25% of right validation answers fall below it).
Then the user sees the runner-up answers with their probabilities (the other labels of a closed set,
the next names of the name reader; a generated answer has none). Without a calibrated threshold the
probability is shown as it is, and the notice says it is not calibrated.

A label answer after evidence the model wrote is also low confidence when a claim of that evidence is not
a fact of the retrieved graph (:func:`~toporag_core.retrieval.claims.unsupported_claims`), and a generated
answer when the retrieved graph does not state it beside the question's words
(:func:`~toporag_core.retrieval.claims.ungrounded_answer`), for the checkpoints calibrated with that check;
the notice quotes what is missing, and says so even where the checkpoint was calibrated without the check.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..metrics import answer_items

KIND_WORDS = {"label": "label answers", "names": "answers read from the graph's names",
              "generated": "generated answers"}
# what the compared number is, per answer kind (docs/results/confidence.md)
KIND_NUMBER = {"label": "the label's probability among the labels; after evidence the model wrote, the per-token "
                        "probability of that evidence and the label",
               "names": "r / (1 + r), r the model's probability that the answer is its first name over the square "
                        "root of that probability with the question left out",
               "generated": "the per-token probability of the answer, and of the evidence the model wrote before it"}

# what the context check found missing, per answer kind: (the headline's reason, the label of the quoted text)
MISSING = {"label": ("the evidence the model wrote is not in the retrieved graph",
                     "evidence not in the retrieved graph"),
           "generated": ("the retrieved graph does not state the answer beside the question's words",
                         "the answer is not stated beside the question's words in the retrieved graph")}


@dataclass(frozen=True)
class ConfidenceNote:
    """One answer's confidence as the user reads it."""

    confidence: float | None  # the number the threshold is compared with (None: the model gave none)
    low: bool | None  # low confidence: below the threshold, or evidence the graph does not hold (None: no threshold)
    threshold: float | None = None
    kind: str | None = None  # "label" | "names" | "generated"
    runner_ups: list[tuple[str, float]] = field(default_factory=list)  # the next answers, best first
    unsupported: list[str] = field(default_factory=list)  # what the retrieved graph does not hold (claims / answer)

    @property
    def by_evidence(self) -> bool:
        """Low confidence because of the evidence alone (the probability is at or above the threshold)."""
        return bool(self.low and self.unsupported and self.confidence is not None
                    and (self.threshold is None or self.confidence >= self.threshold))

    @property
    def missing_what(self) -> str:
        """What :attr:`unsupported` quotes (:data:`MISSING`'s label): the evidence's claims, or (a generated
        answer) the answer itself."""
        return MISSING.get(self.kind or "", MISSING["label"])[1]

    def unsupported_text(self) -> str | None:
        """``'"The poster is blue"'`` (the unsupported claims, quoted, ``;``-joined), or ``None``."""
        return "; ".join(f'"{c}"' for c in self.unsupported) if self.unsupported else None

    def headline(self) -> str:
        """``"Low confidence: p = 0.03, below ..."`` / ``"Confidence: p = 0.91 ..."`` (plain text)."""
        if self.confidence is None:
            return "Confidence: not available (the model gave this answer no probability)"
        p = f"p = {self.confidence:.3g}"
        kind = KIND_WORDS.get(self.kind or "", "answers")
        if self.low is None:
            return f"Confidence: {p} (not calibrated: this checkpoint has no threshold for {kind})"
        where = f"the threshold {self.threshold:.3g} calibrated on validation for {kind}" \
            if self.threshold is not None else f"the threshold calibrated on validation for {kind}"
        what = f" (p: {KIND_NUMBER[self.kind]})" if self.kind in KIND_NUMBER else ""
        if self.by_evidence:
            why = MISSING.get(self.kind or "", MISSING["label"])[0]
            return (f"Low confidence: {why} ({self.unsupported_text()}), though {p} is at or above {where}; the "
                    f"answer may well be wrong{what}")
        if self.low:
            return f"Low confidence: {p} is below {where}; the answer may well be wrong{what}"
        return f"Confidence: {p} (at or above {where}){what}"

    def runner_up_text(self) -> str | None:
        """``"Rijksmuseum (p = 0.02), Mauritshuis (p = 0.01)"``, or ``None`` without runner-ups."""
        if not self.runner_ups:
            return None
        return ", ".join(f"{name} (p = {p:.3g})" for name, p in self.runner_ups)

    def lines(self) -> list[str]:
        """The CLI's lines: the headline, the evidence's unsupported claims (when the headline does not quote
        them), and the runner-ups when the answer is low confidence."""
        out = [self.headline()]
        if self.unsupported and not self.by_evidence:
            out.append(f"{self.missing_what}: " + str(self.unsupported_text()))
        if self.low and self.runner_ups:
            out.append("runner-up answers: " + str(self.runner_up_text()))
        elif self.low:
            out.append("runner-up answers: none (a generated answer has no scored alternatives)")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "low_confidence": self.low, "threshold": self.threshold,
                "answer_kind": self.kind, "runner_ups": [{"name": n, "probability": p} for n, p in self.runner_ups],
                "unsupported_claims": list(self.unsupported)}


def runner_ups(answer: str, candidates: list[dict[str, Any]] | None, top: int = 3) -> list[tuple[str, float]]:
    """The best ``top`` candidates that are not part of ``answer`` (a list answer ``"A, B"`` holds both
    names), best first."""
    chosen = {x.lower() for x in answer_items(answer)} | {str(answer).strip().lower()}
    rest = [(str(c["name"]), float(c["probability"])) for c in candidates or ()
            if str(c["name"]).strip().lower() not in chosen]
    return sorted(rest, key=lambda x: -x[1])[:top]


def confidence_note(answer: str, probability: float | None, low: bool | None, candidates=None,
                    threshold: float | None = None, kind: str | None = None, top: int = 3,
                    unsupported: list[str] | None = None) -> ConfidenceNote:
    """The :class:`ConfidenceNote` of one answer: ``probability`` is the number its threshold is compared
    with (the pipeline's ``confidence``: for a names answer :func:`~toporag_core.metrics.name_confidence`, not
    the softmax ``probability``), then ``low_confidence``, ``candidates``, ``answer_kind``; ``threshold``:
    :meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.confidence_threshold`; ``unsupported``: the
    answer's ``unsupported_claims``."""
    return ConfidenceNote(None if probability is None else float(probability), low, threshold, kind,
                          runner_ups(answer, candidates, top), list(unsupported or ()))
