"""Hybrid-tables page support: the corpus or index it searches, the search, and the answer.

The page (``pages/7_Hybrid_tables.py``) has two modes. An index folder written by
``toporag hybrid index CORPUS --out DIR`` is opened once per folder and modification time
(:func:`saved_index`) and searched. Otherwise the generated sample corpus (:func:`sample_corpus`),
plus an uploaded document, is routed into prose and tables at the SDS threshold ``tau``
(:func:`parse`) and indexed once per corpus, encoder and ``tau`` (:func:`corpus_index`, cells
embedded once). :func:`search` runs both routes and their fusion; :func:`answer` hands the fused
context to the frozen LLM (loaded only when asked). The figures and tables are
:mod:`toporag_core.hybrid.view`'s, re-exported here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from ..datagen.hybrid import GeneratorConfig, generate  # noqa: F401
from ..hybrid import (DocumentError, HybridIndex, RouterConfig, SearchConfig,  # noqa: F401
                      parse_document, read_upload)
from ..hybrid.search import open_index
from ..hybrid.view import (best_cell_frame, cell_heatmap, follow_top, fused_frame, rank_frame,  # noqa: F401
                           route_frame, sds_strip)
from .resources import app_encoder


@st.cache_resource(max_entries=2, show_spinner="Generating the sample corpus ...")
def sample_corpus(n_docs: int, seed: int):
    """The generated corpus of ``n_docs`` documents (and its questions), once per server."""
    return generate(GeneratorConfig(n_docs=n_docs, n_questions=max(6, n_docs // 4), seed=seed))


def index_mtime(folder: str) -> float:
    """The modification time of the folder's ``index.json`` (0 when there is none): a rebuilt index is
    opened again."""
    f = Path(folder) / "index.json"
    return f.stat().st_mtime if f.is_file() else 0.0


@st.cache_resource(max_entries=2, show_spinner="Opening the index ...")
def saved_index(path: str, mtime: float, choice: str):
    """The index in folder ``path`` (``mtime``: :func:`index_mtime`); an index built with another encoder
    than MiniLM is queried with the encoder ``choice``."""
    try:
        return open_index(path)  # a MiniLM index: queried with the numpy MiniLM, no model to load
    except ValueError:
        return open_index(path, app_encoder(choice))


def parse(text: str, doc_id: str, tau: float):
    """One document routed into prose and table units at SDS threshold ``tau`` (raises
    :class:`DocumentError`)."""
    return parse_document(text, doc_id, RouterConfig(tau=tau))


@st.cache_resource(max_entries=4, show_spinner="Indexing (cells embedded once) ...")
def corpus_index(key: str, choice: str, tau: float, _texts: dict):
    """The index of the documents ``_texts`` (``{doc id: text}``; ``key`` names them for the cache)."""
    docs = [parse(t, d, tau) for d, t in _texts.items()]
    return HybridIndex.build(docs, app_encoder(choice))


def search(index, question: str, k: int, table_score: str | None = None) -> dict[str, Any]:
    """Both routes (``k`` each) and their fusion; ``table_score``: the table route's score, else its default."""
    config = SearchConfig(k=k) if table_score is None else SearchConfig(k=k, table_score=table_score)
    return index.search(question, config)


def document_choices(dataset, picked: str | None) -> list[str]:
    """The documents to show, in order: the upload, the mixed (prose + table) documents, the rest."""
    mixed = [d for d in dataset.docs if d.startswith("mixed")]
    return ([picked] if picked else []) + mixed + [d for d in dataset.docs if d not in mixed]


def default_question(dataset) -> str:
    """The corpus' first table question (type B), else empty."""
    return next((q["question"] for q in dataset.questions if q["type"] == "B"), "")


def blocks_rows(doc) -> list[dict[str, Any]]:
    """One row per block of a parsed document: its lines, kind, SDS, table shape and first 120 characters."""
    return [{"lines": f"{u.start + 1}-{u.end}", "kind": u.kind, "SDS": u.sds,
             "shape": "" if u.table is None else f"{u.table.shape[0]} x {u.table.shape[1]} ({u.table.fmt})",
             "text": u.text[:120]} for u in doc.units]


def answer(question: str, context: str) -> dict[str, Any]:
    """The frozen LLM's answer from ``context`` (loads it; raises ``ValueError`` / ``OSError`` when it cannot)."""
    from ..hybrid.answer import answer_from_context, frozen_reader

    return answer_from_context(question, context, frozen_reader())
