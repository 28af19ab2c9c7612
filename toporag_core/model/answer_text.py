"""Answer text: generated text cut to a short phrase, the check that an answer is an answer, the
polar-question test, and the evidence-first answer form ``"<evidence>. Answer: <label>"``."""
from __future__ import annotations

import re

from ..metrics import answer_items
from ..retrieval.citations import EVIDENCE_CUE

_LEAD = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:\-]?\s*", re.IGNORECASE)


def dedupe_items(line: str) -> str:
    """A comma-separated answer list with repeated items kept once, in order (a small model looping
    on a list writes ``"Tony Warren, Tony Warren, Tony Warren,"``); unchanged when nothing repeats."""
    items = answer_items(line)  # "1,000,000" is one item
    if len(items) < 2:
        return line
    keep: dict[str, str] = {}
    for x in items:
        if x.lower() not in keep:
            keep[x.lower()] = x
    return ", ".join(keep.values()) if len(keep) < len(items) else line


def short_answer(text: str, max_words: int = 12) -> str:
    """A generated answer as a short phrase: first non-empty line, a leading ``Answer:`` /
    ``The answer is`` dropped, surrounding quotes and a final full stop stripped, repeated list items
    kept once (:func:`dedupe_items`), at most ``max_words`` words."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    line = _LEAD.sub("", line).strip()
    for _ in range(2):  # '"red".' and 'red."' alike
        line = line.strip("\"'`").strip()
        if line.endswith(".") and not line.endswith(".."):
            line = line[:-1].rstrip()
    return " ".join(dedupe_items(line).split()[:max_words])


_DUMP = re.compile(r"node_id|node_attr|edge_attr|src,|\(x,\s*y,\s*w,\s*h\)|^\s*c\d+\s*:|^\s*\d+\s*,|,\s*\d+\s*$|"
                   r"\bc\d+\b|<-\[|\]->", re.IGNORECASE | re.MULTILINE)


def is_clean(answer: str, question: str = "", context: str = "", max_words: int = 12) -> bool:
    """``False`` for an answer that is not an answer: empty, longer than ``max_words`` words, a
    piece of the textualized context (CSV rows, node ids, 2-cell ids ``c0``, cycle arrows), or
    the question repeated (>= 60% of its words, in order, or the answer contained in it with
    4+ words)."""
    from ..metrics import normalize

    a = normalize(answer)
    words = a.split()
    if not words or len(words) > max_words or _DUMP.search(str(answer)):
        return False
    q = normalize(question)
    if len(words) >= 4 and a in q:
        return False
    qw = q.split()
    if qw and len(words) >= 0.6 * len(qw) and len(set(words) & set(qw)) >= 0.8 * len(set(words)):
        return False
    ctx_lines = {normalize(ln) for ln in str(context).splitlines() if len(ln.split(",")) >= 3}
    return a not in ctx_lines


_YES_NO = re.compile(r"(?:^|[:.?!\n]\s*)((?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)"
                     r"\b[^:.?!\n]*)\?\s*(?:answer\s*:?\s*)?$", re.IGNORECASE)


def yes_no_choices(question: str) -> tuple[str, str] | None:
    """``("yes", "no")`` when the question's last clause is a polar question (starts with an
    auxiliary verb, ends with ``?``, no ``or`` alternative), else ``None`` (an open question).
    A trailing ``Answer:`` prompt is allowed. For :func:`~toporag_core.model.prompt.choices_for`."""
    m = _YES_NO.search(str(question).strip())
    if not m or re.search(r"\bor\b", m.group(1), re.IGNORECASE):
        return None
    return ("yes", "no")


def is_yes_no(choices) -> bool:
    """Whether a closed answer set is exactly yes/no (any case, in that order)."""
    return choices is not None and tuple(str(c).lower() for c in choices) == ("yes", "no")


def evidence_target(evidence: str, label: str) -> str:
    """The training target of an evidence-first answer: ``"<evidence>. Answer: <label>"``
    (``"The metal cup is orange. Answer: no"``); the evidence decoder scores each label after
    the model's own evidence in exactly this form."""
    ev = " ".join(str(evidence).split()).rstrip(" .")
    return f"{ev}. {EVIDENCE_CUE} {label}" if ev else f"{EVIDENCE_CUE} {label}"


def split_evidence(text: str) -> tuple[str, str | None]:
    """A generated evidence-first answer -> ``(evidence, label or None)``: the text before the
    last ``Answer:`` (trailing full stop dropped) and the rest of the line after it (outer
    punctuation stripped; an open answer may have several words); without the cue, the whole
    first line is the evidence and the label is ``None``."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    k = line.rfind(EVIDENCE_CUE)
    if k < 0:
        return line.rstrip(" ."), None
    rest = line[k + len(EVIDENCE_CUE):].split()
    return line[:k].rstrip(" ."), (" ".join(rest).strip(".,;:!?\"'") or None if rest else None)
