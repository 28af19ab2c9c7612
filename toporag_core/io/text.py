"""Shared reading helpers of every graph format: decoding, size limits, streamed CSV records, JSON, text fields.

Every failure is a :class:`~toporag_core.graph.GraphFormatError` naming the file, the line
(1-based, the header being line 1) or record (0-based), and the field. These helpers are the
public toolkit of format readers (``io/<format>.py`` and any plug-in format).

Rules every format shares (one place, here):

* **Strict CSV.** A quoted field must be the whole field: ``"x"y`` or ``""><b>"`` is rejected
  ("text after the closing quote") with its line and field instead of being silently altered; an
  unterminated quote is reported at the line where it *opens*. A ``"`` inside an unquoted field is
  an ordinary character (kept verbatim, as RFC 4180 readers do).
* **One text-length limit**, :attr:`Limits.max_text_chars` (default :data:`MAX_TEXT_CHARS` = 100,000
  characters), for a node or relation text in every format (CSV cell, JSON string, ExplaGraphs part).
* **Texts are valid Unicode**: a lone surrogate (JSON ``"\\ud800"``) is rejected at load with its field.
* **JSON** has no ``NaN`` / ``Infinity`` / ``-Infinity`` tokens (they are not JSON): rejected with line and column.
* **Limits are checked while streaming**: CSV/TSV tables are read record by record from the file (or the
  upload's bytes), never as one list of rows, so a file over ``max_edges`` / ``max_nodes`` is rejected at
  the first record over the limit with memory bounded by what was kept so far.
"""
from __future__ import annotations

import codecs
import csv
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ..graph import MAX_TEXT_CHARS, GraphFormatError, check_text

HEAD_BYTES = 1 << 16  # what format detection reads of a file


@dataclass(frozen=True)
class Limits:
    """Size limits; input over any of them is rejected before it can exhaust memory."""

    max_nodes: int = 200_000
    max_edges: int = 1_000_000
    max_bytes: int = 200_000_000
    max_text_chars: int = MAX_TEXT_CHARS

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


def check_path(path: Path) -> None:
    """A readable regular file: missing, a symlink loop, a directory or unreadable are each named as such."""
    file = str(path)
    try:
        path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise GraphFormatError("broken symbolic link (its target does not exist)", file=file) from None
        raise GraphFormatError("file not found", file=file) from None
    except OSError as e:
        if e.errno == 40 or "symbolic links" in str(e).lower():  # ELOOP
            raise GraphFormatError("symbolic link loop (the link resolves to itself)", file=file) from None
        raise GraphFormatError(f"cannot read: {e.strerror or e}", file=file) from None
    if path.is_dir():
        raise GraphFormatError("is a directory, not a file (a directory is only valid for csv-pair)", file=file)


def read_file(path: Path, limits: Limits) -> str:
    """A file's text (checked against ``limits`` before it is read)."""
    check_path(path)
    limits.check_bytes(path.stat().st_size, str(path))
    try:
        data = path.read_bytes()
    except OSError as e:
        raise GraphFormatError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    return decode(data, str(path), limits)


def iter_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` (ends kept), one at a time: no list of all lines, no copy of the text."""
    start, n = 0, len(text)
    while start < n:
        end = text.find("\n", start)
        end = n if end < 0 else end + 1
        yield text[start:end]
        start = end


def iter_byte_lines(chunks: Iterable[bytes], file: str) -> Iterator[str]:
    """Decoded lines of a UTF-8 byte stream (``chunks``), streamed; a BOM is dropped; bad bytes name offset+line."""
    pending = ""
    for text in iter_text_chunks(chunks, file):
        text = pending + text
        cut = text.rfind("\n") + 1
        pending = text[cut:]
        yield from iter_lines(text[:cut])
    if pending:
        yield pending


def file_chunks(path: Path, size: int = 1 << 20) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def bytes_chunks(data: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    view = memoryview(data)
    for i in range(0, len(data), size):
        yield bytes(view[i:i + size])


def text_field(value: Any, file: str | None, field: str, *, line: int | None = None, record: int | str | None = None,
               strip: bool = True, lower: bool = False, max_chars: int = MAX_TEXT_CHARS) -> str:
    """One text field: a non-empty string (numbers are converted) of valid Unicode, at most ``max_chars`` long."""
    if value is None or isinstance(value, (dict, list, tuple, bool)):
        raise GraphFormatError(f"expected text, got {type(value).__name__}", file=file, line=line,
                               record=record, field=field)
    s = str(value)
    if not s.strip():
        raise GraphFormatError("empty text", file=file, line=line, record=record, field=field)
    s = s.strip() if strip else s
    problem = check_text(s, max_chars)
    if problem:
        raise GraphFormatError(problem, file=file, line=line, record=record, field=field)
    return s.lower() if lower else s


# ------------------------------------------------------------------------------------------------ CSV
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


def csv_rows(text: str, file: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """``[(line number, cells)]`` of a whole CSV/TSV text (small inputs; big ones stream :class:`CsvRecords`)."""
    return list(CsvRecords(iter_lines(text), file, delimiter))


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


# ------------------------------------------------------------------------------------------------ JSON
class _NonFinite(ValueError):
    pass


def _reject_constant(name: str):
    raise _NonFinite(name)


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def parse_json(text: str, file: str) -> Any:
    """JSON text -> value, errors with line and column; ``NaN`` / ``Infinity`` are errors (not JSON)."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except _NonFinite as e:
        for m in _JSON_TOKEN.finditer(text):
            if m.group(1):
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() - text.rfind("\n", 0, m.start())
                raise GraphFormatError(f"invalid JSON at column {col}: {m.group(1)} is not a JSON value "
                                       "(JSON has no NaN/Infinity)", file=file, line=line) from None
        raise GraphFormatError(f"invalid JSON: {e} is not a JSON value", file=file) from None
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"invalid JSON at column {e.colno}: {e.msg}", file=file, line=e.lineno) from None
    except RecursionError:
        raise GraphFormatError("invalid JSON: nested too deeply", file=file) from None


def iter_json_list(text: str, file: str) -> Iterator[Any] | None:
    """The items of a top-level JSON list, decoded one at a time (no list of all items is built), or ``None``
    when ``text`` is not a list. Errors as :func:`parse_json`."""
    dec = json.JSONDecoder(parse_constant=_reject_constant)
    i = len(text) - len(text.lstrip())
    if text[i:i + 1] != "[":
        return None

    def items() -> Iterator[Any]:
        ws = re.compile(r"\s*")
        pos = ws.match(text, i + 1).end()
        if text[pos:pos + 1] == "]":
            return
        while True:
            try:
                value, pos = dec.raw_decode(text, pos)
            except (json.JSONDecodeError, _NonFinite, RecursionError):
                parse_json(text, file)  # the precise message (line, column) of the whole text
                raise
            yield value
            pos = ws.match(text, pos).end()
            c = text[pos:pos + 1]
            if c == "]":
                if text[pos + 1:].strip():
                    parse_json(text, file)
                return
            if c != ",":
                parse_json(text, file)
                raise GraphFormatError("invalid JSON: expected ',' or ']'", file=file)
            pos = ws.match(text, pos + 1).end()
    return items()


def iter_text_chunks(chunks: Iterable[bytes], file: str) -> Iterator[str]:
    """Decoded text pieces of a UTF-8 byte stream (BOM dropped), not split into lines; bad bytes name offset+line."""
    dec = codecs.getincrementaldecoder("utf-8-sig")("strict")
    offset, lines_before = 0, 0
    for chunk in chunks:
        try:
            text = dec.decode(chunk)
        except UnicodeDecodeError as e:
            raise GraphFormatError(f"not UTF-8: byte 0x{chunk[e.start]:02x} at byte offset {offset + e.start}",
                                   file=file, line=lines_before + chunk.count(b"\n", 0, e.start) + 1) from None
        offset += len(chunk)
        lines_before += chunk.count(b"\n")
        if text:
            yield text
    try:
        tail = dec.decode(b"", final=True)
    except UnicodeDecodeError:
        raise GraphFormatError(f"not UTF-8: truncated multi-byte character at byte offset {offset}",
                               file=file, line=lines_before + 1) from None
    if tail:
        yield tail


_WS = re.compile(r"\s*")
_NON_FINITE = re.compile(r"-?Infinity|NaN")


class _JsonPieces:
    """A JSON text read from text pieces: ``buf`` holds the unread rest of the pieces read so far (from
    ``pos``), ``line``/``col`` are where ``buf[0]`` is in the whole text, for error messages."""

    def __init__(self, pieces: Iterable[str], file: str) -> None:
        self.it, self.file = iter(pieces), file
        self.dec = json.JSONDecoder(parse_constant=_reject_constant)
        self.buf, self.pos, self.eof, self.line, self.col = "", 0, False, 1, 0

    def fill(self) -> bool:
        """Append the next piece (dropping what was read); ``False`` at the end of the input."""
        if self.eof:
            return False
        nxt = next(self.it, None)
        if nxt is None:
            self.eof = True
            return False
        dropped = self.buf[:self.pos]
        nl = dropped.count("\n")
        if nl:
            self.line += nl
            self.col = len(dropped) - dropped.rfind("\n") - 1
        else:
            self.col += len(dropped)
        self.buf, self.pos = self.buf[self.pos:] + nxt, 0
        return True

    def where(self, at: int) -> tuple[int, int]:
        """Line and column (1-based) of ``buf[at]`` in the whole text."""
        buf = self.buf
        nl = buf.count("\n", 0, at)
        col = at - buf.rfind("\n", 0, at) if nl else self.col + at + 1
        return self.line + nl, col

    def fail(self, at: int, msg: str) -> GraphFormatError:
        line, col = self.where(at)
        return GraphFormatError(f"invalid JSON at column {col}: {msg}", file=self.file, line=line)

    def skip_ws(self) -> str:
        """Skip white space (reading pieces as needed); the next character, ``""`` at the end."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf) or not self.fill():
                return self.buf[self.pos:self.pos + 1]

    def expect_end(self) -> None:
        if self.skip_ws():
            raise self.fail(self.pos, "Extra data")

    def decode(self) -> tuple[Any, int]:
        """The value at ``pos`` and where it ends in ``buf``, reading more pieces while it may go on."""
        while True:
            buf, pos = self.buf, self.pos
            try:
                value, end = self.dec.raw_decode(buf, pos)
            except _NonFinite as e:
                m = _NON_FINITE.search(buf, pos)
                raise self.fail(m.start() if m else pos, f"{e} is not a JSON value (JSON has no NaN/Infinity)") \
                    from None
            except (json.JSONDecodeError, RecursionError) as e:
                # an error near the buffer's end (a cut literal, number or list) or an unterminated string
                # may only mean that the item goes on in the next piece
                at_end = isinstance(e, RecursionError) or e.pos >= len(buf) - 64 or \
                    e.msg.startswith("Unterminated string")
                if at_end and self.fill():
                    continue
                if isinstance(e, RecursionError):
                    raise GraphFormatError("invalid JSON: nested too deeply", file=self.file) from None
                raise self.fail(e.pos, e.msg) from None
            if end < len(buf) or self.eof or not self.fill():
                return value, end  # a value that ends at the buffer's end may go on in the next piece

    def items(self) -> Iterator[Any]:
        """The list's items; ``pos`` is just after its ``[``."""
        if self.skip_ws() == "]":
            self.pos += 1
            self.expect_end()
            return
        while True:
            self.skip_ws()
            value, self.pos = self.decode()
            yield value
            c = self.skip_ws()
            if c == "]":
                self.pos += 1
                self.expect_end()
                return
            if c != ",":
                raise self.fail(self.pos, "Expecting ',' delimiter" if c else "Expecting ',' delimiter or ']'")
            self.pos += 1


def stream_json_list(pieces: Iterable[str], file: str) -> Iterator[Any] | None:
    """The items of a top-level JSON list read from text ``pieces`` (e.g. :func:`iter_text_chunks`), one at a time:
    memory is one piece plus one item, never the whole text. ``None`` when the input is not a list.
    Errors name the line and column as :func:`parse_json` does (``NaN``/``Infinity`` included)."""
    src = _JsonPieces(pieces, file)
    if src.skip_ws() != "[":
        return None
    src.pos += 1
    return src.items()


def delimiter_of(text: str, file: str) -> str:
    """Tab when the name ends ``.tsv``/``.tab`` or line 1 has a tab, else comma."""
    first = text.lstrip("\r\n").split("\n", 1)[0]
    if file.lower().endswith((".tsv", ".tab")) or "\t" in first:
        return "\t"
    return ","


def looks_like_json(text: str, file: str) -> bool:
    return file.lower().endswith(".json") or text.lstrip()[:1] in ("[", "{")


__all__ = ["Limits", "MAX_TEXT_CHARS", "decode", "read_file", "check_path", "iter_lines", "iter_byte_lines",
           "file_chunks", "bytes_chunks", "text_field", "CsvRecords", "csv_rows", "near_match", "require_columns",
           "row_cell", "parse_json", "iter_json_list", "iter_text_chunks",
           "stream_json_list", "delimiter_of", "looks_like_json", "HEAD_BYTES"]
