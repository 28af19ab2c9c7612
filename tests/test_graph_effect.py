"""What the graph tokens did for one answer (:mod:`toporag_core.studio.graph_effect`), on the tiny model."""
from __future__ import annotations

import pytest
import torch

from toporag_core.embed import HashingEncoder
from toporag_core.nn import collate, subcomplex_tensors
from toporag_core.pipeline import TopoRAGPipeline
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting
from toporag_core.studio import graph_effect as ge
from toporag_core.studio import samples
from toporag_core.testing import tiny_model

CLOSED = ("Is the cup on the table?", ("yes", "no"))
OPEN = "What is on the table next to the cup?"


@pytest.fixture(scope="module")
def pipe():
    return TopoRAGPipeline(tiny_model(in_dim=256, tokens=2), HashingEncoder())


@pytest.fixture(scope="module")
def ecx():
    return EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder())


def answered(pipe, ecx, question, choices):
    r = pipe.answer(ecx, question, RetrievalSetting(), choices=choices or ())
    return r


def test_drop_cells_keeps_the_boundaries_valid(pipe, ecx):
    r = answered(pipe, ecx, *CLOSED)
    st = subcomplex_tensors(r["subcomplex"], ecx.emb)
    n, m, f = st.shape
    assert f > 0
    for dim, size in enumerate(st.shape):
        for i in range(size):
            out, gone = ge.drop_cells(st, dim, i)
            out.validate()
            assert gone[dim] == 1 and tuple(a - b for a, b in zip(st.shape, gone)) == out.shape
            if dim == 0:  # every 1-cell on the node went with it
                assert gone[1] == int((st.edge_nodes == i).any(1).sum())
            if dim == 1:  # every 2-cell on the 1-cell went with it
                assert gone[2] == int(st.cell_index[st.cell_edges == i].unique().numel())
    # removing a 1-cell: the remaining 1-cells keep their features and endpoints (renumbered)
    out, _ = ge.drop_cells(st, 1, 0)
    torch.testing.assert_close(out.x1, st.x1[1:])
    torch.testing.assert_close(st.x0[out.edge_nodes], st.x0[st.edge_nodes[1:]])


def test_the_three_arms_hand_the_llm_own_zero_and_permuted_tokens(pipe, ecx):
    r = answered(pipe, ecx, *CLOSED)
    st = subcomplex_tensors(r["subcomplex"], ecx.emb)
    with torch.no_grad():
        tokens = ge.arm_tokens(pipe.model, st, seed=3)
        own = pipe.model.graph_tokens(collate([st]))
    torch.testing.assert_close(tokens["own"], own)
    assert tokens["zeroed"].shape == own.shape and tokens["zeroed"].abs().max() == 0
    assert not torch.allclose(tokens["permuted"], own)
    perm = ge.permuted_cells(st, seed=3)
    assert perm.shape == st.shape and torch.equal(perm.edge_nodes, st.edge_nodes)
    assert sorted(map(tuple, perm.x0.tolist())) == sorted(map(tuple, st.x0.tolist()))
    assert not (perm.x0 == st.x0).all(1).any()  # a derangement: no node keeps its own features


def test_closed_answer_probabilities_per_arm_sum_to_one_and_own_is_the_pipelines(pipe, ecx):
    r = answered(pipe, ecx, *CLOSED)
    e = ge.graph_token_effect(pipe, ecx, r["subcomplex"], CLOSED[0], r["context"], r["answer"], CLOSED[1])
    assert e.has_graph and e.closed and e.labels == ("yes", "no")
    for arm in ge.ARMS:
        assert sum(e.probs[arm].values()) == pytest.approx(1.0)
    for label, p in r["label_probs"].items():
        assert e.probs["own"][label] == pytest.approx(p, abs=1e-5)
    assert e.answers["own"] == r["answer"]
    assert e.probs["zeroed"] != e.probs["own"]
    line = e.verdict()
    assert line.startswith(f"The graph tokens moved P({r['answer']}) by ")
    assert ("the graph path mattered" in line) == e.mattered and e.changed == (len(set(e.answers.values())) > 1)
    assert [row["label"] for row in e.table()] == ["yes", "no"]


def test_open_answer_log_probability_per_arm(pipe, ecx):
    r = answered(pipe, ecx, OPEN, None)
    e = ge.graph_token_effect(pipe, ecx, r["subcomplex"], OPEN, r["context"], r["answer"], None)
    assert e.has_graph and not e.closed
    assert set(e.logp) == set(ge.ARMS) and all(v < 0 for v in e.logp.values())
    assert e.answers["own"] == r["answer"] and "nats" in e.verdict()
    assert len(e.table()) == 3


def test_leave_one_cell_out_drops(pipe, ecx):
    r = answered(pipe, ecx, *CLOSED)
    sub = r["subcomplex"]
    e = ge.graph_token_effect(pipe, ecx, sub, CLOSED[0], r["context"], r["answer"], CLOSED[1])
    cells = ge.attribute(pipe, ecx, sub, CLOSED[0], r["context"], e, cap=6)
    assert e.cells is cells and len(cells) == 6
    assert [c.drop for c in cells] == sorted((c.drop for c in cells), reverse=True)
    # each drop is the own log-probability minus the one read with that cell's leave-one-out tokens
    st = subcomplex_tensors(sub, ecx.emb)
    rows = {(d, c): local for d, local, c, *_ in ge.cell_rows(sub, True, 6)}
    model = pipe.model
    for c in cells[:2]:
        cut, _ = ge.drop_cells(st, c.dim, rows[(c.dim, c.cell)])
        with torch.no_grad():
            own, without = model.graph_tokens(collate([st])), model.graph_tokens(collate([cut]))
            assert not torch.allclose(own, without)  # removing the cell changes the tokens ...
            sc = model.score_choices(ge.qa_rows(pipe.prompt_for(CLOSED[0]), r["context"], 2), list(CLOSED[1]),
                                     soft=torch.cat([own, without])).double().log_softmax(-1)
        j = CLOSED[1].index(r["answer"])
        want = float(sc[0, j] - sc[1, j])
        # ... and the answer's log-probability. The tiny model's drops are ~1e-5 and the attribution scores
        # the rows in batches of 8 (this check in a batch of 2): float32 summation order moves a drop by
        # up to ~3e-6 across batch compositions and thread counts, hence the tolerance.
        assert want != 0 and c.drop == pytest.approx(want, abs=6e-6)
    assert {c.dim for c in ge.attribute(pipe, ecx, sub, CLOSED[0], r["context"], e)} == {0, 1, 2}
    assert ge.cells_table(cells, top=3)[0]["text"] == cells[0].text


def test_models_without_graph_tokens_get_a_clear_line(ecx):
    pipe = TopoRAGPipeline(tiny_model(in_dim=256, use_graph=False), HashingEncoder())
    r = answered(pipe, ecx, *CLOSED)
    e = ge.graph_token_effect(pipe, ecx, r["subcomplex"], CLOSED[0], r["context"], r["answer"], CLOSED[1])
    assert not e.has_graph and not e.changed and e.table() == []
    assert e.verdict() == ge.NO_GRAPH and "no graph tokens" in e.verdict()
    assert ge.attribute(pipe, ecx, r["subcomplex"], CLOSED[0], r["context"], e) == []


def test_the_effect_and_the_attribution_on_a_model_with_several_tokens_per_cell(ecx):
    """A cell-path model with ``tokens_per_cell = 3`` (the word-target recipes use 4): the three arms, the closed
    answer's probabilities and leave-one-cell-out drops work on its ``(1, T k, H)`` graph tokens."""
    pipe = TopoRAGPipeline(tiny_model(in_dim=256, tokens=4, graph_path="cells", cell_order=(0, 2, 1),
                                      tokens_per_cell=3), HashingEncoder())
    r = answered(pipe, ecx, *CLOSED)
    st = subcomplex_tensors(r["subcomplex"], ecx.emb)
    with torch.no_grad():
        tokens = ge.arm_tokens(pipe.model, st)
    assert tokens["own"].shape == (1, 12, pipe.model.llm_hidden) and not torch.allclose(tokens["permuted"],
                                                                                        tokens["own"])
    e = ge.graph_token_effect(pipe, ecx, r["subcomplex"], CLOSED[0], r["context"], r["answer"], CLOSED[1])
    assert e.has_graph and all(sum(e.probs[a].values()) == pytest.approx(1.0) for a in ge.ARMS)
    for label, p in r["label_probs"].items():
        assert e.probs["own"][label] == pytest.approx(p, abs=1e-5)
    cells = ge.attribute(pipe, ecx, r["subcomplex"], CLOSED[0], r["context"], e, cap=5)
    assert len(cells) == 5 and any(c.drop != 0 for c in cells)
