"""Live evaluation from the Error-analysis page: preprocess a slice of a split, then answer it in
small chunks that a Stop button can interrupt without losing what was written.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Callable


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
                   lock: threading.Lock | None = None) -> dict[str, Any]:
    """``toporag eval`` in small chunks: every chunk's predictions are appended (and flushed) to
    ``out`` before ``should_stop`` is asked again, so a stop keeps everything answered so far.
    ``lock``: held per chunk (the pipeline's, so Ask sessions interleave with a long run).

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
                     show_progress=False)
        done += len(chunk)
        if on_progress is not None:
            on_progress(done, len(examples))
    return {"done": done, "total": len(examples), "stopped": stopped, "path": str(out)}
