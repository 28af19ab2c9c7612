"""What every corpus reader returns: documents, and optionally queries and relevance judgements.

A :class:`Corpus` is ``documents`` (each a :class:`Document`: ``id``, ``title``, ``text`` and
where it came from), plus what evaluation formats bring: ``queries`` (:class:`Query`: ``id``,
``text``) and ``qrels`` (``{query id: {document id: grade}}``, BEIR's graded relevance).

Document ids are unique inside a corpus (a reader rejects a repeated id naming the file, line
and field); ``title`` may be empty (many BEIR corpora have none), :attr:`Document.name` is the
title or, failing that, the id. Bad input raises :class:`~toporag_core.graph.GraphFormatError`
naming the file, the line (1-based) or record (0-based), and the field.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..graph import MAX_TEXT_CHARS, GraphFormatError, check_text


@dataclass(frozen=True)
class Document:
    """One document of a corpus. ``source`` / ``line`` say where it was read (for messages)."""

    id: str
    title: str
    text: str
    source: str = ""
    line: int | None = None

    @property
    def name(self) -> str:
        """The title, or the id where there is none."""
        return self.title or self.id

    def fingerprint(self) -> str:
        """A hash of title and text: an index re-embeds a document only when this changes."""
        h = hashlib.blake2b(digest_size=12)
        h.update(self.title.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
        h.update(self.text.encode("utf-8", "surrogatepass"))
        return h.hexdigest()


@dataclass(frozen=True)
class Query:
    """One query (BEIR ``queries.jsonl``, or a question of a QA file)."""

    id: str
    text: str


@dataclass
class Corpus:
    """Documents, with the queries and graded judgements an evaluation format brings."""

    documents: list[Document]
    queries: list[Query] = field(default_factory=list)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    name: str = "corpus"
    format: str = ""
    skipped: list[str] = field(default_factory=list)  # one message per input that could not be read

    def __len__(self) -> int:
        return len(self.documents)

    def ids(self) -> list[str]:
        return [d.id for d in self.documents]

    def by_id(self) -> dict[str, Document]:
        return {d.id: d for d in self.documents}


def check_field_text(value: object, file: str, field_name: str, *, line: int | None = None,
                     record: int | str | None = None, allow_empty: bool = False,
                     max_chars: int = MAX_TEXT_CHARS) -> str:
    """``value`` as a valid text field, else :class:`GraphFormatError` naming file, line / record and field."""
    if not isinstance(value, str):
        what = "missing" if value is None else f"not a string (got {type(value).__name__})"
        raise GraphFormatError(what, file=file, line=line, record=record, field=field_name)
    if not allow_empty and not value.strip():
        raise GraphFormatError("empty text", file=file, line=line, record=record, field=field_name)
    why = check_text(value, max_chars)
    if why:
        raise GraphFormatError(why, file=file, line=line, record=record, field=field_name)
    return value


def id_field(value: object, file: str, field_name: str, *, line: int | None = None,
             record: int | str | None = None) -> str:
    """An id: a non-empty string or a whole number (as text), else an error naming where."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        what = "missing" if value is None else f"not a string or whole number (got {type(value).__name__})"
        raise GraphFormatError(what, file=file, line=line, record=record, field=field_name)
    text = str(value).strip()
    if not text:
        raise GraphFormatError("empty id", file=file, line=line, record=record, field=field_name)
    why = check_text(text, 1000)
    if why:
        raise GraphFormatError(why, file=file, line=line, record=record, field=field_name)
    return text


def check_unique(docs: list[Document]) -> None:
    """Raise at the second document of a repeated id, naming both places."""
    seen: dict[str, Document] = {}
    for d in docs:
        if d.id in seen:
            first = seen[d.id]
            where = f"{first.source}, line {first.line}" if first.line else first.source
            raise GraphFormatError(f"id {d.id!r} repeats the document of {where}", file=d.source, line=d.line,
                                   field="id")
        seen[d.id] = d
