"""Table parsing: one grid (header + rows of strings) from any of five text formats.

* Markdown pipe tables (``| a | b |``; the ``|---|---|`` rule marks the header row above it);
* HTML tables (:class:`html.parser.HTMLParser` from the standard library; ``<th>`` or the first
  ``<tr>`` is the header; ``<script>``/``<style>`` content is dropped, entities are unescaped);
* TSV (tabs) and CSV (the :mod:`csv` module, ``,`` or ``;``), header = first row;
* columns aligned by runs of 2+ spaces; a rule of dashes (``---  -----``) marks the header above.

Ragged rows are padded with ``""`` (short) or have their extra cells joined into the last column
(long), and each fix is a warning naming the line; more than ``max_columns`` columns raises
:class:`TableError` (a 10,000-column "table" is not something to embed cell by cell).
"""
from __future__ import annotations

import csv
import html
import io
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

FORMATS = ("markdown", "html", "tsv", "csv", "aligned")
MAX_COLUMNS = 256
_RULE_CELL = re.compile(r"^:?-{2,}:?$")
_ALIGNED_SPLIT = re.compile(r" {2,}")


class TableError(ValueError):
    """A block that cannot be parsed as a table (the message names the line and the problem)."""


@dataclass
class Table:
    """A parsed table: ``header`` (C,) and ``rows`` (R, C) of stripped strings."""

    header: list[str]
    rows: list[list[str]]
    fmt: str
    warnings: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.header)

    def to_dict(self) -> dict:
        return {"header": self.header, "rows": self.rows, "format": self.fmt, "warnings": self.warnings}

    def row_text(self, i: int) -> str:
        """``header: value; ...`` of row ``i`` (empty cells left out)."""
        return "; ".join(f"{h}: {v}" for h, v in zip(self.header, self.rows[i]) if v)

    def to_markdown(self, rows: list[int] | None = None) -> str:
        """The header and the chosen rows (default all) as a Markdown pipe table."""
        pick = range(len(self.rows)) if rows is None else rows
        esc = [[c.replace("|", "/") for c in r] for r in [self.header] + [self.rows[i] for i in pick]]
        lines = ["| " + " | ".join(esc[0]) + " |", "|" + "|".join("---" for _ in self.header) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in esc[1:]])


def detect_format(text: str) -> str:
    """The most likely format of a table block (see :data:`FORMATS`)."""
    lines = [x for x in text.splitlines() if x.strip()]
    if not lines:
        raise TableError("empty table block")
    low = text.lower()
    if "<table" in low or "<tr" in low or "<td" in low:
        return "html"
    pipes = sum(x.count("|") >= 2 or x.strip().startswith("|") for x in lines)
    if pipes >= max(1, len(lines) // 2):
        return "markdown"
    if sum("\t" in x for x in lines) >= max(1, len(lines) // 2):
        return "tsv"
    if sum(len(_ALIGNED_SPLIT.split(x.strip())) >= 2 for x in lines) >= max(1, len(lines) // 2):
        return "aligned"
    return "csv"


def parse_table(text: str, fmt: str = "auto", max_columns: int = MAX_COLUMNS, where: str = "table") -> Table:
    """Parse one table block. ``fmt``: ``auto`` or one of :data:`FORMATS`; ``where`` prefixes messages."""
    if not isinstance(text, str) or not text.strip():
        raise TableError(f"{where}: empty table block")
    fmt = detect_format(text) if fmt == "auto" else fmt
    if fmt not in FORMATS:
        raise TableError(f"{where}: unknown table format {fmt!r} (expected one of {', '.join(FORMATS)})")
    grid, header_at = {"markdown": _markdown, "html": _html, "tsv": _tsv, "csv": _csv, "aligned": _aligned}[fmt](text)
    grid = [[c for c in r] for r in grid if any(c.strip() for c in r)]
    if not grid:
        raise TableError(f"{where}: no cells found in the {fmt} block")
    width = max(len(r) for r in grid)
    if width > max_columns:
        raise TableError(f"{where}: {width} columns is more than max_columns={max_columns}; "
                         "not indexed as a table")
    header = [c.strip() for c in grid[header_at]]
    ncol = len(header)
    warnings = []
    rows = []
    for i, r in enumerate(grid[header_at + 1:], start=header_at + 2):
        r = [c.strip() for c in r]
        if len(r) < ncol:
            warnings.append(f"{where}, row {i}: {len(r)} cells for {ncol} columns; padded with empty cells")
            r = r + [""] * (ncol - len(r))
        elif len(r) > ncol:
            warnings.append(f"{where}, row {i}: {len(r)} cells for {ncol} columns; extra cells joined into "
                            f"column {header[-1]!r}" if header else f"{where}, row {i}: extra cells")
            r = r[:ncol - 1] + [" ".join(c for c in r[ncol - 1:] if c)]
        rows.append(r)
    header = [h or f"column {j + 1}" for j, h in enumerate(header)]
    return Table(header=header, rows=rows, fmt=fmt, warnings=warnings)


def _header_from_rule(rows: list[list[str]], is_rule) -> tuple[list[list[str]], int]:
    """Drop rule rows; the header is the row above the first rule (else the first row)."""
    out, header_at = [], None
    for r in rows:
        if r and all(is_rule(c) for c in r if c.strip()) and any(c.strip() for c in r):
            if header_at is None and out:
                header_at = len(out) - 1
            continue
        out.append(r)
    return out, header_at or 0


def _markdown(text: str):
    rows = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("|"):
            s = s[1:]
        if s.endswith("|") and not s.endswith("\\|"):
            s = s[:-1]
        cells = [c.replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)]
        rows.append(cells)
    return _header_from_rule(rows, lambda c: bool(_RULE_CELL.match(c.strip())))


def _tsv(text: str):
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    return rows, 0


def _csv(text: str):
    sample = text[:4096]
    delim = ";" if sample.count(";") > sample.count(",") else ","
    rows = list(csv.reader(io.StringIO(text), delimiter=delim, skipinitialspace=True))
    return rows, 0


def _aligned(text: str):
    rows = [_ALIGNED_SPLIT.split(line.strip()) for line in text.splitlines() if line.strip()]
    return _header_from_rule(rows, lambda c: bool(re.fullmatch(r"[-=:]{2,}", c.strip())))


class _HTMLTable(HTMLParser):
    """Collects the cells of the first table (nested tables' cells join their parent cell)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.header_rows: list[int] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._row_has_th = False
        self._skip = 0  # inside <script>/<style>

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag == "tr":
            self._close_row()
            self._row, self._row_has_th = [], False
        elif tag in ("td", "th"):
            self._close_cell()
            if self._row is None:
                self._row, self._row_has_th = [], False
            self._cell = []
            self._row_has_th |= tag == "th"
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag in ("td", "th"):
            self._close_cell()
        elif tag in ("tr", "table"):
            self._close_row()

    def handle_data(self, data):
        if self._skip == 0 and self._cell is not None:
            self._cell.append(data)

    def _close_cell(self):
        if self._cell is not None and self._row is not None:
            self._row.append(re.sub(r"\s+", " ", "".join(self._cell)).strip())
        self._cell = None

    def _close_row(self):
        self._close_cell()
        if self._row:
            if self._row_has_th:
                self.header_rows.append(len(self.rows))
            self.rows.append(self._row)
        self._row = None

    def close(self):
        super().close()
        self._close_row()


def _html(text: str):
    p = _HTMLTable()
    p.feed(text)
    p.close()
    return p.rows, (p.header_rows[0] if p.header_rows else 0)


def strip_html(text: str) -> str:
    """Visible text of an HTML fragment (scripts and styles dropped, entities unescaped)."""
    text = re.sub(r"(?is)<(script|style)\b.*?(</\1\s*>|$)", " ", text)
    text = re.sub(r"(?s)<[^>]*>", " ", text)
    return re.sub(r"[ \t]+", " ", html.unescape(text)).strip()


def table_text(table: Table) -> str:
    """The table written for BM25 and the dense encoder: the header once, then one line per row
    ``section / label: header value; ...`` (empty cells left out)."""
    lines = [" | ".join(h for h in table.header if h)]
    section = ""
    for r in table.rows:
        label, rest = (r[0], r[1:]) if r else ("", [])
        if label and not any(rest):
            section = label
            continue
        name = f"{section} / {label}" if section and label else label
        cells = "; ".join(f"{h} {v}" for h, v in zip(table.header[1:], rest) if v)
        lines.append(f"{name}: {cells}" if name else cells)
    return "\n".join(x for x in lines if x)
