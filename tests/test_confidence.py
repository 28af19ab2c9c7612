"""A confidence that means something: the probability of a generated answer, the threshold fitted per
answer kind on validation (at most 25% of right answers below it), the pipeline's ``low_confidence``,
``toporag ask --json`` and the Ask page's "Low confidence" notice with the runner-up answers."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from toporag_core.model import QABatch, short_answer
from toporag_core.model.dispatch import answer_prefix, answer_scores
from toporag_core.model.answer_text import evidence_target
from toporag_core.model.styles import get_style
from toporag_core.answering.pipeline import TopoRAGPipeline
from toporag_core.predictions import eval_record
from toporag_core.predictions.calibrate import (answer_kind, auroc, calibrate, confidence_of, fit_rate, fit_threshold,
                                                flag_rates, measure, names_separation, write_confidence)
from toporag_core.answering.confidence import confidence_note, runner_ups
from toporag_core.model.tiny import build_tiny_checkpoint, tiny_model

ROOT = Path(__file__).resolve().parents[1]


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))
POLAR = "Is the cup on the table?"


# ====================================================================== fitting
@pytest.mark.parametrize("m", [1, 3, 4, 7, 100, 101])
def test_threshold_flags_at_most_a_quarter_of_right_answers_and_is_the_largest_such(m):
    rng = np.random.default_rng(m)
    p = rng.uniform(0, 1, m)
    t = fit_threshold(p)
    assert np.mean(p < t) <= 0.25
    assert t in p and np.mean(p <= t) > 0.25  # any larger threshold also flags t itself: over 25%
    assert int(np.sum(p < t)) == int(np.floor(0.25 * m))  # distinct values: exactly floor(m / 4) flagged


def test_threshold_with_ties_and_without_right_answers():
    p = [0.2, 0.2, 0.2, 0.2, 0.9, 0.9, 0.9, 0.9]  # k = 2: t = 0.2 flags none (0.2 < 0.2 is false)
    assert fit_threshold(p) == 0.2 and flag_rates(p, [True] * 8, 0.2)["right_flagged"] == 0.0
    assert fit_threshold([0.1, 0.5, 0.6, 0.7]) == 0.5  # 1 of 4 right answers flagged = exactly 25%
    assert fit_threshold([]) is None


def test_the_fit_stays_one_standard_error_below_the_target():
    assert fit_rate(400) == pytest.approx(0.25 - math.sqrt(0.25 * 0.75 / 400))  # 22.8%
    assert fit_rate(400, margin=0) == 0.25 and fit_rate(0) == 0.25 and fit_rate(1) == 0.0
    assert fit_rate(100) < fit_rate(400) < 0.25  # fewer validation answers: a wider margin
    rng = np.random.default_rng(1)
    recs = [{"correct": True, "probability": float(x), "answer_kind": "label", "margin": 0.5}
            for x in rng.uniform(0, 1, 400)]
    recs += [{"correct": False, "probability": float(x), "answer_kind": "label", "margin": 0.5}
             for x in rng.uniform(0, 0.3, 50)]
    fit, at = calibrate(recs)["label"], calibrate(recs, margin=0)["label"]
    assert fit["fit_rate"] == pytest.approx(fit_rate(400))
    assert fit["right_flagged"] == int(np.floor(fit_rate(400) * 400)) / 400  # 91 of 400, not 100
    assert at["right_flagged"] == 0.25 and fit["threshold"] < at["threshold"]
    # drawn like the validation answers, new right answers stay at or under 25% more often with the margin
    over = [np.mean(rng.uniform(0, 1, 400) < fit["threshold"]) > 0.25 for _ in range(400)]
    over_at = [np.mean(rng.uniform(0, 1, 400) < at["threshold"]) > 0.25 for _ in range(400)]
    assert np.mean(over) < 0.25 < np.mean(over_at)


def test_auroc_and_the_separation_per_question_free_weight():
    assert auroc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert auroc([0.1, 0.8, 0.9], [True, True, False]) == 0.0
    assert auroc([0.5, 0.5, 0.2, 0.6], [True, False, False, True]) == pytest.approx(3.5 / 4)  # one tie: half
    assert auroc([0.5], [True]) is None
    # right answers: likely names the model would not say without the question; wrong ones: names it says anyway
    def rec(ok, ll, free):
        return {"answer_kind": "names", "hit": ok, "names": ["a", "b"], "name_scores": [-9.0, ll],
                "candidates": [{"name": "b", "probability": 0.9}], "name_free": free}
    recs = [rec(True, -2.0, -6.0), rec(True, -1.0, -1.5), rec(False, -1.2, -0.5), rec(False, -1.8, -1.0)]
    s = names_separation(recs + [{**recs[0], "name_free": None}], [0.0, 0.5])
    assert s["n"] == 4 and s["n_wrong"] == 2
    assert s["auroc"][0.0] == 0.5 and s["auroc"][0.5] == 1.0


def test_flag_rates_count_wrong_and_right_answers():
    r = flag_rates([0.1, 0.2, 0.9, 0.3, 0.95], [False, False, False, True, True], 0.5)
    assert (r["n"], r["n_right"], r["n_wrong"]) == (5, 2, 3)
    assert r["wrong_flagged"] == pytest.approx(2 / 3) and r["right_flagged"] == 0.5
    assert r["kept_accuracy"] == 0.5 and r["accuracy"] == 0.4
    assert flag_rates([0.5], [True], None)["right_flagged"] == 0.0  # no threshold flags nothing


def test_calibration_is_per_answer_kind_and_reads_both_record_formats():
    rng = np.random.default_rng(0)
    recs = []
    for i in range(200):  # labels: right ones near 0.9, wrong near 0.6; generated: right ~0.3, wrong ~0.05
        ok = bool(i % 3)
        recs.append(eval_record(id=i, qtype=None, question="q", gold="support", answer="support",
                                probability=float(np.clip(rng.normal(0.9 if ok else 0.6, 0.05), 0, 1)), correct=ok,
                                clean=True, seconds=0.0, raw="", cells={}, context="", method="toporag",
                                dataset="expla_graphs", margin=0.5, answer_kind="label"))
        own = float(rng.uniform(-1.0, -0.1) if ok else rng.uniform(-4.0, -2.0))  # the chosen name's log-likelihood
        recs.append({"arm": "shipped/seeded+names", "kind": "webqsp", "hit": ok, "names": ["a", "b"],
                     "name_scores": [own - 3.0, own], "name_priors": [2.0, 0.0], "probability": 0.6, "margin": 0.1,
                     "candidates": [{"name": "b", "probability": 0.6}, {"name": "a", "probability": 0.4}]})
        recs.append({"id": i, "correct": ok, "probability": float(0.3 if ok else 0.05), "margin": None})
    recs.append({"id": "x", "correct": True, "probability": None})  # no probability: not calibrated on
    assert [answer_kind(r) for r in recs[:3]] == ["label", "names", "generated"]
    fit = calibrate(recs)
    assert set(fit) == {"label", "names", "generated"}
    # names: judged by the chosen name's likelihood (the softmax probability is the same 0.6 for all);
    # the chosen name is the first candidate ("b", the second of the names), not the first name
    assert confidence_of(recs[1]) == pytest.approx(_sigmoid(recs[1]["name_scores"][1]))  # no name_free recorded
    assert confidence_of({**recs[1], "name_free": -2.0}) == pytest.approx(_sigmoid(recs[1]["name_scores"][1] + 1.0))
    assert confidence_of({**recs[1], "candidates": None}) == 0.6  # no chosen name known: the probability
    assert _sigmoid(-1.0) <= fit["names"]["threshold"] <= _sigmoid(-0.1)
    assert fit["generated"]["threshold"] == 0.3 and fit["generated"]["right_flagged"] == 0.0
    for r in fit.values():
        assert r["right_flagged"] <= 0.25 and r["wrong_flagged"] > 0.9
    again = measure(recs, {k: r["threshold"] for k, r in fit.items()})
    assert again["label"]["wrong_flagged"] == fit["label"]["wrong_flagged"]


def test_write_confidence_keeps_the_config_and_the_pipeline_reads_it(tmp_path):
    ckpt = build_tiny_checkpoint(tmp_path / "ck")
    before = json.loads((ckpt / "config.json").read_text())
    write_confidence(ckpt, {"label": 0.8, "generated": 0.1, "names": None}, "test split", {"label": 3})
    after = json.loads((ckpt / "config.json").read_text())
    assert {k: v for k, v in after.items() if k != "confidence"} == before
    assert after["confidence"] == {"threshold": {"label": 0.8, "generated": 0.1}, "fitted_on": "test split",
                                   "n": {"label": 3}}
    assert not list(ckpt.glob(".*tmp"))
    pipe = TopoRAGPipeline(tiny_model(), meta=after)
    assert pipe.confidence_of(0.7, "label") == {"confidence": 0.7, "low_confidence": True}
    assert pipe.confidence_of(0.7, "generated") == {"confidence": 0.7, "low_confidence": False}
    assert pipe.confidence_of(0.7, "names") == {"confidence": 0.7, "low_confidence": None}  # not fitted
    assert pipe.confidence_of(0.7) == {"confidence": 0.7, "low_confidence": None}  # kind unknown
    assert pipe.confidence_of(None, "label") == {"confidence": None, "low_confidence": None}
    legacy = TopoRAGPipeline(tiny_model(), meta={"confidence": {"threshold": 0.5}})  # one number: every kind
    assert legacy.confidence_of(0.4)["low_confidence"] and not legacy.confidence_of(0.6, "names")["low_confidence"]
    assert TopoRAGPipeline(tiny_model()).confidence_threshold("label") is None


# ====================================================================== generated answers
def test_generated_answers_get_a_per_token_probability_and_stay_the_generated_ones():
    m = tiny_model(in_dim=16, use_graph=False, max_new_tokens=6).eval()  # the graph path: test_decoding's eval
    qs = ["what is red?", "where is the cup?", "who?"]
    batch = QABatch(None, qs, ["cup red", "cup on table", "nobody"])
    rows = m.answer(batch, choices=[None, None, None])
    style = get_style(m.config.answer_style)
    assert [r["answer"] for r in rows] == [short_answer(style.read_open(g)[1]) for g in m.generate(batch)]
    eos = len(m.prompter.pieces["eos"])
    checked: list[bool] = []
    for i, r in enumerate(rows):
        assert r["kind"] == "generated"
        if not r["answer"].strip():
            assert r["probability"] is None
            continue
        assert 0 < r["probability"] <= 1
        one = batch.select([i])
        if answer_prefix(r["raw"], r["raw"], r["answer"]):  # text before the answer: scored after it
            checked.append(False)
            continue
        ll = float(m.score_choices(one, [[r["answer"]]], truncate=False)[0, 0])
        assert r["probability"] == pytest.approx(math.exp(ll / (len(m.prompter.ids(r["answer"])) + eos)), rel=1e-4)
        checked.append(True)
        assert m.answer(one, choices=[None])[0]["probability"] == pytest.approx(r["probability"], rel=1e-4)
    assert any(checked)  # at least one answer is the whole generation, scored alone
    assert answer_scores(m, batch, ["", " ", "x"], None)[0][:2] == [None, None]  # empty answers: no probability


def test_a_cited_answer_is_scored_after_the_evidence_the_model_wrote():
    from toporag_core.model.decode import score_token_lists

    m = tiny_model(in_dim=16, use_graph=False, max_new_tokens=12, answer_style="cited").eval()
    batch = QABatch(None, ["what is red?"], ["cup [0]: red"])
    eos, ids = list(m.prompter.pieces["eos"]), m.prompter.ids
    text = "cup [0]. Answer: red"  # with the end token appended, token-list scoring is score_choices
    assert float(score_token_lists(m, batch, [[ids(text) + eos]])[0, 0]) == \
        pytest.approx(float(m.score_choices(batch, [[text]], truncate=False)[0, 0]), abs=1e-4)
    pre, ans = "cup [0]. Answer: ", "red"
    full, head = ids(pre + ans), ids(pre)
    k = next(i for i, (x, y) in enumerate(zip(full, head + [-1])) if x != y)
    ll_all = float(m.score_choices(batch, [[pre + ans]], truncate=False)[0, 0])  # prefix + answer + end
    ll_pre = float(score_token_lists(m, batch, [[full[:k]]])[0, 0])
    p = answer_scores(m, batch, [ans], None, [pre])[0][0]
    assert p == pytest.approx(math.exp((ll_all - ll_pre) / (len(full) - k + len(eos))), rel=1e-4) and 0 < p <= 1
    assert p != pytest.approx(answer_scores(m, batch, [ans], None)[0][0], rel=1e-3)  # the evidence counts
    assert answer_prefix("dog [5]: brown, sitting. Answer: brown", "brown", "brown") == \
        "dog [5]: brown, sitting. Answer: "
    assert answer_prefix("brown dog", "brown dog", "brown") == "" and answer_prefix("x", "x", "y") == ""
    # the same pass gives the per-token probability of everything written: evidence and answer together
    q = answer_scores(m, batch, [ans], None, [pre])[1][0]
    assert q == pytest.approx(math.exp(ll_all / (len(full) + len(eos))), rel=1e-4) and 0 < q <= 1 and q != p
    row = m.answer(batch, choices=[None])[0]  # the open row scores its answer after its own generated prefix
    prefix = answer_prefix(row["raw"], get_style("cited").read_open(row["raw"])[1], row["answer"])
    if row["answer"].strip():
        p_row, q_row = (x[0] for x in answer_scores(m, batch, [row["answer"]], None, [prefix]))
        assert row["probability"] == pytest.approx(p_row) and row["confidence"] == pytest.approx(q_row)


def test_an_evidence_first_label_carries_the_probability_of_its_evidence_and_label():
    m = tiny_model(in_dim=16, use_graph=False, max_new_tokens=8, answer_style="cited").eval()
    batch = QABatch(None, ["is the cup red?"], ["cup [0]: red"])
    row = m.answer(batch, choices=[("yes", "no")])[0]
    assert row["kind"] == "label" and "evidence" in row and 0 < row["confidence"] <= 1
    target = evidence_target(row["evidence"], row["answer"])
    ll = float(m.score_choices(batch, [[target]], truncate=False)[0, 0])  # evidence + label + end token
    n = len(m.prompter.ids(target)) + len(m.prompter.pieces["eos"])
    assert row["confidence"] == pytest.approx(math.exp(ll / n), rel=1e-4)
    assert row["answer"] == max(row["scores"], key=row["scores"].get)


def test_a_names_answer_is_judged_against_the_same_name_without_the_question():
    from toporag_core.metrics import QUESTION_FREE_WEIGHT, name_confidence
    from toporag_core.model.decode import score_names
    from toporag_core.model.dispatch import QUESTION_FREE
    from toporag_core.model.frozen_kv import with_context_kv

    for question_first in (False, True):  # the free pass may reuse the frozen part only when it holds no question
        m = tiny_model(in_dim=16, use_graph=False, question_first=question_first,
                       graph_position="before_question").eval()
        batch = QABatch(None, ["who is red?", "who is blue?"], ["anna red; bob blue", "bob blue"])
        names = [("anna", "bob", "carl"), ("bob", "dora")]
        assert m.cacheable
        rows = m.answer(with_context_kv(m, batch), choices=[None, None], names=names)  # the caches a service passes
        free = QABatch(None, [QUESTION_FREE] * 2, batch.contexts)
        for r, sc, ns, fr in zip(rows, score_names(m, batch, [list(x) for x in names]), names,
                                 score_names(m, free, [list(x) for x in names])):
            best = int(np.argmax(sc))
            assert r["kind"] == "names" and r["answer"].split(", ")[0] == ns[best]
            # the chosen name's log-likelihood with the question replaced, scored on its own
            assert r["name_free"] == pytest.approx(fr[best], rel=1e-6)
            want = _sigmoid(sc[best] - QUESTION_FREE_WEIGHT * fr[best])
            assert r["confidence"] == pytest.approx(want, rel=1e-6) and 0 < r["confidence"] <= 1
            assert r["confidence"] != pytest.approx(r["probability"])  # not the softmax over the names
    # with a prior that makes another name the answer, the confidence follows the chosen name
    sc = score_names(m, batch.select([0]), [list(names[0])])[0]
    fr = score_names(m, free.select([0]), [list(names[0])])[0]
    worst = int(np.argmin(sc))
    pri = tuple(100.0 if i == worst else 0.0 for i in range(len(sc)))
    row = m.answer(batch.select([0]), choices=[None], names=[names[0]], priors=[pri], path_weight=1.0)[0]
    assert row["answer"].split(", ")[0] == names[0][worst]
    assert row["confidence"] == pytest.approx(name_confidence(sc, worst, fr[worst]), rel=1e-6)


def test_name_confidence_credits_what_the_question_adds():
    from toporag_core.metrics import name_confidence

    ll = [-3.0, -2.0]
    assert name_confidence(ll, 1) == pytest.approx(_sigmoid(-2.0))  # no question-free score: p / (1 + p)
    # r = p / p_free^0.5: a name the model would hardly say without the question gains; one it says anyway does not
    assert name_confidence(ll, 1, -2.0) == pytest.approx(_sigmoid(-2.0 + 1.0))
    assert name_confidence(ll, 1, -2.0) > name_confidence(ll, 1, -1.0) > name_confidence(ll, 1, -0.1)
    assert name_confidence(ll, 1, -2.0, weight=1.0) == pytest.approx(0.5)  # r = 1
    # r above 1 keeps its order below 1: no ties among confident answers
    assert name_confidence(ll, 0, -9.0) < name_confidence(ll, 0, -12.0) < 1.0
    assert name_confidence([-800.0], 0) == 0.0
    assert name_confidence([], 0) == 0.0 and name_confidence(ll, 5, -1.0) == 0.0


# ====================================================================== where users see it
def test_runner_ups_leave_out_the_answer_and_its_listed_names():
    cands = [{"name": "A", "probability": 0.5}, {"name": "B", "probability": 0.3}, {"name": "C", "probability": 0.1},
             {"name": "D", "probability": 0.05}, {"name": "E", "probability": 0.04}]
    assert runner_ups("A, B", cands) == [("C", 0.1), ("D", 0.05), ("E", 0.04)]
    low = confidence_note("A, B", 0.5, True, cands, threshold=0.6, kind="names")
    assert low.headline().startswith("Low confidence: p = 0.5 is below the threshold 0.6")
    assert low.lines()[1] == "runner-up answers: C (p = 0.1), D (p = 0.05), E (p = 0.04)"
    from toporag_core.studio.ask import confidence_markdown

    assert "**Low confidence**" in confidence_markdown(low) and "C (p = 0.1)" in confidence_markdown(low)
    assert "\\*" in confidence_markdown(confidence_note("x", 0.1, True, [{"name": "*x*", "probability": 0.1}], 0.5))
    ok = confidence_note("A", 0.9, False, cands, threshold=0.6, kind="label")
    assert ok.headline().startswith("Confidence: p = 0.9 (at or above") and ok.lines() == [ok.headline()]
    assert "not calibrated" in confidence_note("A", 0.9, None).headline()
    assert "runner-up answers: none" in confidence_note("A", 0.2, True, None, 0.5, "generated").lines()[1]


def test_the_page_judges_a_names_answer_by_its_confidence_not_the_softmax():
    from types import SimpleNamespace

    from toporag_core.studio.ask import answer_confidence

    cands = [{"name": "A", "probability": 0.85}, {"name": "B", "probability": 0.15}]
    a = SimpleNamespace(answer="A", probability=0.85, confidence=0.31, low_confidence=True, candidates=cands,
                        confidence_threshold=0.8, answer_kind="names", unsupported_claims=None)
    head = answer_confidence(a).headline()
    assert head.startswith("Low confidence: p = 0.31 is below the threshold 0.8")  # not the softmax's 0.85
    assert "p: r / (1 + r), r the model's probability that the answer is its first name over the square root" in head
    assert "p = 0.85" not in head


@pytest.fixture(scope="module")
def strict_checkpoint(tmp_path_factory) -> Path:
    """A tiny checkpoint whose thresholds are 1.0: every answer with a probability is low confidence."""
    ckpt = build_tiny_checkpoint(tmp_path_factory.mktemp("strict") / "ck")
    write_confidence(ckpt, {"label": 1.0, "generated": 1.0, "names": 1.0}, "a test: everything low", {})
    return ckpt


def test_toporag_ask_json_carries_confidence_and_runner_ups(strict_checkpoint, monkeypatch, capsys):
    from toporag_core.cli import main

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    sample = str(ROOT / "assets" / "samples" / "scene_breakfast.csv")
    assert main(["ask", sample, "-q", POLAR, "--checkpoint", str(strict_checkpoint), "--device", "cpu",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] in ("yes", "no") and out["answer_kind"] == "label" and out["confidence_threshold"] == 1.0
    assert out["low_confidence"] is True and out["confidence"] == out["probability"] and 0.5 <= out["confidence"] < 1
    other = "no" if out["answer"] == "yes" else "yes"
    assert [c["name"] for c in out["candidates"]] == [out["answer"], other]
    assert out["runner_ups"] == [{"name": other, "probability": pytest.approx(1 - out["confidence"])}]
    assert main(["ask", sample, "-q", POLAR, "--checkpoint", str(strict_checkpoint), "--device", "cpu"]) == 0
    human = capsys.readouterr().out
    assert "Low confidence: p = " in human and f"runner-up answers: {other} (p = " in human
    assert main(["ask", sample, "-q", "What is on the table?", "--checkpoint", str(strict_checkpoint), "--device",
                 "cpu", "--json"]) == 0
    gen = json.loads(capsys.readouterr().out)
    assert gen["answer_kind"] == "generated" and gen["runner_ups"] == []
    assert (gen["low_confidence"] is True) == (gen["confidence"] is not None)


def test_ask_page_warns_low_confidence_with_the_runner_ups(strict_checkpoint, monkeypatch):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from toporag_core.studio import state

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(strict_checkpoint))
    monkeypatch.delenv("TOPORAG_LLM", raising=False)
    at = AppTest.from_file(str(ROOT / "pages" / "4_Ask.py"), default_timeout=120)
    at.run()
    at.text_area(key=f"ask_question_{at.session_state[state.GRAPH_KEY]}").set_value(POLAR)
    at.button(key="ask_go").click()
    at.run()
    assert not at.exception
    answer = at.code[0].value
    assert answer in ("yes", "no")
    other = "no" if answer == "yes" else "yes"
    low = [w.value for w in at.warning if "Low confidence" in w.value]
    assert len(low) == 1 and "below the threshold 1 calibrated on validation" in low[0]
    assert f"Runner-up answers: {other} (p = " in low[0]
