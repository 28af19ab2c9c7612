"""A hybrid corpus from what a user has: retrieval units (prose blocks and tables) from any input.

``read_hybrid_corpus(path)`` accepts

* a **TAT-QA JSON file** (:mod:`~toporag_core.hybrid.tatqa`): each table and each paragraph a unit,
  with the file's questions and gold units;
* a **folder** (or one file) of documents: Markdown, HTML, CSV, TSV and plain text, each routed into
  narrative blocks and tables (:func:`~toporag_core.hybrid.documents.load_folder`; a CSV / TSV file is
  one table, an HTML or Markdown file its tables plus the text around them);
* any corpus :func:`toporag_core.corpus.read_corpus` reads (a JSONL of ``{"id"|"title", "text"}``, a
  BEIR folder): each document's text is routed the same way, so a Markdown table inside a JSONL
  document's text becomes a table unit.

Units of one document share its ``doc_id`` (fusion propagates scores inside a document). Bad input:
a whole-input problem raises an error naming the file, the line or record and the field; a single
unreadable document of a folder is skipped with one message (``skipped``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .documents import TEXT_SUFFIXES, Unit, load_folder, parse_document
from .tatqa import TatqaCorpus, looks_like_tatqa, parse_tatqa, read_json


@dataclass
class HybridCorpus:
    """Units to index, the questions a labelled input brings (TAT-QA), and messages."""

    units: list[Unit]
    questions: list[dict] = field(default_factory=list)
    format: str = ""
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tatqa: TatqaCorpus | None = None


def _is_tatqa_file(p: Path) -> bool:
    """A ``.json`` file whose first record has ``table`` and ``paragraphs`` (other JSON: the corpus readers)."""
    if p.suffix.lower() != ".json":
        return False
    with open(p, "rb") as f:
        head = f.read(65536)
    return head.lstrip()[:1] == b"[" and b'"table"' in head and b'"paragraphs"' in head


def read_hybrid_corpus(path: str | Path, format: str = "auto") -> HybridCorpus:
    """Units of ``path`` (module docstring). ``format``: ``auto``, ``tatqa``, ``documents`` (a folder or
    file of documents) or any :func:`toporag_core.corpus.read_corpus` format name."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or folder")
    if format == "tatqa" or (format == "auto" and p.is_file() and _is_tatqa_file(p)):
        data = read_json(p)
        if not looks_like_tatqa(data):
            raise ValueError(f"{p}: not a TAT-QA file (a JSON list of contexts with 'table' and 'paragraphs')")
        tq = parse_tatqa(data, str(p))
        return HybridCorpus(tq.units, tq.questions, "tatqa", tatqa=tq)
    if format == "documents" or (format == "auto" and (p.suffix.lower() in TEXT_SUFFIXES
                                                       or (p.is_dir() and not _is_beir(p)))):
        docs, skipped = load_folder(p)
        if not docs:
            raise ValueError(f"{p}: no readable documents ({len(skipped)} skipped)"
                             + (f": {skipped[0]}" if skipped else ""))
        return HybridCorpus([u for d in docs for u in d.units], [], "documents", skipped,
                            [w for d in docs for w in d.warnings])
    from ..corpus import read_corpus

    corpus = read_corpus(p, "auto" if format == "auto" else format)
    units, warnings = [], []
    for d in corpus.documents:
        text = f"{d.title}\n\n{d.text}" if d.title and d.title != d.id else d.text
        parsed = parse_document(text, d.id)
        units += parsed.units
        warnings += parsed.warnings
    return HybridCorpus(units, [], corpus.format, list(corpus.skipped), warnings)


def _is_beir(p: Path) -> bool:
    return (p / "corpus.jsonl").is_file()


def tatqa_questions(path: str | Path) -> list[dict]:
    """The questions (with gold units) of a TAT-QA file, for ``toporag hybrid eval``."""
    p = Path(path)
    data = read_json(p)
    if not looks_like_tatqa(data):
        raise ValueError(f"{p}: not a TAT-QA file (a JSON list of contexts with 'table' and 'paragraphs'); "
                         f"got {type(data).__name__}" + (f" of {json.dumps(data)[:60]}" if not data else ""))
    tq = parse_tatqa(data, str(p))
    if not tq.questions:
        raise ValueError(f"{p}: no questions (field 'questions' of every record is empty)")
    return tq.questions
