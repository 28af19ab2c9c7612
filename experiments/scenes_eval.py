"""Evaluate SceneGraphs checkpoints on one fixed, stratified test subset; print per-type accuracy.

Every method is scored on exactly the same questions: ``--per-type`` of each question type
(0-/1-/2-cell), spread over the test images (at most ``ceil(per_type / images)`` questions
of a type per image, in file order). Predictions go to ``<run>/test_subset.jsonl`` (the
``toporag eval`` format, with ``qtype``); the table is built from those files by
:func:`toporag_core.tasks.scenes.accuracy_by_type`.

    .venv/bin/python experiments/scenes_eval.py runs/scenes_toporag runs/scenes_gretriever ...
    .venv/bin/python experiments/scenes_eval.py --table-only runs/scenes_*   # just the table
"""
from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import torch

from toporag_core.predictions import read_records
from toporag_core.tasks import load_raw
from toporag_core.tasks.prep import PrepConfig, prepare_dataset
from toporag_core.retrieval.report import format_table
from toporag_core.tasks.scenes import QUESTION_TYPES, accuracy_by_type


def subset_ids(raw_test, per_type: int) -> list[str]:
    """Ids of the stratified subset (one pass over the split in order, quotas per type and image)."""
    images = {id(e.graph) for e in raw_test}
    cap = max(1, math.ceil(per_type / max(len(images), 1)))
    left, per_image, ids = Counter({t: per_type for t in QUESTION_TYPES}), Counter(), []
    for e in raw_test:
        key = (id(e.graph), e.qtype)
        if left[e.qtype] > 0 and per_image[key] < cap:
            ids.append(e.id)
            left[e.qtype] -= 1
            per_image[key] += 1
    return ids


def checkpoint_setting(ckpt: Path) -> PrepConfig:
    """The preprocessing a checkpoint was trained with (``config.json``)."""
    meta = json.loads((ckpt / "config.json").read_text())
    s = dict(meta.get("retrieval", {}))
    if not meta["config"]["cwn"].get("use_cells2", True):
        s["use_cells2"] = False
    return PrepConfig.from_dict(s)


def evaluate_run(run: Path, ids: list[str], data_dir, batch_size: int) -> Path:
    from toporag_core.evaluation.evaluate import evaluate
    from toporag_core.model import TopoRAGModel

    ckpt = run / "best"
    setting = checkpoint_setting(ckpt)
    test = prepare_dataset("scene_graphs", setting, splits=("test",), data_dir=data_dir)["test"]
    by_id = {e.id: e for e in test}
    examples = [by_id[i] for i in ids]
    model = TopoRAGModel.load(ckpt, device="cpu")
    out = run / "test_subset.jsonl"
    res = evaluate(model, examples, "scene_graphs", out=out, batch_size=batch_size, method=run.name, resume=True)
    print(json.dumps({"run": run.name, **{k: res[k] for k in ("accuracy", "correct", "n", "seconds")}}), flush=True)
    return out


def table(runs: list[Path]) -> str:
    rows = []
    for run in runs:
        pred = run / "test_subset.jsonl"
        if not pred.is_file():
            continue
        acc = accuracy_by_type(pred)
        summ = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
        row = {"run": run.name, "n": acc["all"]["n"], "all": acc["all"]["accuracy"]}
        for t in QUESTION_TYPES:
            row[t] = acc.get(t, {}).get("accuracy", float("nan"))
        recs = read_records(pred)
        # yes/no vs open answers: separates "learned the answer format" from "found the answer"
        for name, keep in (("yes/no", lambda r: r["label"] in ("yes", "no")),
                           ("open", lambda r: r["label"] not in ("yes", "no"))):
            part = [r for r in recs if keep(r)]
            row[name] = sum(bool(r["correct"]) for r in part) / len(part) if part else float("nan")
        row["context_chars"] = round(sum(len(r.get("context", "")) for r in recs) / max(len(recs), 1))
        row.update(steps=summ.get("steps", ""), train_examples_seen=summ.get("examples_seen", ""),
                   train_s=round(summ.get("train_seconds", 0.0)), best_val_loss=summ.get("best_val_loss", float("nan")))
        rows.append(row)
    return format_table(rows)


def paired(base: Path, runs: list[Path]) -> str:
    """Per type: questions only ``base`` got right / only the other run got right, and the exact
    two-sided sign-test p-value on those discordant pairs (the runs share their questions)."""
    from scipy.stats import binomtest

    def load(run: Path) -> dict[str, dict]:
        return {r["id"]: r for r in read_records(run / "test_subset.jsonl")}

    a = load(base)
    rows = []
    for run in runs:
        if run == base or not (run / "test_subset.jsonl").is_file():
            continue
        b = load(run)
        row = {"vs": run.name}
        for t in ("all", *QUESTION_TYPES):
            ids = [i for i in a if i in b and (t == "all" or a[i]["qtype"] == t)]
            x = sum(bool(a[i]["correct"]) and not b[i]["correct"] for i in ids)
            y = sum(bool(b[i]["correct"]) and not a[i]["correct"] for i in ids)
            p = binomtest(x, x + y).pvalue if x + y else 1.0
            row[t] = f"{x}/{y} (p={p:.2f})"
        rows.append(row)
    return format_table(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="training output folders (with best/)")
    ap.add_argument("--per-type", type=int, default=30)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="also print paired counts (baseline-only right / other-only right) against this run")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if not args.table_only:
        ids = subset_ids(load_raw("scene_graphs", args.data_dir)["test"], args.per_type)
        for run in args.runs:
            if (run / "best" / "config.json").is_file():
                evaluate_run(run, ids, args.data_dir, args.batch_size)
            else:
                print(f"skipped {run}: no best/ checkpoint")
    print(table(args.runs))
    if args.baseline is not None:
        print(f"\npaired against {args.baseline.name}: {args.baseline.name}-only correct / other-only correct")
        print(paired(args.baseline, args.runs))


if __name__ == "__main__":
    main()
