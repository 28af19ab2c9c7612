"""Multi-hop QA files (HotpotQA distractor / fullwiki, 2WikiMultihopQA) and their paragraphs as a corpus.

Accepted layouts, each a JSON list of records (or JSON lines, one record per line):

* **original** (HotpotQA's own files, 2WikiMultihopQA): ``"context": [[title, [sentence, ...]], ...]``,
  ``"supporting_facts": [[title, sentence index], ...]``;
* **Hugging Face** (``datasets``' HotpotQA / 2Wiki export): ``"context": {"title": [...],
  "sentences": [[...], ...]}``, ``"supporting_facts": {"title": [...], "sent_id": [...]}``, ``"id"``.

:func:`load_multihop` returns the records in the original layout (``_id``, ``question``, ``answer``,
``type``, ``level``, ``supporting_facts``, ``context``; other keys kept), so every consumer reads one
layout. Fullwiki records have the same shape (their ``context`` are retrieved paragraphs; a test file
without answers gets ``answer: ""``). :func:`multihop_corpus` is the union of the records'
paragraphs, one document per title (first occurrence kept): the corpus the questions are asked
against. A bad record raises :class:`~toporag_core.graph.GraphFormatError` naming file, record and field.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..graph import GraphFormatError
from .base import Corpus, Document, Query
from .jsonl import iter_json_lines
from .registry import CorpusFormat, register_corpus_format


def _context(value: Any, file: str, i: int) -> list[list]:
    """The context in the original layout ``[[title, [sentences]], ...]``."""
    if isinstance(value, dict):  # Hugging Face: {"title": [...], "sentences": [[...]]}
        titles, sents = value.get("title"), value.get("sentences")
        if not isinstance(titles, list) or not isinstance(sents, list) or len(titles) != len(sents):
            raise GraphFormatError('expected {"title": [...], "sentences": [[...], ...]} of equal lengths',
                                   file=file, record=i, field="context")
        value = [[t, s] for t, s in zip(titles, sents)]
    if not isinstance(value, list):
        raise GraphFormatError("missing or not a list (or a {title, sentences} object)", file=file, record=i,
                               field="context")
    out = []
    for j, item in enumerate(value):
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], list) and all(isinstance(s, str) for s in item[1])):
            raise GraphFormatError(f"context item {j} is not [title, [sentences]]", file=file, record=i,
                                   field="context")
        out.append([item[0], list(item[1])])
    return out


def _supporting(value: Any, file: str, i: int) -> list[list]:
    if value is None:
        return []
    if isinstance(value, dict):  # Hugging Face: {"title": [...], "sent_id": [...]}
        titles, ids = value.get("title"), value.get("sent_id")
        if not isinstance(titles, list) or not isinstance(ids, list) or len(titles) != len(ids):
            raise GraphFormatError('expected {"title": [...], "sent_id": [...]} of equal lengths', file=file,
                                   record=i, field="supporting_facts")
        value = [[t, s] for t, s in zip(titles, ids)]
    if not isinstance(value, list) or not all(isinstance(f, (list, tuple)) and len(f) >= 2 and isinstance(f[0], str)
                                              for f in value):
        raise GraphFormatError("expected [[title, sentence index], ...]", file=file, record=i,
                               field="supporting_facts")
    return [[f[0], f[1]] for f in value]


def normalize_record(r: Any, file: str, i: int) -> dict:
    """One record in the original layout (see the module docstring)."""
    if not isinstance(r, dict):
        raise GraphFormatError(f"expected a JSON object, got {type(r).__name__}", file=file, record=i)
    q = r.get("question")
    if not isinstance(q, str) or not q.strip():
        raise GraphFormatError("missing or not a non-empty string", file=file, record=i, field="question")
    ans = r.get("answer", "")
    if not isinstance(ans, str):
        raise GraphFormatError("not a string", file=file, record=i, field="answer")
    out = dict(r)
    out.pop("id", None)
    out.update({"_id": str(r.get("_id", r.get("id", i))), "question": q, "answer": ans,
                "type": str(r.get("type", "") or ""), "level": str(r.get("level", "") or ""),
                "context": _context(r.get("context"), file, i),
                "supporting_facts": _supporting(r.get("supporting_facts"), file, i)})
    return out


def load_multihop(path: str | Path) -> list[dict]:
    """Every record of a HotpotQA / 2Wiki file (JSON list or JSON lines), normalised."""
    path = Path(path)
    file = str(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return [normalize_record(obj, file, no) for no, obj in iter_json_lines(path)]
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise GraphFormatError("binary file, not HotpotQA JSON", file=file)
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise GraphFormatError(f"not UTF-8 (byte {e.start})", file=file, line=raw[:e.start].count(b"\n") + 1) from None
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"not valid JSON ({e.msg}, column {e.colno})", file=file, line=e.lineno) from None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise GraphFormatError("expected a JSON list of question records", file=file)
    return [normalize_record(r, file, i) for i, r in enumerate(data)]


def gold_titles(record: dict) -> list[str]:
    """The record's gold articles: ``gold_titles`` when present, else the supporting facts' titles."""
    if record.get("gold_titles"):
        return list(record["gold_titles"])
    return list(dict.fromkeys(t for t, _ in record.get("supporting_facts", [])))


def paragraph_text(sentences: list[str]) -> str:
    """HotpotQA sentences (which keep their leading spaces) joined into one paragraph."""
    return " ".join(s.strip() for s in sentences if s.strip())


def multihop_corpus(records: list[dict], name: str = "hotpotqa", source: str = "") -> Corpus:
    """The union of the records' paragraphs, one :class:`Document` per title (first occurrence wins),
    and the questions as :class:`Query` (``qrels``: the gold titles, grade 1)."""
    docs: dict[str, Document] = {}
    for i, r in enumerate(records):
        for title, sents in r["context"]:
            text = paragraph_text(sents)
            if title.strip() and text and title not in docs:
                docs[title] = Document(id=title, title=title, text=text, source=source or name, line=None)
    queries = [Query(r["_id"], r["question"]) for r in records]
    qrels = {r["_id"]: {t: 1 for t in gold_titles(r) if t in docs} for r in records}
    return Corpus(documents=list(docs.values()), queries=queries, qrels=qrels, name=name)


def read_hotpotqa(path: Path) -> Corpus:
    return multihop_corpus(load_multihop(path), name=path.stem, source=str(path))


def _detect(path: Path) -> bool:
    if not path.is_file() or path.suffix.lower() not in (".json", ".jsonl"):
        return False
    with open(path, "rb") as f:
        head = f.read(4096).decode("utf-8", errors="ignore")
    return '"question"' in head and '"context"' in head


register_corpus_format(CorpusFormat("hotpotqa", "a HotpotQA / 2WikiMultihopQA question file (its paragraphs)",
                                    _detect, read_hotpotqa, priority=15))
