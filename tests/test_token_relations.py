"""``TopoRAGConfig.token_text = "relations"``: the CSV relation lines of the 1-cells that have graph tokens of their
own lose their relation (``0,?,2``), so the relations reach the LLM through the graph tokens alone; the word targets
and the readback of the alignment stage aim at those 1-cells' slots (retrieval/textualize.py, model/config.py,
model/graph_tokens.py ``CellTokens.slots``, arms.py, align.py)."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from toporag_core.training.align import check_word_targets, word_loss
from toporag_core.evaluation.arms import readback, readback_rows, readback_target, slot_words
from toporag_core.tasks.batching import make_batch
from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.model import TopoRAGConfig, TopoRAGModel
from toporag_core.retrieval import RetrievalSetting
from toporag_core.retrieval.textualize import relation_block, relation_groups, relation_words, relations_hidden
from toporag_core.tasks import RawExample
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model.tiny import tiny_llm, tiny_model, tiny_tokenizer
from toporag_core.training import TrainConfig

DIM = 16
CONTEXT = """node_id,node_attr
0,cannabis
1,marijuana
2,good thing
3,legal

src,edge_attr,dst
0,synonym of,1
1,not capable of,2
2,desires,3
3,causes,2
1,is a,1

2-cells (closed loops)
c0: good thing [2] -[desires]-> legal [3] -[causes]-> good thing [2]"""


def test_relations_hidden_drops_the_relation_of_the_first_one_cells_and_nothing_else():
    lines = CONTEXT.split("\n")
    # 1-cells in text order; a 1-cell's relations (both directions between its two nodes) form one group,
    # the self-loop line belongs to no 1-cell
    assert relation_groups(CONTEXT) == [[7], [8], [9, 10]]
    assert relation_words(CONTEXT) == [["synonym", "of"], ["not", "capable", "of"], ["desires"]]
    got = relations_hidden(CONTEXT, 2).split("\n")
    assert got[7:12] == ["0,?,1", "1,?,2", "2,desires,3", "3,causes,2", "1,is a,1"]
    assert got[:7] == lines[:7] and got[12:] == lines[12:]  # nodes and 2-cells as written
    # a 1-cell with several relations hides the first, the one its tokens carry
    assert relations_hidden(CONTEXT, 3).split("\n")[9:12] == ["2,?,3", "3,causes,2", "1,is a,1"]
    assert relations_hidden(CONTEXT, 0) == CONTEXT and relations_hidden("", 3) == ""
    compact = "nodes\ncup [0]\ntable [1]\n\nrelations\ncup [0] on table [1]"
    assert relations_hidden(compact, 3) == compact and relation_groups(compact) == []  # another format: unchanged
    assert relation_block(CONTEXT).split("\n") == lines[6:12] and relation_block(compact) == ""
    # a relation with a comma (quoted by the CSV writer) is one relation
    quoted = 'node_id,node_attr\n0,a\n1,b\n\nsrc,edge_attr,dst\n0,"part of, mostly",1'
    assert relation_words(quoted) == [['"part', 'of,', 'mostly"']] and relations_hidden(quoted, 1).endswith("\n0,?,1")


def test_token_text_relations_is_validated_and_round_trips():
    cfg = TopoRAGConfig(graph_path="cells", num_graph_tokens=3, token_text="relations")  # relations first: default
    again = TopoRAGConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again.token_text == "relations" and again.reads(CONTEXT) == relations_hidden(CONTEXT, 2)
    with pytest.raises(ValueError, match=r"cell_order starting with 1 \(relations first\)"):
        TopoRAGConfig(graph_path="cells", num_graph_tokens=3, cell_order=(0, 2, 1), token_text="relations")
    with pytest.raises(ValueError, match="graph_path='cells'"):
        TopoRAGConfig(graph_path="pooled", num_graph_tokens=3, token_text="relations")
    assert readback_target(cfg) == "relations" and readback_target(TopoRAGConfig()) == "nodes"
    assert (cfg.token_rank, TopoRAGConfig().token_rank) == (1, 0)


@pytest.mark.parametrize("token_text, order, text", [("relations", "1,2,0", "compact"), ("names", "0,2,1", "csv")])
def test_a_token_text_in_another_text_format_is_refused_before_training(token_text, order, text, capsys, tmp_path):
    """``relations`` hides CSV relation lines, ``names`` compact node attributes: in the other format nothing would
    leave the text, so ``toporag train`` refuses the plan in one line naming both settings."""
    from toporag_core.cli import main

    recipe = tmp_path / "mine.toml"
    recipe.write_text(f'graph_path = "cells"\nnum_graph_tokens = 4\ncell_order = [{order}]\n'
                      f'token_text = "{token_text}"\ntext = "{text}"\n')
    assert main(["train", "--recipe", str(recipe), "--dataset", "expla_graphs", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"token_text={token_text!r}" in err and f"text is {text!r}" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before any data or LLM


GRAPHS = [
    [("cats", "are", "pets"), ("pets", "need", "care")],
    [("guns", "not capable of", "safety"), ("safety", "is a", "goal")],
    [("school", "has context", "uniforms"), ("uniforms", "causes", "bullying")],
]


@pytest.fixture(scope="module")
def examples():
    enc = HashingEncoder(dim=DIM)
    setting = PrepConfig(RetrievalSetting.make(k0=3, k1=3, k2=1))  # CSV text, ExplaGraphs' format
    return [prepare_example(RawExample(id=str(i), graph=TextualGraph.from_triples(t, name=f"g{i}"), question="q?",
                                       label="support", answer="support"), enc, setting)
            for i, t in enumerate(GRAPHS)]


def relations_model(token_text: str = "relations", tokens: int = 4, k: int = 3, order=(1, 2, 0)) -> TopoRAGModel:
    return tiny_model(in_dim=DIM, mode="lora", graph_path="cells", tokens=tokens, cell_order=order, tokens_per_cell=k,
                      token_text=token_text, max_new_tokens=48, chat=False, graph_position="before_question")


def test_a_relations_model_reads_the_tokened_relations_out_of_the_text(examples):
    """The row the LLM reads, its frozen (cached) part and the app's prompt view hide the relations of the 1-cells
    with a slot; the readback rows carry the full relation block, the targets the tokens are trained toward."""
    full, rel = relations_model("full"), relations_model()
    e = examples[1]
    assert "not capable of" in e.context
    dec = rel.tokenizer.decode
    read = dec(sum(rel.prompter.row(e.context, e.question), []))
    assert "not capable of" not in read and "is a" not in read and ",?," in read
    assert "not capable of" in dec(sum(full.prompter.row(e.context, e.question), []))
    assert "not capable of" not in dec(rel.prompter.frozen_ids(e.context, e.question))
    assert "not capable of" not in rel.prompter.layout(e.context, e.question)["context"]
    rows = readback_rows(examples, readback_target(rel.config))
    assert len(rows) == 3 and rows[1].question.startswith("Question: List the relations")
    assert rows[1].answer.split("\n")[0] == "src,edge_attr,dst" and "not capable of" in rows[1].answer
    assert slot_words(rel.config, rows[1].answer)[0] == ["not", "capable", "of"]
    no_relations = [dataclasses.replace(x, context=x.context.split("\n\n")[0]) for x in examples]
    assert readback_rows(no_relations, "relations") == []
    with pytest.raises(ValueError, match=r"readback \(relations\).*with a CSV relation block"):
        readback(rel, no_relations, target="relations")
    rel.load_state_dict(full.state_dict())  # the same weights read another prompt: another loss
    batch = make_batch(examples)
    with torch.no_grad():
        assert not torch.isclose(full.eval()(batch), rel.eval()(batch))


def test_slots_say_where_forward_puts_each_cell(examples):
    """``CellTokens.slots``: 3 cell slots, relations first. Each graph has 3 nodes and 2 1-cells: both 1-cells and
    the first node get a slot, emitted in text order (node 0 in slot 1, the 1-cells in slots 2 and 3), exactly
    where ``forward`` writes a non-empty token."""
    model = relations_model(k=1).eval()
    batch = make_batch(examples)
    owner, slot, rank, local = model.projector.slots(batch.cells, model.config.cwn.use_cells2)
    for i in range(3):
        mine = owner == i
        assert list(zip(slot[mine].tolist(), rank[mine].tolist(), local[mine].tolist())) == [(1, 0, 0), (2, 1, 0),
                                                                                              (3, 1, 1)]
    with torch.no_grad():
        soft = model.graph_tokens(batch.cells)  # (B, T, H)
    empty = torch.isclose(soft, model.projector.empty.detach().expand_as(soft)).all(-1)
    assert not empty[:, 1:].any()  # every cell slot filled
    # nodes first: the three nodes take the three slots, the 1-cells none
    nodes_first = relations_model(order=(0, 2, 1), k=1, token_text="full").eval()
    o, s, r, c = nodes_first.projector.slots(batch.cells, True)
    assert list(zip(s[o == 0].tolist(), r[o == 0].tolist())) == [(1, 0), (2, 0), (3, 0)]


def test_relation_word_targets_aim_at_the_one_cell_slots(examples):
    """Under ``token_text = "relations"`` token ``j`` of the slot of the ``c``-th 1-cell targets the LLM embedding of
    word ``j`` of the ``c``-th relation: zero when those tokens are the targets; node slots and a relation's unused
    third token have none."""
    model = relations_model(k=3).eval()
    rows = readback_rows(examples, "relations")
    batch = make_batch(rows)
    emb = model.llm.get_input_embeddings().weight.detach()

    def vec(word):
        return emb[model.prompter.ids(" " + word)].mean(0)

    soft = torch.randn(3, 4 * 3, model.llm_hidden)
    assert float(word_loss(model, rows, soft, batch.cells)) > 0.5
    words = [slot_words(model.config, r.answer) for r in rows]
    assert words[1] == [["not", "capable", "of"], ["is", "a"]]
    for i in range(3):
        for c, slot in ((0, 2), (1, 3)):  # the 1-cells sit in slots 2 and 3 (node 0 in slot 1)
            for j, w in enumerate(words[i][c]):
                soft[i, slot * 3 + j] = 2.0 * vec(w)
    assert float(word_loss(model, rows, soft, batch.cells)) == pytest.approx(0.0, abs=1e-5)
    soft[:, :6] = torch.randn(3, 6, model.llm_hidden)  # the whole-subcomplex and node slots have no target
    soft[0, 3 * 3 + 2] = torch.randn(model.llm_hidden)  # "need" has one word: the slot's third token neither
    assert float(word_loss(model, rows, soft, batch.cells)) == pytest.approx(0.0, abs=1e-5)
    soft[1, 2 * 3] = vec("desires")  # a wrong first word for "not capable of"
    assert float(word_loss(model, rows, soft, batch.cells)) > 1e-3
    check_word_targets(model)
    with pytest.raises(ValueError, match=r"node slots.*nodes first"):
        check_word_targets(relations_model("full"))  # relations first with the relations in the text: node targets


def test_the_alignment_stage_of_a_relations_model_reads_the_relations_back(tmp_path, examples):
    from toporag_core.training.align import align

    model = relations_model(k=3)
    cfg = TrainConfig(align_steps=20, align_lr=1e-2, encoder_lr=1e-3, align_words=5.0, batch_size=3, eval_every=20,
                      seed=0, show_progress=False)
    out = align(model, examples, examples, cfg, tmp_path)
    log = [json.loads(x) for x in (tmp_path / "align_log.jsonl").read_text().splitlines()]
    words = [x["words"] for x in log if "words" in x]
    assert len(words) == 20 and words[-1] < 0.7 * words[0]
    assert out["align_readback"]["n"] == 3  # the readback checks read the relation blocks of all three


def test_a_relations_model_round_trips_through_save_and_load(tmp_path, examples):
    model = relations_model().eval()
    model.save(tmp_path / "rel")
    tok = tiny_tokenizer(False)
    again = TopoRAGModel.load(tmp_path / "rel", tiny_llm(len(tok), 0), tok).eval()
    e = examples[0]
    assert again.config.token_text == "relations"
    assert again.prompter.row(e.context, e.question) == model.prompter.row(e.context, e.question)


def test_the_ask_page_says_what_a_models_text_leaves_to_its_graph_tokens():
    from types import SimpleNamespace

    from toporag_core.studio.ask import token_text_note

    assert "`0,?,2`" in token_text_note(SimpleNamespace(model=relations_model()))
    assert "`lamp [6]`" in token_text_note(SimpleNamespace(model=relations_model("names", order=(0, 2, 1))))
    assert token_text_note(SimpleNamespace(model=relations_model("full"))) is None
    assert token_text_note(SimpleNamespace(model=None)) is None  # no checkpoint: the frozen LLM alone
