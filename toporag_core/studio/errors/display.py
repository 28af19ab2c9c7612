"""Showing one record on the Error-analysis page: the question without its prompt wrapper, the
nodes that hold the gold answer, cited evidence, and Markdown that cannot be hijacked by user text.

* :func:`user_question` strips the benchmark's prompt wrapper (``Question: ... Answer:``;
  ExplaGraphs' fixed support/counter instruction) so tables show what was asked (the verdict still
  reads the whole prompt).
* :func:`gold_nodes` finds the retrieved nodes whose text holds a gold answer (the GraphQA
  normalisation of :func:`~toporag_core.metrics.normalize`, whole words), which the drill-down
  highlights; :func:`gold_note` says so in one line; :func:`cells_note` why no subcomplex is drawn
  (none recorded in the file, or an empty retrieval).
* :func:`citation_check` / :func:`citation_text` / :func:`citation_note`: whether a cited answer's
  lines are really in its context; for evidence written as a sentence (a yes / no answer's ``"The metal
  cup is red"``), whether each of its claims is a fact of the context
  (:func:`~toporag_core.retrieval.claims.unsupported_claims`, the check that flags such answers low confidence).
* :func:`escape_markdown`: file text shown through Streamlit's Markdown (verdict reasons, notes,
  line errors) is escaped, so an id or a node text cannot become a link, an image or markup. (The
  graph view's tooltips are HTML-escaped in :mod:`~toporag_core.studio.graph_view`.)
"""
from __future__ import annotations

import re
from typing import Any

from ...metrics import normalize
from ...retrieval.citations import CITATION_SEP, NODE_ID, CitationGrammar
from ...retrieval.claims import claims, unsupported_claims
from .verdicts import gold_answers, label_is_entity, verdict

# The prompt wrappers the tasks put around a question (tasks/webqsp.py, tasks/scenes/dataset.py:
# "Question: {q}\nAnswer:"; io/explagraphs.py: two arguments, then a fixed instruction).
_QA_WRAPPER = re.compile(r"\A\s*Question:\s*(?P<q>.*?)\s*Answer:\s*\Z", re.S)
_EXPLA_WRAPPER = re.compile(r"\A\s*Argument 1:\s*(?P<a1>.*?)\s*\n\s*Argument 2:\s*(?P<a2>.*?)\s*\n\s*Question:"
                            r".*\bAnswer:\s*\Z", re.S)
_MARKDOWN_ACTIVE = re.compile(r"([\\`*_\[\]<>#|~$])")


def escape_markdown(text: Any) -> str:
    """``text`` with the characters that start Markdown markup (links, images, emphasis, code,
    HTML, tables, maths) backslash-escaped, so it shows as written."""
    return _MARKDOWN_ACTIVE.sub(r"\\\1", str(text))


def verdict_markdown(rec: dict[str, Any]) -> str:
    """``**Verdict: V** - reason`` with the reason's file text escaped."""
    v, why = verdict(rec)
    return f"**Verdict: {v}** \u2014 {escape_markdown(why)}"


def user_question(prompt: str) -> str:
    """The user's question inside a benchmark prompt: ``"Question: Q\\nAnswer:"`` -> ``Q``; an
    ExplaGraphs prompt -> ``"Argument 1: A | Argument 2: B"`` (its instruction is the same for
    every row); any other text is returned stripped, unchanged."""
    text = str(prompt or "")
    m = _EXPLA_WRAPPER.match(text)
    if m:
        return f"Argument 1: {m['a1']} | Argument 2: {m['a2']}"
    m = _QA_WRAPPER.match(text)
    if m and m["q"]:
        return m["q"]
    return text.strip()


def cells_note(rec: dict[str, Any]) -> str:
    """Why the drill-down draws no subcomplex: the file records no cells for this example, or it
    records an empty retrieval."""
    if not rec.get("cells_recorded", True):
        return "The file records no retrieved cells for this example (no `cells` or `retrieved` field)."
    return "Nothing was retrieved for this example."


def gold_nodes(node_texts: list[str], label: Any) -> dict[int, str]:
    """``{node index: the gold answer it holds}``, both texts normalised as the GraphQA metrics do
    (:func:`~toporag_core.metrics.normalize`): the nodes whose text *equals* a gold answer, or,
    when none does, those that contain one as whole words (``"Paris, France"`` for ``Paris``).
    Empty when the label is not a graph entity (a stance, yes/no, a number: no node holds it)."""
    if not label_is_entity(label):
        return {}
    golds = [(g, n) for g, n in ((g, normalize(g)) for g in gold_answers(label)) if n]
    texts = [normalize(t) for t in node_texts]
    for match in (lambda n, t: n == t, lambda n, t: f" {n} " in f" {t} "):  # equal first, else contained
        out: dict[int, str] = {}
        for i, t in enumerate(texts):
            hit = next((g for g, n in golds if match(n, t)), None)
            if hit is not None:
                out[i] = hit
        if out:
            return out
    return {}


def gold_note(node_texts: list[str], label: Any, found: dict[int, str]) -> str:
    """One line for the drill-down: which node(s) hold the gold answer, or why none is marked."""
    golds = " | ".join(gold_answers(label))
    if not label_is_entity(label):
        return f"The label ({golds}) is not a graph entity: no node can hold it."
    if not found:
        return f"No retrieved node holds the gold answer ({golds})."
    names = ", ".join(repr(node_texts[i]) for i in found)
    return f"Gold answer ({golds}) found in {len(found)} retrieved node(s), highlighted in gold: {names}."


def is_citation(evidence: str | None) -> bool:
    """Whether evidence is cited context lines (names a node id such as ``[5]``), not a sentence."""
    return bool(evidence) and bool(NODE_ID.search(str(evidence)))


def citation_check(evidence: str, context: str) -> tuple[int, int, list[str]] | None:
    """Whether a cited answer (``--answer-style cited``: ``"cabinet [5]: yellow, wooden; cabinet [5]
    in front of clock [9]"``) cites lines that are really in its context: ``(found, cited, missing)``
    over its ``"; "``-separated parts, each compared with the context's lines (whitespace-stripped).
    ``None`` when the evidence names no node id (``[5]``: a sentence, not a citation) or there is no
    context. A wrong answer whose citations are all found read the wrong line; one with a missing
    citation wrote a line that does not exist."""
    if not context or not is_citation(evidence):
        return None
    parts = [p.strip() for p in str(evidence).split(CITATION_SEP) if p.strip()]
    missing = CitationGrammar(context).missing(evidence)
    return len(parts) - len(missing), len(parts), missing


def claim_check(evidence: str, context: str) -> tuple[int, int, list[str]] | None:
    """Whether evidence written as a sentence holds in its context: ``(held, claims, not held)`` over its
    claims (:func:`~toporag_core.retrieval.claims.unsupported_claims`); ``None`` for a citation, no evidence or a
    context the check cannot read."""
    if not context or not evidence or is_citation(evidence):
        return None
    missing = unsupported_claims(evidence, context)
    if missing is None:
        return None
    n = len(claims(evidence))
    return n - len(missing), n, missing


def citation_text(rec: dict) -> str:
    """``"2/2"`` (cited lines, or a sentence's claims, found in the context / all), ``""`` for a record with
    neither."""
    c = citation_check(rec.get("evidence", ""), rec.get("context", "")) or \
        claim_check(rec.get("evidence", ""), rec.get("context", ""))
    return "" if c is None else f"{c[0]}/{c[1]}"


def citation_note(rec: dict) -> str:
    """The drill-down line about a cited answer's lines, or about an evidence sentence's claims (``""``
    without either)."""
    evidence, context = rec.get("evidence", ""), rec.get("context", "")
    head, c = "Citations:  {} of {} cited lines are in the context", citation_check(evidence, context)
    if c is None:
        head, c = "Evidence:  {} of {} claims of the evidence are facts of the context", claim_check(evidence, context)
    if c is None:
        return ""
    found, n, missing = c
    tail = "" if not missing else "; not in the context: " + " | ".join(repr(m) for m in missing[:3])
    return head.format(found, n) + tail + "\n"
