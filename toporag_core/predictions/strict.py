"""The strict reader: ``toporag eval``'s own files (resume, merge, compare), where a bad line is an
error that names the file, the line and the field.

:func:`iter_records` is the one loop over a predictions file; ``skip_cut=True`` skips lines that
are not JSON (the half-written last line of a killed run, which a resumed run redoes) instead of
failing on them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Sequence


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(1-based line number, text)`` of every non-blank line; ``ValueError`` for a missing,
    unreadable or non-UTF-8 file."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such predictions file") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start})") from None
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield n, line


def _check(rec: Any, require: Sequence[str]) -> str | None:
    """Why a parsed line is not a record with the ``require``-d fields (``None``: it is)."""
    if not isinstance(rec, dict):
        return f"not a JSON object (got {type(rec).__name__})"
    for key in require:
        if key not in rec:
            return f"field {key!r} is missing"
    if "id" in require and (isinstance(rec["id"], bool) or not isinstance(rec["id"], (str, int))):
        return f"field 'id' must be a string or a whole number, got {rec['id']!r}"
    if "correct" in require and not isinstance(rec["correct"], bool):
        return "field 'correct' must be true or false"
    return None


def iter_records(path: str | os.PathLike, require: Sequence[str] = ("id",), *,
                 skip_cut: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of every non-blank line of a predictions JSONL.

    Raises ``ValueError("FILE, line N: ...")`` naming the field for a line that is not JSON (unless
    ``skip_cut``), not an object, or lacks one of ``require`` (``id``: a string or a whole number;
    ``correct``: true or false)."""
    path = Path(path)
    for n, line in _lines(path):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if skip_cut:
                continue
            raise ValueError(f"{path}, line {n}: not JSON ({e.msg})") from None
        problem = _check(rec, require)
        if problem:
            raise ValueError(f"{path}, line {n}: {problem}")
        yield n, rec


def read_records(path: str | os.PathLike, require: Sequence[str] = ("id",), *,
                 skip_cut: bool = False) -> list[dict[str, Any]]:
    """The records of :func:`iter_records`, in file order."""
    return [rec for _, rec in iter_records(path, require, skip_cut=skip_cut)]


def read_predictions(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Per-example records of a predictions JSONL (``toporag eval --out``), keyed by ``id``.

    Raises ``ValueError`` naming the file, line and field for a line that is not JSON or lacks
    ``id`` / ``correct``, for an id seen twice, and for a file without records."""
    out: dict[str, dict[str, Any]] = {}
    for n, rec in iter_records(path, ("id", "correct")):
        if str(rec["id"]) in out:
            raise ValueError(f"{path}, line {n}: field 'id' {rec['id']!r} repeats an earlier line")
        out[str(rec["id"])] = rec
    if not out:
        raise ValueError(f"{path}: no predictions")
    return out


def read_ids(path: str | os.PathLike) -> list[str]:
    """The ids of an order file: a predictions JSONL (each line's ``id``) or one id per line."""
    path = Path(path)
    out = []
    for n, line in _lines(path):
        line = line.strip()
        if not line.startswith("{"):
            out.append(line)
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}, line {n}: not JSON ({e.msg})") from None
        problem = _check(rec, ("id",))
        if problem:
            raise ValueError(f"{path}, line {n}: {problem}")
        out.append(str(rec["id"]))
    return out
