"""Shared reading helpers of every graph format: decoding, size limits, files, lines, text fields.

Every failure is a :class:`~toporag_core.graph.GraphFormatError` naming the file, the line
(1-based, the header being line 1) or record (0-based), and the field. These helpers are the
public toolkit of format readers (``io/<format>.py`` and any plug-in format); this module also
re-exports the strict CSV reader (:mod:`.csv_records`) and the strict JSON reader
(:mod:`.json_stream`), so a format imports its whole toolkit from one place.

Rules every format shares (one place each):

* **Strict CSV** (:mod:`.csv_records`). A quoted field must be the whole field: ``"x"y`` or
  ``""><b>"`` is rejected ("text after the closing quote") with its line and field instead of being
  silently altered; an unterminated quote is reported at the line where it *opens*. A ``"`` inside an
  unquoted field is an ordinary character (kept verbatim, as RFC 4180 readers do).
* **One text-length limit**, :attr:`Limits.max_text_chars` (default :data:`MAX_TEXT_CHARS` = 100,000
  characters), for a node or relation text in every format (CSV cell, JSON string, ExplaGraphs part).
* **Texts are valid Unicode**: a lone surrogate (JSON ``"\\ud800"``) is rejected at load with its field.
* **JSON** (:mod:`.json_stream`) has no ``NaN`` / ``Infinity`` / ``-Infinity`` tokens (they are not
  JSON): rejected with line and column.
* **Limits are checked while streaming**: CSV/TSV tables are read record by record from the file (or the
  upload's bytes), never as one list of rows, so a file over ``max_edges`` / ``max_nodes`` is rejected at
  the first record over the limit with memory bounded by what was kept so far.
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..graph import MAX_TEXT_CHARS, GraphFormatError, check_text
from .csv_records import ALIASES_HINT, CsvRecords, near_match, require_columns, row_cell
from .json_stream import iter_json_list, parse_json, stream_json_list

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


def csv_rows(text: str, file: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """``[(line number, cells)]`` of a whole CSV/TSV text (small inputs; big ones stream :class:`CsvRecords`)."""
    return list(CsvRecords(iter_lines(text), file, delimiter))


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
           "stream_json_list", "delimiter_of", "looks_like_json", "HEAD_BYTES", "ALIASES_HINT"]
