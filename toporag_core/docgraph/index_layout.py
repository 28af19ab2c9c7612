"""Corpus documents laid out as index rows, and the vectors of sections and documents.

A document becomes an :class:`~toporag_core.docgraph.build.Article` (Markdown ``##`` headings open
sections, blank lines separate paragraphs), then rows in pre-order (document, sections,
paragraphs, sentences with ``sentence_nodes``; the root dropped): a :class:`NodeBlock`. With
``embed="pooled"`` only paragraphs (as ``"title: text"``, ``"title, heading: text"`` under a
heading that is not the title) and sentences are encoded, and :func:`pool_upwards` gives a section
/ document the normalised sum of its paragraphs' vectors; ``embed="every"`` encodes every row's
content.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..corpus import Document
from ..graph import GraphFormatError
from .build import DOCUMENT, PARAGRAPH, SECTION, Article, layout_articles, parse_text
from .index_store import IndexConfig


def document_article(doc: Document, max_paragraph_chars: int = 20_000) -> Article:
    """A corpus document as an :class:`Article` (Markdown ``##`` headings open sections, blank lines
    separate paragraphs); its title is the document's name. Errors name the document's file and line."""
    try:
        art = parse_text(doc.text, source=doc.source or doc.id, title=doc.name,
                         max_paragraph_chars=max_paragraph_chars)
    except GraphFormatError as e:
        raise GraphFormatError(f"document {doc.id!r}: {e.reason}", file=doc.source or None,
                               line=doc.line if e.line is None else (doc.line or 1) + e.line - 1,
                               field="text") from None
    return Article(title=doc.name, sections=[(h if h != art.title else doc.name, p) for h, p in art.sections],
                   source=art.source)


@dataclass
class NodeBlock:
    """Rows of some documents (root dropped): the unit new documents are laid out and embedded in."""

    text: list[str]
    level: np.ndarray
    parent: np.ndarray  # row within the block; -1 for documents
    doc: np.ndarray  # document ordinal within the block
    embed_text: list[str]  # what is encoded (pooled: paragraphs and sentences; every: all contents)
    embed_rows: np.ndarray  # the rows those texts' vectors go to


def lay_out(articles: Sequence[Article], config: IndexConfig) -> NodeBlock:
    text, content, level, parent, doc = layout_articles(articles, "corpus", config.sentence_nodes)
    text, content = text[1:], content[1:]
    lv = np.asarray(level[1:], np.int8)
    par = np.asarray(parent[1:], np.int64) - 1  # the root (0) becomes -1
    dc = np.asarray(doc[1:], np.int64)
    if config.embed == "every":
        rows = np.arange(len(text))
        return NodeBlock(text, lv, par, dc, content, rows)
    rows = np.flatnonzero(lv >= PARAGRAPH)
    titles = [a.title for a in articles]
    emb = []
    for r in rows:
        if lv[r] == PARAGRAPH:
            title, heading = titles[dc[r]], text[par[r]]
            head = title if heading == title else f"{title}, {heading}"
            emb.append(f"{head}: {text[r]}")
        else:
            emb.append(text[r])
    return NodeBlock(text, lv, par, dc, emb, rows)


def pool_upwards(x: np.ndarray, level: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Sections and documents get the normalised sum of their paragraphs' vectors (vectorised)."""
    x = x.copy()
    paras = np.flatnonzero(level == PARAGRAPH)
    secs = parent[paras]
    x[level == SECTION] = 0.0
    np.add.at(x, secs, x[paras])
    docs_of_sec = parent[secs]
    x[level == DOCUMENT] = 0.0
    np.add.at(x, docs_of_sec, x[paras])
    up = level <= SECTION
    norm = np.linalg.norm(x[up], axis=1, keepdims=True)
    x[up] /= np.where(norm == 0, 1.0, norm)
    return x
