"""toporag_core.predictions: the strict reader (file, line and field in every error), the lenient
reader (aliases, one message per bad line, the rest kept), the atomic writer, shard merging and
`toporag eval merge`."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from toporag_core import predictions as P
from toporag_core.cli import main


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(x + "\n" for x in lines))
    return path


def test_eval_record_has_the_documented_fields_in_order():
    rec = P.eval_record(id="e1", qtype=None, question="q", gold="support", answer="support", probability=0.9,
                        correct=True, clean=True, seconds=0.1, raw="support.", cells={}, context="c",
                        method="toporag", dataset="expla_graphs")
    from toporag_core.predictions.schema import OPTIONAL_FIELDS

    assert tuple(rec) == tuple(k for k in P.FIELDS if k not in OPTIONAL_FIELDS)
    assert rec["prediction"] == rec["answer"] and rec["label"] == rec["gold"]
    assert rec["confidence"] == 0.9  # the probability, unless the decoder gives another number to judge
    assert P.eval_record(**{k: rec[k] for k in rec if k not in ("prediction", "label", "confidence")},
                         confidence=0.3)["confidence"] == 0.3
    full = P.eval_record(**{k: rec[k] for k in rec if k not in ("prediction", "label")}, evidence="e",
                         support_covered=False, unsupported_claims=["e"], low_confidence=True)
    assert tuple(full) == P.FIELDS
    assert json.loads(P.record_line(full)) == full and P.record_line(full).endswith("}\n")


@pytest.mark.parametrize("line, message", [
    ("not json", "line 2: not JSON"),
    ("[1, 2]", "line 2: not a JSON object (got list)"),
    ('{"correct": true}', "line 2: field 'id' is missing"),
    ('{"id": 2}', "line 2: field 'correct' is missing"),
    ('{"id": 2, "correct": "yes"}', "line 2: field 'correct' must be true or false"),
    ('{"id": [2], "correct": true}', "line 2: field 'id' must be a string or a whole number"),
])
def test_strict_reader_names_file_line_and_field(tmp_path, line, message):
    path = _write(tmp_path / "p.jsonl", ['{"id": 1, "correct": true}', line])
    with pytest.raises(ValueError) as e:
        P.read_records(path, ("id", "correct"))
    assert str(e.value).startswith(f"{path}, {message}")


def test_strict_reader_skips_a_cut_line_only_when_asked(tmp_path):
    path = _write(tmp_path / "p.jsonl", ['{"id": 1, "correct": true}', "", '{"id": 2, "correct": fal'])
    assert [r["id"] for r in P.read_records(path, skip_cut=True)] == [1]
    with pytest.raises(ValueError, match=r"p\.jsonl, line 3: not JSON"):
        P.read_records(path)
    with pytest.raises(ValueError, match=r"nope\.jsonl: no such predictions file"):
        P.read_records(tmp_path / "nope.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(ValueError, match=r"bin\.jsonl: not UTF-8"):
        P.read_records(tmp_path / "bin.jsonl")


def test_lenient_reader_takes_answer_gold_and_skips_a_bad_line_keeping_the_rest():
    lines = [json.dumps({"id": 1, "question": "Where is the Eiffel Tower?", "answer": "Paris", "gold": ["Paris"]}),
             json.dumps({"id": 2, "pred": "Lyon", "target": "Paris", "correct": False}),
             json.dumps({"id": 3, "answer": "x"}),
             '{"id": 4, "answer": "supp',
             json.dumps({"id": 5, "prediction": "support", "answers": "counter", "dataset": "expla_graphs"})]
    p = P.parse_lenient("\n".join(lines), "mine.jsonl")
    assert [(r["id"], r["prediction"], r["label"], r["correct"], r["line"]) for r in p.records] == [
        ("1", "Paris", ["Paris"], True, 1), ("2", "Lyon", "Paris", False, 2), ("5", "support", "counter", False, 5)]
    assert p.records[0]["question"] == "Where is the Eiffel Tower?" and p.records[0]["cells"] == {
        "nodes": [], "edges": [], "cells2": []}
    assert [e.line for e in p.errors] == [3, 4]
    assert p.messages()[0] == f"mine.jsonl, line 3: missing field(s) {P.field_names('label')}"
    assert p.messages()[1].startswith("mine.jsonl, line 4: not valid JSON")
    bad = P.parse_lenient(json.dumps({"id": 1, "answer": "x", "gold": {"a": 1}}), "m.jsonl")
    assert str(bad.errors[0]) == "line 1: field 'gold' must be a string or a list, got dict"
    # the canonical name wins over an alias; the upload's bytes read the same as its text
    both = P.load_lenient(json.dumps({"id": 1, "prediction": "Paris", "answer": "Lyon", "label": "Paris"}).encode(), "u")
    assert both.records[0]["prediction"] == "Paris" and both.records[0]["correct"] is True
    assert "answer" in P.accepted_fields() and "gold" in P.accepted_fields()


def test_lenient_reader_takes_lines_without_ids_and_the_common_field_names():
    lines = [json.dumps({"question": "q", "answer": "Paris", "gold": "Paris"}),
             json.dumps({"prediction": "Lyon", "answer": "Paris"}),  # answer = the reference here
             json.dumps({"question_id": 7, "response": "x", "expected": "y"}),
             json.dumps({"id": [1], "answer": "a", "gold": "a"}),
             json.dumps({"output": "a"})]
    p = P.parse_lenient("\n".join(lines), "plain.jsonl")
    assert [(r["id"], r["prediction"], r["label"], r["correct"]) for r in p.records] == [
        ("1", "Paris", "Paris", True), ("2", "Lyon", "Paris", False), ("7", "x", "y", False)]
    assert p.messages()[0] == "plain.jsonl, line 4: field 'id' must be a string or a number, got [1]"
    assert p.messages()[1].startswith("plain.jsonl, line 5: missing field(s) label (or gold, answers")
    # an answer that is the only prediction field stays the prediction
    solo = P.parse_lenient(json.dumps({"answer": "Paris", "target": "Paris"}), "s.jsonl")
    assert solo.records[0]["prediction"] == "Paris" and solo.records[0]["label"] == "Paris"


def test_merge_round_trip_and_order(tmp_path):
    recs = [P.eval_record(id=f"e{i}", qtype="t", question=f"q{i}", gold="yes", answer="yes" if i % 2 else "no",
                          probability=0.5, correct=bool(i % 2), clean=True, seconds=0.01, raw="", cells={},
                          context="", method="toporag", dataset="scene_graphs") for i in range(7)]
    parts = [P.write_predictions(tmp_path / f"p.shard-{i}-of-3.jsonl", recs[i::3]) for i in range(3)]
    out = tmp_path / "merged.jsonl"
    order = [r["id"] for r in recs] + ["e99"]
    res = P.merge(parts, out, order=order)
    assert P.read_records(out) == recs  # every field back, in the original order
    assert res == {"n": 7, "correct": 3, "accuracy": 3 / 7, "missing": ["e99"]}
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic writer left nothing behind
    assert P.merge(parts, tmp_path / "none.jsonl", order=[])["n"] == 0 and P.read_records(tmp_path / "none.jsonl") == []
    P.merge([parts[0], parts[0]], out)  # the same line twice is kept once
    assert len(P.read_records(out)) == 3
    _write(parts[1], [json.dumps({**recs[0], "correct": True})])
    with pytest.raises(ValueError, match=r"p\.shard-1-of-3\.jsonl, line 1, field 'id': 'e0' also in"):
        P.merge(parts, out)


def test_eval_merge_via_the_cli(tmp_path, capsys):
    a = _write(tmp_path / "p.shard-0-of-2.jsonl", ['{"id": "b", "correct": true}'])
    b = _write(tmp_path / "p.shard-1-of-2.jsonl", ['{"id": "a", "correct": false}'])
    order = _write(tmp_path / "order.txt", ["a", '{"id": "b"}'])
    out = tmp_path / "p.jsonl"
    assert main(["eval", "merge", str(a), str(b), "--out", str(out), "--order-from", str(order)]) == 0
    assert json.loads(capsys.readouterr().out) == {"n": 2, "correct": 1, "accuracy": 0.5, "missing": []}
    assert [r["id"] for r in P.read_records(out)] == ["a", "b"]
    _write(b, ['{"id": "a", "correct": false}', '{"correct": true}'])
    assert main(["eval", "merge", str(a), str(b), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "p.shard-1-of-2.jsonl, line 2: field 'id' is missing" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as e:
        main(["eval", "merge", str(a)])
    assert e.value.code == 2 and "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "typo"])
    assert "the one sub-command is `merge SHARDS... --out FILE`" in capsys.readouterr().err
