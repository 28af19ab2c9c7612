"""Neural core on a tiny random Llama (built in-process, no download): gradients, frozen LLM,
overfitting, checkpoints, batched generation, resume, evaluation JSONL, data cache, pipeline."""
from __future__ import annotations

import dataclasses
import json
import threading

import pytest
import torch

from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import RawExample, Task, register_task
from toporag_core.tasks.prep import Example, PrepConfig, load_split, prepare_dataset, prepare_example, save_split
from toporag_core.embed import HashingEncoder
from toporag_core.evaluation.evaluate import evaluate, score
from toporag_core.graph import TextualGraph
from toporag_core.model import IGNORE_INDEX, TopoRAGConfig, TopoRAGModel
from toporag_core.nn import CWNConfig
from toporag_core.model.tiny import tiny_llm, tiny_tokenizer
from toporag_core.tasks.batching import make_batch
from toporag_core.training import TrainConfig, train

DIM = 16
ENC = HashingEncoder(dim=DIM)


def tiny_model(mode: str = "soft_prompt", chat: bool = False, tokens: int = 1, seed: int = 0, **kw) -> TopoRAGModel:
    tok = tiny_tokenizer(chat)
    llm = tiny_llm(len(tok), seed)
    torch.manual_seed(seed + 1)
    cfg = TopoRAGConfig(cwn=CWNConfig(in_dim=DIM, hidden=16), num_graph_tokens=tokens, projector_hidden=32,
                        llm="tiny", mode=mode, max_new_tokens=8, **kw)
    return TopoRAGModel(cfg, llm, tok)


GRAPHS = [
    [("cats", "are", "pets"), ("pets", "need", "care"), ("care", "helps", "cats")],
    [("guns", "cause", "harm"), ("harm", "is", "bad")],
    [("school", "has", "uniforms"), ("uniforms", "reduce", "bullying"), ("bullying", "harms", "school")],
    [("tax", "funds", "roads"), ("roads", "help", "trade")],
    [("sun", "gives", "energy"), ("energy", "powers", "homes"), ("homes", "face", "sun")],
    [("rain", "feeds", "rivers")],
]


def raw_examples() -> list[RawExample]:
    out = []
    for i, triples in enumerate(GRAPHS):
        g = TextualGraph.from_triples(triples, name=f"g{i}")
        label = "support" if i % 2 == 0 else "counter"
        out.append(RawExample(id=str(i), graph=g, question=f"Q{i}: {triples[0][0]} vs {triples[-1][2]}? Answer:",
                              label=label, answer=label, qtype="even" if i % 2 == 0 else "odd"))
    return out


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return [prepare_example(r, ENC, PrepConfig(RetrievalSetting.make(k0=2, k1=2, k2=1))) for r in raw_examples()]


def test_gradients_reach_encoder_and_projector_and_llm_stays_bit_identical(examples):
    model = tiny_model()
    before = {n: p.detach().clone() for n, p in model.llm.named_parameters()}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    loss = model(make_batch(examples[:4]))
    loss.backward()
    for name, mod in (("encoder", model.encoder), ("projector", model.projector)):
        grads = [p.grad for p in mod.parameters()]
        assert all(g is not None for g in grads), name
        assert sum(float(g.abs().sum()) for g in grads) > 0, name
    assert all(p.grad is None for p in model.llm.parameters())
    opt.step()
    for n, p in model.llm.named_parameters():
        assert torch.equal(p, before[n]), n


def test_labels_cover_only_answer_and_eos(examples):
    model = tiny_model()
    batch = make_batch(examples[:3])
    _, mask, pos, labels = model.build_inputs(batch, with_answers=True)
    for i, ex in enumerate(examples[:3]):
        want = model.tokenizer(ex.answer, add_special_tokens=False)["input_ids"] + [model.tokenizer.eos_token_id]
        assert labels[i][labels[i] != IGNORE_INDEX].tolist() == want
    assert (mask.sum(1) - 1 == pos[:, -1]).all()  # left padding: positions count real tokens only


def test_context_truncated_question_kept():
    model = tiny_model(max_input_tokens=64)
    question = "Is this kept in full? " * 2
    ctx, q = model.context_ids("node_id,node_attr\n" + "0,long text\n" * 50, question)
    assert model.tokenizer.decode(q) == question
    layout = model.prompt_layout("x" * 500, question)
    assert layout["context_truncated"] and layout["input_tokens"] <= 64 and layout["question"] == question


@pytest.mark.training
def test_overfit_tiny_batch_through_the_graph_alone(examples):
    # Identical text for every example, labels alternate: only the graph tokens can tell them apart.
    same_text = [dataclasses.replace(e, question="Q?", context="") for e in examples[:4]]
    model = tiny_model(tokens=4)
    batch = make_batch(same_text)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.0)
    model.train()
    with torch.no_grad():
        first = float(model(batch))
    for _ in range(100):
        opt.zero_grad()
        loss = model(batch)
        loss.backward()
        opt.step()
    assert loss.item() < 0.6 * first, (first, loss.item())
    gen = model.eval().generate(make_batch(same_text, with_answers=False))
    assert gen[0] == gen[2] and gen[1] == gen[3] and gen[0] != gen[1]  # support vs counter examples


@pytest.mark.parametrize("mode", ["soft_prompt", "lora"])
def test_checkpoint_round_trip(tmp_path, examples, mode):
    model = tiny_model(mode=mode)
    with torch.no_grad():  # move off the initialisation so a silently skipped load would show
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    model.eval()
    batch = make_batch(examples[:3])
    with torch.no_grad():
        loss = model(batch).item()
    gen = model.generate(make_batch(examples[:3], with_answers=False))
    model.save(tmp_path / "ck")
    fresh_llm = tiny_llm(len(model.tokenizer))  # same seed: same frozen weights, no adapters yet
    loaded = TopoRAGModel.load(tmp_path / "ck", llm=fresh_llm, tokenizer=model.tokenizer)
    with torch.no_grad():
        assert loaded(batch).item() == loss
    assert loaded.generate(make_batch(examples[:3], with_answers=False)) == gen
    names = set(loaded.trainable_state_dict())
    if mode == "lora":
        assert names and any("lora_A" in n and "q_proj" in n for n in names) and any("v_proj" in n for n in names)
    assert not any(n.startswith("llm.") and "lora_" not in n for n in names)


def test_load_rejects_mismatched_checkpoint(tmp_path):
    tiny_model().save(tmp_path / "ck")
    cfg = json.loads((tmp_path / "ck" / "config.json").read_text())
    cfg["config"]["projector_hidden"] = 48
    (tmp_path / "ck" / "config.json").write_text(json.dumps(cfg))
    tok = tiny_tokenizer()
    with pytest.raises(ValueError, match="shape|match"):
        TopoRAGModel.load(tmp_path / "ck", llm=tiny_llm(len(tok)), tokenizer=tok)


@pytest.mark.parametrize("chat", [False, True])
def test_batched_generation_equals_one_by_one(examples, chat):
    model = tiny_model(chat=chat, tokens=2).eval()
    batched = model.generate(make_batch(examples, with_answers=False))
    single = [model.generate(make_batch([e], with_answers=False))[0] for e in examples]
    assert batched == single
    assert len({len(e.context) for e in examples}) > 1  # the rows really needed padding


def test_metrics_hand_worked():
    assert score("expla_graphs", "Support. They agree.", "support")
    assert not score("expla_graphs", "counter, not support", "support")
    assert not score("expla_graphs", "I cannot tell", "counter")
    assert score("scene_graphs", "It is a Red mug", "red")
    assert not score("scene_graphs", "blue", "red")
    assert score("webqsp", "I think it is The Beatles!", ["beatles", "wings"])
    assert not score("webqsp", "the rolling stones", ["beatles"])


def test_train_resume_equals_uninterrupted(tmp_path, examples):
    cfg = dict(lr=1e-2, batch_size=2, epochs=2, eval_every=2, patience=10, show_progress=False)
    a = tiny_model(seed=3)
    train(a, examples, examples[:2], TrainConfig(max_steps=5, **cfg), tmp_path / "a")
    b = tiny_model(seed=3)
    train(b, examples, examples[:2], TrainConfig(max_steps=2, **cfg), tmp_path / "b")
    b2 = tiny_model(seed=3)
    with torch.no_grad():  # scramble: everything trainable must come from the checkpoint
        for p in b2.parameters():
            if p.requires_grad:
                p.normal_()
    summary = train(b2, examples, examples[:2], TrainConfig(max_steps=5, **cfg), tmp_path / "b", resume=True)
    assert summary["steps"] == 5
    sa, sb = a.trainable_state_dict(), b2.trainable_state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert (tmp_path / "b" / "best" / "model.safetensors").is_file()
    log = [json.loads(x) for x in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "val_loss" in r] == [2, 3, 4, 5]  # 3 = end of epoch 1 (6 examples / batch 2)
    assert [r["step"] for r in log if "loss" in r] == [1, 2, 3, 4, 5]  # one line per step, the resumed ones too


def test_evaluate_streams_jsonl_and_resumes(tmp_path, examples):
    model = tiny_model().eval()
    out = tmp_path / "preds.jsonl"
    full = evaluate(model, examples, "expla_graphs", out=out, batch_size=4, show_progress=False)
    lines = out.read_text().splitlines()
    assert full["n"] == len(examples) == len(lines)
    rec = json.loads(lines[0])
    assert {"id", "question", "prediction", "label", "correct", "cells", "context", "qtype", "method"} <= set(rec)
    assert rec["cells"]["nodes"] and full["accuracy"] == sum(json.loads(x)["correct"] for x in lines) / len(lines)
    out.write_text("\n".join(lines[:2]) + "\n" + lines[2][:15])  # a run killed mid-line
    res = evaluate(model, examples, "expla_graphs", out=out, batch_size=4, resume=True, show_progress=False)
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert sorted(ids) == sorted(e.id for e in examples) and res["correct"] == full["correct"]
    assert set(res["by_type"]) == {"even", "odd"}


def test_prep_cache_round_trip_and_corruption(tmp_path, examples):
    save_split(tmp_path, "val", examples)
    back = load_split(tmp_path, "val")
    assert [e.id for e in back] == [e.id for e in examples] and back[2].context == examples[2].context
    assert torch.equal(back[2].tensors.x0, examples[2].tensors.x0)
    assert torch.equal(back[2].tensors.cell_edges, examples[2].tensors.cell_edges)
    (tmp_path / "val.json").write_text('{"version": 1, "token": "other"')
    assert load_split(tmp_path, "val") is None


def test_registered_dataset_is_prepared_once(tmp_path):
    calls = []

    def loader(_):
        calls.append(1)
        raw = raw_examples()
        return {"train": raw[:4], "val": raw[4:5], "test": raw[5:]}

    register_task(Task("tiny_test_set", loader, metric="expla_graphs"))
    setting = PrepConfig(RetrievalSetting("whole"), use_cells2=False)
    d = prepare_dataset("tiny_test_set", setting, encoder=ENC, cache_dir=tmp_path, show_progress=False)
    again = prepare_dataset("tiny_test_set", setting, encoder=ENC, cache_dir=tmp_path, show_progress=False)
    assert len(calls) == 1 and [len(d[s]) for s in ("train", "val", "test")] == [4, 1, 1]
    assert again["train"][0].context == d["train"][0].context
    ex = d["train"][0]  # "whole": every cell; no 2-cells in the text or the tensors
    assert ex.tensors.shape == (3, 3, 0) and "2-cells" not in ex.context
    with pytest.raises(ValueError, match="unknown dataset"):
        prepare_dataset("no_such_set", setting, encoder=ENC, cache_dir=tmp_path)


def test_pipeline_answers_concurrently(examples):
    from toporag_core.answering.pipeline import TopoRAGPipeline

    pipe = TopoRAGPipeline(tiny_model(tokens=2), encoder=ENC)
    graphs = [TextualGraph.from_triples(t) for t in GRAPHS[:3]]
    ecxs = [pipe.prepare(g) for g in graphs]
    expected = [pipe.answer(e, f"what about {g.node_text[0]}?")["answer"] for e, g in zip(ecxs, graphs)]
    got = [None] * 3

    def ask(i):
        got[i] = pipe.answer(ecxs[i], f"what about {graphs[i].node_text[0]}?")["answer"]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert got == expected
    out = pipe.answer(graphs[0], "cats and care", RetrievalSetting.make(k0=2, k1=2, k2=1))
    assert out["subcomplex"].nodes.size > 0 and out["cells"]["nodes"]
    assert set(out["timings"]) >= {"retrieve", "encode", "generate"} and out["prompt"]["soft_tokens"] == 2
    with pytest.raises(ValueError):
        pipe.answer(graphs[0], "  ")


def test_cli_ask_with_a_tiny_checkpoint(tmp_path, capsys):
    """``toporag ask`` end to end: checkpoint config names a local LLM folder; packaged MiniLM retrieves."""
    from toporag_core.cli import main

    tok = tiny_tokenizer()
    tiny_llm(len(tok)).save_pretrained(tmp_path / "llm")
    tok.save_pretrained(tmp_path / "llm")
    torch.manual_seed(0)
    cfg = TopoRAGConfig(cwn=CWNConfig(in_dim=384, hidden=16), projector_hidden=32, llm=str(tmp_path / "llm"),
                        max_new_tokens=4)
    TopoRAGModel(cfg, tiny_llm(len(tok)), tok).save(tmp_path / "ck", extra={"retrieval": {"method": "toporag", "k0": 2}})
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps([list(t) for t in GRAPHS[0] + GRAPHS[2]]))
    code = main(["ask", str(graph), "--question", "do uniforms reduce bullying?", "--checkpoint",
                 str(tmp_path / "ck"), "--device", "cpu", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out["answer"], str) and out["params"]["k0"] == 2 and out["cells"]["nodes"]
    assert {"retrieve", "encode", "generate"} <= set(out["timings"]) and out["prompt"]["graph_tokens"] == 1
    assert main(["ask", str(tmp_path / "missing.json"), "-q", "x", "--checkpoint", str(tmp_path / "ck")]) == 2


def test_cli_eval_on_a_users_explagraphs_file_and_ask_a_row(tmp_path, capsys, monkeypatch):
    """``toporag eval --data-file rows.tsv --split all`` writes one JSONL line per row with the issue's keys,
    every answer one of the labels; ``--readback`` pairs own and other graph tokens on every row; ``toporag ask
    rows.tsv --record 1`` answers that row with a probability."""
    from toporag_core.cli import main

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    tok = tiny_tokenizer()
    tiny_llm(len(tok)).save_pretrained(tmp_path / "llm")
    tok.save_pretrained(tmp_path / "llm")
    torch.manual_seed(0)
    cfg = TopoRAGConfig(cwn=CWNConfig(in_dim=256, hidden=16), projector_hidden=32, llm=str(tmp_path / "llm"),
                        max_new_tokens=4)
    TopoRAGModel(cfg, tiny_llm(len(tok)), tok).save(tmp_path / "ck", extra={"retrieval": {"method": "toporag"}})
    rows = tmp_path / "rows.tsv"
    rows.write_text("arg1\targ2\tlabel\tgraph\n"
                    "Uniforms help.\tUniforms reduce bullying.\tsupport\t(uniforms; causes; equality)(equality; "
                    "reduces; bullying)\n"
                    "Guns are dangerous.\tGuns should be legal.\tcounter\t(guns; capable of; harm)(harm; not desires; "
                    "legal)\n"
                    "Cats are pets.\tCats need care.\tsupport\t(cats; is a; pets)(pets; desires; care)\n")
    out = tmp_path / "pred.jsonl"
    assert main(["eval", "--dataset", "expla_graphs", "--data-file", str(rows), "--split", "all", "--checkpoint",
                 str(tmp_path / "ck"), "--device", "cpu", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-2])
    assert summary["dtype"] == "float32" and summary["n"] == 3  # no llm_dtype recorded: trained in fp32
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3 and {"id", "qtype", "question", "gold", "answer", "correct", "clean", "seconds"} <= set(lines[0])
    assert all(r["answer"] in ("support", "counter") for r in lines)
    capsys.readouterr()
    assert main(["eval", "--dataset", "expla_graphs", "--data-file", str(rows), "--split", "all", "--checkpoint",
                 str(tmp_path / "ck"), "--device", "cpu", "--readback"]) == 0
    got = json.loads(capsys.readouterr().out.splitlines()[-2])["readback"]
    assert got["n"] == 3 and got["own_lower"] + got["other_lower"] == 3 and 0 < got["p_value"] <= 1  # no ties
    assert got["nll_own"] > 0 and got["nll_other"] > 0
    assert main(["ask", str(rows), "--record", "1", "--checkpoint", str(tmp_path / "ck"), "--device", "cpu",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["answer"] in ("support", "counter") and got["gold"] == "counter"
    assert abs(sum(got["label_probs"].values()) - 1) < 1e-6 and got["probability"] == max(got["label_probs"].values())
