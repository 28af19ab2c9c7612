"""Writing predictions files: the atomic writer and :func:`merge` (evaluation shards -> one file).

A file is written next to its final name and moved into place (``os.replace``), so a reader never
sees half a file and a failed write leaves the old one. (``toporag eval`` itself appends one line
per answer and flushes, so a killed run keeps what it had; see :mod:`toporag_core.evaluation.evaluate`.)
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

from .schema import record_line
from .strict import iter_records


def write_predictions(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> Path:
    """``records`` as JSONL at ``path``, atomically (parent folders created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text("".join(record_line(r) for r in records), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def merge(parts: Sequence[str | os.PathLike], out: str | os.PathLike,
          order: Sequence[str] | None = None) -> dict[str, Any]:
    """Join shard files (``toporag eval --shard i/n`` outputs) into ``out``: one line per ``id``
    (the same id twice with the same content is kept once; with different content it is an error
    naming both files), in ``order`` (ids) when given, else shard by shard. Every line must be a
    JSON object with an ``id`` (:func:`~.strict.iter_records`). Returns ``{"n", "correct",
    "accuracy", "missing"}`` (``missing``: ids of ``order`` in no shard)."""
    rows: dict[str, tuple[str, dict]] = {}
    for part in parts:
        for ln, rec in iter_records(part, ("id",)):
            key = str(rec["id"])
            if key in rows and rows[key][1] != rec:
                raise ValueError(f"{part}, line {ln}, field 'id': {key!r} also in {rows[key][0]} with other content")
            rows.setdefault(key, (str(part), rec))
    keys = [str(k) for k in order if str(k) in rows] if order is not None else list(rows)
    missing = [str(k) for k in order if str(k) not in rows] if order is not None else []
    write_predictions(out, (rows[k][1] for k in keys))
    correct = sum(bool(rows[k][1].get("correct")) for k in keys)
    return {"n": len(keys), "correct": correct, "accuracy": correct / max(len(keys), 1), "missing": missing}
