"""The alignment stage (align.py): the contrastive readback loss, what trains, the kept state, and its
place before the joint stage in train()."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from toporag_core.training.align import contrastive_readback_loss, graph_parameters
from toporag_core.evaluation.arms import readback_rows
from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.model import TopoRAGModel
from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import RawExample
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model.tiny import tiny_model
from toporag_core.tasks.batching import make_batch
from toporag_core.training import TrainConfig, train

DIM = 16
GRAPHS = [
    [("cats", "are", "pets"), ("pets", "need", "care")],
    [("guns", "cause", "harm"), ("harm", "is", "bad")],
    [("school", "has", "uniforms"), ("uniforms", "reduce", "bullying")],
    [("tax", "funds", "roads"), ("roads", "help", "trade")],
    [("rain", "feeds", "rivers"), ("rivers", "reach", "sea")],
    [("sun", "gives", "energy"), ("energy", "powers", "homes")],
]


@pytest.fixture(scope="module")
def examples():
    enc = HashingEncoder(dim=DIM)
    out = []
    for i, triples in enumerate(GRAPHS):
        g = TextualGraph.from_triples(triples, name=f"g{i}")
        label = "support" if i % 2 == 0 else "counter"
        raw = RawExample(id=str(i), graph=g, question=f"Q{i}: {triples[0][0]}? Answer:", label=label, answer=label)
        out.append(prepare_example(raw, enc, PrepConfig(RetrievalSetting.make(k0=3, k1=3, k2=1))))
    return out


def lora_model(seed: int = 0) -> TopoRAGModel:
    return tiny_model(in_dim=DIM, mode="lora", graph_path="cells", tokens=4, cell_order=(0, 2, 1),
                      max_new_tokens=48, seed=seed)


def test_the_loss_is_the_readback_loss_plus_a_hinge_against_another_rows_tokens(examples):
    model = lora_model().eval()
    batch = make_batch(readback_rows(examples[:4]))
    with torch.no_grad():
        loss, own, other = contrastive_readback_loss(model, batch, margin=0.3, weight=2.0)
        soft = model.graph_tokens(batch.cells)
        assert torch.allclose(own, model.answer_nll(batch))
        assert torch.allclose(other, model.answer_nll(batch, soft=soft[[3, 0, 1, 2]]))  # row i reads row i-1's
        assert torch.isclose(loss, own.mean() + 2.0 * torch.relu(0.3 + own - other).mean())
    with pytest.raises(ValueError, match="at least 2 rows"):
        contrastive_readback_loss(model, make_batch(readback_rows(examples[:1])), margin=0.3)


@pytest.mark.training  # an alignment / training loop
def test_alignment_trains_the_graph_path_only_and_keeps_its_best_readback(tmp_path, examples):
    model = lora_model()
    mine = {id(p) for ps in graph_parameters(model).values() for p in ps}
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    cfg = TrainConfig(align_steps=40, align_lr=1e-2, encoder_lr=1e-3, batch_size=4, eval_every=10, seed=0,
                      show_progress=False)
    from toporag_core.training.align import align

    res = align(model, examples, examples, cfg, tmp_path)
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    for n, p in model.named_parameters():
        if id(p) not in mine:  # the LLM and its LoRA adapters
            assert torch.equal(p.detach(), before[n]), f"{n} is not the graph path's and must stay frozen"
    assert any(not torch.equal(p.detach(), before[n]) for n, p in model.named_parameters() if id(p) in mine)
    log = [json.loads(x) for x in (tmp_path / "align_log.jsonl").read_text().splitlines()]
    checks = [r for r in log if "nll_own" in r]
    assert [r["align_step"] for r in checks] == [0, 10, 20, 30, 40]
    assert sum("loss" in r for r in log) == 40
    gaps = {r["align_step"]: r["nll_other"] - r["nll_own"] for r in checks}
    assert res["align_best_step"] == max(gaps, key=gaps.get)
    # the tiny LLM learns to read its six graphs back: own tokens beat another graph's on every row
    best = res["align_readback"]
    assert gaps[res["align_best_step"]] > gaps[0] + 0.05 and best["own_lower"] == best["n"] == len(examples)
    # the model is left holding the kept state: reading back again gives the kept check's numbers
    from toporag_core.evaluation.arms import readback

    again = readback(model.eval(), examples)
    assert again["nll_own"] == pytest.approx(best["nll_own"], abs=1e-4)
    with pytest.raises(ValueError, match="batches of at least 2 rows"):
        align(model, examples, examples, TrainConfig(align_steps=1, batch_size=1), tmp_path / "one")
    with pytest.raises(ValueError, match="at least 2 examples with a textualized context, got 1 of 1"):
        readback(model, examples[:1])


def test_alignment_steps_weigh_the_hinge_by_align_weight(tmp_path, examples):
    """The logged step loss is ``mean L_own + align_weight * mean hinge``: weight 0 leaves the plain readback
    loss, weight 3 adds three hinges (margin 0.5 keeps the hinge positive at the first step)."""
    from toporag_core.training.align import align

    first = {}
    for w in (0.0, 3.0):
        cfg = TrainConfig(align_steps=1, align_weight=w, batch_size=4, eval_every=1, seed=0, show_progress=False)
        align(lora_model(), examples, examples, cfg, tmp_path / str(w))
        log = [json.loads(x) for x in (tmp_path / str(w) / "align_log.jsonl").read_text().splitlines()]
        first[w] = next(r for r in log if "loss" in r)
    assert first[0.0]["loss"] == pytest.approx(first[0.0]["own"], abs=2e-5)
    hinge = first[3.0]["loss"] - first[3.0]["own"]
    assert hinge > 3 * 0.4  # three hinges of about margin 0.5 each (own and other nearly equal at step 1)
    assert first[0.0]["own"] == pytest.approx(first[3.0]["own"], abs=2e-5)  # same start, same batch


SCENES = [
    [("name: lamp; attributes: brown, glass", "on", "name: table; attributes: wooden"),
     ("name: table; attributes: wooden", "near", "name: chair; attributes: red, small")],
    [("name: cup; attributes: white", "on", "name: shelf; attributes: tall, metal")],
    [("name: dog; attributes: black, large", "under", "name: bench; attributes: green")],
    [("name: book; attributes: blue, thin", "beside", "name: vase; attributes: glass")],
]


@pytest.fixture(scope="module")
def scene_examples():
    enc = HashingEncoder(dim=DIM)
    setting = PrepConfig(RetrievalSetting.make(k0=3, k1=3, k2=1), text="compact")  # node lines `lamp [0]: brown, ...`
    return [prepare_example(RawExample(id=str(i), graph=TextualGraph.from_triples(t, name=f"s{i}"), question="q",
                                       label="a", answer="a"), enc, setting) for i, t in enumerate(SCENES)]


def word_model(k: int = 2, tokens: int = 3, order=(0, 2, 1)) -> TopoRAGModel:
    return tiny_model(in_dim=DIM, mode="lora", graph_path="cells", tokens=tokens, cell_order=order,
                      tokens_per_cell=k, max_new_tokens=48)


def test_word_targets_are_the_llm_embeddings_of_each_node_slots_words(scene_examples):
    """``word_loss`` compares token ``(1 + s) k + j`` with the embedding of word ``j`` of node line ``s`` (name, then
    attributes), only for the nodes that have a slot: zero when those tokens are the targets, and the other
    positions do not enter."""
    from toporag_core.training.align import check_word_targets, word_loss

    model = word_model(k=2, tokens=3).eval()  # 2 node slots of 2 tokens each
    rows = readback_rows(scene_examples[:2])
    batch = make_batch(rows)
    emb = model.llm.get_input_embeddings().weight.detach()

    def vec(word):
        return emb[model.prompter.ids(" " + word)].mean(0)

    soft = torch.randn(2, 3 * 2, model.llm_hidden)
    assert float(word_loss(model, rows, soft, batch.cells)) > 0.5
    # scene 0: lamp [0]: brown, glass / table [1]: wooden / chair [2]: ...; scene 1: cup [0]: white / shelf [1]: ...
    want = {(0, 2): "lamp", (0, 3): "brown", (0, 4): "table", (0, 5): "wooden",
            (1, 2): "cup", (1, 3): "white", (1, 4): "shelf", (1, 5): "tall"}
    assert rows[0].answer.splitlines()[1:3] == ["lamp [0]: brown, glass", "table [1]: wooden"]
    for (i, p), w in want.items():
        soft[i, p] = 3.0 * vec(w)
    assert float(word_loss(model, rows, soft, batch.cells)) == pytest.approx(0.0, abs=1e-5)
    soft[:, :2] = torch.randn(2, 2, model.llm_hidden)  # the whole-subcomplex slot has no target
    assert float(word_loss(model, rows, soft, batch.cells)) == pytest.approx(0.0, abs=1e-5)
    soft[0, 3] = vec("red")  # a wrong attribute in lamp's second token
    assert float(word_loss(model, rows, soft, batch.cells)) > 1e-3
    with pytest.raises(ValueError, match="nodes first"):
        check_word_targets(word_model(order=(1, 2, 0)))


@pytest.mark.training  # an alignment / training loop
def test_alignment_with_word_targets_moves_node_tokens_onto_their_words(tmp_path, scene_examples):
    from toporag_core.training.align import align

    model = word_model(k=2, tokens=4)
    cfg = TrainConfig(align_steps=30, align_lr=1e-2, encoder_lr=1e-3, align_words=5.0, batch_size=4, eval_every=30,
                      seed=0, show_progress=False)
    align(model, scene_examples, scene_examples, cfg, tmp_path)
    words = [json.loads(x)["words"] for x in (tmp_path / "align_log.jsonl").read_text().splitlines()
             if "words" in x]
    assert len(words) == 30 and words[-1] < 0.6 * words[0]  # measured: 0.85 to 0.43
    with pytest.raises(ValueError, match="nodes first"):
        align(word_model(order=(1, 2, 0)), scene_examples, scene_examples, cfg, tmp_path / "no")


@pytest.mark.training  # an alignment / training loop
def test_word_steps_run_the_word_targets_alone_before_the_alignment_steps(tmp_path, scene_examples):
    """``word_steps`` train the graph path on ``L_words`` only: as many LLM forwards as without them (the readback
    checks and the alignment step), every 50th step logged, and one more readback check before the alignment."""
    from toporag_core.training.align import align

    forwards = {}
    for n in (0, 100):
        model = word_model(k=2, tokens=4)
        layer = next(m for m in model.llm.modules() if type(m).__name__.endswith("DecoderLayer"))
        calls = []
        layer.register_forward_hook(lambda *a, calls=calls: calls.append(1))
        cfg = TrainConfig(align_steps=1, word_steps=n, align_lr=1e-2, encoder_lr=1e-3, align_words=1.0,
                          batch_size=4, eval_every=1, seed=0, show_progress=False)
        align(model, scene_examples, scene_examples, cfg, tmp_path / str(n))
        forwards[n] = len(calls)
        log = [json.loads(x) for x in (tmp_path / str(n) / "align_log.jsonl").read_text().splitlines()]
    assert 0 < forwards[100] - forwards[0] < 100  # one readback check more; none in each of the 100 word steps
    words = [r["words"] for r in log if "word_step" in r]
    assert [r["word_step"] for r in log if "word_step" in r] == [50, 100] and words[-1] < 0.5
    assert [r["align_step"] for r in log if "nll_own" in r] == [0, 0, 1]
    with pytest.raises(ValueError, match="word_steps.*needs align_words"):
        TrainConfig(word_steps=10, align_steps=5)


def test_the_joint_readback_term_adds_the_word_targets(scene_examples):
    from toporag_core.training.align import JointReadback, word_loss

    model = word_model(k=2, tokens=3).eval()
    cfg = TrainConfig(joint_align_weight=0.5, align_words=2.0, batch_size=3, seed=1)
    with torch.no_grad():
        got, log = JointReadback(scene_examples, scene_examples, cfg).loss(model, 4)
        rows = readback_rows([scene_examples[int(i)] for i in np.random.default_rng([1, 4]).choice(4, 3, replace=False)])
        batch = make_batch(rows)
        soft = model.graph_tokens(batch.cells)
        ref, _, _ = contrastive_readback_loss(model, batch, cfg.align_margin, cfg.align_weight, soft)
        words = word_loss(model, rows, soft, batch.cells)
    assert words > 0.1 and log["readback_words"] == pytest.approx(words.item(), abs=1e-5)
    assert torch.isclose(got, 0.5 * (ref + 2.0 * words))


def test_the_joint_readback_term_is_lambda_times_the_loss_of_rows_drawn_by_the_step(examples):
    from toporag_core.training.align import JointReadback

    model = lora_model().eval()
    term = JointReadback(examples, examples, TrainConfig(joint_align_weight=2.5, align_weight=3.0, align_margin=0.4,
                                                         batch_size=4, seed=7))
    with torch.no_grad():
        a, log_a = term.loss(model, 5)
        b, _ = term.loss(model, 5)
        c, _ = term.loss(model, 6)
        assert torch.equal(a, b) and not torch.equal(a, c)  # the step seeds the draw: a resume draws the same rows
        pick = np.random.default_rng([7, 5]).choice(len(examples), size=4, replace=False)
        ref, own, _ = contrastive_readback_loss(model, make_batch(readback_rows([examples[int(i)] for i in pick])),
                                                margin=0.4, weight=3.0)
    assert torch.isclose(a, 2.5 * ref) and log_a["readback_own"] == pytest.approx(own.mean().item(), abs=1e-5)
    with pytest.raises(ValueError, match="at least 2 training rows per batch"):
        JointReadback(examples, examples, TrainConfig(joint_align_weight=1.0, batch_size=1))


def joint_run(tmp, examples, weight: float) -> tuple[TopoRAGModel, list[dict]]:
    model = lora_model()
    cfg = TrainConfig(lr=1e-2, encoder_lr=1e-3, max_steps=30, epochs=30, patience=10, eval_every=10, batch_size=4,
                      joint_align_weight=weight, seed=0, show_progress=False)
    train(model, examples, examples, cfg, tmp)
    return model, [json.loads(x) for x in (tmp / "log.jsonl").read_text().splitlines()]


@pytest.mark.training  # an alignment / training loop
def test_the_joint_stage_with_a_readback_term_learns_to_read_back_and_logs_it(tmp_path, examples):
    """Same data, seed and answer batches: with ``joint_align_weight`` the steps log the term and the
    validations the readback, and the tokens read back better than after answer training alone."""
    from toporag_core.evaluation.arms import readback

    plain, plain_log = joint_run(tmp_path / "plain", examples, 0.0)
    joint, log = joint_run(tmp_path / "joint", examples, 1.0)
    steps = [r for r in log if "loss" in r]
    assert len(steps) == 30 and all("readback_loss" in r for r in steps)
    assert not any("readback_loss" in r for r in plain_log)
    checks = [r for r in log if "val_loss" in r]
    assert [r["step"] for r in checks] == list(range(2, 31, 2))  # every epoch of 2 steps ends with one
    assert all(r["readback_n"] == len(examples) and "readback_own_lower" in r for r in checks)
    first = [r["loss"] for r in plain_log if "loss" in r][0]
    assert steps[0]["loss"] == pytest.approx(first, abs=1e-5)  # the answer loss of step 1: same model, same rows
    after = {k: readback(m.eval(), examples) for k, m in (("plain", plain), ("joint", joint))}
    gap = {k: r["nll_other"] - r["nll_own"] for k, r in after.items()}
    assert gap["joint"] > gap["plain"] + 0.05  # measured: 0.105 against 0.003


def test_the_joint_readback_term_is_refused_without_graph_tokens_or_under_several_processes(tmp_path, examples):
    from toporag_core.training import ProcessEnv, check_training_inputs

    class TwoRanks(ProcessEnv):
        world = 2

    with pytest.raises(ValueError, match="joint_align_weight is not supported with several processes"):
        check_training_inputs(lora_model(), examples, examples, TrainConfig(joint_align_weight=1.0, batch_size=4),
                              TwoRanks(), None)
    with pytest.raises(ValueError, match="joint_align_weight and align_words must be >= 0"):
        TrainConfig(joint_align_weight=-1.0)
    with pytest.raises(ValueError, match="joint_align_weight and align_words must be >= 0"):
        TrainConfig(align_words=-1.0, align_steps=1)
    with pytest.raises(ValueError, match="align_words=2.0 acts in the alignment stage or the joint readback term"):
        TrainConfig(align_words=2.0)
    text_only = tiny_model(in_dim=DIM, mode="lora", use_graph=False, max_new_tokens=48)
    with pytest.raises(ValueError, match="joint_align_weight reads cells back from graph tokens"):
        train(text_only, examples, examples, TrainConfig(joint_align_weight=1.0, batch_size=4), tmp_path / "t")
    assert not (tmp_path / "t").exists()  # refused before anything is written


@pytest.mark.training  # an alignment / training loop
def test_toporag_train_aligns_alone_then_eval_reads_the_aligned_checkpoint_back(tmp_path, monkeypatch, capsys):
    """`toporag train --align-steps N --max-steps 0` runs the alignment stage alone and saves OUT/aligned (no
    joint stage, no OUT/best), which `toporag eval --readback` reads as any checkpoint; without --max-steps 0
    the joint stage follows and its checkpoint records the alignment. Refused: max_steps 0 without alignment,
    and train() asked for no steps."""
    from toporag_core.cli import main
    from toporag_core.tasks.scenes import write_dataset
    from toporag_core.model.tiny import save_tiny_llm

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    scenes = tmp_path / "scenes"
    write_dataset(scenes, n=10, seed=3, per_type=2)
    llm = save_tiny_llm(tmp_path / "llm")
    recipe = tmp_path / "cells.toml"  # the cell path and its order are recipe settings
    recipe.write_text('graph_position = "before_question"\ngraph_path = "cells"\ncell_order = [0, 2, 1]\n'
                      'num_graph_tokens = 4\ntext = "compact"\n')  # compact node lines: `lamp [2]: brown, glass`
    common = ["--recipe", str(recipe), "--dataset", "scene_graphs", "--data-dir", str(scenes), "--device", "cpu",
              "--llm", str(llm), "--hidden", "16", "--projector-hidden", "32", "--batch-size", "4",
              "--align-steps", "3", "--eval-every", "3"]
    assert main(["train", *common, "--max-steps", "0", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "aligned checkpoint:" in out and "best checkpoint" not in out
    assert (tmp_path / "a" / "aligned" / "model.safetensors").is_file() and not (tmp_path / "a" / "best").exists()
    meta = json.loads((tmp_path / "a" / "aligned" / "config.json").read_text())
    assert meta["align_steps"] == 3 and meta["config"]["cell_order"] == [0, 2, 1] and meta["dataset"] == "scene_graphs"
    checks = [json.loads(x) for x in (tmp_path / "a" / "align_log.jsonl").read_text().splitlines() if "nll_own" in x]
    assert [c["align_step"] for c in checks] == [0, 3]
    assert main(["eval", "--checkpoint", str(tmp_path / "a" / "aligned"), "--dataset", "scene_graphs", "--data-dir",
                 str(scenes), "--split", "val", "--device", "cpu", "--readback"]) == 0
    got = json.loads(capsys.readouterr().out.splitlines()[-2])["readback"]
    assert got["n"] >= 2 and got["own_lower"] + got["other_lower"] <= got["n"]
    assert main(["eval", "--checkpoint", str(tmp_path / "a" / "aligned"), "--dataset", "scene_graphs", "--data-dir",
                 str(scenes), "--split", "val", "--device", "cpu", "--readback", "--readback-target", "attributes"]) == 0
    attrs = json.loads(capsys.readouterr().out.splitlines()[-2])["readback"]  # one named node's attributes each
    assert 2 <= attrs["n"] <= got["n"] and attrs["nll_own"] != got["nll_own"]
    assert main(["train", *common, "--max-steps", "2", "--out", str(tmp_path / "b")]) == 0
    best = json.loads((tmp_path / "b" / "best" / "config.json").read_text())
    assert best["align_steps"] == 3 and best["align_readback"]["n"] >= 2
    for bad in ({"align_steps": -1}, {"align_lr": 0.0}, {"align_margin": -0.1}, {"align_weight": -1.0}, {"max_steps": 0}):
        with pytest.raises(ValueError, match="align"):
            TrainConfig(**bad)
    with pytest.raises(ValueError, match="alignment stage"):
        train(lora_model(), [], [], TrainConfig(max_steps=0, align_steps=1), tmp_path / "c")
