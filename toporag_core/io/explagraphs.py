"""ExplaGraphs: a ``(h; r; t)(h; r; t)...`` graph string, or an ExplaGraphs TSV (``arg1 arg2 label graph``).

Exactly as the GraphQA benchmark: head/tail/relation are lower-cased and stripped. A TSV row
(``record``, 0-based, default 0) becomes a graph whose ``meta`` keeps ``id``, ``arg1``, ``arg2``,
``label`` and the benchmark's ``question``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..graph import GraphFormatError, TextualGraph, check_text
from .formats import GraphFormat, Source, register_format
from .text import Limits, csv_rows, read_file, require_columns

EXPLAGRAPHS_FILE = "expla_graphs_train_dev.tsv"


def parse_explagraphs_graph(text: str, name: str = "", *, file: str | None = None, line: int | None = None,
                            record: int | None = None, meta: dict | None = None) -> TextualGraph:
    """``(h; r; t)(h; r; t)...`` -> graph, lower-cased and stripped as the GraphQA benchmark does.

    Stricter than the benchmark's regex: text outside parentheses, a nested or unclosed ``(``, a triple
    without exactly two ``;`` or with an empty part is a :class:`GraphFormatError` naming the triple (1-based).
    """
    triples: list[tuple[str, str, str]] = []
    i, n = 0, len(text)

    def fail(msg: str) -> None:
        raise GraphFormatError(f"triple {len(triples) + 1}: {msg}", file=file, line=line, record=record, field="graph")

    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        if text[i] != "(":
            fail(f"unbalanced parentheses: unexpected ')' at character {i + 1}" if text[i] == ")" else
                 f"expected '(' at character {i + 1}, found {text[i]!r}")
        close, nested = text.find(")", i + 1), text.find("(", i + 1)
        if close < 0:
            fail(f"unbalanced parentheses: '(' at character {i + 1} is never closed")
        if 0 <= nested < close:
            fail(f"unbalanced parentheses: '(' at character {i + 1} is not closed before the next '('")
        parts = text[i + 1:close].split(";")
        if len(parts) != 3:
            fail(f"expected '(head; relation; tail)' with 2 ';', found {len(parts) - 1} in '{text[i:close + 1]}'")
        h, r, t = (p.lower().strip() for p in parts)
        for value, role in ((h, "head"), (r, "relation"), (t, "tail")):
            if not value:
                fail(f"empty {role} in '{text[i:close + 1]}'")
            problem = check_text(value)
            if problem:
                fail(f"{role}: {problem}")
        triples.append((h, r, t))
        i = close + 1
    if not triples:
        raise GraphFormatError("no triples in the graph string", file=file, line=line, record=record, field="graph")
    return TextualGraph.from_triples(triples, name=name, meta=meta)


def read_tsv_records(text: str, file: str, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """A headed TSV -> ``[(line, {column: cell})]``; checks the required columns and the field count."""
    rows = csv_rows(text, file, "\t")
    if not rows:
        raise GraphFormatError("file is empty", file=file)
    (hl, header), body = rows[0], rows[1:]
    require_columns(header, hl, file, required)
    names = [c.strip().lower() for c in header]
    out = []
    for line, row in body:
        if len(row) != len(names):
            raise GraphFormatError(f"expected {len(names)} tab-separated fields, got {len(row)}", file=file, line=line)
        out.append((line, dict(zip(names, row))))
    return out


def read_explagraphs(path: str | os.PathLike) -> list[dict[str, Any]]:
    """ExplaGraphs TSV (header ``arg1 arg2 label graph``) -> rows.

    Each row: ``{"id": row index (0-based), "arg1", "arg2", "label", "graph": raw triple string,
    "line": 1-based line in the file}``. Quoting follows the CSV rules (as ``pandas.read_csv`` does), so
    ``"The ""three strikes"" law"`` reads as ``The "three strikes" law``. Graphs are not parsed here.
    """
    file = str(path)
    records = read_tsv_records(read_file(Path(path), Limits()), file, ("arg1", "arg2", "label", "graph"))
    return [_row(i, line, r) for i, (line, r) in enumerate(records)]


def _row(i: int, line: int, r: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": i, **{k: r[k] for k in ("arg1", "arg2") if k in r}}
    if "label" in r:
        row["label"] = r["label"].strip()
    return {**row, "graph": r["graph"], "line": line}


def explagraphs_question(arg1: str, arg2: str) -> str:
    """The GraphQA benchmark prompt for one ExplaGraphs row."""
    return (f"Argument 1: {arg1}\nArgument 2: {arg2}\nQuestion: Do argument 1 and argument 2 support or counter "
            "each other? Answer in one word in the form of 'support' or 'counter'.\n\nAnswer:")


def explagraphs_row_to_graph(row: dict[str, Any], file: str | None = None) -> TextualGraph:
    """A :func:`read_explagraphs` row -> graph with ``meta`` = id, arg1, arg2, label, question."""
    meta = {k: row[k] for k in ("id", "arg1", "arg2", "label") if k in row}
    if "arg1" in row and "arg2" in row:
        meta["question"] = explagraphs_question(row["arg1"], row["arg2"])
    return parse_explagraphs_graph(row["graph"], name=f"explagraphs[{row.get('id', '')}]", file=file,
                                   line=row.get("line"), meta=meta)


def explagraphs_from_text(text: str, file: str, record: int | None = None, name: str = "") -> TextualGraph:
    """An ExplaGraphs file's text -> graph: a bare ``(h; r; t)...`` string, or row ``record`` (0-based,
    default 0) of a TSV with a ``graph`` column (``arg1``/``arg2``/``label`` optional, kept in ``meta``)."""
    if text.lstrip().startswith("("):
        return parse_explagraphs_graph(text, name=name, file=file)
    rows = read_tsv_records(text, file, ("graph",))
    idx = 0 if record is None else int(record)
    if not 0 <= idx < len(rows):
        raise GraphFormatError(f"row {idx} out of range (file has {len(rows)} rows)", file=file, record=idx)
    g = explagraphs_row_to_graph(_row(idx, *rows[idx]), file=file)
    g.name = f"{name or Path(file).stem}[{idx}]"
    return g


def _has_graph_column(src: Source) -> bool:
    return "graph" in {c.strip().lower() for c in src.first_line.split("\t")}


def _load(src: Source, record=None) -> TextualGraph:
    return explagraphs_from_text(src.text, src.file, None if record is None else int(record), src.name)


def _records(src: Source) -> list[str]:
    if src.text.lstrip().startswith("("):
        return []
    return [f"row {i}: {r.get('arg1', '')[:60]}" for i, (_, r) in
            enumerate(read_tsv_records(src.text, src.file, ("graph",)))]


register_format(GraphFormat(
    name="explagraphs", label="ExplaGraphs row or (h; r; t) string", load=_load,
    detect=lambda s: not s.is_json and (s.head.lstrip().startswith("(") or _has_graph_column(s)),
    extensions=("tsv", "txt"), priority=40, records=_records,
    help="an ExplaGraphs TSV (arg1, arg2, label, graph; --record picks the row) or one (h; r; t)... string"))
