"""Answer styles: how a checkpoint's training targets were written, and so how its answers are decoded
and read (``TopoRAGConfig.answer_style``, ``toporag train --answer-style``). One registry; code asks a
style's fields, never its name.

* ``"label"`` (the paper's): every question trains on its bare answer.
* ``"evidence"`` (beyond the paper): polar questions train on ``"<evidence>. Answer: <label>"`` (the
  dataset's full answer with its yes/no removed: ``"The metal cup is orange. Answer: no"``), so a yes/no
  becomes "read the attribute, then compare"; at answer time the evidence is generated greedily and the
  labels are scored after it (:func:`~toporag_core.model.dispatch.answer`).
* ``"cited"``: that, and open questions train on the context lines their answer rests on, copied
  verbatim with their node ids, then the label (``"cabinet [5]: yellow, wooden; cabinet [5] in front of
  clock [9]. Answer: clock"``); a generated open answer is read after its last ``Answer:``
  (:func:`~toporag_core.model.answer_text.split_evidence`), and generation drafts with prompt lookup
  (copied lines are in the prompt).
"""
from __future__ import annotations

from dataclasses import dataclass

from .answer_text import is_yes_no, split_evidence

LOOKUP_TOKENS = 10  # prompt-lookup draft length of a cited model's generation (decode.generate)


@dataclass(frozen=True)
class AnswerStyle:
    """One answer style (see the module docstring).

    ``polar_evidence``: yes/no questions train on evidence-first targets (the task's ``evidence``
    hook) and decode evidence first; ``open_citations``: open questions train on cited context lines
    (the task's ``citation`` hook) and a generated open answer is split at its last ``Answer:`` (its
    rows carry an ``"evidence"`` entry); ``lookup_tokens``: the default prompt-lookup draft length
    of one-row generation (0: off); ``help``: the ``--answer-style`` help text."""

    name: str
    polar_evidence: bool = False
    open_citations: bool = False
    lookup_tokens: int = 0
    help: str = ""

    @property
    def rewrites_targets(self) -> bool:
        """Whether training targets differ from the bare answers (the task needs evidence hooks)."""
        return self.polar_evidence or self.open_citations

    def evidence_first(self, choices) -> bool:
        """Whether rows with this closed answer set decode evidence first: a yes/no set under a style
        whose polar targets carried evidence (a checkpoint's own ``answer_set`` is scored directly)."""
        return self.polar_evidence and is_yes_no(choices)

    def read_open(self, raw: str) -> tuple[str | None, str]:
        """A generated open answer -> ``(evidence or None, the text the answer is cut from)``."""
        if not self.open_citations:
            return None, raw
        evidence, label = split_evidence(raw)
        return evidence, (label if label is not None else raw)


ANSWER_STYLES: dict[str, AnswerStyle] = {}


def register_style(style: AnswerStyle) -> AnswerStyle:
    """Make ``style`` available by name (the same name replaces)."""
    ANSWER_STYLES[style.name] = style
    return style


def get_style(name: str) -> AnswerStyle:
    """The registered style ``name``; ``ValueError`` naming the registered ones otherwise."""
    try:
        return ANSWER_STYLES[name]
    except KeyError:
        raise ValueError(f"unknown answer style {name!r}; choose one of {tuple(ANSWER_STYLES)}") from None


register_style(AnswerStyle("label", help="train on the bare answer"))
register_style(AnswerStyle(
    "evidence", polar_evidence=True,
    help="beyond the paper: yes/no questions train on '<evidence>. Answer: <label>' from the dataset's full "
         "answers ('The metal cup is orange. Answer: no'), and at answer time the model writes its evidence "
         "before the label is scored"))
register_style(AnswerStyle(
    "cited", polar_evidence=True, open_citations=True, lookup_tokens=LOOKUP_TOKENS,
    help="evidence, and open questions train on the context lines their answer rests on, copied with their "
         "node ids ('cabinet [5]: yellow, wooden; cabinet [5] in front of clock [9]. Answer: clock'), the "
         "answer read after the generated 'Answer:'"))
