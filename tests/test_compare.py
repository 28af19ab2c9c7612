"""Paired comparison of evaluation runs: exact McNemar and `toporag compare`."""
from __future__ import annotations

import json
from math import comb

import pytest

from toporag_core.cli import main
from toporag_core.evaluate import paired_table, read_predictions
from toporag_core.metrics import mcnemar_exact


def test_mcnemar_exact_counts_discordant_pairs_and_matches_the_binomial():
    a = [True, True, True, False, True, False, True, True]
    b = [False, False, True, False, False, True, True, False]
    x, y, p = mcnemar_exact(a, b)
    assert (x, y) == (4, 1)  # concordant pairs do not count
    assert p == pytest.approx(2 * (comb(5, 0) + comb(5, 1)) / 2 ** 5)  # 0.375
    assert mcnemar_exact(a, a) == (0, 0, 1.0)
    assert mcnemar_exact([True] * 20, [False] * 20)[2] == pytest.approx(2 / 2 ** 20)
    with pytest.raises(ValueError, match="differ in length"):
        mcnemar_exact([True], [True, False])


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_paired_table_uses_common_ids_and_adds_majority(tmp_path):
    golds = ["support", "support", "counter", "support"]
    a = _write(tmp_path / "a.jsonl", [{"id": i, "gold": g, "correct": c}
                                      for i, (g, c) in enumerate(zip(golds, [True, True, True, False]))])
    b = _write(tmp_path / "b.jsonl", [{"id": i, "gold": g, "correct": c}
                                      for i, (g, c) in enumerate(zip(golds + ["counter"], [False, True, False, True,
                                                                                         True]))])
    rows = {r["run"]: r for r in paired_table({"a": a, "b": b}, "a")}
    assert rows["a"]["reference"] and rows["a"]["accuracy"] == 0.75 and rows["a"]["n"] == 4
    assert rows["b"]["accuracy"] == 0.5 and rows["b"]["answered"] == 5  # id 4 only in b: not compared
    assert (rows["b"]["only_this_right"], rows["b"]["only_reference_right"]) == (1, 2)
    assert rows["majority (support)"]["accuracy"] == 0.75


def test_bad_prediction_files_name_file_line_and_field(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "correct": true}\n{"id": 2}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: field 'correct' is missing"):
        read_predictions(bad)
    bad.write_text('{"id": 1, "correct": true}\nnot json\n')
    with pytest.raises(ValueError, match=r"line 2: not JSON"):
        read_predictions(bad)
    bad.write_text('{"id": 1, "correct": true}\n{"id": 1, "correct": false}\n')
    with pytest.raises(ValueError, match=r"line 2: field 'id' 1 repeats"):
        read_predictions(bad)
    good = _write(tmp_path / "g.jsonl", [{"id": 1, "correct": True}])
    assert main(["compare", f"x={good}", f"y={bad}"]) != 0  # one clear line, no traceback
    assert "repeats" in capsys.readouterr().err
    assert main(["compare", f"x={good}", f"y={good}", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in rows] == ["x", "y"] and rows[1]["p_value"] == 1.0
