"""The graph-format registry: one entry per input format, read by every loader entry point.

A :class:`GraphFormat` says everything a caller needs: its ``name`` (``--format``), a
``label``, the file ``extensions`` an upload may have, a ``detect`` rule for
``--format auto`` (tried in ``priority`` order, lower first), its ``load`` function, and
optionally ``records`` (labels of the records of a multi-record file, for a record picker)
and ``load_path`` / ``detect_path`` for formats that are more than one file (a csv pair's
folder, a GQA scene file with its ``questions.csv``).

The CLI's ``--format`` choices, auto-detection and the app's upload types all come from
:data:`FORMATS`; a new format is one :func:`register_format` call in its own module. The
built-in formats register themselves in ``io/<format>.py``, imported by ``io/__init__``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from ..graph import GraphFormatError, TextualGraph
from .text import HEAD_BYTES, Limits, bytes_chunks, decode, file_chunks, iter_byte_lines, iter_lines, \
    iter_text_chunks, looks_like_json, parse_json, read_file


class Source:
    """One input to a format reader: its text (or the file / bytes it comes from), file name, limits, graph name.

    Give one of ``text``, ``path`` or ``data`` (an upload's bytes). ``text`` is decoded only when a reader
    asks for it; streaming readers call :meth:`lines` instead (from the file or the bytes, never holding a
    decoded copy) and detection reads :attr:`head` (the first 64 KiB). ``json`` parses the text once,
    however many detectors look at it.
    """

    def __init__(self, text: str | None = None, file: str = "", limits: Limits | None = None, name: str = "", *,
                 path: Path | None = None, data: bytes | None = None) -> None:
        if text is None and path is None and data is None:
            raise ValueError("Source needs text, path or data")
        self._text, self.file, self.limits, self.name = text, file, limits or Limits(), name
        self.path, self.data = path, data

    @cached_property
    def text(self) -> str:
        if self._text is not None:
            return self._text
        if self.data is not None:
            return decode(self.data, self.file, self.limits)
        return read_file(self.path, self.limits)

    @cached_property
    def head(self) -> str:
        """The first :data:`HEAD_BYTES` of the input, decoded (a cut multi-byte character is dropped)."""
        if self._text is not None:
            return self._text[:HEAD_BYTES]
        if self.data is not None:
            raw = self.data[:HEAD_BYTES]
        else:
            with open(self.path, "rb") as f:
                raw = f.read(HEAD_BYTES)
        return raw.decode("utf-8-sig", errors="ignore")

    def lines(self):
        """The input's lines, streamed (ends kept; UTF-8 errors name the byte offset and line)."""
        if self._text is not None:
            return iter_lines(self._text)
        chunks = bytes_chunks(self.data) if self.data is not None else file_chunks(self.path)
        return iter_byte_lines(chunks, self.file)

    def pieces(self):
        """The input's text in pieces (about 1 MiB each), decoded as it is read; never the whole text at once."""
        if self._text is not None:
            return iter((self._text,))
        chunks = bytes_chunks(self.data) if self.data is not None else file_chunks(self.path)
        return iter_text_chunks(chunks, self.file)

    @cached_property
    def json(self) -> Any:
        return parse_json(self.text, self.file)

    @property
    def is_json(self) -> bool:
        return looks_like_json(self.head, self.file)

    @property
    def first_line(self) -> str:
        return self.head.lstrip().split("\n", 1)[0]


@dataclass(frozen=True)
class GraphFormat:
    """A registered graph format (see the module docstring)."""

    name: str
    label: str
    load: Callable[[Source, Any], TextualGraph]
    detect: Callable[[Source], bool] | None = None
    extensions: tuple[str, ...] = ()
    priority: int = 50
    records: Callable[[Source], list[str]] | None = None
    load_path: Callable[[Path, Limits, dict], TextualGraph] | None = None
    detect_path: Callable[[Path], bool] | None = None
    help: str = ""


FORMATS: dict[str, GraphFormat] = {}


def register_format(fmt: GraphFormat | None = None, **fields: Any) -> GraphFormat:
    """Register a format (a :class:`GraphFormat` or its fields); the same name replaces the old one."""
    f = fmt if fmt is not None else GraphFormat(**fields)
    if not f.name or f.name == "auto":
        raise ValueError(f"invalid format name {f.name!r}")
    FORMATS[f.name] = f
    return f


def unregister_format(name: str) -> None:
    FORMATS.pop(name, None)


def format_names() -> list[str]:
    """Registered format names, in detection order."""
    return [f.name for f in sorted(FORMATS.values(), key=lambda f: f.priority)]


def get_format(name: str) -> GraphFormat:
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; expected 'auto' or one of {', '.join(format_names())}")
    return FORMATS[name]


def upload_extensions() -> list[str]:
    """Every extension some format accepts (the app's uploader types), sorted."""
    return sorted({e.lower().lstrip(".") for f in FORMATS.values() for e in f.extensions})


def detect_source(src: Source) -> GraphFormat:
    """The first format (by priority) whose ``detect`` accepts ``src``."""
    for f in sorted(FORMATS.values(), key=lambda f: f.priority):
        if f.detect is not None and f.detect(src):
            return f
    raise GraphFormatError("cannot tell the format of this input; pass --format", file=src.file)


def detect_path(path: Path) -> GraphFormat | None:
    """A multi-file format that recognises ``path`` itself (a folder, a file of a pair), else ``None``."""
    for f in sorted(FORMATS.values(), key=lambda f: f.priority):
        if f.detect_path is not None and f.detect_path(path):
            return f
    return None
