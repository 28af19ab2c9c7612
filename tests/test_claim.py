"""Evidence for yes/no answers (issue 33, item 7): read from the retrieved facts about the question's
claim, never the model's own sentence unless the facts back it; the Ask page shows exactly that."""
from __future__ import annotations

from pathlib import Path

import pytest

from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve
from toporag_core.studio import claim

SCENE = [("cup", "has color", "red"), ("cup", "made of", "metal"), ("cup", "on", "table"),
         ("ball", "has color", "blue"), ("ball", "under", "table"), ("lamp", "above", "table")]


def whole(triples=SCENE):
    """Every cell of a small graph: the retrieved facts are all its node texts and triples."""
    ecx = EmbeddedComplex.from_graph(TextualGraph.from_triples(triples), HashingEncoder())
    return retrieve(ecx, "anything", setting=RetrievalSetting.make("whole"))


def test_claim_terms_drop_auxiliaries_articles_and_fold_plurals():
    assert claim.claim_terms("Is the cup red?") == ("cup", "red")
    assert claim.claim_terms("Are there any CUPS on the tables?") == ("cup", "table")
    assert claim.claim_terms("Does the glass hold water?") == ("glass", "hold", "water")  # -ss kept


def test_facts_about_the_claim_most_terms_first_and_nothing_when_none():
    ev = claim.claim_evidence("Is the cup red?", whole())
    assert ev.facts[0] == ("cup has color red", ("cup", "red")) and ev.whole
    assert {f for f, _ in ev.facts} == {"cup has color red", "cup made of metal", "cup on table"}
    assert all(len(h) >= 1 for _, h in ev.facts) and "cup" not in [f for f, _ in ev.facts]  # no bare names
    blue = claim.claim_evidence("Is the cup blue?", whole())  # a right "no" rests on "cup has color red"
    assert not blue.whole and "cup has color red" in [f for f, _ in blue.facts]
    assert "ball has color blue" in [f for f, _ in blue.facts]
    assert [f for f, _ in blue.facts].index("cup has color red") < [f for f, _ in blue.facts].index(
        "ball has color blue")  # the subject's facts first
    none = claim.claim_evidence("Is the giraffe purple?", whole())
    assert none.facts == () and not none.whole
    assert "holds **nothing** about the question's claim" in claim.evidence_markdown(none)
    assert "giraffe, purple" in claim.evidence_markdown(none)
    assert len(claim.claim_evidence("Is the table wooden?", whole()).facts) <= claim.MAX_FACTS


def test_a_false_or_off_claim_sentence_is_not_backed_a_true_one_is():
    sub = whole()
    assert claim.claim_evidence("Is the cup red?", sub, "The cup is blue").backed is False  # false: not shown
    assert claim.claim_evidence("Is the cup red?", sub, "The metal cup is red").backed is True
    assert claim.claim_evidence("Is the ball red?", sub, "The ball is blue").backed is True
    # true in the graph, but not about the claim: not evidence for it
    assert claim.claim_evidence("Is the giraffe purple?", sub, "The cup is red").backed is False
    assert claim.claim_evidence("Is the cup red?", sub, None).backed is None
    assert claim.sentence_note(claim.claim_evidence("Is the cup red?", sub, None)) is None
    assert "not shown as evidence" in claim.sentence_note(claim.claim_evidence("Is the cup red?", sub, "The cup is blue"))


def test_yes_no_answers_are_recognised_by_their_label_set():
    from types import SimpleNamespace as A

    assert claim.is_yes_no_answer(A(choices=("yes", "no"), label_probs=None))
    assert claim.is_yes_no_answer(A(choices=None, label_probs={"No": 0.9, "Yes": 0.1}))
    assert not claim.is_yes_no_answer(A(choices=("support", "counter"), label_probs=None))
    assert not claim.is_yes_no_answer(A(choices=None, label_probs=None))


# ---------------------------------------------------------------------------------------------- the page
@pytest.fixture
def ask_env(monkeypatch, tmp_path_factory):
    pytest.importorskip("streamlit")
    from toporag_core.model.tiny import build_tiny_checkpoint

    ckpt = build_tiny_checkpoint(tmp_path_factory.mktemp("claim_ckpt") / "ckpt")
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(ckpt))
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("TOPORAG_LLM", raising=False)
    return ckpt


def _ask_yes_no(monkeypatch, question: str, sentence: str, answer: str = "no"):
    """The Ask page on the scene sample, the pipeline's answer replaced by a yes/no ``answer`` that the
    model wrote ``sentence`` before."""
    from streamlit.testing.v1 import AppTest

    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.studio import state

    real = TopoRAGPipeline.answer

    def yes_no(self, *a, **kw):
        out = real(self, *a, **kw)
        out.answer, out.evidence, out.label_probs = answer, sentence, {"yes": 0.004, "no": 0.996}
        return out

    monkeypatch.setattr(TopoRAGPipeline, "answer", yes_no)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "pages" / "4_Ask.py"), default_timeout=120)
    at.run()
    at.text_area(key=f"ask_question_{at.session_state[state.GRAPH_KEY]}").set_value(question)
    at.button(key="ask_go").click()
    return at.run()


def test_ask_page_shows_the_claims_retrieved_facts_not_the_models_false_sentence(ask_env, monkeypatch):
    at = _ask_yes_no(monkeypatch, "Is the cup blue?", "The cup is purple and tiny")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "does **not** occur in the retrieved context" not in text  # says nothing for a label
    assert "Evidence about the claim** (cup, blue)" in text
    assert "Evidence the model wrote first" not in text
    codes = [c.value for c in at.code]
    assert not any("purple" in c for c in codes)  # the unbacked sentence is never shown
    assert "not shown as evidence" in text
    # the facts shown are those of the retrieval the page ran (the library's, recomputed here)
    from toporag_core.io import samples

    ecx = EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder())
    want = claim.claim_evidence("Is the cup blue?", retrieve(ecx, "Is the cup blue?",
                                                             setting=RetrievalSetting.make("toporag")))
    assert want.facts and "\n".join(f for f, _ in want.facts) in codes


def test_ask_page_says_when_nothing_retrieved_is_about_the_claim(ask_env, monkeypatch):
    at = _ask_yes_no(monkeypatch, "Is the giraffe purple?", "The giraffe is grey")
    assert not at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "holds **nothing** about the question's claim" in text
    assert not any("giraffe is grey" in c.value for c in at.code)
