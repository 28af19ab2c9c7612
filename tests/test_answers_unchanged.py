"""The general checkpoint answers its first test questions exactly as the recorded reference
(``benchmarks/reference/answers/``, written by ``toporag eval`` with the LLM in float32). It is the
checkpoint whose answering uses the most of the code (seeded retrieval, the path match, the name reader,
label sets). ``benchmarks/bench_answers_unchanged.py`` (``make bench``) compares every shipped checkpoint on
its whole reference: three ``toporag eval`` runs would add about two minutes to the suite."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_answers_unchanged", ROOT / "benchmarks" / "bench_answers_unchanged.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

LIMITS = {"general": 12}


def test_compare_counts_differences():
    ref = [{"id": "a", "answer": "x", "probability": 0.5, "correct": True},
           {"id": "b", "answer": "y", "probability": 0.4, "correct": False}]
    now = [{"id": "a", "answer": "x", "probability": 0.51, "correct": True},
           {"id": "b", "answer": "z", "probability": 0.4, "correct": True}]
    c = bench.compare(ref, now)
    assert (c["n"], c["same"], c["differ"], c["missing"]) == (2, 1, ["b"], 0)
    assert c["max_dp"] == pytest.approx(0.01) and (c["ref_acc"], c["now_acc"]) == (0.5, 1.0)
    assert bench.compare(ref, now[:1])["missing"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LIMITS))
def test_shipped_checkpoint_answers_as_recorded(name, shared_data):
    ref = bench.reference(name)[:LIMITS[name]]
    assert len(ref) == LIMITS[name], f"no reference for {name}: run benchmarks/bench_answers_unchanged.py"
    now = bench.eval_records(name, LIMITS[name], threads=1)
    c = bench.compare(ref, now)
    assert c["missing"] == 0 and not c["differ"], json.dumps({"differ": c["differ"], "now": [
        (r["id"], r["answer"]) for r in now if r["id"] in c["differ"]]})
    # the same answers and, in float32, the same probabilities up to the order of a batch's sums
    assert c["max_dp"] < 1e-3
