"""Strict CSV/TSV records, streamed, with the line and field of every malformed one; header checks.

:class:`CsvRecords` reads ``(line, cells)`` records from a stream of lines through the ``csv`` module
(``strict=True``), blank records skipped. When the module rejects a record, :class:`_RecordScan`
re-reads that record's text character by character to say *where* it goes wrong: text after a
closing quote (``"x"y``) at its line and field, an unterminated quote at the line where it opens, a
field over ``max_text_chars`` at its line. A ``"`` inside an unquoted field is an ordinary character
(kept verbatim, as RFC 4180 readers do). Memory is the current record, never the whole table.

Header helpers shared by the table formats: :func:`require_columns` names a missing column and the
header cell it is probably misspelt as (:func:`near_match`), :func:`row_cell` checks a row's width.
"""
from __future__ import annotations

import csv
import difflib
import re
from typing import Iterable, Iterator, Sequence

from ..graph import MAX_TEXT_CHARS, GraphFormatError


class _Tape:
    """Line iterator that remembers the lines of the record being read (to diagnose a malformed one)."""

    __slots__ = ("_it", "buf")

    def __init__(self, lines: Iterable[str]) -> None:
        self._it = iter(lines)
        self.buf: list[str] = []

    def __iter__(self) -> "_Tape":
        return self

    def __next__(self) -> str:
        line = next(self._it)
        self.buf.append(line)
        return line


class CsvRecords:
    """Strict CSV/TSV records ``(line, cells)`` of a stream of lines, blank records skipped.

    ``line`` is where the record starts (1-based). Set :attr:`columns` (the header's names) once the
    header is known, so errors name the column. A malformed record raises :class:`GraphFormatError`
    with the line and field where the problem *is* (see the module docstring).
    """

    def __init__(self, lines: Iterable[str], file: str, delimiter: str = ",",
                 max_chars: int = MAX_TEXT_CHARS) -> None:
        self.file, self.delimiter, self.max_chars = file, delimiter, max_chars
        self.columns: Sequence[str] | None = None
        self._tape = _Tape(lines)
        if csv.field_size_limit() != max_chars + 1:
            csv.field_size_limit(max_chars + 1)  # a longer cell is diagnosed below, as in every format
        self._reader = csv.reader(self._tape, delimiter=delimiter, strict=True)

    @property
    def kind(self) -> str:
        return "TSV" if self.delimiter == "\t" else "CSV"

    def field_name(self, i: int) -> str:
        return self.columns[i] if self.columns and i < len(self.columns) else f"column {i + 1}"

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        reader, tape = self._reader, self._tape
        while True:
            start = reader.line_num + 1
            tape.buf.clear()
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                raise self._diagnose("".join(tape.buf), start, str(e)) from None
            if row and any(c.strip() for c in row):
                yield start, row

    def _diagnose(self, raw: str, start: int, reason: str) -> GraphFormatError:
        """Re-read one malformed record character by character: where does it go wrong?"""
        scan = _RecordScan(raw, self.delimiter, start)
        bad = scan.run()
        if bad is not None:
            j = raw.rfind('"', 0, bad)
            snippet = raw[max(0, j - 20):bad + 20].strip()
            return GraphFormatError(
                f"malformed {self.kind}: text after the closing quote of a quoted field near {snippet!r} "
                "(quote the whole field and double every quote inside it)",
                file=self.file, line=scan.line, field=self.field_name(scan.fld))
        quoted = scan.state == _RecordScan.QUOTED
        if "field larger than field limit" in reason:
            if quoted:
                return GraphFormatError(f"quoted field opened here is longer than max_text_chars={self.max_chars} "
                                        "characters (is its closing quote missing?)", file=self.file, line=scan.qline,
                                        field=self.field_name(scan.fld))
            return GraphFormatError(f"text longer than max_text_chars={self.max_chars} characters", file=self.file,
                                    line=scan.line, field=self.field_name(scan.fld))
        if quoted:
            return GraphFormatError("unterminated quote: the quoted field opened here is never closed",
                                    file=self.file, line=scan.qline, field=self.field_name(scan.fld))
        return GraphFormatError(f"malformed {self.kind}: {reason}", file=self.file, line=scan.line)


class _RecordScan:
    """A character-by-character re-read of one CSV/TSV record, as the ``csv`` module reads it: which line
    and field it is in, and whether it is inside a quoted field (and on which line that field opened).

    One step per state (table-driven); the unquoted and quoted states jump to the next delimiter / quote
    with one search instead of looping over every character.
    """

    START, UNQUOTED, QUOTED, CLOSED = 0, 1, 2, 3  # field start, unquoted field, quoted field, after its closing quote

    def __init__(self, raw: str, delimiter: str, line: int) -> None:
        self.raw, self.d, self.n = raw, delimiter, len(raw)
        self.line, self.qline, self.fld, self.state = line, line, 0, self.START
        self.stop = re.compile("[" + re.escape(delimiter) + "\n]")
        self.bad: int | None = None

    def run(self) -> int | None:
        """Scan the whole record; the index of text after a closing quote (the error), else ``None``."""
        steps = (self._start, self._unquoted, self._quoted, self._closed)
        i = 0
        while i < self.n:
            i = steps[self.state](i)
            if i is None:
                break
            i += 1
        return self.bad

    def _next_field(self) -> None:
        self.fld, self.state = self.fld + 1, self.START

    def _start(self, i: int) -> int:
        c = self.raw[i]
        if c == '"':
            self.state, self.qline = self.QUOTED, self.line
        elif c == self.d:
            self.fld += 1
        elif c == "\n":
            self.line += 1
        elif c != "\r":
            self.state = self.UNQUOTED
        return i

    def _unquoted(self, i: int) -> int | None:
        """Jump to the field's end."""
        m = self.stop.search(self.raw, i)
        if m is None:
            return None
        i = m.start()
        if self.raw[i] == self.d:
            self._next_field()
        else:
            self.line, self.state = self.line + 1, self.START
        return i

    def _quoted(self, i: int) -> int | None:
        """Jump to the next quote (a long quoted field is one find, not a loop)."""
        raw, n = self.raw, self.n
        j = raw.find('"', i)
        j = n if j < 0 else j
        self.line += raw.count("\n", i, j)
        i = j
        if i >= n:
            return None
        if i + 1 < n and raw[i + 1] == '"':
            return i + 1
        self.state = self.CLOSED
        return i

    def _closed(self, i: int) -> int | None:
        c = self.raw[i]
        if c == self.d:
            self._next_field()
        elif c in "\r\n":
            self.line, self.state = self.line + (c == "\n"), self.START
        else:
            self.bad = i
            return None
        return i




ALIASES_HINT = "node_id,node_attr / src,edge_attr,dst / head,relation,tail"


def near_match(word: str, names: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The known name ``word`` is probably a misspelling of (``difflib`` ratio >= ``cutoff``), else ``None``."""
    m = difflib.get_close_matches(word.strip().lower(), list(names), n=1, cutoff=cutoff)
    return m[0] if m else None


def require_columns(header: Sequence[str], line: int, file: str, required: tuple[str, ...]) -> dict[str, int]:
    """``{column: index}`` of the ``required`` columns of a header row (case-insensitive); a missing one is
    named, with the header cell it is probably misspelt as."""
    cols = {c.strip().lower(): i for i, c in enumerate(header)}
    for name in required:
        if name not in cols:
            guess = near_match(name, [c for c in cols if c not in required], 0.6)
            hint = f"; did you mean '{name}' for '{guess}'?" if guess else ""
            raise GraphFormatError(f"missing column '{name}': expected a header with {', '.join(required)} "
                                   f"(header has {[c.strip() for c in header]}){hint}", file=file, line=line,
                                   field=name)
    return {name: cols[name] for name in required}


def row_cell(row: list[str], idx: int, width: int, line: int, file: str) -> str:
    """``row[idx]`` of a row that must have ``width`` fields."""
    if len(row) != width:
        raise GraphFormatError(f"expected {width} fields, got {len(row)}", file=file, line=line)
    return row[idx]

