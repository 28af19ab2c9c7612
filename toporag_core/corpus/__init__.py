"""A user's corpus, in the formats people have, read the same way by every command.

:func:`read_corpus` (``format="auto"`` detects) returns a :class:`Corpus` of :class:`Document`
(``id``, ``title``, ``text``), with BEIR's queries and graded judgements where the format has them.
Formats are a registry (:data:`CORPUS_FORMATS`, :func:`register_corpus_format`), one module each:

* ``jsonl`` (:mod:`.jsonl`): one ``{"id"|"_id"|"title", "text"}`` object per line;
* ``folder`` (:mod:`.folder`): every ``.txt`` / ``.md`` file below a folder, one document each;
* ``beir`` (:mod:`.beir`): ``corpus.jsonl`` + ``queries.jsonl`` + ``qrels/*.tsv``;
* ``hotpotqa`` (:mod:`.hotpotqa`): a HotpotQA / 2WikiMultihopQA question file (original or Hugging Face
  layout): its paragraphs as documents, its questions as queries. :func:`load_multihop` reads the
  questions themselves.

Bad input raises :class:`~toporag_core.graph.GraphFormatError` naming the file, the line or record,
and the field; a folder's unreadable files are skipped with one message each (:attr:`Corpus.skipped`).
"""
from . import beir, folder, hotpotqa, jsonl  # noqa: F401  (each registers its format)
from .base import Corpus, Document, Query
from .hotpotqa import gold_titles, load_multihop, multihop_corpus
from .registry import (
    CORPUS_FORMATS,
    CorpusFormat,
    corpus_format_names,
    detect_corpus_format,
    read_corpus,
    register_corpus_format,
)

__all__ = [
    "CORPUS_FORMATS",
    "Corpus",
    "CorpusFormat",
    "Document",
    "Query",
    "corpus_format_names",
    "detect_corpus_format",
    "gold_titles",
    "load_multihop",
    "multihop_corpus",
    "read_corpus",
    "register_corpus_format",
]
