"""Answer for answer: every shipped checkpoint answers its test questions as the recorded reference does.

The reference (``benchmarks/reference/answers/<checkpoint>.jsonl``: ``id``, ``answer``,
``probability`` per question) was written by ``toporag eval`` with the LLM in float32 (bf16 answers
depend on the CPU's kernels: docs/results/benchmarks.md); this script runs the same command with
today's code and compares question by question. A restructuring that changes behaviour shows up here
as differing answers.

    python benchmarks/bench_answers_unchanged.py                 # every checkpoint with a reference
    python benchmarks/bench_answers_unchanged.py --only expla_graphs --limit 40
    python benchmarks/bench_answers_unchanged.py --write-reference   # record today's answers

Prints one row per checkpoint: questions compared, same answers, differing answers, accuracy of
the reference and of today's code on the same questions, and the largest probability change.
Exits 1 when any answer differs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "reference" / "answers"
# checkpoint -> (dataset, extra eval arguments, test questions compared: the first n of the test split)
RUNS = {
    "expla_graphs": ("expla_graphs", [], 554),
    "scene_graphs": ("scene_graphs", [], 64),
    "general": ("general", ["--data-dir", "data/general-n360-s3"], 96),
}
GENERAL_DATA = ["data", "general", "--n", "360", "--seed", "3", "--out", "data/general-n360-s3"]


def eval_records(name: str, limit: int, threads: int) -> list[dict]:
    """``toporag eval`` of checkpoint ``name`` on the first ``limit`` test questions (records), the LLM in
    float32: bf16 matrix products round differently on different CPUs (AVX512-BF16 and AMX kernels), so a
    bf16 reference recorded on one machine flips near-tied answers on another."""
    dataset, extra, _ = RUNS[name]
    if name == "general" and not (ROOT / "data" / "general-n360-s3").is_dir():
        subprocess.run([sys.executable, "-m", "toporag_core.cli", *GENERAL_DATA], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "preds.jsonl"
        cmd = [sys.executable, "-m", "toporag_core.cli", "eval", "--dataset", dataset, "--checkpoint",
               f"assets/checkpoints/{name}", "--split", "test", "--limit", str(limit), "--threads", str(threads),
               "--dtype", "float32", *extra, "--out", str(out)]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def reference(name: str) -> list[dict]:
    path = REFERENCE / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def compare(ref: list[dict], now: list[dict]) -> dict:
    """Same / differing answers of the questions both runs answered, accuracies and the largest |dp|."""
    by_id = {r["id"]: r for r in now}
    pairs = [(r, by_id[r["id"]]) for r in ref if r["id"] in by_id]
    differ = [r["id"] for r, n in pairs if r["answer"] != n["answer"]]
    dp = [abs(r["probability"] - n["probability"]) for r, n in pairs
          if r.get("probability") is not None and n.get("probability") is not None]
    return {"n": len(pairs), "same": len(pairs) - len(differ), "differ": differ,
            "ref_acc": sum(bool(r.get("correct")) for r, _ in pairs) / max(len(pairs), 1),
            "now_acc": sum(bool(n.get("correct")) for _, n in pairs) / max(len(pairs), 1),
            "max_dp": max(dp, default=0.0), "missing": len(ref) - len(pairs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(RUNS), action="append", help="checkpoint(s) to check (default all)")
    ap.add_argument("--limit", type=int, default=None, help="compare the first N questions only")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--write-reference", action="store_true", help="record today's answers as the reference")
    args = ap.parse_args(argv)
    names = args.only or sorted(RUNS)
    print("| checkpoint | questions | same answers | differ | reference acc | today acc | max abs dp |")
    print("|---|---|---|---|---|---|---|")
    bad = 0
    for name in names:
        limit = args.limit or RUNS[name][2]
        now = eval_records(name, limit, args.threads)
        if args.write_reference:
            REFERENCE.mkdir(parents=True, exist_ok=True)
            keep = [{k: r.get(k) for k in ("id", "answer", "probability", "correct")} for r in now]
            (REFERENCE / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep))
            print(f"| {name} | {len(now)} | written | | | | |")
            continue
        ref = reference(name)[:limit]
        if not ref:
            print(f"| {name} | no reference | | | | | |")
            continue
        c = compare(ref, now)
        bad += len(c["differ"]) + c["missing"]
        print(f"| {name} | {c['n']} | {c['same']} | {len(c['differ'])} | {c['ref_acc']:.3f} | {c['now_acc']:.3f} "
              f"| {c['max_dp']:.2g} |")
        if c["differ"]:
            print(f"  differing ids: {', '.join(c['differ'][:20])}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
