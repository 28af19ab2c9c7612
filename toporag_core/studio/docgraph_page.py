"""Document-graph page support: the documents a question walks, the walk, and what it changed.

The page (``pages/8_Document_graph.py``) takes its documents from a generated question
(:func:`sample_records`, :func:`record_articles`), from pasted Markdown (:func:`pasted_articles`:
documents separated by a line ``---``), or from a corpus index folder written by
``toporag docgraph index CORPUS --out DIR`` (:func:`open_index`, once per folder and manifest time,
:func:`index_stamp`; :func:`search_index` walks the question's neighbourhood graph there).
:func:`document_graph` builds the hierarchical graph (document -> section -> paragraph -> sentence,
plus semantic edges above ``theta``), :func:`traversal_config` holds the walk's settings (FGW
budget epsilon, depth, keep ratio, grafting), and :func:`evolved` is the graph after the walk's
evolution step (the original is left as it was). The figures are
:mod:`toporag_core.docgraph.views`', re-exported here with :func:`prefix_curve`; so is
:class:`~toporag_core.graph.GraphFormatError`, what a bad paste or document raises.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import streamlit as st

from ..docgraph import BuildConfig, FGWConfig, TraversalConfig, Traverser, build_docgraph, parse_text
from ..docgraph.build import docgraph_to_textual_graph
from ..docgraph.corpus_search import CorpusSearcher, SearchConfig
from ..docgraph.evolve import evolve
from ..datagen.docgraph import generate
from ..docgraph.records import gold_titles, record_articles  # noqa: F401  (re-exported for the page)
from ..docgraph.index import DocGraphIndex
from ..docgraph.traverse import prefix_curve  # noqa: F401  (re-exported for the page)
from ..docgraph.views import coupling_figure, fgw_curve_figure, tree_figure  # noqa: F401  (re-exported)
from ..graph import GraphFormatError, TextualGraph  # GraphFormatError: re-exported for the page too
from .resources import encoder_choice, app_encoder


@st.cache_data(show_spinner=False)
def sample_records(n: int, seed: int):
    """``n`` generated questions (with their articles and gold answers), once per server."""
    return generate(n, seed=seed)[0]


@st.cache_resource(max_entries=4, show_spinner="Loading the corpus index ...")
def open_index(folder: str, stamp: float) -> CorpusSearcher:
    """The searcher of an index folder (``stamp``: its manifest's modification time, so a rebuilt
    index is loaded again), with the encoder the index was built with."""
    index = DocGraphIndex.load(folder)
    return CorpusSearcher(index, app_encoder(index.stats.get("encoder_spec") or encoder_choice()))


def index_stamp(folder: str) -> float:
    """The modification time of the folder's ``index.json`` (0 when there is none)."""
    f = Path(folder) / "index.json"
    return f.stat().st_mtime if f.is_file() else 0.0


def traversal_config(*, max_depth: int, keep_ratio: float, epsilon: float, graft_semantic: bool,
                     graft_mentions: bool, feature_weight: float, corpus: bool) -> TraversalConfig:
    """The walk's settings; in a corpus (``corpus``) a title counts as mentioned in any document's
    content, else only in the document's own."""
    return TraversalConfig(max_depth=max_depth, keep_ratio=keep_ratio, epsilon=epsilon, graft_semantic=graft_semantic,
                           graft_mentions=graft_mentions, fgw=FGWConfig(feature_weight=feature_weight),
                           mention_scope="content" if corpus else "own")


def pasted_articles(pasted: str) -> list:
    """Pasted Markdown documents, separated by lines ``---`` (raises :class:`GraphFormatError` when empty)."""
    parts = [p for p in pasted.split("\n---\n") if p.strip()]
    if not parts:
        raise GraphFormatError("empty document: paste at least one document", file="pasted text")
    return [parse_text(p, source=f"pasted document {i + 1}", title=f"document {i + 1}") for i, p in enumerate(parts)]


def document_graph(articles: list, encoder, theta: float, name: str):
    """The document graph of ``articles`` (semantic edges at similarity ``theta`` and above)."""
    return build_docgraph(articles, encoder, BuildConfig(sim_threshold=theta), name=name)


def search_index(searcher: CorpusSearcher, question: str, theta: float, cfg: TraversalConfig):
    """The walk on the question's neighbourhood graph in the index: ``.graph``, ``.result``, ``.neighbourhood``."""
    return searcher.search(question, config=SearchConfig(theta=theta, traversal=cfg))


def ranking(searcher: CorpusSearcher, ranked) -> list[dict[str, Any]]:
    """The ranked documents of :func:`search_index`, one row each."""
    return ranked.to_dict(searcher.index)["ranking"]


def traverser(graph, encoder, cfg: TraversalConfig) -> Traverser:
    """The walker of ``graph`` (``.run(question)``, ``.question_vector(question)``)."""
    return Traverser(graph, encoder, cfg)


def evolved(graph, result, walker: Traverser, question: str):
    """A copy of ``graph`` after the evolution step of the walk ``result`` (edge weights ``p`` moved)."""
    out = copy.deepcopy(graph)
    evolve(out, result, walker.question_vector(question))
    return out


def evaluations_rows(result) -> list[dict[str, Any]]:
    """One row per FGW evaluation of the walk: operation, depth, prefix size, value, within epsilon."""
    return [{"op": e.op, "depth": e.depth, "size": e.size, "FGW": round(e.value, 5), "<= epsilon": e.ok}
            for e in result.evaluations]


def as_textual_graph(graph) -> TextualGraph:
    """The document graph as a textual graph (for Explore and the Retrieval lab)."""
    return docgraph_to_textual_graph(graph)
