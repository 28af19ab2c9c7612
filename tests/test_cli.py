"""The ``toporag`` command-line contract: names, JSON keys, one-line errors, exit codes."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from toporag_core.cli import main

SCENE = "head,relation,tail\ncup,left of,plate\nplate,on,table\ntable,under,cup\nlamp,on,table\n"


@pytest.fixture
def scene(tmp_path):
    p = tmp_path / "scene.csv"
    p.write_text(SCENE)
    return p


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_lift_json(capsys, scene):
    code, out, _ = run(capsys, "lift", scene, "--json")
    assert code == 0
    d = json.loads(out)
    for key in ("nodes", "edges", "cells2", "components", "betti1", "boundary_ok", "seconds"):
        assert key in d
    assert (d["nodes"], d["edges"], d["cells2"], d["components"], d["betti1"], d["boundary_ok"]) == (4, 4, 1, 1, 1, True)


def test_lift_options(capsys, scene):
    code, out, _ = run(capsys, "lift", scene, "--tree", "random", "--seed", "3", "--max-cycle-len", "2", "--json")
    d = json.loads(out)
    assert code == 0 and d["cells2"] == 0 and d["skipped_cycles"] == 1 and d["tree"] == "random"


@pytest.mark.parametrize("method", ["toporag", "g-retriever", "shortest-path", "topk-triples"])
def test_retrieve_json(capsys, scene, method):
    own = ("--k2", 1, "--c2", 0.1) if method == "toporag" else ()  # options a method does not take are errors
    code, out, _ = run(capsys, "retrieve", scene, "--question", "is the cup left of the plate", "--method", method,
                       "--k", 3, *own, "--encoder", "hashing", "--json")
    assert code == 0
    d = json.loads(out)
    assert set(d) >= {"nodes", "edges", "cells2", "seconds"}
    assert all(isinstance(t, str) for t in d["nodes"])
    assert all(len(e) == 3 for e in d["edges"])
    assert all(isinstance(c, list) for c in d["cells2"])
    if method == "toporag":
        assert sorted(d["cells2"][0]) == ["cup", "plate", "table"]


def test_retrieve_topology_methods(capsys, scene):
    code, out, _ = run(capsys, "retrieve", scene, "--method", "proximity", "--target", "cup", "--k", 2, "--json")
    d = json.loads(out)
    assert code == 0 and len(d["nodes"]) == 2 and "cup" not in d["nodes"]


@pytest.mark.parametrize("content,needle", [
    ("head,relation,tail\ncup,on\n", "line 2"),
    ("[[\"a\", \"r\"]", "record 0"),  # streamed: the first bad item is met before the missing ']'
    ("[[\"a\", \"r\", \"b\"]", "line 1: invalid JSON"),
    ("", "empty"),
])
def test_bad_input_is_one_line_and_nonzero(capsys, tmp_path, content, needle):
    p = tmp_path / ("bad.json" if content.startswith("[") else "bad.csv")
    p.write_text(content)
    code, out, err = run(capsys, "lift", p, "--json")
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1 and "bad.json" in err or "bad.csv" in err
    assert needle in err


def test_missing_file_and_missing_question(capsys, scene, tmp_path):
    code, _, err = run(capsys, "lift", tmp_path / "nope.csv")
    assert code != 0 and "nope.csv" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "retrieve", scene, "--encoder", "hashing")
    assert code != 0 and "--question" in err


@pytest.mark.slow
def test_console_script_entry_point(scene):
    proc = subprocess.run([sys.executable, "-m", "toporag_core.cli", "lift", str(scene), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["cells2"] == 1


def test_ask_headerless_warns_on_stderr_and_still_answers(tmp_path, capsys, monkeypatch):
    from toporag_core.model.tiny import build_tiny_checkpoint

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    ckpt = build_tiny_checkpoint(tmp_path / "ckpt")
    p = tmp_path / "people.csv"
    p.write_text("name,age,city\nAda,36,London\n")
    code, out, err = run(capsys, "ask", p, "-q", "Who lives in London?", "--checkpoint", ckpt, "--device", "cpu",
                         "--json")
    assert code == 0 and "answer" in json.loads(out)
    assert "toporag: warning: line 1 read as data: no header recognised" in err


def test_lift_headerless_warns_on_stderr_and_in_json(tmp_path, capsys):
    p = tmp_path / "plain.csv"
    p.write_text("cup,on,table\nplate,on,table\n")
    code, out, err = run(capsys, "lift", p, "--json")
    assert code == 0 and json.loads(out)["warnings"] == ["line 1 read as data: no header recognised (a header is "
                                                         "head,relation,tail or an alias)"]
    assert err.startswith("toporag: warning: line 1 read as data")


def test_argparse_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["lift"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and "the following arguments are required" in err


def help_options(text: str) -> list[str]:
    """The option strings an argparse help lists (``-h, --help``: two)."""
    import re

    out = []
    for line in text.splitlines():
        m = re.match(r"^  (-\S.*?)(?:  |$)", line)
        if m:
            out += [part.split()[0] for part in m.group(1).split(", ") if part.startswith("-")]
    return out


def test_train_help_lists_at_most_45_options_and_help_all_lists_the_rest(capsys):
    """The main `toporag train --help` shows what a user needs (<= 45 option strings); `--help-all`
    shows every option, the advanced ones too; an advanced option still parses."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    main_help = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "--help-all"])
    full = capsys.readouterr().out
    shown, every = help_options(main_help), help_options(full)
    assert "--recipe" in shown and "--tree" in shown and len(set(shown)) == len(shown)
    assert len(shown) <= 45 and set(every) > set(shown)
    assert "--lr " in main_help and "--bucket" not in main_help and "--bucket" in full and "--weight-decay" in full
    assert build_parser_args("--bucket", "1").bucket == 1


def build_parser_args(*argv):
    from toporag_core.cli import build_parser

    return build_parser().parse_args(["train", *argv])


def test_train_option_defaults_are_the_config_dataclass_defaults(capsys):
    """Each option made from a config field has that field's default (the dataclass is the one source),
    and no option exposes a retired experiment."""
    import dataclasses

    from toporag_core.commands.train import DataOptions, RunOptions
    from toporag_core.model import TopoRAGConfig
    from toporag_core.nn import CWNConfig
    from toporag_core.training import TrainConfig

    args = build_parser_args()
    checked = 0
    for cls in (TrainConfig, TopoRAGConfig, CWNConfig, DataOptions, RunOptions):
        for f in dataclasses.fields(cls):
            if hasattr(args, f.name) and not (cls is TopoRAGConfig and f.name == "answer_set"):
                default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
                assert getattr(args, f.name) == default, (cls.__name__, f.name)
                checked += 1
    assert checked >= 35
    for gone in ("graph_norm", "graph_label_weight", "mode", "num_virtual_tokens", "graph_position",
                 "graph_pretrain_epochs", "freeze_graph"):
        assert not hasattr(args, gone)
    with pytest.raises(SystemExit):
        main(["train", "--help-all"])
    flags = set(help_options(capsys.readouterr().out))
    assert not flags & {"--graph-norm", "--graph-label-weight", "--mode", "--graph-position",
                        "--graph-pretrain-epochs", "--freeze-graph"}
    for argv in (["--text", "keyed"], ["--text", "short-loops"], ["--answer-style", "cited-loops"]):
        with pytest.raises(SystemExit):
            build_parser_args(*argv)


def test_recipe_then_overrides(tmp_path, capsys):
    """`--recipe NAME` sets a shipped checkpoint's setting; options after it override it; a path to a
    .toml file works the same; an unknown key or a wrong type is one line naming the file, line and key."""
    args = build_parser_args("--recipe", "scene_graphs", "--lr", "1e-3", "--epochs", "1")
    assert (args.lr, args.epochs, args.encoder_lr, args.lora_r, args.text) == (1e-3, 1, 1e-4, 16, "compact")
    assert args.graph_position == "before_question" and args.lora_targets[-1] == "down_proj"
    recipe = tmp_path / "mine.toml"
    recipe.write_text('# a small recipe\nlr = 2e-4\nlora_r = 4\n')
    args = build_parser_args("--recipe", str(recipe), "--lora-r", "2")
    assert (args.lr, args.lora_r, args.epochs) == (2e-4, 2, 10)
    recipe.write_text('graph_path = "cells"\ncell_order = [0, 2, 1]\n')
    assert build_parser_args("--recipe", str(recipe)).cell_order == (0, 2, 1)
    for text, needle in (('cell_order = [0, "x"]\n', "line 1, 'cell_order': expected a list of strings or of integers"),
                         ('lr = 2e-4\n\nlearning_rate = 1\n', "line 3, 'learning_rate': not an option"),
                         ('lr = 2e-4\nepochs = "two"\n', "line 2, 'epochs': expected int, got 'two'"),
                         ('lr = \n', "mine.toml"), ):
        recipe.write_text(text)
        with pytest.raises(SystemExit) as e:
            main(["train", "--recipe", str(recipe)])
        err = capsys.readouterr().err
        assert e.value.code == 2 and needle in err and str(recipe) in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        main(["train", "--recipe", "no_such_recipe"])
    assert "shipped recipes: expla_graphs, general, scene_graphs," in capsys.readouterr().err


def test_the_scene_alignment_recipes_hold_the_word_target_stage_and_its_joint_stage():
    """recipes/scene_graphs_align.toml (word steps, then alignment steps, then stop) and scene_graphs_joint.toml
    (the joint stage with the alignment loss as a term) build valid plans on the same model."""
    from toporag_core.commands.train import plan_from_args

    align, joint = (plan_from_args(build_parser_args("--recipe", r)) for r in ("scene_graphs_align", "scene_graphs_joint"))
    assert (align.train.word_steps, align.train.align_words, align.train.align_steps, align.train.max_steps) == \
        (3000, 5.0, 100, 0)
    assert (joint.train.align_steps, joint.train.joint_align_weight, joint.train.align_words, joint.train.graph_only) == \
        (0, 1.0, 5.0, 0.5)
    for key in ("graph_path", "cell_order", "num_graph_tokens", "tokens_per_cell", "lora_r", "text"):
        assert getattr(build_parser_args("--recipe", "scene_graphs_align"), key) == \
            getattr(build_parser_args("--recipe", "scene_graphs_joint"), key), key
    assert build_parser_args("--recipe", "scene_graphs_joint").tokens_per_cell == 4


def test_the_scene_names_recipe_is_the_joint_stage_with_the_tokened_attributes_out_of_the_text():
    """recipes/scene_graphs_names.toml: recipes/scene_graphs_joint.toml plus ``token_text = "names"``, nothing else."""
    from toporag_core.commands.train import plan_from_args

    joint, names = (plan_from_args(build_parser_args("--recipe", r)) for r in ("scene_graphs_joint", "scene_graphs_names"))
    assert (joint.model.get("token_text", "full"), names.model["token_text"]) == ("full", "names")
    assert {k: v for k, v in names.model.items() if k != "token_text"} == \
        {k: v for k, v in joint.model.items() if k != "token_text"}
    assert names.train == joint.train and names.prep == joint.prep


def test_the_expla_recipe_puts_the_relations_in_three_tokens_per_cell_and_aligns_them_first():
    """recipes/expla_graphs.toml: the cell path, relations first, three tokens per cell and ``token_text =
    "relations"``; word steps, alignment steps, then the joint stage with the readback term."""
    from toporag_core.commands.train import plan_from_args

    rel = plan_from_args(build_parser_args("--recipe", "expla_graphs"))
    m = rel.model
    assert (m["graph_path"], m["num_graph_tokens"], m["tokens_per_cell"], m["token_text"]) == ("cells", 12, 3, "relations")
    assert tuple(m.get("cell_order", (1, 2, 0)))[0] == 1  # relations first
    t = rel.train
    assert (t.word_steps, t.align_steps, t.align_words, t.joint_align_weight, t.graph_only) == (3000, 100, 5.0, 1.0, 0.5)


def test_a_true_false_option_takes_only_true_or_false_words(capsys, scene):
    args = ("retrieve", scene, "--question", "what is on the table", "--method", "toporag-seeded", "--encoder",
            "hashing", "--json")
    for word, on in (("off", False), ("No", False), ("0", False), ("true", True), ("yes", True)):
        code, out, _ = run(capsys, *args, "--synonyms", word)
        assert code == 0 and json.loads(out)["params"]["synonyms"] is on
    with pytest.raises(SystemExit) as e:  # a typo is an error naming the option, not a silent "false"
        run(capsys, *args, "--synonyms", "flase")
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--synonyms" in err and "true or false" in err and "'flase'" in err
