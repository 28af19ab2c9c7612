"""A BEIR dataset folder: ``corpus.jsonl``, optionally ``queries.jsonl`` and ``qrels/<split>.tsv``.

* ``corpus.jsonl``: ``{"_id", "title", "text"}`` per line (read by :mod:`.jsonl`; ``title`` may be empty);
* ``queries.jsonl``: ``{"_id", "text"}`` per line;
* ``qrels/<split>.tsv``: tab-separated ``query-id  corpus-id  score`` with that header line; every split
  present is read (``test`` first) and merged; the score is a whole-number grade (``> 0`` relevant).

A judgement naming a document or query that is not in the files raises, naming the file, line and
field (``qrels/test.tsv, line 12, field 'corpus-id': unknown document '4983'``).
"""
from __future__ import annotations

from pathlib import Path

from ..graph import GraphFormatError
from ..io.text import file_chunks, iter_byte_lines
from .base import Corpus, Query, check_field_text, id_field
from .jsonl import iter_json_lines, read_documents
from .registry import CorpusFormat, register_corpus_format

QREL_COLUMNS = ("query-id", "corpus-id", "score")


def read_queries(path: Path) -> list[Query]:
    out, seen = [], set()
    for no, obj in iter_json_lines(path):
        key = "_id" if "_id" in obj else "id"
        qid = id_field(obj.get(key), str(path), key, line=no)
        if qid in seen:
            raise GraphFormatError(f"query id {qid!r} repeats", file=str(path), line=no, field=key)
        seen.add(qid)
        out.append(Query(qid, check_field_text(obj.get("text"), str(path), "text", line=no)))
    return out


def read_qrels(path: Path, docs: set[str], queries: set[str] | None) -> dict[str, dict[str, int]]:
    """``{query id: {document id: grade}}`` of one qrels TSV."""
    file, out = str(path), {}
    for no, line in enumerate(iter_byte_lines(file_chunks(path), file), 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        cells = line.split("\t")
        if no == 1 and cells[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue
        if len(cells) != 3:
            raise GraphFormatError(f"expected 3 tab-separated columns {QREL_COLUMNS}, got {len(cells)}", file=file,
                                   line=no)
        qid, did, score = (c.strip() for c in cells)
        if not qid:
            raise GraphFormatError("empty", file=file, line=no, field="query-id")
        if queries is not None and qid not in queries:
            raise GraphFormatError(f"unknown query {qid!r} (not in queries.jsonl)", file=file, line=no,
                                   field="query-id")
        if did not in docs:
            raise GraphFormatError(f"unknown document {did!r} (not in corpus.jsonl)", file=file, line=no,
                                   field="corpus-id")
        try:
            grade = int(score)
        except ValueError:
            raise GraphFormatError(f"expected a whole number, got {score!r}", file=file, line=no,
                                   field="score") from None
        out.setdefault(qid, {})[did] = grade
    return out


def read_beir(folder: Path) -> Corpus:
    corpus_file = folder / "corpus.jsonl"
    docs = read_documents(corpus_file, id_keys=("_id", "id"))
    queries = read_queries(folder / "queries.jsonl") if (folder / "queries.jsonl").is_file() else []
    qrels: dict[str, dict[str, int]] = {}
    qdir = folder / "qrels"
    if qdir.is_dir():
        ids, qids = {d.id for d in docs}, ({q.id for q in queries} if queries else None)
        splits = sorted(qdir.glob("*.tsv"), key=lambda p: (p.stem != "test", p.stem))
        for f in splits:
            for q, rel in read_qrels(f, ids, qids).items():
                qrels.setdefault(q, {}).update(rel)
    return Corpus(documents=docs, queries=queries, qrels=qrels, name=folder.name or "beir")


def _detect(path: Path) -> bool:
    return path.is_dir() and (path / "corpus.jsonl").is_file()


register_corpus_format(CorpusFormat("beir", "a BEIR folder: corpus.jsonl, queries.jsonl, qrels/*.tsv", _detect,
                                    read_beir, priority=10))
