"""Documents -> retrieval units: read a file safely, route its lines, parse its tables.

A *unit* is what every retriever ranks: one narrative block (route A) or one table (route B),
identified by ``doc_id`` and its line span ``[start, end)``. Evaluation matches units to gold
spans by line overlap, so gold never depends on how a retriever (or the router) cut the text.

Bad input never raises out of :func:`parse_document` for a single bad block: a table block that
cannot be parsed (e.g. 10,000 columns) is kept as narrative text and the reason is recorded in
``warnings``. Whole-file problems (binary, empty, undecodable) raise :class:`DocumentError`
naming the file; an upload of another type (JSON) or a CSV / TSV whose header does not fit its
rows raises it too (:func:`read_upload`), naming the file, the line and what is wrong.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .router import RouterConfig, Routing, route_lines
from .tables import MAX_COLUMNS, Table, TableError, parse_table, strip_html

MAX_DOC_BYTES = 20_000_000
TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".tsv", ".csv", ".text")


class DocumentError(ValueError):
    """A document that cannot be read at all (binary, empty, undecodable)."""


@dataclass
class Unit:
    """One retrieval unit: a narrative block or a table of a document."""

    doc_id: str
    kind: str  # "narrative" | "table"
    start: int  # first line (0-based)
    end: int  # one past the last line
    text: str  # narrative: visible text; table: the raw block
    sds: float
    table: Table | None = None

    @property
    def uid(self) -> str:
        return f"{self.doc_id}:{self.start + 1}-{self.end}"

    def flat_text(self) -> str:
        """The naive flattening: visible text with separators turned into spaces."""
        if self.table is None:
            return self.text
        return " ".join([" ".join(self.table.header)] + [" ".join(r) for r in self.table.rows])


@dataclass
class ParsedDocument:
    doc_id: str
    routing: Routing
    units: list[Unit]
    warnings: list[str] = field(default_factory=list)


def decode_document(data: bytes, name: str) -> str:
    """UTF-8 (or UTF-16 with BOM, or Latin-1 when it is clearly text) -> str; binary raises."""
    if not data or not data.strip():
        raise DocumentError(f"{name}: empty document")
    if len(data) > MAX_DOC_BYTES:
        raise DocumentError(f"{name}: {len(data):,} bytes is more than the {MAX_DOC_BYTES:,}-byte limit")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16")
    head = data[:8192]
    if b"\x00" in head:
        raise DocumentError(f"{name}: binary file (NUL bytes), not a text document")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        ctrl = sum(b < 9 or 13 < b < 32 for b in head)
        if ctrl > len(head) * 0.01:
            raise DocumentError(f"{name}: binary file (byte {e.start} is not UTF-8), not a text document") from e
        text = data.decode("latin-1")
    if not text.strip():
        raise DocumentError(f"{name}: empty document")
    return text


def check_upload(text: str, name: str) -> None:
    """:class:`DocumentError` naming ``name`` and what is wrong when an uploaded file is not a document
    this reader takes: another file type (JSON data, ...), or a CSV / TSV whose header line does not
    fit its rows (an empty or repeated column name, a row with another number of fields)."""
    suffix = Path(name).suffix.lower()
    if suffix == ".json" or (suffix not in TEXT_SUFFIXES and _is_json(text)):
        raise DocumentError(f"{name}: JSON data, not a document; upload Markdown, HTML, TSV, CSV or plain text")
    if suffix not in TEXT_SUFFIXES and suffix:
        raise DocumentError(f"{name}: unknown document type {suffix!r}; upload one of {', '.join(TEXT_SUFFIXES)}")
    if suffix in (".csv", ".tsv"):
        _check_delimited(text, name, "\t" if suffix == ".tsv" else ",")


def _is_json(text: str) -> bool:
    if text.lstrip()[:1] not in ("{", "["):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _check_delimited(text: str, name: str, delimiter: str) -> None:
    rows = [(i, r) for i, r in enumerate(csv.reader(io.StringIO(text), delimiter=delimiter), 1) if any(c.strip()
                                                                                                   for c in r)]
    if not rows:
        raise DocumentError(f"{name}: empty document")
    line, header = rows[0]
    names = [c.strip() for c in header]
    if len(names) < 2:
        raise DocumentError(f"{name}, line {line}: the header has {len(names)} column; a table needs at least 2 "
                            f"({'tab' if delimiter == chr(9) else 'comma'}-separated)")
    if "" in names:
        raise DocumentError(f"{name}, line {line}: header column {names.index('') + 1} has no name")
    seen = {n for n in names if names.count(n) > 1}
    if seen:
        raise DocumentError(f"{name}, line {line}: header column name {sorted(seen)[0]!r} is repeated")
    for i, r in rows[1:]:
        if len(r) != len(names):
            raise DocumentError(f"{name}, line {i}: {len(r)} field(s), but the header (line {line}) has "
                                f"{len(names)} columns: {', '.join(names)}")


def read_upload(data: bytes, name: str) -> str:
    """An uploaded document's text (:func:`decode_document`), checked by :func:`check_upload`."""
    text = decode_document(data, name)
    check_upload(text, name)
    return text


def read_document(path: str | Path) -> str:
    """Read a text document; :class:`DocumentError` names the file when it is not one."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file")
    return decode_document(p.read_bytes(), str(p))


def parse_document(text: str, doc_id: str, config: RouterConfig | None = None,
                   max_columns: int = MAX_COLUMNS) -> ParsedDocument:
    """Route the lines of ``text`` and turn its blocks into units."""
    if not isinstance(text, str) or not text.strip():
        raise DocumentError(f"{doc_id}: empty document")
    lines = text.splitlines()
    routing = route_lines(lines, config)
    units, warnings = [], []
    for b in routing.blocks:
        if b.kind == "table":
            try:
                t = parse_table(b.text, max_columns=max_columns, where=f"{doc_id}, lines {b.start + 1}-{b.end}")
            except TableError as e:
                warnings.append(f"{e}; kept as narrative text")
            else:
                if len(t.rows) >= 1 and len(t.header) >= 2:
                    warnings.extend(t.warnings)
                    units.append(Unit(doc_id, "table", b.start, b.end, b.text, b.sds, t))
                    continue
                warnings.append(f"{doc_id}, lines {b.start + 1}-{b.end}: fewer than 2 columns or no data row; "
                                "kept as narrative text")
        visible = strip_html(b.text) if re.search(r"<[a-zA-Z/!]", b.text) else b.text.strip()
        if visible:
            units.append(Unit(doc_id, "narrative", b.start, b.end, visible, b.sds))
    return ParsedDocument(doc_id, routing, units, warnings)


def load_folder(folder: str | Path, config: RouterConfig | None = None) -> tuple[list[ParsedDocument], list[str]]:
    """Every text document under ``folder`` (sorted); unreadable ones become messages, not errors."""
    root = Path(folder)
    if root.is_file():
        files = [root]
        root = root.parent
    elif root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    else:
        raise FileNotFoundError(f"{folder}: no such file or folder")
    docs, errors = [], []
    for p in files:
        try:
            docs.append(parse_document(read_document(p), p.relative_to(root).as_posix(), config))
        except DocumentError as e:
            errors.append(str(e))
    return docs, errors
