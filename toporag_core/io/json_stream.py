"""Strict JSON: parsed whole, or a top-level list streamed item by item, errors with line and column.

JSON has no ``NaN`` / ``Infinity`` / ``-Infinity`` tokens: :func:`parse_json` rejects them naming
the line and column where they occur. :func:`iter_json_list` decodes the items of a list held in one
string one at a time; :func:`stream_json_list` reads them from text pieces (a file's decoded chunks),
so memory is one piece plus one item, never the whole text. Every failure is a
:class:`~toporag_core.graph.GraphFormatError` naming the file and line.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, Iterator

from ..graph import GraphFormatError


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

