"""The candidate-name training term (training/names_loss.py): which names enter it, its value, and that training
on it moves the model's likelihood from a wrong retrieved name to the right one."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.model.tiny import tiny_model
from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import RawExample
from toporag_core.tasks.batching import make_batch
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.training import TrainConfig, train
from toporag_core.training.names_loss import candidate_names, group_loss, name_rows, names_loss

TRIPLES = [("anna smith", "spouse", "bob jones"), ("bob jones", "occupation", "baker"),
           ("anna smith", "born in", "oslo"), ("m.0abc", "part of", "oslo")]


def _example(i: int = 0, label=("baker",)):
    g = TextualGraph.from_triples(TRIPLES, name=f"g{i}")
    raw = RawExample(id=str(i), graph=g, question="What did the spouse of Anna Smith do?", label=list(label),
                     answer=", ".join(label))
    return prepare_example(raw, HashingEncoder(dim=16), PrepConfig(RetrievalSetting.make(k0=5, k1=5, k2=0)))


def test_candidates_are_the_retrieved_names_the_reader_would_see():
    ex = _example()
    names = candidate_names(ex)
    assert "anna smith" not in names  # the question names it: a topic entity
    assert "m.0abc" not in names  # a machine id is never an answer
    assert set(names) <= set(ex.cells["nodes"]) and all(n in ex.context for n in names)
    assert {"bob jones", "baker"} <= set(names)
    cut = replace(ex, context=ex.context.replace("baker", "b"))
    assert "baker" not in candidate_names(cut)  # a name whose line the budget dropped


def test_rows_put_the_right_names_first_and_skip_examples_without_a_right_or_a_wrong_one():
    rng = np.random.default_rng(0)
    ex = _example()
    rows, groups = name_rows([ex, _example(1, label=("paris",))], negatives=1, rng=rng)
    assert groups == [(0, 1, 2)]  # the second example has no right candidate: no group
    assert rows[0].answer == "baker" and rows[1].answer != "baker" and rows[1].id == ex.id
    rows, groups = name_rows([ex], negatives=10, rng=rng)
    assert groups == [(0, 1, len(candidate_names(ex)))]  # every wrong name when fewer than asked


def test_group_loss_is_the_listwise_cross_entropy():
    s = torch.tensor([-1.0, -2.0, -0.5, -3.0, -1.0])
    got = group_loss(s, [(0, 1, 3), (3, 1, 2)])
    a = -(-1.0 - math.log(math.exp(-1.0) + math.exp(-2.0) + math.exp(-0.5)))
    b = -(-3.0 - math.log(math.exp(-3.0) + math.exp(-1.0)))
    assert float(got) == pytest.approx((a + b) / 2)


def test_training_on_the_term_makes_the_right_name_likelier_than_the_others():
    torch.manual_seed(0)
    model = tiny_model(in_dim=16, mode="lora", tokens=2, graph_position="before_question", chat=False)
    ex = _example()
    rows, groups = name_rows([ex], negatives=4, rng=np.random.default_rng(0))

    def scores():
        with torch.no_grad():
            ce, row, _ = model.answer_token_nll(make_batch(rows))
            return -torch.zeros(len(rows)).index_add_(0, row, ce.float())

    before = scores()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-3)
    model.train()
    for step in range(30):
        opt.zero_grad()
        loss = names_loss(model, [ex], 4, np.random.default_rng([0, step]))
        loss.backward()
        opt.step()
    model.eval()
    after = scores()
    assert float(group_loss(after, groups)) < float(group_loss(before, groups)) - 0.5
    assert int(after.argmax()) == 0  # the right name ("baker"), first of its group, now leads
    assert names_loss(model, [_example(1, label=("paris",))], 4, np.random.default_rng(0)) is None


def test_the_training_loop_logs_the_term_and_refuses_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="names_negatives"):
        TrainConfig(names_negatives=0)
    with pytest.raises(ValueError, match="names_weight"):
        TrainConfig(names_weight=-1.0)
    model = tiny_model(in_dim=16, mode="lora", tokens=2, graph_position="before_question", chat=False)
    exs = [_example(i) for i in range(4)]
    train(model, exs, exs[:2], TrainConfig(lr=1e-3, epochs=1, batch_size=2, names_weight=1.0, show_progress=False),
          tmp_path / "run")
    lines = [line for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines() if '"loss"' in line]
    assert len(lines) == 2 and all('"names_loss"' in line for line in lines)
