"""A hybrid text-and-table dataset in memory and on disk: documents, line labels, questions, facts.

Folder layout (what ``toporag hybrid generate`` writes and ``toporag hybrid eval`` reads):
``docs/<id>`` (UTF-8 text), ``questions.jsonl`` (one question a line with ``question``, ``type``
and ``gold`` spans ``{doc, start, end}``), ``labels.json`` (per-line router labels and document
kinds) and ``facts.json`` (the fact store). Every file is written to a temporary name and renamed,
so a reader never sees half a file.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class HybridDataset:
    """Documents (``doc_id -> text``), per-line gold labels (1 table line, 0 prose, -1 blank),
    document kinds, questions and the fact store."""

    docs: dict[str, str]
    labels: dict[str, list[int]]
    kinds: dict[str, str]
    questions: list[dict]
    facts: dict = field(default_factory=dict)


def write_dataset(ds: HybridDataset, out: str | os.PathLike) -> dict:
    """``docs/<id>``, ``questions.jsonl``, ``labels.json`` (per-line router labels), ``facts.json``."""
    root = Path(out)
    (root / "docs").mkdir(parents=True, exist_ok=True)

    def atomic(path: Path, text: str) -> None:
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    for doc_id, text in ds.docs.items():
        atomic(root / "docs" / doc_id, text)
    atomic(root / "questions.jsonl", "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in ds.questions))
    atomic(root / "labels.json", json.dumps({"labels": ds.labels, "kinds": ds.kinds}))
    atomic(root / "facts.json", json.dumps(ds.facts, ensure_ascii=False, indent=1))
    return stats(ds)


def load_dataset(folder: str | os.PathLike) -> HybridDataset:
    """Read what :func:`write_dataset` wrote (documents are read as UTF-8 text)."""
    root = Path(folder)
    qpath = root / "questions.jsonl"
    if not qpath.is_file():
        raise FileNotFoundError(f"{root}: no questions.jsonl (write one with `toporag hybrid generate`)")
    questions = []
    for i, line in enumerate(qpath.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{qpath}, line {i}: not JSON ({e.msg})") from e
        for k in ("question", "type", "gold"):
            if k not in q:
                raise ValueError(f"{qpath}, line {i}: field {k!r} is missing")
        questions.append(q)
    lab = json.loads((root / "labels.json").read_text()) if (root / "labels.json").is_file() else {}
    docs = {p.name: p.read_text(encoding="utf-8") for p in sorted((root / "docs").glob("*")) if p.is_file()}
    facts = json.loads((root / "facts.json").read_text()) if (root / "facts.json").is_file() else {}
    return HybridDataset(docs, lab.get("labels", {}), lab.get("kinds", {}), questions, facts)


def stats(ds: HybridDataset) -> dict:
    kinds: dict[str, int] = {}
    for k in ds.kinds.values():
        kinds[k] = kinds.get(k, 0) + 1
    types: dict[str, int] = {}
    for q in ds.questions:
        types[q["type"]] = types.get(q["type"], 0) + 1
    return {"documents": len(ds.docs), "kinds": kinds, "questions": len(ds.questions), "types": types,
            "table_lines": sum(sum(x == 1 for x in v) for v in ds.labels.values())}
