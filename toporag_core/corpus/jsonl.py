"""A JSONL corpus: one document per line, ``{"id"|"_id"|"title": ..., "text": ...}``.

Each non-blank line is one JSON object with ``text`` (a non-empty string) and an identity:
``id`` (or BEIR's ``_id``; a string or whole number) and/or ``title``; without an id the title is
the id. Other keys are ignored. Read as a stream (one line in memory at a time). A bad line raises
:class:`~toporag_core.graph.GraphFormatError` naming the file, the line and the field, e.g.
``docs.jsonl, line 7, field 'text': missing``.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..graph import GraphFormatError
from ..io.text import file_chunks, iter_byte_lines
from .base import Corpus, Document, check_field_text, check_unique, id_field
from .registry import CorpusFormat, register_corpus_format

SUFFIXES = (".jsonl", ".ndjson")


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSON-lines file."""
    file = str(path)
    for no, line in enumerate(iter_byte_lines(file_chunks(path), file), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=_no_constants)
        except (json.JSONDecodeError, ValueError) as e:
            raise GraphFormatError(f"not valid JSON ({e})", file=file, line=no) from None
        if not isinstance(obj, dict):
            raise GraphFormatError(f"expected a JSON object, got {type(obj).__name__}", file=file, line=no)
        yield no, obj


def document_from(obj: dict, file: str, line: int, id_keys: tuple[str, ...] = ("id", "_id")) -> Document:
    """One :class:`Document` from a JSON object (see the module docstring)."""
    key = next((k for k in id_keys if k in obj), None)
    title = obj.get("title")
    if title is not None:
        title = check_field_text(title, file, "title", line=line, allow_empty=True).strip()
    if key is not None:
        doc_id = id_field(obj[key], file, key, line=line)
    elif title:
        doc_id = title
    else:
        raise GraphFormatError('missing: each document needs "id" (or "_id") or a non-empty "title"', file=file,
                               line=line, field="id")
    text = check_field_text(obj.get("text"), file, "text", line=line)
    return Document(id=doc_id, title=title or "", text=text, source=file, line=line)


def read_documents(path: Path, id_keys: tuple[str, ...] = ("id", "_id")) -> list[Document]:
    """Every document of a JSONL file, ids checked unique."""
    docs = [document_from(obj, str(path), no, id_keys) for no, obj in iter_json_lines(path)]
    if not docs:
        raise GraphFormatError("no documents (empty file)", file=str(path))
    check_unique(docs)
    return docs


def read_jsonl(path: Path) -> Corpus:
    return Corpus(documents=read_documents(path), name=path.stem)


def _detect(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in SUFFIXES


register_corpus_format(CorpusFormat("jsonl", 'JSON lines of {"id"|"title", "text"} documents', _detect,
                                    read_jsonl, priority=20))
