"""Grounded evidence (issue 51): the claims an evidence-first answer wrote, checked against the compact
context it read; the check flags the answer as low confidence, the calibration fits the threshold beside
it, and every surface quotes the claims the retrieved graph does not hold."""
from __future__ import annotations

import json

import pytest

from toporag_core.answering.confidence import confidence_note
from toporag_core.answering.pipeline import TopoRAGPipeline
from toporag_core.graph import TextualGraph
from toporag_core.predictions.calibrate import (calibrate, context_check, fit_threshold, flag_rates, measure,
                                                unsupported_of)
from toporag_core.retrieval.claims import ContextFacts, claims, loosely_backed, ungrounded_answer, unsupported_claims
from toporag_core.retrieval.textualize import textualize

CONTEXT = """nodes
table [0]: pink, wooden
table [1]: blue, metal, large
man [4]: black, standing
man [5]: red, standing
tv stand [6]: black

relations
table [0] next to man [5]
man [5] next to table [0]
table [1] behind man [5]
man [5] in front of table [1]
tv stand [6] to the left of table [0]

2-cells (closed loops)
c3: table [1] <-[behind]-[in front of]-> man [5] <-[next to]-[next to]-> table [0]"""


def test_a_claim_is_a_node_fact_or_a_directed_relation_fact_of_the_context():
    facts = ContextFacts(CONTEXT)
    assert facts.readable and len(facts.relations) == 5
    assert facts.supports("The metal table is blue")  # one node line holds every word
    assert facts.supports("The table is large") and facts.supports("The man is red")
    assert not facts.supports("The metal table is pink")  # pink is the other table's
    assert not facts.supports("The poster is blue")  # no such node
    assert not facts.supports("blue")  # a claim names its node
    assert facts.supports("The metal table is behind the red man")
    assert facts.supports("The red man is in front of the metal table")
    assert not facts.supports("The metal table is in front of the red man")  # the direction counts
    assert not facts.supports("The wooden table is behind the red man")  # the wrong head
    assert not facts.supports("The metal table is behind the black man")  # the wrong tail
    assert facts.supports("The black tv stand is to the left of the pink table")  # several-word names, relation
    assert not facts.supports("The tv stand is to the left of the metal table")


def test_claims_split_at_and_and_the_unsupported_ones_are_named():
    assert claims("The table is metal and the chair is metal.") == ["The table is metal", "the chair is metal"]
    assert claims("") == [] and claims(None) == []
    assert unsupported_claims("The metal table is blue and the red man is black", CONTEXT) == ["the red man is black"]
    assert unsupported_claims("The wooden table is pink and the metal table is blue", CONTEXT) == []
    assert unsupported_claims(None, CONTEXT) is None  # no evidence: nothing to check
    assert unsupported_claims("The cup is red", "node_id,node_attr\n0,cup\n") is None  # not a compact context


def test_the_facts_of_a_scene_subcomplex_read_as_the_model_reads_them():
    from toporag_core.embed import HashingEncoder
    from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve

    g = TextualGraph.from_triples([("name: cup; attribute: red, metal", "on", "name: table; attribute: wooden")])
    sub = retrieve(EmbeddedComplex.from_graph(g, HashingEncoder()), "cup", setting=RetrievalSetting.make("whole"))
    text = textualize(sub, fmt="compact")
    assert unsupported_claims("The metal cup is on the wooden table", text) == []
    assert unsupported_claims("The red cup is under the table", text) == ["The red cup is under the table"]


def test_plain_name_graphs_read_their_attribute_values_as_the_nodes_words():
    from toporag_core.io import samples

    plain = "nodes\ncup\nred\nred cup holder\ntable\nwood\n\nrelations\ncup has color red\ncup on table\n" \
            "table made of wood\nred cup holder next to table"
    facts = ContextFacts(plain)
    assert facts.readable and facts.node_words["cup"] == {"cup", "red"}  # red: a value (points nowhere)
    assert facts.node_words["table"] == {"table", "wood"} and ("red cup holder", ["next", "to"], "table") in \
        facts.relations  # the longest node name begins the line
    assert unsupported_claims("The red cup is on the wooden table", plain) == ["The red cup is on the wooden table"]
    assert unsupported_claims("The red cup is on the table and the table is wood", plain) == []
    assert unsupported_claims("The cup is blue", plain) == ["The cup is blue"]
    assert unsupported_claims("The table is on the cup", plain) == ["The table is on the cup"]
    # the built-in breakfast scene, as the scene checkpoint reads it on the Ask page
    from toporag_core.embed import HashingEncoder
    from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve

    sub = retrieve(EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder()), "cup",
                   setting=RetrievalSetting.make("whole"))
    text = textualize(sub, fmt="compact")
    assert unsupported_claims("The red cup is made of ceramic and the cup is on the table", text) == []
    assert unsupported_claims("The cup is blue", text) == ["The cup is blue"]


def test_the_looser_rule_joins_facts_of_plain_name_graphs():
    facts = ["cup has color red", "cup made of metal"]
    assert loosely_backed("The metal cup is red", facts)
    assert not loosely_backed("The cup is blue", facts)
    assert not loosely_backed("the", facts)


# ---------------------------------------------------------------------------------------------- calibration
def _rec(ok: bool, p: float, evidence: str | None) -> dict:
    return {"correct": ok, "probability": p, "confidence": p, "answer_kind": "label", "margin": 0.5,
            "evidence": evidence, "context": CONTEXT, "gold": "yes"}


def test_the_threshold_is_fitted_beside_the_answers_the_evidence_check_flags():
    # 8 right answers: 25% = 2 may be flagged; one is flagged by its evidence, so the threshold flags one more
    p = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99]
    forced = [False, False, False, False, False, False, False, True]
    assert fit_threshold(p, 0.25) == 0.7
    assert fit_threshold(p, 0.25, forced) == 0.6
    assert fit_threshold(p, 0.25, [True, True, True] + [False] * 5) == 0.0  # the check alone flags too many
    r = flag_rates([0.99, 0.99, 0.2], [False, True, False], 0.5, [True, False, False])
    assert r["wrong_flagged"] == 1.0 and r["right_flagged"] == 0.0 and r["unsupported"] == 1

    good, bad = "The metal table is blue", "The metal table is pink"
    recs = [_rec(True, 0.99, good)] * 6 + [_rec(True, 0.9, good), _rec(True, 0.99, bad)] + \
        [_rec(False, 0.99, bad)] * 3 + [_rec(False, 0.6, good)]
    assert unsupported_of(recs[7]) == [bad] and unsupported_of(recs[0]) == []
    assert unsupported_of({**recs[0], "answer_kind": "generated"}) is None  # cited lines are not claims
    fit = calibrate(recs, margin=0)["label"]  # at 25% itself: the margin is tested in test_confidence.py
    assert fit["evidence_checked"] and fit["unsupported"] == 4
    # k = 2 right answers may be flagged, one is by its evidence: the threshold is the 2nd smallest other p
    assert fit["threshold"] == 0.99 and fit["right_flagged"] == 2 / 8 and fit["wrong_flagged"] == 1.0
    alone = calibrate(recs, check_evidence=False, margin=0)["label"]
    assert not alone["evidence_checked"] and alone["wrong_flagged"] == 0.25  # the probability misses them
    assert measure(recs, {"label": 0.9})["label"]["wrong_flagged"] == 1.0
    assert measure(recs, {"label": 0.9}, checked=())["label"]["wrong_flagged"] == 0.25


# ---------------------------------------------------------------------------------------------- answering
def test_the_pipeline_flags_an_answer_whose_evidence_the_context_does_not_hold():
    from toporag_core.model.tiny import tiny_model

    meta = {"confidence": {"threshold": {"label": 0.5}, "evidence_check": ["label"]}}
    pipe = TopoRAGPipeline(tiny_model(), meta=meta)
    assert pipe.confidence_of(0.9, "label", ["The poster is blue"])["low_confidence"] is True
    assert pipe.confidence_of(0.9, "label", [])["low_confidence"] is False
    assert pipe.confidence_of(0.9, "label", None)["low_confidence"] is False
    unchecked = TopoRAGPipeline(tiny_model(), meta={"confidence": {"threshold": {"label": 0.5}}})
    assert unchecked.confidence_of(0.9, "label", ["The poster is blue"])["low_confidence"] is False


def test_an_evidence_first_answer_carries_its_unsupported_claims_end_to_end(tmp_path):
    from toporag_core.embed import HashingEncoder
    from toporag_core.model.tiny import build_tiny_checkpoint
    from toporag_core.retrieval import EmbeddedComplex

    ckpt = build_tiny_checkpoint(tmp_path / "ck", answer_style="cited", max_new_tokens=8,
                                 retrieval={"method": "whole", "text": "compact"})
    meta = json.loads((ckpt / "config.json").read_text())
    meta["confidence"] = {"threshold": {"label": 0.0}, "evidence_check": ["label"]}  # only the check flags
    (ckpt / "config.json").write_text(json.dumps(meta))
    pipe = TopoRAGPipeline.load(ckpt, device="cpu")
    g = TextualGraph.from_triples([("name: cup; attribute: red, metal", "on", "name: table; attribute: wooden")])
    a = pipe.answer(EmbeddedComplex.from_graph(g, HashingEncoder()), "Is the cup on the table?")
    assert a.answer_kind == "label" and a.evidence is not None and "cup [0]: red, metal" in a.context
    assert a.unsupported_claims == unsupported_claims(a.evidence, a.context) and a.unsupported_claims is not None
    # the tiny model's evidence is random text, no fact of the context: with threshold 0 only the check flags it
    assert a.unsupported_claims and a.low_confidence is True
    assert a.to_json()["unsupported_claims"] == a.unsupported_claims


def test_a_generated_answer_is_grounded_when_the_context_states_it_beside_the_questions_words():
    # a node line that names a question word and holds the answer
    assert ungrounded_answer("What colour is the man standing next to the pink table?", "red", CONTEXT) == []
    assert ungrounded_answer("What is the tv stand made of?", "black", CONTEXT) == []
    # the answer is some other node's attribute, not the asked one's
    assert ungrounded_answer("What colour is the tv stand?", "pink", CONTEXT) == ["pink"]
    # a relation line the question names, joining the answer's node to a node the question names
    assert ungrounded_answer("What is to the left of the table?", "tv stand", CONTEXT) == []
    assert ungrounded_answer("What is behind the man?", "table", CONTEXT) == []
    assert ungrounded_answer("What is behind the man?", "blue table", CONTEXT) == []
    # the relation is not the one asked about ("next to" is not "behind") or the node is not named
    assert ungrounded_answer("What is behind the tv stand?", "man", CONTEXT) == ["man"]
    assert ungrounded_answer("What is to the left of the man?", "tv stand", CONTEXT) == ["tv stand"]
    assert ungrounded_answer("What is behind the man?", "lamp", CONTEXT) == ["lamp"]  # not in the graph
    # nothing to check: a count, no answer words, no other question words, no node lines
    assert ungrounded_answer("How many tables are there?", "2", CONTEXT) is None
    assert ungrounded_answer("What colour is the man?", "the", CONTEXT) is None
    assert ungrounded_answer("What is it?", "table", CONTEXT) is None
    assert ungrounded_answer("What colour is the man?", "red", "node_id,node_attr\n0,man") is None
    # the one check per kind: label answers by their evidence, generated answers by themselves, names not
    q = "What colour is the tv stand?"
    assert context_check("generated", q, "pink", None, CONTEXT) == ["pink"]
    assert context_check("names", q, "pink", None, CONTEXT) is None
    assert context_check("label", q, "yes", "The tv stand is black", CONTEXT) == []
    assert unsupported_of({"answer_kind": "generated", "question": q, "answer": "pink", "context": CONTEXT}) == ["pink"]


def test_the_notice_says_when_the_graph_does_not_state_a_generated_answer():
    from toporag_core.studio.ask import confidence_markdown

    low = confidence_note("pink", 0.9, True, None, 0.6, "generated", unsupported=["pink"])
    assert low.by_evidence and low.headline().startswith(
        "Low confidence: the retrieved graph does not state the answer beside the question's words (\"pink\")")
    info = confidence_note("pink", 0.9, False, None, 0.6, "generated", unsupported=["pink"])
    assert info.lines()[1] == 'the answer is not stated beside the question\'s words in the retrieved graph: "pink"'
    assert "The answer is not stated beside" in confidence_markdown(info)


def test_the_notice_quotes_the_claims_the_graph_does_not_hold():
    from toporag_core.studio.ask import confidence_markdown

    low = confidence_note("yes", 0.99, True, [{"name": "no", "probability": 0.01}], 0.9, "label",
                          unsupported=["The *poster* is blue"])
    assert low.by_evidence
    head = low.headline()
    assert head.startswith("Low confidence: the evidence the model wrote is not in the retrieved graph "
                           '("The *poster* is blue"), though p = 0.99 is at or above the threshold 0.9')
    assert low.lines()[1] == "runner-up answers: no (p = 0.01)"
    md = confidence_markdown(low)
    assert md.startswith("**Low confidence**") and "\\*poster\\*" in md and "Runner-up answers: no" in md
    both = confidence_note("yes", 0.5, True, [], 0.9, "label", unsupported=["The poster is blue"])
    assert not both.by_evidence and both.headline().startswith("Low confidence: p = 0.5 is below")
    assert both.lines()[1] == 'evidence not in the retrieved graph: "The poster is blue"'
    info = confidence_note("yes", 0.99, False, [], 0.9, "label", unsupported=["The poster is blue"])
    assert info.lines() == [info.headline(), 'evidence not in the retrieved graph: "The poster is blue"']
    assert "Evidence not in the retrieved graph" in confidence_markdown(info)
    assert info.to_dict()["unsupported_claims"] == ["The poster is blue"]


def _ask_page(monkeypatch, tmp_path, calibration: dict, patch, question: str):
    """The Ask page on a tiny checkpoint calibrated with ``calibration``, each answer passed through
    ``patch(pipe, answer)`` (the tiny model writes neither evidence nor a scene answer), after asking
    ``question``."""
    pytest.importorskip("streamlit")
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from toporag_core.model.tiny import build_tiny_checkpoint
    from toporag_core.studio import state

    ckpt = build_tiny_checkpoint(tmp_path / "ck")
    meta = json.loads((ckpt / "config.json").read_text())
    meta["confidence"] = calibration
    (ckpt / "config.json").write_text(json.dumps(meta))
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(ckpt))
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TOPORAG_LLM", raising=False)
    real = TopoRAGPipeline.answer

    def patched(self, *a, **kw):
        out = patch(self, real(self, *a, **kw))
        out.low_confidence = self.confidence_of(out.confidence, out.answer_kind, out.unsupported_claims)[
            "low_confidence"]
        return out

    monkeypatch.setattr(TopoRAGPipeline, "answer", patched)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "pages" / "4_Ask.py"), default_timeout=120)
    at.run()
    at.text_area(key=f"ask_question_{at.session_state[state.GRAPH_KEY]}").set_value(question)
    at.button(key="ask_go").click()
    at.run()
    assert not at.exception
    return at


@pytest.mark.parametrize("unsupported", [["The cup is purple"], []])
def test_the_ask_page_warns_when_the_evidence_is_not_in_the_retrieved_graph(monkeypatch, tmp_path, unsupported):
    def with_evidence(pipe, out):  # the tiny checkpoint writes no evidence: give its answer some
        out.evidence, out.unsupported_claims = "The cup is purple", list(unsupported)
        return out

    at = _ask_page(monkeypatch, tmp_path, {"threshold": {"label": 0.0}, "evidence_check": ["label"]},
                   with_evidence, "Is the cup on the table?")
    warned = [w.value for w in at.warning if "not in the retrieved graph" in w.value]
    if unsupported:
        assert len(warned) == 1 and '"The cup is purple"' in warned[0]
    else:
        assert not warned and not any("Low confidence" in w.value for w in at.warning)


def test_the_ask_page_says_when_the_graph_does_not_state_a_generated_answer(monkeypatch, tmp_path):
    def generated(pipe, out):  # a generated answer that no retrieved fact states beside the question's words
        out.answer, out.answer_kind, out.label_probs, out.candidates = "purple", "generated", None, None
        out.unsupported_claims = ["purple"]  # what context_check says of it in a compact context (tested above)
        return out

    at = _ask_page(monkeypatch, tmp_path, {"threshold": {"generated": 0.0}, "evidence_check": ["generated"]},
                   generated, "What colour is the cup?")
    warned = [w.value for w in at.warning if "does not state the answer beside the question's words" in w.value]
    assert len(warned) == 1 and '"purple"' in warned[0] and warned[0].startswith("**Low confidence**")


# ---------------------------------------------------------------------------------------------- evaluation records
def test_eval_records_say_whether_each_answer_is_low_confidence(tmp_path):
    from toporag_core.embed import HashingEncoder
    from toporag_core.evaluation.evaluate import evaluate
    from toporag_core.model.tiny import tiny_model
    from toporag_core.predictions.calibrate import is_low
    from toporag_core.retrieval import RetrievalSetting
    from toporag_core.studio import errors
    from toporag_core.tasks.prep import PrepConfig, RawExample, prepare_example

    graphs = [[("cats", "are", "pets"), ("pets", "need", "care"), ("care", "helps", "cats")],
              [("guns", "cause", "harm"), ("harm", "is", "bad")], [("sun", "gives", "energy")]]
    raw = [RawExample(id=f"e{i}", graph=TextualGraph.from_triples(t), question=f"{t[0][0]} and {t[-1][2]}?",
                      label=lab, answer=lab, qtype="q")
           for i, (t, lab) in enumerate(zip(graphs, ["support", "counter", "support"]))]
    model = tiny_model(in_dim=16, answer_set=("support", "counter")).eval()
    exs = [prepare_example(r, HashingEncoder(dim=16), PrepConfig(RetrievalSetting())) for r in raw]
    calibration = {"threshold": {"label": 0.5}}
    out = tmp_path / "p.jsonl"
    evaluate(model, exs, "expla_graphs", out=out, batch_size=3, show_progress=False, calibration=calibration)
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == len(exs)
    for r in recs:  # no evidence: nothing checked; the flag is the threshold's
        assert r["answer_kind"] == "label" and "unsupported_claims" not in r
        assert r["low_confidence"] is (r["confidence"] < 0.5)
        assert r["low_confidence"] == is_low(calibration, "label", r["confidence"])
    plain = tmp_path / "plain.jsonl"
    evaluate(model, exs, "expla_graphs", out=plain, batch_size=3, show_progress=False)
    assert all("low_confidence" not in json.loads(x) for x in plain.read_text().splitlines())  # not calibrated
    # the Error-analysis table shows the flag and sums it up per verdict
    df = errors.predictions_frame(errors.load_predictions(out))
    assert set(df["low confidence"]) <= {"yes", "no"}
    wrong = int((~df["correct"].astype(bool)).sum())
    assert errors.low_confidence_summary(df).startswith("Low confidence (the checkpoint's calibrated flag")
    assert f"of {wrong} wrong answers flagged" in errors.low_confidence_summary(df)
    assert errors.low_confidence_summary(errors.predictions_frame(errors.load_predictions(plain))) is None


def test_is_low_reads_one_threshold_or_one_per_kind_and_the_evidence_check():
    from toporag_core.predictions.calibrate import is_low, threshold_for

    assert threshold_for({"threshold": 0.4}, "names") == 0.4 and threshold_for({"threshold": {"label": 0.3}}, "x") is None
    assert threshold_for(None, "label") is None
    cal = {"threshold": {"label": 0.5, "generated": 0.5}, "evidence_check": ["label"]}
    assert is_low(cal, "label", 0.9, ["The cup is red"]) is True and is_low(cal, "label", 0.9, []) is False
    assert is_low(cal, "generated", 0.9, ["x"]) is False and is_low(cal, "generated", 0.1) is True
    assert is_low(cal, "names", 0.1) is None and is_low(cal, "label", None) is None


def test_the_evidence_heading_says_whether_the_claims_were_checked():
    from types import SimpleNamespace

    from toporag_core.studio.ask import evidence_heading
    from toporag_core.studio.errors import citation_note

    a = SimpleNamespace(answer="blue", evidence="The metal table is blue", context=CONTEXT, unsupported_claims=None)
    assert "which of its claims are facts of the retrieved context" in evidence_heading(a, False)
    assert citation_note({"evidence": a.evidence, "context": CONTEXT}) == \
        "Evidence:  1 of 1 claims of the evidence are facts of the context\n"
    csv = SimpleNamespace(answer="blue", evidence="The table is blue", context="node_id,node_attr\n0,table\n",
                          unsupported_claims=None)
    assert "could not be checked against this context" in evidence_heading(csv, False)
