"""Relation-path match: how well the relations on the way from a seed to a node spell out the question.

The seeded method's path score (:mod:`.seeded`) multiplies one weight per relation, so every extra hop
costs: for "What did the spouse of Walter Morrison do?" the bridge entity (the spouse, one hop) scores
above the answer (her occupation, two hops), and a reader that trusts the path score names the spouse.
Question answering over knowledge graphs scores whole relation paths against the question instead
(relation-path retrieval, as RoG and SubgraphRAG do). This module does it with the sentence encoder:
the text of a path is its relations read as words (:func:`readable`), in walking order, and
its score is that text's cosine with the question,

    P(v) = max over paths  s -r1-> v  or  s -r1-> b -r2-> v   of   cos(q, enc("r1 r2")),

so "spouse occupation" matches the question better than "spouse" alone, and "place of death" better
than "place of birth". With ``lexical > 0`` each path also gains ``lexical x C(path)``, the question words
its relations name together (:mod:`.word_match`). ``P(v) = -1`` for a node no 1- or 2-hop path reaches
(and for the seeds).
With several seeds ``P`` is the mean of each seed's ``P_s``: "Which element named after Canada did
Anton Castellan discover?" is answered by the node both seeds reach, and an element reached from only
one of them pays ``-1`` for the other (measured: docs/results/kg.md).

Cost: the relation words, their ids and the incidence lists sorted by node are built once per graph
(``ecx.cache``); per question and seed only index arithmetic and the new texts' encoding remain. The
first hops are limited to the ``top`` relations that match best on their own, so the pairs
to encode are at most ``top x`` (relations at the bridges): about 50 to 200 short texts on a WebQSP
subgraph, encoded once per graph and text (kept in ``ecx.cache``).

Shapes: ``edges (M, 2)``; the 1-hop arrays are ``(m1,)``, the 2-hop join ``(m2,)``; every step is index
arithmetic over those arrays (one ``np.maximum.at`` per hop), strings are built only for distinct
relation pairs.
"""
from __future__ import annotations

import numpy as np

from .result import EmbeddedComplex
from .word_match import count, relation_masks, relation_vocab, text_vectors

TOP = 8  # first-hop relations followed to a second hop


def readable(relation: str) -> str:
    """A relation name as words: ``"people.person.place_of_birth"`` -> ``"person place of birth"`` (the last
    two dotted parts, underscores as spaces); ``"release_year"`` -> ``"release year"``; plain text unchanged."""
    parts = [p for p in str(relation).split(".") if p]
    return " ".join(parts[-2:]).replace("_", " ").strip() or str(relation)


def cell_words(ecx: EmbeddedComplex) -> np.ndarray:
    """``(M,)`` object array: each 1-cell's relation read as words (its first original edge's), cached."""
    if "cell-words" not in ecx.cache:
        cx = ecx.complex
        words = np.full(cx.num_edges, "", dtype=object)
        orig = np.flatnonzero(cx.edge_of_orig >= 0)[::-1]  # reversed: the first original edge is written last
        cells = cx.edge_of_orig[orig]
        words[cells] = [readable(cx.graph.edge_text[i]) for i in orig.tolist()]
        ecx.cache["cell-words"] = words
    return ecx.cache["cell-words"]


def text_cosines(ecx: EmbeddedComplex, texts: list[str], q: np.ndarray) -> np.ndarray:
    """``(len(texts),)`` cosine of ``q`` with each text's unit vector (:func:`~.word_match.text_vectors`: every
    text is encoded once per graph)."""
    return text_vectors(ecx, texts) @ q if texts else np.zeros(0)


def _graph_arrays(ecx: EmbeddedComplex) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per graph, cached: ``(word texts (W,), word id of each 1-cell (M,), ends, others, 1-cell ids)``, the
    last three the ``(2M,)`` incidences sorted by end node (the join of hop 2 looks bridges up in them)."""
    if "path-match-arrays" not in ecx.cache:
        cx = ecx.complex
        wtext, wid = np.unique(cell_words(ecx).astype(str), return_inverse=True)
        u, v = cx.edges[:, 0], cx.edges[:, 1]
        ends, others = np.concatenate([u, v]), np.concatenate([v, u])
        eid = np.concatenate([np.arange(cx.num_edges)] * 2)
        order = np.argsort(ends, kind="stable")
        ecx.cache["path-match-arrays"] = (wtext, wid.reshape(-1), ends[order], others[order], eid[order])
    return ecx.cache["path-match-arrays"]


def word_masks(ecx: EmbeddedComplex, question: str | np.ndarray, seeds: np.ndarray,
               synonyms: bool = True) -> np.ndarray:
    """``(W,)`` int64 bit sets: the question words each relation text of :func:`_graph_arrays` names
    (:func:`~.word_match.relation_masks`, with its synonym groups when ``synonyms``; the seeds' own names are
    not question words); zeros for a question vector or a graph without edges."""
    cx = ecx.complex
    if cx.num_edges == 0:
        return np.zeros(0, np.int64)
    wtext = _graph_arrays(ecx)[0]
    if not isinstance(question, str):
        return np.zeros(len(wtext), np.int64)
    names = [cx.graph.node_text[int(i)] for i in np.asarray(seeds, np.int64).tolist()]
    if "relation-vocab" not in ecx.cache:  # the relation texts' words, once per graph
        ecx.cache["relation-vocab"] = relation_vocab(wtext.tolist())
    return relation_masks(ecx, question, ecx.cache["relation-vocab"], names, synonyms)


def cell_word_masks(ecx: EmbeddedComplex, masks: np.ndarray) -> np.ndarray:
    """``(M,)`` each 1-cell's bit set, from the ``(W,)`` bit sets of :func:`word_masks`."""
    return masks[_graph_arrays(ecx)[1]] if masks.size else np.zeros(ecx.complex.num_edges, np.int64)


def path_match(ecx: EmbeddedComplex, question: str | np.ndarray, seeds: np.ndarray,
               top: int = TOP, lexical: float = 0.0, masks: np.ndarray | None = None) -> np.ndarray | None:
    """``(N,)`` the module docstring's ``P`` (the mean over the seeds), plus ``lexical`` x the question
    words the path's relations name (:mod:`.word_match`; ``masks`` from :func:`word_masks`, computed when
    not given); ``None`` without an encoder or for a question vector."""
    if ecx.encoder is None or not isinstance(question, str):
        return None
    seeds = np.asarray(seeds, np.int64)
    if ecx.complex.num_edges == 0 or seeds.size == 0:
        return np.full(ecx.complex.num_nodes, -1.0)
    q = np.asarray(ecx.question_vector(question), np.float32)
    wcos = text_cosines(ecx, _graph_arrays(ecx)[0].tolist(), q)
    if lexical and masks is None:
        masks = word_masks(ecx, question, seeds)
    if not lexical:
        masks = None
    if seeds.size == 1:
        return _match_from(ecx, q, wcos, seeds, top, lexical, masks)
    out = np.mean([_match_from(ecx, q, wcos, seeds[i:i + 1], top, lexical, masks) for i in range(seeds.size)],
                  axis=0)
    out[seeds] = -1.0
    return np.round(out, 5)


def _match_from(ecx: EmbeddedComplex, q: np.ndarray, wcos: np.ndarray, seeds: np.ndarray, top: int,
                lexical: float = 0.0, masks: np.ndarray | None = None) -> np.ndarray:
    """``P`` from one seed set (the best path of any of them), given the question vector ``q``, each
    relation word's cosine ``wcos (W,)`` and, with ``lexical``, its bit set ``masks (W,)``."""
    cx = ecx.complex
    n = cx.num_nodes
    out = np.full(n, -1.0)
    wtext, wid, ends, others, eid = _graph_arrays(ecx)
    u, v = cx.edges[:, 0], cx.edges[:, 1]
    seed = np.zeros(n, bool)
    seed[seeds] = True
    # hop 1: every 1-cell with exactly one seed end
    e1 = np.flatnonzero(seed[u] ^ seed[v])
    b = np.where(seed[u[e1]], v[e1], u[e1])
    one = wcos + lexical * count(masks) if masks is not None else wcos
    np.maximum.at(out, b, one[wid[e1]])
    # hop 2: from the bridges reached by the `top` best-matching first relations
    best = np.unique(wid[e1])
    best = best[np.argsort(-one[best], kind="stable")[:top]]
    keep = np.isin(wid[e1], best)
    e1, b = e1[keep], b[keep]
    start, stop = np.searchsorted(ends, b, "left"), np.searchsorted(ends, b, "right")
    cnt = stop - start
    first = np.repeat(np.arange(b.size), cnt)  # the first hop of each joined pair
    at = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(start, cnt)
    e2, far = eid[at], others[at]
    ok = ~seed[far] & (e2 != e1[first])
    first, e2, far = first[ok], e2[ok], far[ok]
    if far.size:
        code = wid[e1[first]] * len(wtext) + wid[e2]
        uniq, inv = np.unique(code, return_inverse=True)
        texts = [f"{wtext[c // len(wtext)]} {wtext[c % len(wtext)]}" for c in uniq.tolist()]
        two = text_cosines(ecx, texts, q)
        if masks is not None:
            two = two + lexical * count(masks[uniq // len(wtext)] | masks[uniq % len(wtext)])
        np.maximum.at(out, far, two[inv])
    out[seed] = -1.0
    return np.round(out, 5)
