"""Evidence for a yes/no answer: the retrieved facts about the question's claim.

A yes/no question states a claim ("Is the cup red?": *cup*, *red*). The label picked from {yes, no}
never occurs in the context, and the sentence an evidence-first checkpoint writes before it is
generated, not read (a wrong "no" came with a false sentence at probability 0.996). So the evidence
shown for a yes/no answer is read from the retrieved subcomplex, never taken from the model:

* **claim terms**: the question's content words (no auxiliaries, articles, question words or
  stop words), lower-cased, punctuation dropped, a plural ``-s`` folded (``cups`` = ``cup``);
* **facts**: every retrieved node text and every retrieved triple ``"head relation tail"``
  (:meth:`~toporag_core.retrieval.Subcomplex.triples`), so the check does not depend on the
  text format the checkpoint reads;
* a fact is **about the claim** when it holds a claim term and says something (two content words at
  least: a bare node name says nothing); the facts shown are those that hold the most terms (ties: an
  earlier term first, as the claim's subject comes first), at most
  :data:`MAX_FACTS` (*cup has color red* for "Is the cup blue?": the fact a right "no" rests on); no
  such fact = the page says the retrieved context holds nothing about the claim;
* the model's own sentence is shown only when it is about the claim (holds a claim term) and
  **backed**: every claim of it is a fact of the context the model read
  (:func:`~toporag_core.retrieval.claims.unsupported_claims`, the check that also flags the answer as low
  confidence: "The metal table is in front of the red man" is not backed by ``table [1] behind man [5]``; in
  a plain-name graph "The red cup is on the table" is backed by *cup has color red* and *cup on table*).
  Where that check cannot read the context (a CSV context), the looser rule of
  :func:`~toporag_core.retrieval.claims.loosely_backed` decides: each of the sentence's words in some fact
  together with another of its words.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..retrieval.claims import content_words as words
from ..retrieval.claims import loosely_backed

MAX_FACTS = 5


def claim_terms(question: str) -> tuple[str, ...]:
    """The distinct content words of a yes/no question, in order (``"Is the cup red?"`` -> cup, red)."""
    return tuple(dict.fromkeys(words(question)))


def retrieved_facts(sub) -> list[str]:
    """Every retrieved node text and triple (``"head relation tail"``) of a subcomplex, once each."""
    facts = [" ".join(t.split()) for t in sub.node_texts()]
    facts += [" ".join(" ".join(t).split()) for t in sub.triples()]
    return list(dict.fromkeys(f for f in facts if f))


@dataclass(frozen=True)
class ClaimEvidence:
    """What the retrieved context says about a yes/no question's claim.

    ``terms``: the claim terms; ``facts``: the facts about the claim, most terms first, each with
    the terms it holds; ``whole``: whether one fact holds every term; ``sentence``: the model's own
    sentence (``None`` if it wrote none) and ``backed``: whether it is about the claim and the
    retrieved facts back it (``None`` without a sentence).
    """

    terms: tuple[str, ...]
    facts: tuple[tuple[str, tuple[str, ...]], ...]
    whole: bool
    sentence: str | None = None
    backed: bool | None = None


def claim_evidence(question: str, sub, sentence: str | None = None,
                   unsupported: list[str] | None = None) -> ClaimEvidence:
    """The facts of ``sub`` about the claim of ``question`` and whether they back ``sentence`` (the
    model's evidence, if it wrote one); ``unsupported``: the answer's ``unsupported_claims`` (``None``:
    its context could not be checked, so the looser rule decides); see the module docstring."""
    terms = claim_terms(question)
    facts = retrieved_facts(sub)
    held = []
    for f in facts:
        fw = words(f)
        hits = tuple(t for t in terms if t in fw)
        if hits and len(set(fw)) >= 2:
            held.append((f, hits))
    # most terms first, then facts on an earlier term (the claim's subject comes first); stable otherwise
    held.sort(key=lambda fh: (-len(fh[1]), terms.index(fh[1][0])))
    text = (sentence or "").strip() or None
    about = text is not None and bool(set(words(text)) & set(terms))
    return ClaimEvidence(terms=terms, facts=tuple(held[:MAX_FACTS]),
                         whole=bool(held) and len(held[0][1]) == len(terms),
                         sentence=text, backed=None if text is None else about and (
                             not unsupported if unsupported is not None else loosely_backed(text, facts)))


def evidence_markdown(ev: ClaimEvidence) -> str:
    """The page's heading over the facts (Markdown; the facts themselves are shown as code)."""
    terms = ", ".join(ev.terms) or "none found"
    if not ev.facts:
        return (f"**Evidence about the claim** ({terms}): the retrieved context holds **nothing** about the "
                "question's claim, so this yes/no answer rests on no retrieved evidence.")
    how = ("one retrieved fact holds every term of the claim" if ev.whole
           else "no single retrieved fact holds every term of the claim; these come closest")
    return (f"**Evidence about the claim** ({terms}), read from the retrieved context, not written by the "
            f"model: {how}.")


def sentence_note(ev: ClaimEvidence) -> str | None:
    """What the page says about the sentence the model wrote before its yes/no answer (``None``: none
    written). The sentence itself is shown only when the retrieved facts back it."""
    if ev.sentence is None:
        return None
    if ev.backed:
        return "The model wrote this before its answer; the retrieved facts back it:"
    return ("The model also wrote a sentence before its answer that is not about the claim or that the retrieved "
            "facts do not back, so it is not shown as evidence.")


def is_yes_no_answer(answer) -> bool:
    """Whether an :class:`~toporag_core.studio.ask.Answer` was picked from {yes, no} (its closed answer
    set, else the labels it was scored over)."""
    labels = answer.choices or tuple(answer.label_probs or ())
    return {str(c).strip().lower() for c in labels} == {"yes", "no"}
