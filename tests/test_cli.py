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


def test_console_script_entry_point(scene):
    proc = subprocess.run([sys.executable, "-m", "toporag_core.cli", "lift", str(scene), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["cells2"] == 1


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


@pytest.mark.parametrize("flags, needs", [(["--graph-pretrain-epochs", "3"], "--graph-label-weight"),
                                          (["--freeze-graph"], "--graph-pretrain-epochs")])
def test_train_refuses_inconsistent_graph_flags_before_loading_anything(capsys, tmp_path, flags, needs):
    """Pretraining needs the label head, freezing needs pretraining: refused in one line, exit 2,
    before the data are prepared or the LLM loaded (nothing is written to --out)."""
    code, out, err = run(capsys, "train", "--dataset", "expla_graphs", "--data-dir", tmp_path / "absent",
                         "--out", tmp_path / "run", *flags)
    assert code == 2 and needs in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
