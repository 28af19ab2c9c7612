"""A folder of text documents: every ``.txt`` / ``.md`` (``.markdown``, ``.rst``, ``.text``) file below it.

One file is one document: ``id`` = its path relative to the folder (``/``-separated), ``title`` = the
first line when it is a Markdown ``# Title``, else the file's stem; ``text`` = the file's text
(the title line removed). Files are read in sorted path order; hidden files and folders and other
suffixes are ignored. A file that cannot be a document (binary, not UTF-8, empty) is *skipped* with
one message naming the file (and line, for a bad byte) in :attr:`Corpus.skipped`; a folder with no
usable file raises.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..graph import GraphFormatError
from .base import Corpus, Document, check_field_text
from .registry import CorpusFormat, register_corpus_format

SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
MAX_FILE_BYTES = 20_000_000
_TITLE = re.compile(r"^\s*#\s+(.+?)\s*#*\s*$")


def text_files(folder: Path) -> list[Path]:
    """The document files below ``folder``, sorted, skipping hidden names."""
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder).parts
        if p.is_file() and p.suffix.lower() in SUFFIXES and not any(part.startswith(".") for part in rel):
            out.append(p)
    return sorted(out)


def read_text_document(path: Path, folder: Path) -> Document:
    """One file as a :class:`Document` (see the module docstring); bad files raise naming the file."""
    file = str(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise GraphFormatError(f"file is {size:,} bytes, over the limit of {MAX_FILE_BYTES:,}", file=file)
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise GraphFormatError("binary file (NUL bytes), not a text document", file=file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise GraphFormatError(f"not UTF-8 text (byte {e.start})", file=file, line=line) from None
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    title = path.stem
    if first is not None and (m := _TITLE.match(lines[first])):
        title = m.group(1)
        text = "\n".join(lines[first + 1:])
    check_field_text(text, file, "text")
    return Document(id=path.relative_to(folder).as_posix(), title=title, text=text, source=file, line=1)


def read_folder_corpus(folder: Path) -> Corpus:
    docs, skipped = [], []
    for f in text_files(folder):
        try:
            docs.append(read_text_document(f, folder))
        except (GraphFormatError, OSError) as e:
            skipped.append(str(e))
    if not docs:
        why = "; ".join(skipped[:3]) if skipped else f"no {'/'.join(SUFFIXES)} files"
        raise GraphFormatError(f"no usable document ({why})", file=str(folder))
    return Corpus(documents=docs, name=folder.name or "documents", skipped=skipped)


def _detect(path: Path) -> bool:
    return path.is_dir() and not (path / "corpus.jsonl").is_file()


register_corpus_format(CorpusFormat("folder", "a folder of .txt / .md files, one document each", _detect,
                                    read_folder_corpus, priority=90))
