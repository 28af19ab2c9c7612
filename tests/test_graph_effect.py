"""What the graph tokens did for one answer (:mod:`toporag_core.studio.graph_effect`), on the tiny model."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from toporag_core.embed import HashingEncoder
from toporag_core.nn import collate, subcomplex_tensors
from toporag_core.answering.pipeline import TopoRAGPipeline
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting
from toporag_core.retrieval.textualize import drop_cell_lines, text_lines
from toporag_core.studio import graph_effect as ge
from toporag_core.io import samples
from toporag_core.model.tiny import tiny_model

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
    assert line.startswith(f"Your graph tokens made the answer '{r['answer']}' ")
    for arm in ge.ARMS[1:]:  # the sentence's direction and numbers are the arms' label probabilities
        own, other = e.probs["own"][r["answer"]], e.probs[arm][r["answer"]]
        word = ("about as likely as" if abs(own - other) < ge.NEUTRAL_P else
                "more likely than" if own > other else "less likely than")
        assert f"{word} {arm} tokens (P {ge.p_text(own)} vs {ge.p_text(other)})" in line
    assert e.changed == (len(set(e.answers.values())) > 1)
    assert [row["label"] for row in e.table()] == ["yes", "no"]
    # with a gold label the gold answer's probabilities come from the same pass
    g = ge.graph_token_effect(pipe, ecx, r["subcomplex"], CLOSED[0], r["context"], r["answer"], CLOSED[1],
                              gold="No")
    assert g.gold == "no" and all(g.p(a, gold=True) == pytest.approx(g.probs[a]["no"]) for a in ge.ARMS)
    assert "no (gold)" in [row["label"] for row in g.table()]


def test_open_answer_log_probability_per_arm(pipe, ecx):
    r = answered(pipe, ecx, OPEN, None)
    e = ge.graph_token_effect(pipe, ecx, r["subcomplex"], OPEN, r["context"], r["answer"], None)
    assert e.has_graph and not e.closed
    assert set(e.logp) == set(ge.ARMS) and all(v < 0 for v in e.logp.values())
    assert e.answers["own"] == r["answer"] and e.verdict().startswith(f"Your graph tokens made the answer '{r['answer']}'")
    assert len(e.table()) == 3
    # a gold answer is scored beside the answer under teacher forcing, per arm
    g = ge.graph_token_effect(pipe, ecx, r["subcomplex"], OPEN, r["context"], r["answer"], None, gold="plate")
    # float32 sums of ~80 nats: a batch of another shape may round a few ulps (1e-5 each) apart
    assert g.logp == pytest.approx(e.logp, abs=1e-4) and set(g.gold_logp) == set(ge.ARMS)
    with torch.no_grad():
        soft = torch.cat([ge.arm_tokens(pipe.model, subcomplex_tensors(r["subcomplex"], ecx.emb))[a] for a in ge.ARMS])
        want = pipe.model.score_choices(ge.qa_rows(pipe.prompt_for(OPEN), r["context"], 3), ["plate"], soft=soft)
    assert [g.gold_logp[a] for a in ge.ARMS] == pytest.approx(want[:, 0].tolist(), abs=1e-4)
    assert "the gold answer 'plate'" in g.verdict() and "P(gold answer)" in g.table()[0]


def test_leave_one_cell_out_drops_through_the_tokens_alone(pipe, ecx):
    r = answered(pipe, ecx, *CLOSED)
    sub = r["subcomplex"]
    e = ge.graph_token_effect(pipe, ecx, sub, CLOSED[0], r["context"], r["answer"], CLOSED[1])
    cells = ge.attribute(pipe, ecx, sub, CLOSED[0], r["context"], e, cap=6, text=False)
    assert e.cells is cells and len(cells) == 6 and all(c.lines == 0 for c in cells)
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
    assert {c.dim for c in ge.attribute(pipe, ecx, sub, CLOSED[0], r["context"], e, text=False)} == {0, 1, 2}
    assert ge.cells_table(cells, top=3)[0]["text"] == cells[0].text


def test_removing_a_cell_removes_its_lines_and_its_cofaces_lines_from_the_context(pipe, ecx):
    r = answered(pipe, ecx, OPEN, None)
    sub, context = r["subcomplex"], r["context"]
    rows = text_lines(sub, True, pipe.text_format)
    assert context == "\n".join(t for t, _ in rows)  # the tiny model's budget keeps everything
    node = int(sub.complex.edges[sub.edges[0]][0])
    st = subcomplex_tensors(sub, ecx.emb)
    local = int(np.searchsorted(np.unique(sub.nodes), node))
    owners = ge.removed_owners(sub, True, ge.keep_masks(st, 0, local))
    assert ("n", node) in owners and ("e", int(sub.edges[0])) in owners
    out = drop_cell_lines(context, sub, owners, True, pipe.text_format)
    kept = out.split("\n")
    for t, o in rows:
        assert (t in kept) == (o not in owners) or o is None  # exactly the removed cells' lines went
    node_line = next(t for t, o in rows if o == ("n", node))
    assert node_line in context and node_line not in kept
    assert len(kept) == len(rows) - sum(o in owners for _, o in rows)
    # a budget-cut context (a subset of the lines) is read the same way; another text is refused
    cut = "\n".join(t for t, o in rows if o != ("n", int(sub.nodes[-1])))
    assert drop_cell_lines(cut, sub, owners, True, pipe.text_format) == "\n".join(
        t for t, o in rows if o != ("n", int(sub.nodes[-1])) and o not in owners)
    with pytest.raises(ValueError, match="not a subset"):
        drop_cell_lines(context + "\nsomething else", sub, owners, True, pipe.text_format)


def test_leave_one_cell_out_drops_through_tokens_and_text(pipe, ecx):
    r = answered(pipe, ecx, *CLOSED)
    sub, context = r["subcomplex"], r["context"]
    e = ge.graph_token_effect(pipe, ecx, sub, CLOSED[0], context, r["answer"], CLOSED[1])
    cells = ge.attribute(pipe, ecx, sub, CLOSED[0], context, e, cap=5)
    assert len(cells) == 5 and all(c.lines >= 1 for c in cells)  # every cell took at least its own line
    st = subcomplex_tensors(sub, ecx.emb)
    rows = {(d, c): local for d, local, c, *_ in ge.cell_rows(sub, True, 5)}
    j = CLOSED[1].index(r["answer"])
    for c in cells[:2]:
        local = rows[(c.dim, c.cell)]
        cut, _ = ge.drop_cells(st, c.dim, local)
        text = drop_cell_lines(context, sub, ge.removed_owners(sub, True, ge.keep_masks(st, c.dim, local)), True,
                               pipe.text_format)
        assert text != context and text.count("\n") == context.count("\n") - c.lines
        with torch.no_grad():
            soft = pipe.model.graph_tokens(collate([st, cut]))
            sc = pipe.model.score_choices(ge.qa_rows(pipe.prompt_for(CLOSED[0]), [context, text], 2), list(CLOSED[1]),
                                          soft=soft).double().log_softmax(-1)
        assert c.drop == pytest.approx(float(sc[0, j] - sc[1, j]), abs=2e-5)
        assert c.change == -c.drop
    table = ge.cells_table(cells)
    assert [row["change in log P(answer) without it"] for row in table] == [c.change for c in cells]
    assert {row["reads"] for row in table} <= {"supports the answer", "works against the answer", "no effect"}


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


# ---------------------------------------------------------------------- wording (no model)
def open_effect(own: float, zeroed: float, permuted: float, gold: dict | None = None, answers: dict | None = None):
    """An open answer's effect with these P(answer) per arm (and P(gold) per arm)."""
    e = ge.GraphTokenEffect(has_graph=True, answer="yellow", labels=("yellow",),
                            logp={"own": np.log(own), "zeroed": np.log(zeroed), "permuted": np.log(permuted)},
                            answers=answers or {a: "yellow" for a in ge.ARMS})
    if gold:
        e.gold = "plate"
        e.gold_logp = {a: float(np.log(p)) for a, p in gold.items()}
    return e


def test_the_verdict_says_which_way_the_own_tokens_moved_the_answer_and_the_gold_answer():
    e = open_effect(0.12, 0.31, 0.05, gold={"own": 0.02, "zeroed": 0.2, "permuted": 0.1})
    line = e.verdict()
    assert ("Your graph tokens made the answer 'yellow' less likely than zeroed tokens (P 0.12 vs 0.31) and more "
            "likely than permuted tokens (P 0.12 vs 0.05).") in line
    assert ("Your graph tokens made the gold answer 'plate' less likely than zeroed tokens (P 0.02 vs 0.20) and "
            "less likely than permuted tokens (P 0.02 vs 0.10).") in line
    assert "worked against the gold answer" in line
    assert not any(w in line for w in ("mattered", "helped", "changed the answer"))
    assert (e.direction("zeroed"), e.direction("permuted"), e.direction("zeroed", gold=True)) == (-1, 1, -1)
    up = open_effect(0.5, 0.1, 0.2, gold={"own": 0.4, "zeroed": 0.1, "permuted": 0.3}).verdict()
    assert "more likely than zeroed tokens (P 0.50 vs 0.10)" in up and "helped the gold answer" in up
    flat = open_effect(0.3, 0.3 * np.exp(0.01), 0.3).verdict()  # below NEUTRAL_NATS: no direction, no praise
    assert "about as likely as zeroed tokens" in flat and "comes from the text" in flat
    tiny = open_effect(0.003, 0.0005, 0.003).verdict()
    assert "(P 3.0e-03 vs 5.0e-04)" in tiny
    # a lowered answer without gold is never praised: only its direction is said
    down = open_effect(0.1, 0.4, 0.4).verdict()
    assert "less likely than zeroed tokens" in down and "less likely than permuted tokens" in down
    assert "helped" not in down and "mattered" not in down


def test_changed_the_answer_only_when_the_normalised_answers_differ():
    assert not ge.answers_differ("flower is yellow", "yellow") and not ge.answers_differ("Yellow.", "the yellow")
    assert ge.answers_differ("yellow", "yellowish") and ge.answers_differ("red", "yellow")
    assert ge.answers_differ("", "yellow") and not ge.answers_differ("", " ")
    same = open_effect(0.2, 0.3, 0.1, answers={"own": "yellow", "zeroed": "flower is yellow", "permuted": "yellow"})
    assert not same.changed and "worded differently: zeroed: 'flower is yellow'" in same.verdict()
    other = open_effect(0.2, 0.3, 0.1, answers={"own": "yellow", "zeroed": "red", "permuted": "Yellow"})
    assert other.changed and "The graph tokens changed the answer: zeroed tokens answer 'red' instead." in other.verdict()


def test_a_closed_answer_reads_its_label_probabilities():
    probs = {"own": {"yes": 0.3, "no": 0.7}, "zeroed": {"yes": 0.6, "no": 0.4}, "permuted": {"yes": 0.305, "no": 0.695}}
    e = ge.GraphTokenEffect(has_graph=True, answer="no", closed=True, labels=("yes", "no"), probs=probs,
                            logp={a: float(np.log(p["no"])) for a, p in probs.items()},
                            answers={"own": "no", "zeroed": "yes", "permuted": "no"}, gold="yes",
                            gold_logp={a: float(np.log(p["yes"])) for a, p in probs.items()})
    line = e.verdict()
    assert "made the answer 'no' more likely than zeroed tokens (P 0.70 vs 0.40) and about as likely as permuted" in line
    assert "made the gold answer 'yes' less likely than zeroed tokens (P 0.30 vs 0.60)" in line
    assert "changed the answer: zeroed tokens answer 'yes' instead" in line


# ---------------------------------------------------------------------- attribution against random
def test_hit_rule_random_rate_and_exact_tests(pipe, ecx):
    from toporag_core.studio import attribution as at

    r = answered(pipe, ecx, OPEN, None)
    sub = r["subcomplex"]
    cx = sub.complex
    a, b = (int(v) for v in cx.edges[sub.edges[0]])
    cells = [(0, a), (0, b), (1, int(sub.edges[0]))] + [(0, int(n)) for n in sub.nodes if n not in (a, b)]
    hits = at.cell_hits(sub, cells, np.array([a]))
    assert hits[:3].tolist() == [True, True, True]  # the node, its neighbour over a retrieved 1-cell, the 1-cell
    ends = cx.edges[sub.edges]
    near = set(ends[(ends == a).any(1)].ravel().tolist())
    assert hits[3:].tolist() == [int(n) in near for n, in [(c,) for _, c in cells[3:]]]
    # answer nodes: the open answer's whole words, support ids, support names
    name = cx.graph.node_text[a]
    assert a in at.answer_nodes(cx, support=[a]) and a in at.answer_nodes(cx, support_names=[name.upper()])
    # ties at the top share the hit; the random rate is the share of hitting cells
    assert at.top_hit(np.array([0.5, 0.5, 0.1]), np.array([True, False, True])) == 0.5
    # the exact Poisson-binomial tail against brute force
    import itertools
    probs = [0.2, 0.5, 0.9, 0.3]
    brute = sum(np.prod([p if x else 1 - p for p, x in zip(probs, xs)])
                for xs in itertools.product([0, 1], repeat=4) if sum(xs) >= 3)
    assert at.poisson_binomial_sf(3, probs) == pytest.approx(brute)
    c = at.compare_to_random([1, 1, 1, 0, 1, 1], [0.2, 0.5, 0.1, 0.3, 0.25, 0.2])
    assert (c.above, c.below) == (5, 1) and c.top_rate == pytest.approx(5 / 6) and c.p_exact < 0.05 and c.beats_random
    assert not at.compare_to_random([0, 0, 1], [0.5, 0.5, 0.5]).beats_random



def test_the_page_reads_the_measured_verdicts_of_the_shipped_checkpoints():
    """:data:`attribution.VERDICTS` is docs/results/attribution.md's, for the weights shipped now."""
    import re
    from pathlib import Path

    from toporag_core.studio import attribution as at
    from toporag_core.answering.route import CHECKPOINT_ROOT

    doc = (Path(__file__).resolve().parents[1] / "docs" / "results" / "attribution.md").read_text()
    written = dict(re.findall(r'^ {4}"(\w+)": (Verdict\(.*\)),$', doc, re.M))
    assert set(written) == set(at.VERDICTS) and written
    for name, v in at.VERDICTS.items():
        assert eval(written[name], vars(at)) == v
        assert at.weights_sha(CHECKPOINT_ROOT / name) == v.sha, f"{name}: retrained since the benchmark ran"
        show, line = at.attribution_verdict(str(CHECKPOINT_ROOT / name))
        assert show == v.beats_random and ("did not beat a random" in line) == (not v.beats_random)
    show, line = at.attribution_verdict("/nowhere/scene_graphs")
    assert show and "was not measured" in line
