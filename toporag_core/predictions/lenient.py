"""The lenient reader: a user's own predictions file (an upload on the Error-analysis page).

Every good line becomes a clean record; a bad line becomes one :class:`LineError` naming the line
and the field, and the rest still loads (a half-written last line of a killed run is just one such
line). Fields may carry the common names of :data:`~.schema.ALIASES` (``answer`` / ``pred`` /
``output`` ... for the prediction, ``gold`` / ``answers`` / ``target`` / ``ground_truth`` ... for the
label; ``answer`` is the label when ``prediction`` is there too); a line without an id is known by its
line number; a record without ``correct`` (or ``hit``, the name ``toporag kg eval`` gives it) is scored
with its dataset's GraphQA metric (:func:`score`). The retrieved cells are read from ``cells`` or
``retrieved`` (``{nodes, edges, cells2}``; a node may be ``{"text"|"name"|"id": ...}``, an edge a
``[head, relation, tail]`` list or a ``{head, relation, tail}`` object, a bare list is the nodes).

A clean record has ``id`` (text), ``prediction`` (text), ``label`` (as given: text, number or a
list of answers), ``correct`` (bool), ``cells {nodes, edges, cells2}`` (texts), ``question``,
``context``, ``qtype``, ``method``, ``dataset``, ``evidence`` (text, ``""`` when absent),
``support_covered`` (bool or absent), ``cells_recorded`` (whether the line has retrieved cells at all:
without them a wrong answer cannot be called a retrieval or a reasoning failure), ``line`` (1-based),
and every other key of the line as is.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..metrics import METRICS, is_correct
from .schema import ALIASES, REQUIRED, field_names

TEXT_FIELDS = ("context", "qtype", "method", "dataset", "evidence")


@dataclass
class LineError:
    """One bad line: its 1-based number and what is wrong (naming the field)."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass
class Predictions:
    """The good records of one prediction file (each with its ``line``) and the bad lines."""

    name: str
    records: list[dict[str, Any]] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {str(r["id"]): r for r in self.records}

    def messages(self) -> list[str]:
        """One message per bad line, naming the file, the line and the field."""
        return [f"{self.name}, {e}" for e in self.errors]


def _key(obj: dict[str, Any], canonical: str) -> str | None:
    """The key of ``obj`` that holds ``canonical`` (itself or its first alias present)."""
    return next((k for k in ALIASES.get(canonical, (canonical,)) if k in obj), None)


def _keys(obj: dict[str, Any]) -> dict[str, str | None]:
    """The key of ``obj`` for each canonical field. ``{"prediction": ..., "answer": ...}`` with no
    label alias is the common "model output + reference answer" layout: there ``answer`` is the label."""
    keys = {k: _key(obj, k) for k in ALIASES}
    if keys["label"] is None and keys["prediction"] not in (None, "answer") and "answer" in obj:
        keys["label"] = "answer"
    return keys


def score(prediction: str, label: Any, dataset: str = "") -> bool:
    """A record's correctness by its dataset's GraphQA metric (a registered task's, or the metric of
    that name); WebQSP's Hit (a normalised gold answer inside the prediction) without a dataset."""
    metric = dataset if dataset in METRICS else ""
    if dataset and not metric:
        from ..tasks import TASKS, metric_of  # registered tasks (their metric names)

        metric = metric_of(dataset) if dataset in TASKS else ""
    return bool(is_correct(metric or "webqsp", prediction, label if isinstance(label, list) else str(label)))


CORRECT_KEYS = ("correct", "hit")  # ``hit``: the WebQSP metric's name, as ``toporag kg eval`` writes it
CELL_KEYS = ("cells", "retrieved")
EDGE_KEYS = (("head", "src", "source", "subject"), ("relation", "rel", "predicate", "edge_attr"),
             ("tail", "dst", "target", "object"))
NODE_KEYS = ("text", "name", "node_attr", "label", "id")


def _correct_key(obj: dict[str, Any]) -> str | None:
    return next((k for k in CORRECT_KEYS if k in obj), None)


def _check_correct(obj: dict[str, Any]) -> None:
    key = _correct_key(obj)
    if key is None:
        return
    c = obj[key]
    if not isinstance(c, (bool, int)) or isinstance(c, int) and c not in (0, 1):
        raise ValueError(f"field {key!r} must be true/false, got {c!r}")


def _correct(obj: dict[str, Any], prediction: str, label: Any) -> bool:
    """The record's ``correct`` (or ``hit``), or its :func:`score` when the line has neither."""
    key = _correct_key(obj)
    if key is not None:
        return bool(obj[key])
    return score(prediction, label, "" if obj.get("dataset") is None else str(obj["dataset"]))


def _node_text(n: Any, key: str) -> str:
    if isinstance(n, dict):
        k = next((k for k in NODE_KEYS if n.get(k) is not None), None)
        if k is None:
            raise ValueError(f"field '{key}.nodes': a node object needs one of {', '.join(NODE_KEYS)}")
        return str(n[k])
    return str(n)


def _edge_triple(t: Any, key: str) -> list[str]:
    if isinstance(t, dict):
        picked = [next((k for k in names if t.get(k) is not None), None) for names in EDGE_KEYS]
        if None not in picked:
            return [str(t[k]) for k in picked]
    elif isinstance(t, (list, tuple)) and len(t) == 3:
        return [str(x) for x in t]
    raise ValueError(f"field '{key}.edges' must be a list of [head, relation, tail] triples")


def cells_key(obj: dict[str, Any]) -> str | None:
    """The key holding the line's retrieved cells (``cells`` or ``retrieved``), ``None`` without one."""
    return next((k for k in CELL_KEYS if obj.get(k) is not None), None)


def _cells(obj: dict[str, Any]) -> dict[str, list]:
    key = cells_key(obj)
    cells = obj.get(key) if key else {}
    if isinstance(cells, list):  # a bare list: the retrieved nodes
        cells = {"nodes": cells}
    if not isinstance(cells, dict):
        raise ValueError(f"field {key!r} must be an object {{nodes, edges, cells2}}")
    edges, nodes = cells.get("edges") or [], cells.get("nodes") or []
    if not isinstance(edges, list):
        raise ValueError(f"field '{key}.edges' must be a list of [head, relation, tail] triples")
    if not isinstance(nodes, list):
        raise ValueError(f"field '{key}.nodes' must be a list of node texts")
    return {"nodes": [_node_text(n, key) for n in nodes],
            "edges": [_edge_triple(t, key) for t in edges],
            "cells2": [[str(n) for n in c] for c in cells.get("cells2") or [] if isinstance(c, list)]}


def check_record(obj: Any, line: int | None = None) -> dict[str, Any]:
    """One parsed line -> a clean record (module docstring), or ``ValueError`` naming the field; a
    line without an id gets ``line`` (its 1-based number) as its id."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    keys = _keys(obj)
    missing = [field_names(k) for k in REQUIRED if keys[k] is None]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    _check_correct(obj)
    label = obj[keys["label"]]
    if not isinstance(label, (str, int, float, list)):
        raise ValueError(f"field {keys['label']!r} must be a string or a list, got {type(label).__name__}")
    cells = _cells(obj)
    if obj.get("support_covered") is not None and not isinstance(obj["support_covered"], bool):
        raise ValueError(f"field 'support_covered' must be true/false, got {obj['support_covered']!r}")
    pred = obj[keys["prediction"]]
    rec = dict(obj)
    rid = obj[keys["id"]] if keys["id"] else line
    if rid is None or isinstance(rid, (dict, list)):
        raise ValueError(f"field {keys['id'] or 'id'!r} must be a string or a number, got {rid!r}")
    rec.update(id=str(rid), prediction="" if pred is None else str(pred), label=label)
    rec["correct"] = _correct(obj, rec["prediction"], label)
    rec["cells"] = cells
    rec["cells_recorded"] = cells_key(obj) is not None
    q = obj.get(keys["question"]) if keys["question"] else None
    rec["question"] = "" if q is None else str(q)
    for k in TEXT_FIELDS:
        rec[k] = "" if obj.get(k) is None else str(obj[k])
    return rec


def parse_lenient(text: str, name: str = "predictions") -> Predictions:
    """Every good line of a predictions JSONL; a bad line becomes a :class:`LineError` (1-based
    line number) and the rest still loads. Blank lines are skipped; a repeated id keeps the
    first record and reports the repeat."""
    out = Predictions(name=name)
    seen: dict[str, int] = {}
    for no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = check_record(json.loads(line), no)
        except json.JSONDecodeError as e:
            out.errors.append(LineError(no, f"not valid JSON ({e.msg}, column {e.colno})"))
            continue
        except ValueError as e:
            out.errors.append(LineError(no, str(e)))
            continue
        if rec["id"] in seen:
            out.errors.append(LineError(no, f"id {rec['id']!r} repeats line {seen[rec['id']]}; kept the first"))
            continue
        seen[rec["id"]] = no
        rec["line"] = no
        out.records.append(rec)
    return out


def load_lenient(source: str | os.PathLike | bytes, name: str | None = None) -> Predictions:
    """:func:`parse_lenient` of a path or the bytes of an upload. A missing / unreadable file or
    non-UTF-8 bytes raise ``ValueError`` with the file name; bad lines never raise."""
    if isinstance(source, bytes):
        label = name or "upload"
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{label}: not UTF-8 text (byte {e.start})") from e
        return parse_lenient(text, label)
    path = Path(source).expanduser()
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e.strerror or e})") from e
    return load_lenient(data, name or path.name)


def require_records(preds: Predictions) -> Predictions:
    """``preds`` when it has at least one good record, else ``ValueError`` naming the file and its
    first bad line(s) with the field (so a fully invalid file never replaces loaded predictions)."""
    if preds.records:
        return preds
    if not preds.errors:
        raise ValueError(f"{preds.name}: no predictions (the file is empty)")
    first = "; ".join(str(e) for e in preds.errors[:3])
    more = f" (and {len(preds.errors) - 3} more bad line(s))" if len(preds.errors) > 3 else ""
    raise ValueError(f"{preds.name}: no valid prediction in {len(preds.errors)} line(s): {first}{more}")
