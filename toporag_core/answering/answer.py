"""One answered question: the typed record every surface reads (CLI, service, pages, evaluation).

:meth:`~.pipeline.TopoRAGPipeline.finish` builds it from a planned and decoded job; the remote core's
JSON reply is read back into the same class (:meth:`Answer.from_json`). What each surface prints is
derived here, once:

* :meth:`Answer.to_json` - the JSON fields shared by ``toporag ask --json`` and ``toporag serve``:
  the answer, its confidence (``probability``, ``confidence``, ``low_confidence`` against
  ``confidence_threshold``, ``margin``, ``candidates``), the evidence and its claims the context does
  not hold (``unsupported_claims``), what was retrieved (``cells``),
  what the LLM read (``context``, ``prompt``) and the ``timings`` in seconds;
* the CLI adds the question, the retrieval parameters, the runner-ups and the route; the service adds
  the subcomplex's cell ids, the setting and the batch size.

``answer_kind`` says how the answer was chosen: ``"label"`` (a closed answer set scored label by
label: ``label_probs`` sums to 1), ``"names"`` (the retrieved entities' names scored: ``candidates``),
``"generated"`` (greedy decoding). Mapping-style reads (``a["answer"]``, ``a.get("evidence")``) give
the field of that name, for the evaluation code that reads answers and records alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..retrieval import RetrievalSetting, Subcomplex
from ..retrieval.budget import ContextFit

# the fields of ``to_json``, in their printed order
JSON_FIELDS = ("answer", "probability", "label_probs", "confidence", "low_confidence", "confidence_threshold",
               "answer_kind", "margin", "candidates", "evidence", "unsupported_claims", "method", "cells", "context",
               "prompt", "timings")


@dataclass
class Answer:
    """One answer with one retrieval method.

    ``timings`` in seconds (``retrieve``, ``encode``, ``generate``; ``prepare`` and ``total`` when the
    graph was lifted for it); ``choices``: the closed answer set it was scored over (``None``: open);
    ``names``: the candidate names the name reader scored (``None``: not a names answer)."""

    method: str
    answer: str
    subcomplex: Subcomplex
    context: str
    prompt: dict[str, Any]
    timings: dict[str, Any]
    label_probs: dict[str, float] | None = None
    evidence: str | None = None  # what an evidence-first / cited checkpoint wrote before its answer
    # the claims of a label answer's evidence that its context does not hold ([]: all hold; None: not checked)
    unsupported_claims: list[str] | None = None
    choices: tuple[str, ...] | None = None
    candidates: list[dict[str, Any]] | None = None  # the top names / labels with their probabilities
    probability: float | None = None  # label / name softmax; generated: per-token geometric mean
    # below the checkpoint's calibrated threshold, or evidence its context does not hold (None: no threshold)
    low_confidence: bool | None = None
    answer_kind: str | None = None  # "label" | "names" | "generated"
    confidence_threshold: float | None = None
    confidence: float | None = None  # what the threshold is compared with (names: metrics.name_confidence)
    margin: float | None = None  # lead of the answer over the runner-up
    setting: RetrievalSetting | None = None
    context_fit: ContextFit | None = None
    cells: dict[str, list] = field(default_factory=dict)  # the retrieved cells' texts
    params: dict[str, Any] = field(default_factory=dict)
    topic: list[str] = field(default_factory=list)  # the question's named entities
    names: list[str] | None = None
    name_scores: dict[str, float] | None = None
    name_priors: dict[str, float] | None = None
    name_free: float | None = None  # the chosen name's log-likelihood with the question left out (names answers)
    raw: str | None = None  # the generated text before cleaning
    clean: str | None = None

    @property
    def closed(self) -> bool:
        """Whether the answer was picked from a closed label set (yes / no, support / counter)."""
        return bool(self.choices) or bool(self.label_probs)

    def __getitem__(self, key: str) -> Any:
        if key not in _NAMES:
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in _NAMES

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in _NAMES else default

    def to_json(self) -> dict[str, Any]:
        """The JSON fields shared by ``toporag ask --json`` and the service (:data:`JSON_FIELDS`)."""
        return {k: getattr(self, k) for k in JSON_FIELDS}

    @classmethod
    def from_json(cls, reply: dict[str, Any], subcomplex: Subcomplex, timings: dict[str, Any] | None = None
                  ) -> "Answer":
        """A service reply (:meth:`to_json` plus the service's fields) read back onto ``subcomplex``
        (this process's cells of the same graph)."""
        known = {k: reply[k] for k in JSON_FIELDS if k in reply and k not in ("timings",)}
        return cls(subcomplex=subcomplex, timings=dict(timings if timings is not None else reply["timings"]),
                   **{"method": reply.get("method", ""), "context": reply.get("context", ""),
                      "prompt": reply.get("prompt", {}), **known})


_NAMES = frozenset(f.name for f in fields(Answer))
