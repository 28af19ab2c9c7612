"""The CUDA path (skipped without a GPU): the shipped recipes train on a CPU and must run on CUDA unchanged.

* The cells path (one graph token per retrieved cell) and the LoRA model's loss give the same numbers on
  CUDA as on the CPU for the same weights and batch (fp32).
* The shipped scene recipe end to end through the CLI on ``--device cuda``: the recipe file itself (LoRA,
  the cached frozen part, question first, cited answers, bf16), a few steps with the tiny Llama and the
  hashing encoder, then ``toporag eval`` with each graph-token arm.
"""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
import torch

from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import RawExample
from toporag_core.tasks.prep import PrepConfig, prepare_example
from toporag_core.model.tiny import tiny_model
from toporag_core.tasks.batching import make_batch

DEVICE = os.environ.get("TOPORAG_TEST_DEVICE", "cuda")  # "cpu": a dry run of these tests without a GPU
pytestmark = pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                                reason="no CUDA device here: the CUDA path is checked on a GPU machine")

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
TRIPLES = [[("cats", "are", "pets"), ("pets", "need", "care"), ("care", "helps", "cats")],
           [("guns", "cause", "harm"), ("harm", "is", "bad")],
           [("school", "has", "uniforms"), ("uniforms", "reduce", "bullying"), ("bullying", "harms", "school")]]


def test_cells_path_tokens_and_loss_match_the_cpu():
    enc = HashingEncoder(dim=16)
    examples = [prepare_example(RawExample(id=str(i), graph=TextualGraph.from_triples(t, name=f"g{i}"),
                                           question=f"Q{i}: {t[0][0]}?", label="yes", answer="yes"),
                                enc, PrepConfig(RetrievalSetting.make(k0=3, k1=3, k2=1)))
                for i, t in enumerate(TRIPLES)]
    model = tiny_model(in_dim=16, mode="lora", tokens=4, graph_path="cells",
                       graph_position="before_question").eval()
    batch = make_batch(examples)
    with torch.no_grad():
        cpu_tokens, cpu_loss = model.graph_tokens(batch.cells).clone(), float(model(batch))
        model.to(DEVICE)
        gpu = batch.to(DEVICE)
        gpu_tokens, gpu_loss = model.graph_tokens(gpu.cells), float(model(gpu))
    assert gpu_tokens.device.type == torch.device(DEVICE).type
    assert torch.allclose(cpu_tokens, gpu_tokens.cpu(), atol=1e-4)
    assert abs(cpu_loss - gpu_loss) < 1e-3 * max(1.0, abs(cpu_loss))


def test_scene_recipe_trains_and_evaluates_every_arm_on_cuda(tmp_path, monkeypatch, capsys):
    from toporag_core.cli import main
    from toporag_core.tasks.scenes import write_dataset
    from toporag_core.model.tiny import save_tiny_llm

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "scenes"
    write_dataset(data, n=20, seed=3, per_type=2)
    llm = save_tiny_llm(tmp_path / "llm")
    common = ["--dataset", "scene_graphs", "--data-dir", str(data), "--device", DEVICE]
    recipe = RECIPES / "scene_graphs.toml"
    code = main(["train", "--recipe", str(recipe), *common, "--llm", str(llm),
                 "--hidden", "16", "--projector-hidden", "32", "--dtype", "bfloat16", "--batch-size", "4",
                 "--max-train", "24", "--max-eval", "8", "--max-steps", "4", "--eval-every", "2",
                 "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    if DEVICE.startswith("cuda"):  # the model really ran there, not on a silent CPU fallback
        assert torch.cuda.max_memory_allocated() > 0
    meta = json.loads((tmp_path / "run" / "best" / "config.json").read_text())
    shipped = tomllib.loads(recipe.read_text())
    assert meta["config"]["graph_path"] == shipped.get("graph_path", "pooled") and meta["llm_dtype"] == "bfloat16"
    for arm in ("normal", "permute", "zero", "only"):
        out = tmp_path / f"{arm}.jsonl"
        code = main(["eval", *common, "--split", "test", "--limit", "8", "--checkpoint",
                     str(tmp_path / "run" / "best"), "--graph-tokens", arm, "--out", str(out)])
        assert code == 0, capsys.readouterr().err
        recs = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(recs) >= 2 and {r["graph_tokens"] for r in recs} == {arm}
