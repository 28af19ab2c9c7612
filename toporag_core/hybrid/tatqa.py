"""TAT-QA (Zhu et al., ACL 2021) as a hybrid corpus: one unit per table and per paragraph, questions with gold.

**Layout read.** A JSON list of contexts ``{"table": {"uid", "table": [[str, ...], ...]},
"paragraphs": [{"uid", "order", "text"}, ...], "questions": [{"uid", "question", "answer_from",
"rel_paragraphs": ["1", ...], ...}, ...]}`` (the released ``tatqa_dataset_*.json`` files).

**Units.** Context ``c`` (its table's uid) gives a table unit at line span ``[0, 1)`` and paragraph
``order = n`` a narrative unit at ``[n, n + 1)``, so a unit's ``uid`` is ``<table uid>:1-1`` /
``<table uid>:<n+1>-<n+1>`` and gold spans use the same ``(doc, start, end)`` overlap rule as every
other hybrid evaluation (:func:`toporag_core.hybrid.evaluate.ndcg_recall`).

**Multi-row headers.** Financial tables put spanning labels above the column labels
(``["", "", "Years Ended", ""]`` over ``["", "2019", "2018", "2017"]``). Leading rows are header rows
while they carry no data: the first row always; a later one when its first cell is empty, or none of
its other cells is a number other than a year / fiscal-year label (``2019``, ``FY19``), and it is not a
section row (a label with every other cell empty). Header rows are joined per column top-down, and a
spanning label (a non-empty cell followed by empty ones in a non-final header row) is copied to the
right until the next label (and to the left edge of the data columns: TAT-QA centres such labels, so
one label alone in its row spans every data column). Section rows (``["Current liabilities", "", "",
""]``) stay rows; the row labels under them get the section as a prefix in
:func:`~toporag_core.hybrid.tables.table_text`.

**Gold (relevance).** ``answer_from = "table"``: the context's table; ``"text"``: the paragraphs in
``rel_paragraphs``; ``"table-text"``: the table and the ``rel_paragraphs``. Every gold unit has
relevance 1 (binary nDCG).

Bad input raises :class:`TatqaError` naming the file, the record (0-based context index and uid) and
the field.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .documents import Unit
from .tables import Table, table_text

SOURCES = ("table", "text", "table-text")
_NUMBER = re.compile(r"^[\s$€£¥(]*[-+−–]?\s*[$€£¥]?\s*\d[\d,]*(\.\d+)?\s*%?\)?\s*$")
_YEARISH = re.compile(r"^\s*((fy|fiscal|q[1-4])\s*'?\d{2,4}|'\d{2}|(19|20)\d{2})\s*[a-z]*\s*$", re.I)
MAX_HEADER_ROWS = 3


class TatqaError(ValueError):
    """A TAT-QA file that does not have the released layout (message: file, record, field)."""


@dataclass
class TatqaCorpus:
    """``units`` (tables and paragraphs, context by context) and ``questions``
    (``{"id", "question", "type", "gold": [{"doc", "start", "end"}], "context", "answer"}``)."""

    units: list[Unit]
    questions: list[dict]
    contexts: list[str]


def is_number(cell: str) -> bool:
    return bool(_NUMBER.match(cell)) and not _YEARISH.match(cell)


def split_header(grid: list[list[str]]) -> tuple[list[str], list[list[str]], int]:
    """``(header (C,), data rows, number of header rows)`` of a TAT-QA grid (module docstring)."""
    width = max((len(r) for r in grid), default=0)
    grid = [[str(c).strip() for c in r] + [""] * (width - len(r)) for r in grid]
    n_head = 1
    while n_head < min(MAX_HEADER_ROWS, len(grid) - 1):
        r = grid[n_head]
        rest = [c for c in r[1:] if c]
        section = bool(r[0]) and not rest
        if section or not rest or (r[0] and any(is_number(c) for c in rest)):
            break
        n_head += 1
    parts: list[list[str]] = [[] for _ in range(width)]
    for i, r in enumerate(grid[:n_head]):
        labelled = [j for j in range(1, width) if r[j]]
        for j, c in enumerate(r):
            label = c
            if not c and j and labelled and i < n_head - 1:  # a spanning label of an upper header row
                left = [k for k in labelled if k < j]
                label = r[left[-1] if left else labelled[0]]
            if label and (not parts[j] or parts[j][-1] != label):
                parts[j].append(label)
    header = [" ".join(p) for p in parts]
    return header, grid[n_head:], n_head


def _field(rec, key, kind, where):
    if not isinstance(rec, dict):
        raise TatqaError(f"{where}: expected an object, got {type(rec).__name__}")
    if key not in rec:
        raise TatqaError(f"{where}: field {key!r} is missing")
    val = rec[key]
    if not isinstance(val, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise TatqaError(f"{where}: field {key!r} must be {names}, got {type(val).__name__}")
    return val


def looks_like_tatqa(data) -> bool:
    """A JSON value shaped like a TAT-QA file (a list whose first item has ``table`` and ``paragraphs``)."""
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "table" in data[0] \
        and "paragraphs" in data[0]


def read_json(path: str | Path):
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise TatqaError(f"{p}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise TatqaError(f"{p}, line {e.lineno}: not valid JSON ({e.msg})") from None


def _paragraphs(ctx: dict, cid: str, where: str) -> tuple[list[Unit], set[int]]:
    units, orders = [], set()
    for pi, p in enumerate(_field(ctx, "paragraphs", list, where)):
        pw = f"{where}, paragraphs[{pi}]"
        order = _field(p, "order", (int, str), pw)
        text = _field(p, "text", str, pw)
        try:
            order = int(order)
        except ValueError:
            raise TatqaError(f"{pw}: field 'order' must be a whole number, got {order!r}") from None
        if order < 1:
            raise TatqaError(f"{pw}: field 'order' must be >= 1, got {order}")
        if order in orders:
            raise TatqaError(f"{pw}: field 'order' repeats {order}")
        orders.add(order)
        if text.strip():
            units.append(Unit(cid, "narrative", order, order + 1, text.strip(), 0.0))
    return units, orders


def _question(q: dict, qi: int, cid: str, orders: set[int], where: str) -> dict:
    qw = f"{where}, questions[{qi}]"
    text = _field(q, "question", str, qw)
    src = _field(q, "answer_from", str, qw)
    if src not in SOURCES:
        raise TatqaError(f"{qw}: field 'answer_from' must be one of {', '.join(SOURCES)}, got {src!r}")
    rel = q.get("rel_paragraphs") or []
    if not isinstance(rel, list):
        raise TatqaError(f"{qw}: field 'rel_paragraphs' must be a list, got {type(rel).__name__}")
    try:
        rel = sorted({int(x) for x in rel})
    except (TypeError, ValueError):
        raise TatqaError(f"{qw}: field 'rel_paragraphs' must hold paragraph orders, got {rel!r}") from None
    missing = [r for r in rel if r not in orders]
    if missing:
        raise TatqaError(f"{qw}: field 'rel_paragraphs' names paragraph {missing[0]}, which is not in the context")
    gold = [{"doc": cid, "start": 0, "end": 1}] if src in ("table", "table-text") else []
    if src in ("text", "table-text"):
        gold += [{"doc": cid, "start": r, "end": r + 1} for r in rel]
    if not gold:
        raise TatqaError(f"{qw}: answer_from 'text' with no rel_paragraphs: no gold paragraph")
    return {"id": str(q.get("uid", f"{cid}#{qi}")), "question": text, "type": src, "gold": gold, "context": cid,
            "answer": q.get("answer")}


def _table(ctx: dict, i: int, name: str, seen: set[str]) -> tuple[str, Unit, str]:
    where = f"{name}, record {i}"
    tab = _field(ctx, "table", dict, where)
    cid = _field(tab, "uid", str, f"{where}, field 'table'")
    where = f"{name}, record {i} (table uid {cid})"
    if not cid.strip():
        raise TatqaError(f"{where}: field 'table.uid' is empty")
    if cid in seen:
        raise TatqaError(f"{where}: field 'table.uid' repeats an earlier record's uid")
    grid = _field(tab, "table", list, f"{where}, field 'table'")
    if not grid or not all(isinstance(r, list) for r in grid):
        raise TatqaError(f"{where}: field 'table.table' must be a non-empty list of rows (lists of strings)")
    for ri, r in enumerate(grid):
        bad = next((c for c in r if not isinstance(c, (str, int, float))), None)
        if bad is not None:
            raise TatqaError(f"{where}: field 'table.table', row {ri}: cell of type {type(bad).__name__}")
    header, rows, _ = split_header(grid)
    table = Table(header=[(h or f"column {j + 1}") if j else h for j, h in enumerate(header)], rows=rows,
                  fmt="tatqa")
    return cid, Unit(cid, "table", 0, 1, table_text(table), 1.0, table), where


def parse_tatqa(data, name: str = "tatqa") -> TatqaCorpus:
    """Units and questions of a parsed TAT-QA JSON value (module docstring); ``name`` prefixes errors."""
    if not isinstance(data, list):
        raise TatqaError(f"{name}: expected a JSON list of contexts, got {type(data).__name__}")
    units, questions, contexts = [], [], []
    seen: set[str] = set()
    for i, ctx in enumerate(data):
        cid, table_unit, where = _table(ctx, i, name, seen)
        seen.add(cid)
        paras, orders = _paragraphs(ctx, cid, where)
        units += [table_unit] + paras
        contexts.append(cid)
        qs = ctx.get("questions") or []
        if not isinstance(qs, list):
            raise TatqaError(f"{where}: field 'questions' must be a list, got {type(qs).__name__}")
        questions += [_question(q if isinstance(q, dict) else _field(q, "question", str, f"{where}, questions[{qi}]"),
                                qi, cid, orders, where) for qi, q in enumerate(qs)]
    if not units:
        raise TatqaError(f"{name}: no contexts")
    return TatqaCorpus(units, questions, contexts)


def load_tatqa(path: str | Path) -> TatqaCorpus:
    """:func:`parse_tatqa` of a file (errors name the file)."""
    return parse_tatqa(read_json(path), str(path))


def split_by_context(contexts: list[str], seed: int = 0, fit_fraction: float = 0.5) -> tuple[set, set]:
    """A seeded split of context ids into ``(fit, report)`` halves: fusion weights are fitted on the
    questions of the first and every number is reported on the second (no context is in both)."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(contexts))
    cut = int(round(fit_fraction * len(contexts)))
    return {contexts[i] for i in order[:cut]}, {contexts[i] for i in order[cut:]}
