"""GraphQA evaluation: generate answers, score them with the benchmark's metric, stream JSONL.

Every prediction is written as one JSON line the moment its batch is done (and flushed), so
a killed run keeps what it had; ``resume=True`` skips ids already in the file. Line fields:
``id, question, prediction, label, correct, cells {nodes, edges, cells2, counts}, context,
qtype, method, dataset`` - what the error-analysis page reads.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .tasks import metric_of
from .tasks.prep import Example
from .metrics import is_correct
from .model import TopoRAGModel
from .train import make_batch


def score(dataset: str, prediction: str, label: Any) -> bool:
    """The dataset's GraphQA metric (the registered task's ``metric``; an unregistered name is a metric name)."""
    return bool(is_correct(metric_of(dataset), prediction, label))


def _done_ids(path: Path) -> tuple[set[str], int, int]:
    """Ids, correct count and line count of a (possibly truncated) predictions file."""
    ids, correct, n = set(), 0, 0
    if not path.is_file():
        return ids, 0, 0
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill: it is redone
        ids.add(str(rec["id"]))
        correct += bool(rec.get("correct"))
        n += 1
    return ids, correct, n


def evaluate(model: TopoRAGModel, examples: list[Example], dataset: str, out: str | os.PathLike | None = None,
             batch_size: int = 8, method: str = "toporag", resume: bool = False,
             show_progress: bool = True) -> dict[str, Any]:
    """Answer every example, score it, stream predictions to ``out`` (JSONL).

    Returns ``{"accuracy", "correct", "n", "seconds", "examples_per_s", "by_type": {qtype: acc}}``
    over all examples in the file (earlier lines included when resuming).
    """
    from tqdm.auto import tqdm

    path = Path(out) if out is not None else None
    done, correct, n = (_done_ids(path) if (path is not None and resume) else (set(), 0, 0))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not resume and path.exists():
            path.unlink()
        if resume and path.is_file():  # drop a half-written last line before appending
            lines = [ln for ln in path.read_text().splitlines() if _is_json(ln)]
            path.write_text("".join(ln + "\n" for ln in lines))
    todo = [e for e in examples if str(e.id) not in done]
    by_type: dict[str, list[int]] = {}
    fh = open(path, "a") if path is not None else None
    model.eval()
    t0 = time.perf_counter()
    bar = tqdm(total=len(todo), disable=not show_progress, desc="eval")
    try:
        for i in range(0, len(todo), batch_size):
            chunk = todo[i:i + batch_size]
            preds = model.generate(make_batch(chunk, with_answers=False, use_graph=model.config.use_graph).to(model.device))
            for ex, pred in zip(chunk, preds):
                ok = score(dataset, pred, ex.label)
                correct += ok
                n += 1
                by_type.setdefault(ex.qtype or "all", [0, 0])
                by_type[ex.qtype or "all"][0] += ok
                by_type[ex.qtype or "all"][1] += 1
                if fh is not None:
                    fh.write(json.dumps({"id": ex.id, "question": ex.question, "prediction": pred, "label": ex.label,
                                         "correct": ok, "cells": ex.cells, "context": ex.context, "qtype": ex.qtype,
                                         "method": method, "dataset": dataset}) + "\n")
                    fh.flush()
            bar.update(len(chunk))
            bar.set_postfix(acc=f"{correct / max(n, 1):.3f}")
    finally:
        bar.close()
        if fh is not None:
            fh.close()
    secs = time.perf_counter() - t0
    if path is not None:  # the file is the truth (it includes lines from before a resume)
        by_type = {}
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            by_type.setdefault(rec.get("qtype") or "all", [0, 0])
            by_type[rec.get("qtype") or "all"][0] += bool(rec["correct"])
            by_type[rec.get("qtype") or "all"][1] += 1
        correct, n = sum(v[0] for v in by_type.values()), sum(v[1] for v in by_type.values())
    return {"accuracy": correct / max(n, 1), "correct": correct, "n": n, "seconds": secs,
            "examples_per_s": len(todo) / max(secs, 1e-9),
            "by_type": {k: v[0] / v[1] for k, v in by_type.items()}}


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except json.JSONDecodeError:
        return False
