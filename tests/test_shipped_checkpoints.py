"""The committed checkpoints in ``assets/checkpoints/`` are what their READMEs say: the config loads,
the text format is registered, the weights are the float16 trainable parameters, and the README's
training command and code revision match the saved config (a retrained checkpoint whose README was
not updated, or the reverse, fails here). No LLM is loaded."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from safetensors import safe_open

from toporag_core.cli import build_parser
from toporag_core.commands.train import closed_answer_set, model_config, plan_from_args, prep_config_from_args
from toporag_core.model import TopoRAGConfig
from toporag_core.retrieval import TEXT_FORMATS
from toporag_core.tasks.prep import PrepConfig
from toporag_core.retrieval.textualize import DEFAULT_TEXT
from toporag_core.tasks import get_task

ROOT = Path(__file__).resolve().parents[1] / "assets" / "checkpoints"
FOLDERS = sorted(p for p in ROOT.iterdir() if (p / "config.json").is_file())


def test_both_task_checkpoints_are_shipped():
    assert {p.name for p in FOLDERS} >= {"expla_graphs", "scene_graphs"}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_shipped_checkpoint_matches_its_readme(folder):
    meta = json.loads((folder / "config.json").read_text())
    cfg = TopoRAGConfig.from_dict(meta["config"])
    assert meta["retrieval"].get("text", DEFAULT_TEXT) in TEXT_FORMATS
    with safe_open(folder / "model.safetensors", framework="pt") as f:
        names = list(f.keys())
        assert names and all(str(f.get_slice(n).get_dtype()) == "F16" for n in names)
    assert meta["weights_dtype"] == "float16"
    if cfg.mode == "lora":
        assert any("lora_" in n for n in names)
    readme = (folder / "README.md").read_text()
    # the first "How it was trained" section is the shipped run
    rev = re.search(r"## How it was trained \(code revision (\w+)", readme)
    assert rev and rev.group(1) == meta["code_revision"]
    cmd = re.search(r"\n    (?:\S+=\S+ )*toporag train (.*?)\n\n", readme[rev.end():], re.S)
    assert cmd, "no training command under the first 'How it was trained' heading"
    argv = shlex.split(cmd.group(1).replace("\\\n", " "), comments=True)
    # the layout options of the time are recipe settings now: read them off the command, parse the rest
    layout = {}
    for flag in ("--mode", "--graph-position"):
        if flag in argv:
            i = argv.index(flag)
            layout[flag[2:].replace("-", "_")] = argv[i + 1]
            del argv[i:i + 2]
    args = build_parser().parse_args(["train", *argv])  # the command as the CLI reads it, recipe and defaults included
    for key in ("mode", "graph_position"):  # a --recipe command carries them in the recipe
        layout.setdefault(key, getattr(args, key, None))
    assert args.dataset == meta["dataset"]
    assert (layout["graph_position"], args.question_first, args.max_input_tokens, layout["mode"]) == \
        (cfg.graph_position, cfg.question_first, cfg.max_input_tokens, cfg.mode)
    assert (args.num_graph_tokens, args.lora_r, args.lora_alpha) == (cfg.num_graph_tokens, cfg.lora_r, cfg.lora_alpha)
    assert args.answer_style == cfg.answer_style  # evidence-first targets are in the command when shipped so
    assert cfg.question_form == get_task(meta["dataset"]).prompt  # what training now stores: users' questions
    assert args.lora_targets == cfg.lora_targets
    assert (args.text or DEFAULT_TEXT) == meta["retrieval"].get("text", DEFAULT_TEXT)
    assert args.no_cells2 == (not meta["retrieval"]["use_cells2"])
    # the whole retrieval setting (method, k0/k1/k2, C2, edge cost, tree, text) as the command builds it
    # (a config saved before text formats has no "text": PrepConfig.from_dict reads it as CSV)
    assert prep_config_from_args(args).to_dict() == PrepConfig.from_dict(meta["retrieval"]).to_dict()
    train = meta["train"]
    assert (args.epochs, args.batch_size, args.lr, args.encoder_lr, args.seed) == \
        (train["epochs"], train["batch_size"], train["lr"], train["encoder_lr"], train["seed"])
    if args.max_train:
        assert meta["train_examples"] <= args.max_train
    # the precision the LLM trained in (config llm_dtype, fp32 before it was recorded) is the command's --dtype
    # (or auto, which resolves to it on the machine the README names)
    from toporag_core.model.llm import DTYPES, checkpoint_llm_dtype

    assert checkpoint_llm_dtype(meta) in DTYPES
    assert args.dtype == "auto" or DTYPES[args.dtype] == DTYPES[checkpoint_llm_dtype(meta)]
    if checkpoint_llm_dtype(meta) != "float32":
        assert checkpoint_llm_dtype(meta) in readme, "the README must say the LLM trained in bf16"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_shipped_configs_load_with_retired_keys_at_their_old_defaults(folder):
    """A shipped config saved before options were retired holds the retired keys at their old default
    values, which load (and are not written again); a newer one holds none. The same config with every retired
    key added at its old default (as it would have been saved before the retirements) loads as the same config."""
    from toporag_core.model import RETIRED_KEYS

    saved = json.loads((folder / "config.json").read_text())["config"]
    held = set(RETIRED_KEYS) & set(saved)  # a checkpoint saved after the retirements holds none of them
    assert all(saved[k] == RETIRED_KEYS[k] for k in held)
    cfg = TopoRAGConfig.from_dict(saved)
    assert not set(RETIRED_KEYS) & set(cfg.to_dict())
    assert TopoRAGConfig.from_dict(cfg.to_dict()) == cfg
    assert TopoRAGConfig.from_dict({**saved, **RETIRED_KEYS}) == cfg


@pytest.mark.parametrize("key, value", [("graph_norm", True), ("graph_label_weight", 0.5), ("num_virtual_tokens", 20),
                                        ("mode", "prompt_tuning"), ("graph_position", "suffix"),
                                        ("answer_style", "cited-loops")])
def test_a_checkpoint_config_with_a_retired_option_is_refused_clearly(tmp_path, key, value):
    """A retired option at another value than its old default: one ValueError naming the key and saying
    the option was retired, from the config alone and from loading the checkpoint folder (which names its
    config.json, before any LLM is loaded)."""
    from toporag_core.model import TopoRAGModel

    meta = json.loads((ROOT / "scene_graphs" / "config.json").read_text())
    meta["config"][key] = value
    with pytest.raises(ValueError, match=rf"^TopoRAGConfig\.{key}={value!r}: this option was retired") as e:
        TopoRAGConfig.from_dict(meta["config"])
    assert len(str(e.value).splitlines()) == 1
    (tmp_path / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf"config\.json: TopoRAGConfig\.{key}=.*was retired"):
        TopoRAGModel.load(tmp_path, llm=None)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_recipe_reproduces_its_checkpoint_config(folder):
    """`toporag train --recipe NAME` builds exactly the saved config.json of checkpoint NAME, field by field:
    the model config (given what the data decide: the embedding width, the answer length limit, and the
    training answers for --answer-set auto), the train config (select auto resolved by the answer set),
    the retrieval setting with tree and text format, the dataset, the data amounts and the LLM precision."""
    from dataclasses import asdict

    from toporag_core.model.llm import DTYPES, checkpoint_llm_dtype

    meta = json.loads((folder / "config.json").read_text())
    saved = TopoRAGConfig.from_dict(meta["config"])
    args = build_parser().parse_args(["train", "--recipe", folder.name])
    plan = plan_from_args(args)
    built = model_config(plan, args.dataset, saved.cwn.in_dim, closed_answer_set(args.answer_set, list(saved.answer_set)),
                         saved.max_new_tokens)
    got, want = built.to_dict(), saved.to_dict()
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key
    train = asdict(plan.train.resolved(built.answer_set))
    added = {"graph_only": 0.0, "min_token_spread": 0.0, "align_steps": 0, "align_lr": 1e-3,  # newer than a saved
             "align_margin": 0.5, "align_weight": 1.0, "joint_align_weight": 0.0,  # config: absent means these values
             "align_words": 0.0, "word_steps": 0}
    train = {k: v for k, v in train.items() if k in meta["train"] or added.get(k, object()) != v}
    retired = {"graph_pretrain_epochs": 0, "freeze_graph": False}  # saved by older code, at their neutral values
    assert {k: v for k, v in meta["train"].items() if k in retired} == {k: v for k, v in retired.items()
                                                                       if k in meta["train"]}
    assert train == {k: v for k, v in meta["train"].items() if k not in retired}
    assert plan.prep.to_dict() == PrepConfig.from_dict(meta["retrieval"]).to_dict()
    assert args.dataset == meta["dataset"] and args.max_eval == meta["val_examples"]
    assert args.max_train is None or meta["train_examples"] <= args.max_train
    assert args.dtype == "auto" or DTYPES[args.dtype] == DTYPES[checkpoint_llm_dtype(meta)]
