"""Graph-token ablation arms (``toporag eval --graph-tokens``): what each arm hands the LLM."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from toporag_core.evaluation.arms import ARMS, READBACK_QUESTION, GraphTokenArm, check_arm, derangement, readback, readback_rows
from toporag_core.evaluation.evaluate import evaluate
from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model.tiny import tiny_model
from toporag_core.tasks.batching import make_batch

from .test_train_eval import DIM, ENC, raw_examples


@pytest.fixture(scope="module")
def examples():
    return [prepare_example(r, ENC, PrepConfig(RetrievalSetting.make(k0=2, k1=2, k2=1))) for r in raw_examples()]


def test_derangement_is_a_seeded_permutation_without_fixed_points():
    for n in range(2, 60):
        for seed in range(3):
            s = derangement(n, seed)
            assert sorted(s.tolist()) == list(range(n))
            assert not np.any(s == np.arange(n)), (n, seed)
    assert derangement(40, 1).tolist() == derangement(40, 1).tolist()
    assert derangement(40, 1).tolist() != derangement(40, 2).tolist()
    with pytest.raises(ValueError, match="at least 2"):
        derangement(1)


def test_unknown_arm_and_arms_without_graph_tokens_are_refused():
    assert check_arm("permute", True) == "permute"
    with pytest.raises(ValueError, match="unknown arm 'shuffle'"):
        check_arm("shuffle", True)
    with pytest.raises(ValueError, match="needs a checkpoint with graph tokens"):
        check_arm("zero", False)
    assert check_arm("normal", False) == "normal"


def _spy(model):
    """Record the contexts and soft prompt of every ``model.answer`` call."""
    seen = []
    real = model.answer

    def answer(batch, choices=None, soft=None, **kw):
        seen.append((list(batch.contexts), list(batch.questions), None if soft is None else soft.detach().clone()))
        return real(batch, choices=choices, soft=soft, **kw)

    model.answer = answer
    return seen


@pytest.mark.parametrize("arm", ARMS)
def test_each_arm_hands_the_llm_what_it_says(arm, examples, tmp_path):
    model = tiny_model(in_dim=DIM, tokens=2, answer_set=("support", "counter")).eval()
    seen = _spy(model)
    out = tmp_path / f"{arm}.jsonl"
    evaluate(model, examples, "expla_graphs", out=out, batch_size=3, show_progress=False, graph_tokens=arm)
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == len(examples) and {r["graph_tokens"] for r in recs} == {arm}
    soft = torch.cat([s for _, _, s in seen])
    contexts = [c for cs, _, _ in seen for c in cs]
    with torch.no_grad():
        own = model.graph_tokens(make_batch(examples, with_answers=False).cells)
    assert [q for _, qs, _ in seen for q in qs] == [e.question for e in examples]
    if arm in ("only", "only_permute"):
        assert contexts == [""] * len(examples)
    else:
        assert contexts == [e.context for e in examples]
    if arm in ("normal", "only"):
        torch.testing.assert_close(soft, own)
    elif arm == "zero":
        assert soft.abs().max() == 0 and soft.shape == own.shape
    elif arm == "mean":
        torch.testing.assert_close(soft, own.mean(0, keepdim=True).expand_as(own), rtol=1e-5, atol=1e-6)
    else:  # permute, only_permute: row i reads the tokens of example sigma(i), never its own
        sigma = derangement(len(examples), 0)
        torch.testing.assert_close(soft, own[torch.as_tensor(sigma)])
        assert all(not torch.equal(soft[i], own[i]) for i in range(len(examples)))


def test_permute_is_fixed_across_a_resume(examples, tmp_path):
    """A run cut after its first batch and resumed gives each question the same partner as one run."""
    arm = GraphTokenArm("permute", examples, seed=3)
    partners = {e.id: arm.partner(e).id for e in examples}
    again = GraphTokenArm("permute", examples, seed=3)
    assert {e.id: again.partner(e).id for e in examples[2:]} == {k: partners[k] for k in [e.id for e in examples[2:]]}
    assert all(partners[k] != k for k in partners)


def test_readback_rows_ask_for_the_first_context_block(examples):
    rows = readback_rows(examples)
    assert [r.id for r in rows] == [e.id for e in examples if e.context.strip()] and rows
    for r, e in zip(rows, examples):
        assert r.context == "" and r.question == READBACK_QUESTION and r.tensors is e.tensors
        assert r.answer == e.context.strip().split("\n\n")[0] and r.answer


def test_readback_tells_a_live_graph_path_from_a_constant_one(examples):
    model = tiny_model(in_dim=DIM, graph_path="cells", tokens=4, max_new_tokens=64)  # the whole block
    live = readback(model, examples)
    assert live["n"] == len(readback_rows(examples)) and live["nll_own"] != live["nll_other"]
    assert live["own_lower"] + live["other_lower"] > 0
    with torch.no_grad():  # a constant path: every example gets the same tokens, so nothing to read back
        for p in model.projector.proj.parameters():
            p.zero_()
    dead = readback(model, examples)
    assert dead["nll_own"] == pytest.approx(dead["nll_other"], abs=1e-6)
    assert dead["own_lower"] == dead["other_lower"] == 0 and dead["p_value"] == 1.0


SCENE_BLOCK = ("nodes\ndesk [0]: green, wooden\nplant [1]: green, sitting\nlamp [2]: brown, glass, small\n"
               "plant [3]: green, standing\nclock [4]: white, wooden\n\nrelations\ndesk [0] in front of plant [1]")


def test_attribute_readback_asks_for_one_named_nodes_attributes_among_the_tokened_lines(examples):
    import dataclasses

    scenes = [dataclasses.replace(examples[0], id=str(i), context=SCENE_BLOCK) for i in range(40)]
    rows = readback_rows(scenes, "attributes", lines=4)  # nodes 0-3 have a token; plant occurs twice
    assert len(rows) == 40 and rows == readback_rows(scenes, "attributes", lines=4)  # the same node every run
    asked = {r.question: r.answer for r in rows}
    assert asked == {"Question: What are the attributes of the desk?\nAnswer:": "green, wooden",
                     "Question: What are the attributes of the lamp?\nAnswer:": "brown, glass, small"}
    assert all(r.context == "" and r.tensors is examples[0].tensors for r in rows)
    with_clock = readback_rows(scenes, "attributes", lines=None)  # every line: the clock may be asked too
    assert "Question: What are the attributes of the clock?\nAnswer:" in {r.question for r in with_clock}
    # triples without attributes (the fixture's node lines have none) give no attribute row
    assert readback_rows(examples, "attributes") == []
    with pytest.raises(ValueError, match="readback target: one of nodes, attributes"):
        readback_rows(scenes, "colours")


def test_attribute_readback_pairs_own_and_another_examples_tokens(examples):
    import dataclasses

    blocks = [SCENE_BLOCK.replace("brown", c) for c in ("brown", "red", "blue", "pink")]
    scenes = [dataclasses.replace(e, context=b) for e, b in zip(examples, blocks)]
    model = tiny_model(in_dim=DIM, graph_path="cells", tokens=4, max_new_tokens=16)
    res = readback(model, scenes, target="attributes")
    assert res["n"] == len(readback_rows(scenes, "attributes", lines=3))
    assert res["own_lower"] + res["other_lower"] > 0 and res["nll_own"] != res["nll_other"]
    with pytest.raises(ValueError, match=r"readback \(attributes\) pairs each example"):
        readback(model, examples, target="attributes")


def test_node_words_reads_name_then_attributes_of_node_lines_only():
    from toporag_core.evaluation.arms import node_words

    block = "nodes\nlamp [0]: brown, glass\ncup [2]\nred table [3]: wooden\n\nrelations\nlamp [0] on cup [2]"
    assert node_words(block) == [["lamp", "brown", "glass"], ["cup"], ["red table", "wooden"]]
