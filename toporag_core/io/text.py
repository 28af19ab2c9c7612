"""Shared reading helpers of every graph format: decoding, size limits, CSV rows, JSON, text fields.

Every failure is a :class:`~toporag_core.graph.GraphFormatError` naming the file, the line
(1-based, the header being line 1) or record (0-based), and the field. These helpers are the
public toolkit of format readers (``io/<format>.py`` and any plug-in format).
"""
from __future__ import annotations

import csv
import io as _stdio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..graph import GraphFormatError


@dataclass(frozen=True)
class Limits:
    """Size limits; input over any of them is rejected before it can exhaust memory."""

    max_nodes: int = 200_000
    max_edges: int = 1_000_000
    max_bytes: int = 200_000_000

    def check_bytes(self, n: int, file: str) -> None:
        if n > self.max_bytes:
            raise GraphFormatError(f"file is {n} bytes, over the limit max_bytes={self.max_bytes}", file=file)

    def check_counts(self, nodes: int, edges: int, file: str, line: int | None = None,
                     record: int | str | None = None) -> None:
        if nodes > self.max_nodes:
            raise GraphFormatError(f"more than max_nodes={self.max_nodes} nodes", file=file, line=line, record=record)
        if edges > self.max_edges:
            raise GraphFormatError(f"more than max_edges={self.max_edges} edges", file=file, line=line, record=record)


def decode(data: bytes, file: str, limits: Limits) -> str:
    """UTF-8 (a BOM is allowed) -> str; a bad byte is reported with its offset and line."""
    limits.check_bytes(len(data), file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise GraphFormatError(f"not UTF-8: byte 0x{data[e.start]:02x} at byte offset {e.start}",
                               file=file, line=line) from None
    if not text.strip():
        raise GraphFormatError("file is empty", file=file)
    return text


def read_file(path: Path, limits: Limits) -> str:
    """A file's text (checked against ``limits`` before it is read)."""
    if not path.exists():
        raise GraphFormatError("file not found", file=str(path))
    if path.is_dir():
        raise GraphFormatError("is a directory, not a file (a directory is only valid for csv-pair)", file=str(path))
    limits.check_bytes(path.stat().st_size, str(path))
    return decode(path.read_bytes(), str(path), limits)


def text_field(value: Any, file: str | None, field: str, *, line: int | None = None, record: int | str | None = None,
               strip: bool = True, lower: bool = False) -> str:
    """One text field: must be a non-empty string (numbers are converted)."""
    if value is None or isinstance(value, (dict, list, tuple, bool)):
        raise GraphFormatError(f"expected text, got {type(value).__name__}", file=file, line=line,
                               record=record, field=field)
    s = str(value)
    if not s.strip():
        raise GraphFormatError("empty text", file=file, line=line, record=record, field=field)
    s = s.strip() if strip else s
    return s.lower() if lower else s


def csv_rows(text: str, file: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """``[(line number, cells)]`` of a CSV/TSV text, blank lines dropped; ``csv.Error`` is wrapped."""
    reader = csv.reader(_stdio.StringIO(text, newline=""), delimiter=delimiter)
    out = []
    try:
        for row in reader:
            if row and any(c.strip() for c in row):
                out.append((reader.line_num, row))
    except csv.Error as e:
        raise GraphFormatError(f"malformed {'TSV' if delimiter == chr(9) else 'CSV'}: {e}", file=file,
                               line=reader.line_num) from None
    return out


def require_columns(header: list[str], line: int, file: str, required: tuple[str, ...]) -> dict[str, int]:
    """``{column: index}`` of the ``required`` columns of a header row (case-insensitive)."""
    cols = {c.strip().lower(): i for i, c in enumerate(header)}
    for name in required:
        if name not in cols:
            raise GraphFormatError(f"missing column '{name}' (header has {[c.strip() for c in header]})",
                                   file=file, line=line, field=name)
    return {name: cols[name] for name in required}


def row_cell(row: list[str], idx: int, width: int, line: int, file: str) -> str:
    """``row[idx]`` of a row that must have ``width`` fields."""
    if len(row) != width:
        raise GraphFormatError(f"expected {width} fields, got {len(row)}", file=file, line=line)
    return row[idx]


def parse_json(text: str, file: str) -> Any:
    """JSON text -> value, errors with line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"invalid JSON at column {e.colno}: {e.msg}", file=file, line=e.lineno) from None
    except RecursionError:
        raise GraphFormatError("invalid JSON: nested too deeply", file=file) from None


def delimiter_of(text: str, file: str) -> str:
    """Tab when the name ends ``.tsv``/``.tab`` or line 1 has a tab, else comma."""
    first = text.lstrip("\r\n").split("\n", 1)[0]
    if file.lower().endswith((".tsv", ".tab")) or "\t" in first:
        return "\t"
    return ","


def looks_like_json(text: str, file: str) -> bool:
    return file.lower().endswith(".json") or text.lstrip()[:1] in ("[", "{")
