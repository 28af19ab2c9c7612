"""Paired comparison of evaluation runs: exact McNemar and `toporag compare`."""
from __future__ import annotations

import json
from math import comb

import pytest

from toporag_core.cli import main
from toporag_core.evaluation.evaluate import paired_table
from toporag_core.predictions import read_predictions
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


def test_paired_table_by_group_tests_within_each_type_and_template(tmp_path, capsys):
    """``--by qtype`` / ``--by template``: the all-examples rows, then the same rows within each group
    (counts recomputed on that group only); the grouping reads the reference's records."""
    from toporag_core.evaluation.evaluate import prediction_group

    qs = [("0-cell", "What colour is the cup?", "red"), ("0-cell", "Is the cup red?", "yes"),
          ("1-cell", "What is on the table?", "cup"), ("1-cell", "Is the cup on the table?", "no"),
          ("2-cell", "The cup is on the table, the table is behind the chair, and the chair is in front of the "
                     "cup: what colour is the chair?", "blue")]
    ca, cb = [True, True, False, True, False], [False, True, True, True, True]
    a = _write(tmp_path / "a.jsonl", [{"id": i, "qtype": t, "question": f"Question: {q}\nAnswer:", "gold": g,
                                       "correct": c} for i, ((t, q, g), c) in enumerate(zip(qs, ca))])
    b = _write(tmp_path / "b.jsonl", [{"id": i, "qtype": t, "question": q, "gold": g, "correct": c}
                                      for i, ((t, q, g), c) in enumerate(zip(qs, cb))])
    rows = paired_table({"a": a, "b": b}, "a", group=prediction_group("qtype"))
    by = {(r["group"], r["run"]): r for r in rows}
    assert [r["group"] for r in rows if r["run"] == "a"] == ["all", "0-cell", "1-cell", "2-cell"]
    assert (by[("all", "b")]["only_this_right"], by[("all", "b")]["only_reference_right"]) == (2, 1)
    assert (by[("0-cell", "b")]["only_this_right"], by[("0-cell", "b")]["only_reference_right"]) == (0, 1)
    assert by[("1-cell", "b")]["n"] == 2 and by[("1-cell", "b")]["accuracy"] == 1.0
    assert by[("2-cell", "a")]["accuracy"] == 0.0 and by[("2-cell", "majority (blue)")]["accuracy"] == 1.0
    rows = paired_table({"a": a, "b": b}, "a", group=prediction_group("template"))
    groups = [r["group"] for r in rows if r["run"] == "a"]
    assert groups == ["all", "0-cell/colour", "0-cell/is-colour", "1-cell/is-rel", "1-cell/one-hop", "2-cell/colour"]
    assert all(r["group"] == "all" for r in paired_table({"a": a, "b": b}, "a"))
    # --by coverage: the reference's support_covered; a record without a true/false one is in no group
    for path, flags in ((a, [True, False, True, [1], False]), (b, [False, False, True, True, True])):
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        _write(path, [{**r, "support_covered": f} for r, f in zip(recs, flags)])
    rows = paired_table({"a": a, "b": b}, "a", group=prediction_group("coverage"))
    by = {(r["group"], r["run"]): r for r in rows}
    assert [r["group"] for r in rows if r["run"] == "a"] == ["all", "answer objects missed", "answer objects retrieved"]
    assert by[("answer objects retrieved", "a")]["n"] == 2 and by[("answer objects retrieved", "a")]["accuracy"] == 0.5
    assert by[("answer objects missed", "b")]["n"] == 2 and by[("answer objects missed", "b")]["accuracy"] == 1.0
    assert (by[("answer objects missed", "b")]["only_this_right"], by[("all", "b")]["n"]) == (1, 5)
    with pytest.raises(ValueError, match="unknown grouping"):
        prediction_group("colour")
    assert main(["compare", f"a={a}", f"b={b}", "--by", "qtype"]) == 0
    out = capsys.readouterr().out
    assert "| 1-cell | b | 2 | 1.000 | 1 | 0 |" in out


def test_pooled_samples_pair_each_sample_with_itself(tmp_path, capsys):
    """``NAME=F1,F2``: two samples whose ids repeat are pooled, sample k paired with sample k only;
    the counts are the sums of the per-sample discordant pairs and the test reads them together."""
    from toporag_core.evaluation.evaluate import read_pooled

    # sample 1: ids 0-3; sample 2: the same ids, other outcomes
    a1 = _write(tmp_path / "a1.jsonl", [{"id": i, "correct": c} for i, c in enumerate([True, True, False, True])])
    b1 = _write(tmp_path / "b1.jsonl", [{"id": i, "correct": c} for i, c in enumerate([False, True, False, False])])
    a2 = _write(tmp_path / "a2.jsonl", [{"id": i, "correct": c} for i, c in enumerate([True, True, True, False])])
    b2 = _write(tmp_path / "b2.jsonl", [{"id": i, "correct": c} for i, c in enumerate([False, False, True, True])])
    pooled = read_pooled([a1, a2])
    assert sorted(pooled) == ["0:0", "0:1", "0:2", "0:3", "1:0", "1:1", "1:2", "1:3"]
    assert pooled["1:2"]["correct"] is True and pooled["0:2"]["correct"] is False
    one = {r["run"]: r for r in paired_table({"a": a1, "b": b1}, "a")}["b"]
    two = {r["run"]: r for r in paired_table({"a": a2, "b": b2}, "a")}["b"]
    both = {r["run"]: r for r in paired_table({"a": [a1, a2], "b": [b1, b2]}, "a")}["b"]
    assert both["n"] == 8 and both["accuracy"] == 3 / 8
    assert both["only_this_right"] == one["only_this_right"] + two["only_this_right"] == 1
    assert both["only_reference_right"] == one["only_reference_right"] + two["only_reference_right"] == 4
    assert both["p_value"] == pytest.approx(2 * (comb(5, 0) + comb(5, 1)) / 2 ** 5)
    with pytest.raises(ValueError, match="same number of sample files"):
        paired_table({"a": [a1, a2], "b": b1}, "a")
    assert main(["compare", f"a={a1},{a2}", f"b={b1},{b2}"]) == 0
    assert "| all | b | 8 | 0.375 | 1 | 4 |" in capsys.readouterr().out
    assert main(["compare", f"a={a1},", f"b={b1}"]) != 0
    assert "empty file name" in capsys.readouterr().err
