"""App support for topology-aware node retrieval (Wang et al.) and the topology-vs-text view.

* One :class:`~toporag_core.topo.TopoNodeIndex` per ``(graph fingerprint, method, encoder)``
  (``st.cache_resource``): GraphWave on a 2K-node graph takes seconds, so it runs once per
  graph; after that a target change or a ``k`` change is a dictionary lookup.
* The text index doubles as the graph's node text embeddings: "most similar to the
  question" and the correlation page both read them, so node texts are encoded once.
* Correlations and hop curves are ``st.cache_data`` per ``(graph, encoder, sampling)``.

Method ids in the lab are the registry's (:data:`toporag_core.retrieval.METHODS`): node methods
``proximity`` and ``role``, and their baselines ``text`` and ``random``, next to the cell methods.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ..graph import TextualGraph
from ..topo import (UNREACHABLE, TopoNodeIndex, TopoRetrieval, build_topo_prompt, resolve_target, retrieve_nodes,
                    text_similarity_by_distance, topology_text_correlation)
from ..topo.retriever import SCORE_NAMES
from ..retrieval import get_method, method_label, method_names
from .resources import app_encoder, prefetch_texts

BASELINES = ("text", "random")  # node baselines shown beside a node method
TARGET_FROM_QUESTION, TARGET_PICKED = "most similar to the question", "a node I pick"
TARGET_MODES = (TARGET_FROM_QUESTION, TARGET_PICKED)
INDEX_K = 20  # top-K precomputed per node; the lab's k slider stops here, so every lookup is O(1)
INDEX_SEED = 0  # seed of the proximity projection and of the random baseline
TARGET_COLOUR, RETRIEVED_COLOUR = "#7b3294", "#f28e2b"
MAX_OPTIONS = 500  # node picker entries at most (the search box narrows big graphs down)


def is_node_method(method: str) -> bool:
    return get_method(method).dimension == "nodes"


def node_methods() -> list[str]:
    """The registered node methods the lab offers (the baselines run beside them)."""
    return [m for m in method_names("nodes") if m not in BASELINES]


def topo_prompt(graph: TextualGraph, res: TopoRetrieval, partial: str) -> str:
    """The prompt of topology-aware RAG for a node retrieval: the target's known ``partial`` text and the
    retrieved nodes' texts (:func:`~toporag_core.topo.build_topo_prompt`)."""
    return build_topo_prompt(graph, res, partial)


# ---------------------------------------------------------------------------------------- indexes
@st.cache_resource(max_entries=16, show_spinner="Embedding the nodes (texts, walks or GraphWave roles: a few "
                                                 "seconds on thousands of nodes, once per graph) ...")
def _node_index(graph_key: str, method: str, encoder_choice: str, _graph: TextualGraph) -> TopoNodeIndex:
    """The top-``INDEX_K`` node index of the graph with fingerprint ``graph_key`` for ``method``
    (``proximity | role | text | random``); ``_graph`` is not hashed."""
    return TopoNodeIndex.build(_graph, method=method, K=INDEX_K, encoder=app_encoder(encoder_choice), seed=INDEX_SEED)


def get_node_index(graph_key: str, method: str, encoder_choice: str, graph: TextualGraph) -> TopoNodeIndex:
    """The top-``INDEX_K`` node index of the graph with fingerprint ``graph_key`` for ``method``
    (``proximity | role | text | random``), built once per graph. The node texts go through the
    encoder cache first, with a progress bar in the page when any is new (:func:`.resources.prefetch_texts`)."""
    if method == "text":
        prefetch_texts(graph.node_text, encoder_choice, "the node texts")
    return _node_index(graph_key, method, encoder_choice, graph)


def text_embeddings(graph_key: str, encoder_choice: str, graph: TextualGraph) -> np.ndarray:
    """``(N, d)`` unit text embeddings of the node texts (those of the cached text index)."""
    return get_node_index(graph_key, "text", encoder_choice, graph).emb


# ---------------------------------------------------------------------------------------- target
def node_options(graph: TextualGraph, query: str = "", limit: int = MAX_OPTIONS) -> list[int]:
    """Node ids for the picker: all nodes, or those whose text contains ``query``
    (case-insensitive) with an exact index ``query`` first; at most ``limit``."""
    q = query.strip().casefold()
    if not q:
        return list(range(min(graph.num_nodes, limit)))
    hits = [i for i, t in enumerate(graph.node_text) if q in t.casefold()]
    # exact matches first, then texts that start with the query, then the rest (each in id order)
    texts = graph.node_text
    hits.sort(key=lambda i: (" ".join(texts[i].split()).casefold() != " ".join(q.split()),
                             not texts[i].casefold().startswith(q)))
    if q.isdigit() and int(q) < graph.num_nodes:
        hits = [int(q)] + [i for i in hits if i != int(q)]
    return hits[:limit]


def no_match_message(graph: TextualGraph, query: str) -> str:
    """Why a search found no node, with the library's close-text suggestions."""
    try:
        resolve_target(graph, query)
    except ValueError as e:
        return f"Target not found: {e}"
    return f"No node text contains {query.strip()!r}."


def picker_key(graph_key: str, query: str) -> str:
    """Widget key of the node picker: one per graph and search text, so a new search starts at
    its first match (a kept key would hold the old pick, or ``None`` after an empty search)."""
    return f"lab_target_{graph_key}_{' '.join(query.split()).casefold()}"


def node_option_label(graph: TextualGraph, i: int, chars: int = 70) -> str:
    text = " ".join(graph.node_text[i].split())
    return f"{i}: {text if len(text) <= chars else text[: chars - 1] + chr(0x2026)}"


def question_target(graph_key: str, encoder_choice: str, graph: TextualGraph, question: str) -> tuple[int, float]:
    """``(node, cosine)`` of the node whose text is most similar to ``question``
    (:meth:`TopoNodeIndex.target_for_question` on the cached text index)."""
    if not question.strip():
        raise ValueError("type a question to choose the target node from it, or pick the target node in the sidebar")
    index = get_node_index(graph_key, "text", encoder_choice, graph)
    return index.target_for_question(question, app_encoder(encoder_choice))


def run_nodes(graph_key: str, encoder_choice: str, graph: TextualGraph, method: str, target: int, k: int,
              question: str | None = None, target_score: float | None = None) -> TopoRetrieval:
    """:func:`retrieve_nodes` on the cached index of ``method`` (a node method id or a
    baseline name); ``question``/``target_score`` record how the target was chosen."""
    index = get_node_index(graph_key, method, encoder_choice, graph)
    res = retrieve_nodes(index, target=target, k=k)
    return dataclasses.replace(res, question=question, target_score=target_score) if question else res


def choose_target(graph_key: str, encoder_choice: str, graph: TextualGraph, mode: str, picked: int | None,
                  query: str = "", question: str = "") -> tuple[int, float | None, str | None]:
    """The lab's target node: ``(node, cosine with the question or None, question or None)``.

    ``mode`` is one of :data:`TARGET_MODES`. Raises ``ValueError`` with a message for the
    page when there is no target (empty question, a search that matched nothing).
    """
    if mode == TARGET_FROM_QUESTION:
        node, score = question_target(graph_key, encoder_choice, graph, question)
        return node, score, question
    if mode != TARGET_PICKED:
        raise ValueError(f"unknown target mode {mode!r}")
    if picked is None:
        raise ValueError(no_match_message(graph, query) if query.strip() else "pick a target node in the sidebar")
    if not 0 <= int(picked) < graph.num_nodes:
        raise ValueError(f"target node {picked} is outside 0..{graph.num_nodes - 1}")
    return int(picked), None, None


# ---------------------------------------------------------------------------------------- tables and view
def retrieval_table(res: TopoRetrieval) -> pd.DataFrame:
    """Retrieved nodes best first: ``rank, node, score, text``."""
    return pd.DataFrame({"rank": range(1, len(res.nodes) + 1), "node": res.nodes,
                         "score": [float(s) for s in res.scores], "text": res.texts},
                        columns=["rank", "node", "score", "text"])


def comparison_table(results: dict[str, TopoRetrieval], reference: str) -> pd.DataFrame:
    """Every method's list in one long table; ``also in <reference>`` marks shared nodes."""
    ref = set(results[reference].nodes)
    frames = []
    for name, res in results.items():
        df = retrieval_table(res)
        df.insert(0, "method", method_label(name))
        df[f"also in {method_label(reference)}"] = df["node"].isin(ref)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def node_marks(res: TopoRetrieval) -> dict[int, tuple[str, str]]:
    """``{node: (colour, tooltip note)}`` for :func:`~.graph_view.render_view`: target first."""
    how = f"; cosine with the question {res.target_score:.3f}" if res.target_score is not None else ""
    marks = {res.target: (TARGET_COLOUR, f"target node{how}")}
    for r, (i, s) in enumerate(zip(res.nodes, res.scores), 1):
        marks[i] = (RETRIEVED_COLOUR, f"retrieved #{r}; {SCORE_NAMES[res.method]}: {s:.4g}")
    return marks


def summary_line(res: TopoRetrieval, graph: TextualGraph) -> str:
    how = (f" (most similar to the question, cosine {res.target_score:.3f})" if res.target_score is not None
           else " (picked)")
    return (f"target node {res.target}{how}: {' '.join(graph.node_text[res.target].split())[:80]}; "
            f"{len(res.nodes)} nodes by {SCORE_NAMES[res.method]}")


def legend_html() -> str:
    """Static colour legend of the node-retrieval view (no user text)."""
    def chip(colour: str, text: str) -> str:
        return (f'<span style="display:inline-block;width:12px;height:12px;background:{colour};'
                f'border:1px solid rgba(0,0,0,0.25);border-radius:3px;margin:0 4px 0 12px;'
                f'vertical-align:middle"></span>{text}')

    return ('<div style="font-size:0.85rem;line-height:1.8">' + chip(TARGET_COLOUR, "target node")
            + chip(RETRIEVED_COLOUR, "retrieved node (hover: rank and score)") + "</div>")


def timings_frame(results: dict) -> pd.DataFrame:
    """Milliseconds per stage (as text), one row per method, cell-complex and node methods alike."""
    rows = [{"method": method_label(name), **{k: f"{v * 1000:.2f}" for k, v in res.timings.items()}}
            for name, res in results.items()]
    return pd.DataFrame(rows).fillna("")


# ---------------------------------------------------------------------------------------- topology vs text
@st.cache_data(max_entries=32, show_spinner="Correlating text and topology over node pairs ...")
def correlation(graph_key: str, encoder_choice: str, method: str, max_pairs: int, seed: int,
                _graph: TextualGraph) -> dict:
    """:func:`topology_text_correlation` with the per-pair arrays (for the scatter).

    Role reuses the cached GraphWave embedding of the role index (the same defaults as the
    library's own); proximity is recomputed with the sampling ``seed`` as its projection
    seed, exactly as the library does without ``topo_emb``.
    """
    text = text_embeddings(graph_key, encoder_choice, _graph)
    topo = get_node_index(graph_key, "role", encoder_choice, _graph).emb if method == "role" else None
    return topology_text_correlation(_graph, text, method=method, max_pairs=max_pairs, seed=seed, topo_emb=topo,
                                     return_pairs=True)


@st.cache_data(max_entries=32, show_spinner="Measuring hop distances of the sampled pairs ...")
def hop_curve(graph_key: str, encoder_choice: str, max_pairs: int, max_hops: int, seed: int,
              _graph: TextualGraph) -> pd.DataFrame:
    """:func:`text_similarity_by_distance` as a table: ``hops, label, mean text similarity, pairs``."""
    text = text_embeddings(graph_key, encoder_choice, _graph)
    rows = text_similarity_by_distance(_graph, text, max_pairs=max_pairs, max_hops=max_hops, seed=seed)
    labels = {UNREACHABLE: "unreachable", max_hops + 1: f">{max_hops}"}
    return pd.DataFrame([{"hops": h, "label": labels.get(h, str(h)), "mean text similarity": m, "pairs": c}
                         for h, m, c in rows], columns=["hops", "label", "mean text similarity", "pairs"])


def correlation_frame(results: dict[str, dict]) -> pd.DataFrame:
    """One row per topological similarity: its measure, Pearson r, Spearman r, pairs used."""
    return pd.DataFrame([{"similarity": name, "measure": r["topo_measure"], "pearson_r": r["pearson_r"],
                          "spearman_r": r["spearman_r"], "pairs": r["pairs"], "sampled": r["sampled"]}
                         for name, r in results.items()],
                        columns=["similarity", "measure", "pearson_r", "spearman_r", "pairs", "sampled"])


def format_r(r: float) -> str:
    """``r`` to three decimals with its sign; a value that rounds to zero is ``0.000`` (never ``-0.000``)."""
    if not np.isfinite(r):
        return "n/a"
    r = round(float(r), 3)
    return "0.000" if r == 0 else f"{r:+.3f}"


def hop_curve_figure(curve: pd.DataFrame) -> go.Figure:
    """Mean text similarity per hop-distance bin (line), pairs per bin (bars, right axis)."""
    fig = go.Figure()
    if curve.empty:
        fig.add_annotation(text="no node pairs", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    else:
        # the line sits on the overlaying axis (y2), which plotly draws above the bars on y: the
        # bars can never hide it
        fig.add_trace(go.Bar(x=curve["label"], y=curve["pairs"], name="pairs", marker_color="rgba(160,160,160,0.45)",
                             yaxis="y"))
        fig.add_trace(go.Scatter(x=curve["label"], y=curve["mean text similarity"], mode="lines+markers",
                                 name="mean text similarity", line=dict(color="#4e79a7", width=3), yaxis="y2"))
    fig.update_layout(title="Text similarity against hop distance", height=360, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis=dict(title="shortest-path distance (hops)", type="category"),
                      yaxis=dict(title="pairs", side="right", showgrid=False),
                      yaxis2=dict(title="mean cosine of node texts", overlaying="y", side="left"),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def pair_density_figure(result: dict, bins: int = 40) -> go.Figure:
    """Density of sampled pairs in (topological similarity, text similarity), hexbin-like,
    with the mean text similarity per topological-similarity bin on top."""
    x, y = np.asarray(result.get("topo_sim", [])), np.asarray(result.get("text_sim", []))
    fig = go.Figure()
    if x.size == 0:
        fig.add_annotation(text="no node pairs", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    else:
        fig.add_trace(go.Histogram2d(x=x, y=y, nbinsx=bins, nbinsy=bins, colorscale="Blues", name="pairs",
                                     colorbar=dict(title="pairs"), hovertemplate="topo %{x}<br>text %{y}<br>"
                                                                                   "%{z} pairs<extra></extra>"))
        edges = np.linspace(x.min(), x.max(), min(bins, 20) + 1)
        which = np.clip(np.digitize(x, edges[1:-1]), 0, edges.size - 2)
        count = np.bincount(which, minlength=edges.size - 1)
        mean = np.bincount(which, weights=y, minlength=edges.size - 1) / np.maximum(count, 1)
        keep = count > 0
        fig.add_trace(go.Scatter(x=((edges[:-1] + edges[1:]) / 2)[keep], y=mean[keep], mode="lines+markers",
                                 name="mean text similarity", line=dict(color="#e15759", width=2)))
    fig.update_layout(title=f"{result['method']}: r = {format_r(result['pearson_r'])} (Pearson), "
                            f"{format_r(result['spearman_r'])} (Spearman)", height=380,
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title=result["topo_measure"],
                      yaxis_title="cosine of node texts", legend=dict(orientation="h", y=-0.25))
    return fig

