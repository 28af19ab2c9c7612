"""``TopoRAGConfig.token_text = "names"``: the node lines of the nodes that have graph tokens of their own keep
their name and index only, so their attributes reach the LLM through the graph tokens alone
(retrieval/textualize.py ``names_only``, model/config.py ``reads``, model/prompt.py)."""
from __future__ import annotations

import json

import pytest
import torch

from toporag_core.evaluation.arms import node_words, readback_rows
from toporag_core.tasks.batching import make_batch
from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.model import TopoRAGConfig, TopoRAGModel
from toporag_core.retrieval import RetrievalSetting
from toporag_core.retrieval.textualize import names_only
from toporag_core.tasks import RawExample
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model.tiny import tiny_llm, tiny_model, tiny_tokenizer

DIM = 16
CONTEXT = """nodes
shelf [0]: gray, wooden
desk [1]
laptop [2]: orange, plastic, small
plant [3]: green

relations
shelf [0] behind desk [1]
laptop [2] on desk [1]

2-cells (closed loops)
c1: desk [1] <-[on]- laptop [2] -[near]-> shelf [0] -[behind]-> desk [1]"""


def test_names_only_drops_the_attributes_of_the_nodes_with_a_slot_and_nothing_else():
    got = names_only(CONTEXT, 3).split("\n")
    want = CONTEXT.split("\n")
    assert got[:5] == ["nodes", "shelf [0]", "desk [1]", "laptop [2]", "plant [3]: green"]  # a bare line counts
    assert got[5:] == want[5:]  # relations and 2-cells as written
    assert names_only(CONTEXT, 10).split("\n")[4] == "plant [3]"
    assert names_only(CONTEXT, 0) == CONTEXT
    # the index says which node has a slot, not the line's position: a fitted context without node 1
    fitted = "nodes\nshelf [0]: gray, wooden\nlaptop [2]: orange\nplant [3]: green\n\nrelations\nlaptop [2] on shelf [0]"
    assert names_only(fitted, 2).split("\n")[:4] == ["nodes", "shelf [0]", "laptop [2]: orange", "plant [3]: green"]
    assert names_only("", 3) == ""
    csv = "node_id,node_attr\n0,\"name: shelf; attributes: gray\"\n\nsrc,edge_attr,dst\n0,behind,1"
    assert names_only(csv, 3) == csv  # another format comes back unchanged
    # relation lines in the first block are never node lines
    assert names_only("a [0] behind b [1]\nb [1]: red", 2) == "a [0] behind b [1]\nb [1]"


def test_token_text_is_validated_and_round_trips():
    cfg = TopoRAGConfig(graph_path="cells", num_graph_tokens=4, cell_order=(0, 2, 1), token_text="names")
    again = TopoRAGConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again.token_text == "names" and again.reads(CONTEXT) == names_only(CONTEXT, 3)
    old = cfg.to_dict()
    old.pop("token_text")  # a checkpoint saved before the key reads the full text
    assert TopoRAGConfig.from_dict(old).reads(CONTEXT) == CONTEXT
    assert TopoRAGConfig(graph_path="cells", num_graph_tokens=4).reads(CONTEXT) == CONTEXT
    with pytest.raises(ValueError, match="nodes first"):
        TopoRAGConfig(graph_path="cells", num_graph_tokens=4, cell_order=(1, 2, 0), token_text="names")
    with pytest.raises(ValueError, match="graph_path='cells'"):
        TopoRAGConfig(graph_path="pooled", num_graph_tokens=4, token_text="names")
    with pytest.raises(ValueError, match="use_graph"):
        TopoRAGConfig(use_graph=False, graph_path="cells", num_graph_tokens=4, cell_order=(0, 2, 1),
                      token_text="names")
    with pytest.raises(ValueError, match="token_text"):
        TopoRAGConfig(graph_path="cells", num_graph_tokens=4, cell_order=(0, 2, 1), token_text="attributes")


SCENES = [
    [("name: lamp; attributes: brown, glass", "on", "name: table; attributes: wooden"),
     ("name: table; attributes: wooden", "near", "name: chair; attributes: red, small")],
    [("name: cup; attributes: white", "on", "name: shelf; attributes: tall, metal")],
]


@pytest.fixture(scope="module")
def scene_examples():
    enc = HashingEncoder(dim=DIM)
    setting = PrepConfig(RetrievalSetting.make(k0=3, k1=3, k2=1), text="compact")
    return [prepare_example(RawExample(id=str(i), graph=TextualGraph.from_triples(t, name=f"s{i}"), question="q",
                                       label="a", answer="a"), enc, setting) for i, t in enumerate(SCENES)]


def model_reading(token_text: str) -> TopoRAGModel:
    return tiny_model(in_dim=DIM, mode="lora", graph_path="cells", tokens=3, cell_order=(0, 2, 1), tokens_per_cell=2,
                      token_text=token_text, max_new_tokens=48, chat=False,
                      graph_position="before_question")


def test_a_names_model_reads_the_tokened_nodes_without_attributes_everywhere_it_builds_a_prompt(scene_examples):
    """Two node slots: the first two node lines lose their attributes in the row the LLM reads, in its frozen
    (cached) part and in the app's prompt view; the third keeps them. Readback rows and word targets still come
    from the full text (what the tokens must carry)."""
    full, names = model_reading("full"), model_reading("names")
    e = scene_examples[0]
    assert node_words(e.context)[:3] == [["lamp", "brown", "glass"], ["table", "wooden"], ["chair", "red", "small"]]
    dec = names.tokenizer.decode
    read = dec(sum(names.prompter.row(e.context, e.question), []))
    assert "lamp [0]\ntable [1]\nchair [2]: red, small" in read
    assert "brown" not in read and "wooden" not in read
    assert "lamp [0]: brown, glass" in dec(sum(full.prompter.row(e.context, e.question), []))
    frozen = dec(names.prompter.frozen_ids(e.context, e.question))  # what the key/value cache holds
    assert "lamp [0]\ntable [1]\n" in frozen and "glass" not in frozen
    view = names.prompter.layout(e.context, e.question)
    assert "brown" not in view["context"] and "chair [2]: red, small" in view["context"]
    assert view["input_tokens"] < full.prompter.layout(e.context, e.question)["input_tokens"]
    # the readback rows carry the full node lines as their answers: the targets the tokens are trained toward
    rows = readback_rows(scene_examples)
    assert "lamp [0]: brown, glass" in rows[0].answer
    # the same weights read a different prompt, so the loss differs
    names.load_state_dict(full.state_dict())
    batch = make_batch(scene_examples)
    with torch.no_grad():
        assert not torch.isclose(full.eval()(batch), names.eval()(batch))


def test_a_names_model_round_trips_through_save_and_load(tmp_path, scene_examples):
    model = model_reading("names").eval()
    model.save(tmp_path / "names")
    tok = tiny_tokenizer(False)
    again = TopoRAGModel.load(tmp_path / "names", tiny_llm(len(tok), 0), tok).eval()
    e = scene_examples[0]
    assert again.config.token_text == "names"
    assert again.prompter.row(e.context, e.question) == model.prompter.row(e.context, e.question)
