"""Cited answers: which texts may cite which lines of a textualized subcomplex.

A model trained with ``answer_style="cited"`` answers an open question with the lines of its own
retrieved context the answer rests on, copied with their node ids, then the label::

    cabinet [5]: yellow, wooden; cabinet [5] in front of clock [9]. Answer: clock

:class:`CitationGrammar` says, for one context, whether a text (so far) can still be such an answer
with every cited line a real line of that context. Constrained decoding
(:meth:`~toporag_core.model.TopoRAGModel.generate` with ``constrain``) keeps each generated row inside
it (an option, off by default: measured neutral on accuracy, and it hides the hallucinated lines that
flag doubtful answers); error analysis (:func:`~toporag_core.studio.errors.citation_check`) names the
cited lines a context does not have. Pure string code, no torch: the app's pages import it without
loading the model stack.
"""
from __future__ import annotations

import bisect
import re

EVIDENCE_CUE = "Answer:"  # before an evidence-first or cited answer's label
NODE_ID = re.compile(r"\[\d+\]")  # a node id in a context line: ``cup [5]: white, glass``
CITATION_SEP = "; "
CITATION_CUE = ". " + EVIDENCE_CUE  # between a cited answer's lines and its label


class CitationGrammar:
    """What a cited open answer may be, given its row's context (beyond the paper).

    A cited answer (``answer_style="cited"``) is ``L ("; " L)* ". Answer: " label``, where every ``L``
    is a whole line of the context that names a node (``cabinet [5]: yellow, wooden``, ``cabinet [5] in
    front of clock [9]``), or a bare ``label`` (a text with no ``[`` and no ``;``: the model cited
    nothing). Greedy decoding can write a line the context does not have (a two-hop answer's second
    relation, typically); the error analysis and the Ask page read an answer against this grammar
    (:meth:`allows`, :meth:`may_stop`) to flag such citations.

    :meth:`state` of a text so far: ``"free"`` (no citation started: a bare label, or a line's first
    word), ``"open"`` (complete lines, then a prefix of a line, of ``"; "`` or of ``". Answer:"``),
    ``"done"`` (the cue is written after real lines: the label is free), ``None`` (no completion).
    A line prefix is found by bisection in the sorted lines: ``O(log n)`` string compares per check.
    """

    def __init__(self, context: str | None) -> None:
        self.lines = sorted({ln.strip() for ln in str(context or "").splitlines() if NODE_ID.search(ln)})
        self.line_set = frozenset(self.lines)
        self._tails = (CITATION_SEP.rstrip(),) + tuple(CITATION_CUE[:m] for m in range(1, len(CITATION_CUE)))

    def _some_line_starts(self, prefix: str) -> bool:
        i = bisect.bisect_left(self.lines, prefix)
        return i < len(self.lines) and self.lines[i].startswith(prefix)

    def state(self, text: str) -> str | None:
        t = str(text).lstrip()
        if "[" not in t and ";" not in t:
            return "free"
        k = t.find(CITATION_CUE)
        if k >= 0:
            return "done" if all(p in self.line_set for p in t[:k].split(CITATION_SEP)) else None
        *whole, last = t.split(CITATION_SEP)
        if not all(p in self.line_set for p in whole):
            return None
        if self._some_line_starts(last) or any(last.endswith(x) and last[:-len(x)] in self.line_set
                                               for x in self._tails):
            return "open"
        return None

    def allows(self, text: str) -> bool:
        return self.state(text) is not None

    def may_stop(self, text: str) -> bool:
        """Whether the answer may end after ``text``: a bare label, or the cue after real lines."""
        return self.state(text) in ("free", "done")

    def missing(self, evidence: str) -> list[str]:
        """The ``"; "``-separated parts of ``evidence`` that are not lines of the context."""
        return [p for p in (q.strip() for q in str(evidence).split(CITATION_SEP)) if p and p not in self.line_set]
