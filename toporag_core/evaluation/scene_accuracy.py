"""SceneGraphs accuracy from a ``toporag eval`` predictions JSONL: overall, per question type and per
generator template (:func:`~toporag_core.tasks.scenes.dataset.record_template`).

Each function takes the JSONL path (lines with ``correct`` and ``qtype``; a line cut by a kill is
skipped) or the already parsed records, and returns ``{group: {"accuracy", "correct", "n"}}`` with
``"all"`` first.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

from ..tasks.scenes.dataset import record_template


def _records(predictions: str | os.PathLike | Sequence[dict]) -> list[dict]:
    if not isinstance(predictions, (str, os.PathLike)):
        return list(predictions)
    from ..predictions.strict import read_records

    return read_records(predictions, ("correct",), skip_cut=True)


def _accuracy_by(recs: Sequence[dict], group: Callable[[dict], str | None]) -> dict[str, dict[str, float]]:
    tally: dict[str, list[int]] = {"all": [0, 0]}
    for r in recs:
        g = group(r)
        for k in ["all"] + ([g] if g else []):
            tally.setdefault(k, [0, 0])
            tally[k][0] += bool(r["correct"])
            tally[k][1] += 1
    return {k: {"accuracy": c / n if n else float("nan"), "correct": c, "n": n} for k, (c, n) in tally.items()}


def accuracy_by_type(predictions: str | os.PathLike | Sequence[dict]) -> dict[str, dict[str, float]]:
    """Accuracy overall and per question type from a ``toporag eval`` predictions JSONL.

    Args:
        predictions: the JSONL path (lines with ``correct`` and ``qtype``; unparsable lines,
            e.g. one cut by a kill, are skipped) or the already parsed records.

    Returns:
        ``{"all": {"accuracy", "correct", "n"}, "<qtype>": {...}, ...}``; records without a
        type count only in ``"all"``.

    Raises:
        ValueError: a record without a ``correct`` field (names the line).
    """
    return _accuracy_by(_records(predictions), lambda r: r.get("qtype"))


def accuracy_by_template(predictions: str | os.PathLike | Sequence[dict]) -> dict[str, dict[str, float]]:
    """As :func:`accuracy_by_type`, per generator template (:func:`record_template`); records no
    template wrote count only in ``"all"``."""
    return _accuracy_by(_records(predictions), record_template)
