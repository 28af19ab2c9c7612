"""Live evaluation from the Error-analysis page: preprocess a slice of a split, then answer it in
small chunks that a Stop button can interrupt without losing what was written.

The run's choices come from the registries: :func:`task_names` (every registered task) and :data:`SPLITS`;
:func:`prep_setting` is how the slice is preprocessed (the checkpoint's setting with the picked method),
:func:`eval_output_path` where its predictions go (under the cache directory, so ``TOPORAG_CACHE`` moves it).
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ...tasks import SPLITS, TASKS

__all__ = ["SPLITS", "eval_output_path", "prep_setting", "prepare_slice", "run_evaluation", "task_names"]


def task_names() -> list[str]:
    """Every registered task's name, sorted (the dataset selector lists these)."""
    return sorted(TASKS)


def prep_setting(pipe, method: str):
    """How a slice is preprocessed for ``pipe``: its training setting with retrieval method ``method``, and
    its use of 2-cells (a :class:`~toporag_core.tasks.prep.PrepConfig`)."""
    from ...tasks.prep import PrepConfig

    return PrepConfig(pipe.default_setting(method=method), use_cells2=pipe.use_cells2)


def eval_output_path(dataset: str, split: str, start: int, count: int, method: str) -> Path:
    """A new predictions file for a run over ``dataset/split[start:start+count]`` with ``method``, named with
    the current time, in ``<cache>/studio_eval``."""
    from ...embed import default_cache_dir

    return default_cache_dir() / "studio_eval" / f"{dataset}-{split}-{start}-{start + count}-{method}-" \
                                                 f"{time.strftime('%Y%m%d-%H%M%S')}.jsonl"


def prepare_slice(dataset: str, split: str, start: int, count: int, encoder, setting,
                  data_dir: str | os.PathLike | None = None, on_progress: Callable[[int, int], None] | None = None):
    """Preprocess only ``raw[split][start:start+count]`` (lift, embed, retrieve), reporting progress."""
    from ...tasks import load_raw
    from ...tasks.prep import prepare_example

    raw = load_raw(dataset, data_dir)
    if split not in raw:
        raise ValueError(f"{dataset} has no split {split!r}; one of {sorted(raw)}")
    rows = raw[split][max(0, int(start)):max(0, int(start)) + max(0, int(count))]
    out = []
    for i, r in enumerate(rows):
        out.append(prepare_example(r, encoder, setting))
        if on_progress:
            on_progress(i + 1, len(rows))
    return out


def run_evaluation(model, examples: list, dataset: str, out: str | os.PathLike, method: str = "toporag",
                   batch_size: int = 1, on_progress: Callable[[int, int], None] | None = None,
                   should_stop: Callable[[], bool] | None = None,
                   lock: threading.Lock | None = None, calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """``toporag eval`` in small chunks: every chunk's predictions are appended (and flushed) to
    ``out`` before ``should_stop`` is asked again, so a stop keeps everything answered so far.
    ``lock``: held per chunk (the pipeline's, so Ask answers interleave with a long run); ``calibration``:
    the checkpoint's ``"confidence"`` entry (each record says whether its answer is low confidence).

    Returns ``{"done", "total", "stopped", "path"}``.
    """
    from ...evaluation.evaluate import evaluate

    done, stopped = 0, False
    for i in range(0, len(examples), max(1, batch_size)):
        if should_stop is not None and should_stop():
            stopped = True
            break
        chunk = examples[i:i + max(1, batch_size)]
        with lock if lock is not None else contextlib.nullcontext():
            evaluate(model, chunk, dataset, out=out, batch_size=len(chunk), method=method, resume=True,
                     show_progress=False, calibration=calibration)
        done += len(chunk)
        if on_progress is not None:
            on_progress(done, len(examples))
    return {"done": done, "total": len(examples), "stopped": stopped, "path": str(out)}
