"""The cell graph path (model/graph_tokens.py): one token per retrieved cell in text order, a
whole-subcomplex slot, the LLM's embedding scale; graph-only training rows, the collapse check and
warm starts (train.py, model/checkpoint.py)."""
from __future__ import annotations

import json

import pytest
import torch

from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.model import TopoRAGConfig, TopoRAGModel, warm_start
from toporag_core.model.graph_tokens import local_index
from toporag_core.nn import CWNConfig, collate
from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import RawExample
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model.tiny import tiny_llm, tiny_tokenizer
from toporag_core.tasks.batching import make_batch
from toporag_core.training import GRAPH_ONLY_SUFFIX, TrainConfig, token_spread, train, with_graph_only_rows

DIM = 16
ENC = HashingEncoder(dim=DIM)
GRAPHS = [
    [("cats", "are", "pets"), ("pets", "need", "care"), ("care", "helps", "cats")],
    [("guns", "cause", "harm"), ("harm", "is", "bad")],
    [("school", "has", "uniforms"), ("uniforms", "reduce", "bullying"), ("bullying", "harms", "school")],
    [("tax", "funds", "roads"), ("roads", "help", "trade")],
    [("rain", "feeds", "rivers")],
    [("sun", "gives", "energy"), ("energy", "powers", "homes"), ("homes", "face", "sun")],
]


def model_of(path: str = "cells", tokens: int = 6, mode: str = "soft_prompt", seed: int = 0,
             cell_order: tuple[int, ...] = (1, 2, 0), per_cell: int = 1) -> TopoRAGModel:
    tok = tiny_tokenizer(False)
    llm = tiny_llm(len(tok), seed)
    torch.manual_seed(seed + 1)
    cfg = TopoRAGConfig(cwn=CWNConfig(in_dim=DIM, hidden=16), num_graph_tokens=tokens, projector_hidden=32,
                        llm="tiny", mode=mode, max_new_tokens=8, graph_path=path, cell_order=cell_order,
                        tokens_per_cell=per_cell)
    return TopoRAGModel(cfg, llm, tok)


@pytest.fixture(scope="module")
def examples():
    out = []
    for i, triples in enumerate(GRAPHS):
        g = TextualGraph.from_triples(triples, name=f"g{i}")
        label = "support" if i % 2 == 0 else "counter"
        raw = RawExample(id=str(i), graph=g, question=f"Q{i}: {triples[0][0]}? Answer:", label=label, answer=label)
        out.append(prepare_example(raw, ENC, PrepConfig(RetrievalSetting.make(k0=3, k1=3, k2=1))))
    return out


def test_local_index_counts_rows_within_each_graph():
    owner = torch.tensor([0, 0, 0, 2, 2, 3])
    assert local_index(owner, 4).tolist() == [0, 1, 2, 0, 1, 0]


def test_cell_tokens_one_per_cell_in_text_order_with_empty_slots(examples):
    model = model_of(tokens=8).eval()
    cells = collate([e.tensors for e in examples])
    g = model.graph_tokens(cells)
    assert g.shape == (len(examples), 8, model.llm_hidden)
    empty = model.projector.empty.detach()
    for i, e in enumerate(examples):
        n, m, f = e.tensors.shape
        used = min(n + m + f, 7)
        rows = g[i].detach()
        filled = [not torch.allclose(r, empty) for r in rows]
        assert filled == [True] * (1 + used) + [False] * (7 - used), (i, n, m, f)
    # slot 1 is the first node (text order), computed from that node's own cell: changing only the
    # second graph's features leaves the first graph's tokens as they were
    other = [examples[0].tensors, examples[1].tensors]
    changed = type(other[1])(**{**vars(other[1]), "x0": other[1].x0 + 1.0})
    a = model.graph_tokens(collate(other)).detach()
    b = model.graph_tokens(collate([other[0], changed])).detach()
    assert torch.allclose(a[0], b[0], atol=1e-6) and not torch.allclose(a[1], b[1])


def test_cells_over_the_cap_keep_relations_first(examples):
    model = model_of(tokens=3).eval()  # one whole slot + 2 cells: both must be 1-cells
    big = max(examples, key=lambda e: e.tensors.shape[1])
    h = model.encoder.cell_states(collate([big.tensors]))
    z1 = h[1] + model.projector.skip[1](big.tensors.x1) + model.projector.rank.weight[1]
    expect = model.projector.token(z1[:2]).flatten(0, 1)  # (2 cells x 1 token, H)
    got = model.graph_tokens(collate([big.tensors]))[0, 1:]
    assert torch.allclose(got, expect, atol=1e-5)


def test_cell_order_puts_nodes_first_when_asked_and_is_saved(tmp_path, examples):
    model = model_of(tokens=3, cell_order=(0, 2, 1)).eval()  # one whole slot + 2 cells: both must be 0-cells
    big = max(examples, key=lambda e: e.tensors.shape[1])
    h = model.encoder.cell_states(collate([big.tensors]))
    z0 = h[0] + model.projector.skip[0](big.tensors.x0) + model.projector.rank.weight[0]
    got = model.graph_tokens(collate([big.tensors]))[0, 1:]
    assert torch.allclose(got, model.projector.token(z0[:2]).flatten(0, 1), atol=1e-5)
    assert TopoRAGConfig.from_dict(json.loads(json.dumps(model.config.to_dict()))).cell_order == (0, 2, 1)
    with pytest.raises(ValueError, match="cell_order"):
        TopoRAGConfig(graph_path="cells", num_graph_tokens=4, cell_order=(0, 0, 1))


def test_tokens_per_cell_gives_each_slot_k_consecutive_tokens_and_round_trips(tmp_path, examples):
    k = 3
    model = model_of(tokens=3, cell_order=(0, 2, 1), per_cell=k).eval()
    big = max(examples, key=lambda e: e.tensors.shape[0])
    g = model.graph_tokens(collate([big.tensors])).detach()
    assert g.shape == (1, 3 * k, model.llm_hidden) and model.num_soft_tokens() == 3 * k
    h = model.encoder.cell_states(collate([big.tensors]))
    z0 = h[0] + model.projector.skip[0](big.tensors.x0) + model.projector.rank.weight[0]
    want = model.projector.token(z0[:2]).detach()  # (2 cells, k, H): slots 1 and 2 are the first two nodes
    assert want.shape == (2, k, model.llm_hidden)
    assert torch.allclose(g[0, k:], want.reshape(2 * k, -1), atol=1e-5)
    assert not torch.allclose(g[0, k], g[0, k + 1])  # the k tokens of one cell differ
    # a subcomplex with fewer cells than slots: the unused slots' k positions hold the empty token
    small = model_of(tokens=8, per_cell=k).eval()
    tiny = min(examples, key=lambda e: sum(e.tensors.shape))
    used = sum(tiny.tensors.shape)
    gs = small.graph_tokens(collate([tiny.tensors])).detach()[0]
    assert torch.allclose(gs[(1 + used) * k:], small.projector.empty.detach().expand(gs.shape[0] - (1 + used) * k, -1))
    # the prompt holds T k soft positions, the loss reads them, and the config and weights round-trip
    batch = make_batch(examples[:2])
    assert torch.isfinite(model(batch))
    model.save(tmp_path / "k3")
    again = TopoRAGModel.load(tmp_path / "k3", tiny_llm(len(tiny_tokenizer(False)), 0), tiny_tokenizer(False)).eval()
    assert again.config.tokens_per_cell == k
    assert torch.allclose(again.graph_tokens(collate([big.tensors])).detach(), g, atol=1e-6)
    with pytest.raises(ValueError, match="tokens_per_cell.*graph_path='cells'"):
        TopoRAGConfig(graph_path="pooled", tokens_per_cell=2)


def test_tokens_start_at_the_llm_embedding_scale(examples):
    model = model_of(tokens=6).eval()
    g = model.graph_tokens(collate([e.tensors for e in examples]))[:, 0]
    rms_tokens = float(g.detach().pow(2).mean().sqrt())
    rms_words = float(model.llm.get_input_embeddings().weight.float().pow(2).mean().sqrt())
    assert 0.5 < rms_tokens / rms_words < 2.0


def test_cells_path_needs_cwn_and_two_tokens():
    with pytest.raises(ValueError, match="encoder 'cwn'"):
        TopoRAGConfig(encoder="gcn", graph_path="cells", num_graph_tokens=4)
    with pytest.raises(ValueError, match="num_graph_tokens >= 2"):
        TopoRAGConfig(graph_path="cells", num_graph_tokens=1)
    with pytest.raises(ValueError, match="graph_path"):
        TopoRAGConfig(graph_path="pool")


def test_old_config_without_graph_path_loads_pooled_and_a_mismatch_says_what_to_do(tmp_path, examples):
    model = model_of(path="pooled", tokens=2)
    model.save(tmp_path / "old")
    cfg = json.loads((tmp_path / "old" / "config.json").read_text())
    del cfg["config"]["graph_path"]
    (tmp_path / "old" / "config.json").write_text(json.dumps(cfg))
    assert TopoRAGConfig.from_dict(cfg["config"]).graph_path == "pooled"
    cfg["config"]["graph_path"] = "cells"
    (tmp_path / "old" / "config.json").write_text(json.dumps(cfg))
    from safetensors.torch import load_file

    with pytest.raises(ValueError, match="graph_path='cells'.*retrain"):
        model_of(path="cells", tokens=2).load_trainable(load_file(str(tmp_path / "old" / "model.safetensors")))


def test_warm_start_loads_matching_tensors_only(tmp_path):
    src = model_of(path="pooled", tokens=4, mode="lora", seed=3)
    src.save(tmp_path / "src")
    dst = model_of(path="cells", tokens=4, mode="lora", seed=4)
    counts = warm_start(dst, tmp_path / "src")
    assert counts["loaded"] > 0 and counts["skipped"] > 0 and counts["new"] > 0
    lora = [n for n, _ in dst.named_parameters() if "lora_" in n]
    s, d = dict(src.named_parameters()), dict(dst.named_parameters())
    assert all(torch.equal(s[n], d[n]) for n in lora)
    other = TopoRAGModel(TopoRAGConfig(use_graph=False, mode="lora", lora_r=3, llm="tiny"),
                         tiny_llm(len(tiny_tokenizer(False)), 0), tiny_tokenizer(False))
    with pytest.raises(ValueError, match="none of its"):
        warm_start(other, tmp_path / "src")


def test_graph_only_rows_have_no_context_and_their_own_ids(examples):
    rows = with_graph_only_rows(examples, 0.5, seed=1)
    extra = rows[len(examples):]
    assert len(extra) == 3 and all(e.context == "" and e.id.endswith(GRAPH_ONLY_SUFFIX) for e in extra)
    assert {e.id.removesuffix(GRAPH_ONLY_SUFFIX) for e in extra} <= {e.id for e in examples}
    assert with_graph_only_rows(examples, 0.0) == list(examples)
    with pytest.raises(ValueError, match="graph_only"):
        TrainConfig(graph_only=1.5)


def test_answer_nll_is_per_row_and_reads_the_soft_tokens_it_is_given(examples):
    model = model_of(path="cells", tokens=4)
    batch = make_batch(examples[:3])
    with torch.no_grad():
        per_row = model.answer_nll(batch)
        lengths = torch.tensor([len(model.answer_ids(a)) for a in batch.answers], dtype=per_row.dtype)
        # forward() is the token mean over the batch: the rows' means weighted by their answer lengths
        assert torch.allclose((per_row * lengths).sum() / lengths.sum(), model(batch), atol=1e-5)
        alone = torch.stack([model.answer_nll(make_batch([e]))[0] for e in examples[:3]])
        assert torch.allclose(per_row, alone, atol=1e-4)  # padding does not leak between rows
        own = model.graph_tokens(batch.cells)
        assert torch.allclose(model.answer_nll(batch, soft=own), per_row)
        assert not torch.allclose(model.answer_nll(batch, soft=own.flip(0)), per_row)
        ce, row, ids = model.answer_token_nll(batch)  # the same losses token by token, with their ids
        assert row.tolist() == sorted(row.tolist()) and torch.bincount(row).tolist() == lengths.int().tolist()
        for r, a in enumerate(batch.answers):
            assert ids[row == r].tolist() == list(model.answer_ids(a)) and torch.isclose(ce[row == r].mean(), per_row[r])


def test_token_spread_zero_for_a_constant_path_and_training_fails_loudly(tmp_path, examples):
    model = model_of(path="cells", tokens=4)
    assert token_spread(model, examples) > 0.05
    with torch.no_grad():  # make the path constant: no skip, no encoder signal, no rank or whole slot
        for p in model.projector.proj.parameters():
            p.zero_()
    assert token_spread(model, examples) < 1e-6
    cfg = TrainConfig(lr=1e-9, epochs=1, batch_size=2, eval_every=1, show_progress=False, min_token_spread=0.01)
    with pytest.raises(RuntimeError, match="collapsed"):
        train(model, examples[:4], examples[4:], cfg, tmp_path / "run")


def test_training_on_the_cells_path_logs_spread_and_reads_graph_only_rows(tmp_path, examples):
    model = model_of(path="cells", tokens=4, mode="lora")
    cfg = TrainConfig(lr=1e-3, epochs=1, batch_size=2, show_progress=False, graph_only=0.5, min_token_spread=1e-4)
    summary = train(model, examples[:4], examples[4:], cfg, tmp_path / "run")
    assert summary["examples_seen"] == 6  # 4 rows + 2 graph-only copies
    evals = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines() if "val_loss" in x]
    assert evals and all(e["token_spread"] > 1e-4 for e in evals)
    batch = make_batch(examples[:2])
    assert model(batch).isfinite()

