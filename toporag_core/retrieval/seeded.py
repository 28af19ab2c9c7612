"""Question-seeded TopoRAG: prizes that follow the question's relations from the entities it names.

The paper's prizes (:mod:`.toporag`) are cosines to the question. On a knowledge graph the answer
to "When were the films starring Tom Hanks released?" is two relations away from *Tom Hanks* and
looks nothing like the question (a year), so cosine prizes stop at the bridge entity (the films).
This method keeps the rest of TopoRAG (rank prizes, 2-cell prizes, one prize-collecting Steiner
tree, boundary closure) and replaces *what is ranked*:

1. **Seeds** ``S``: the nodes the question names (:func:`~.seeds.link_nodes`), or the ``seeds``
   given by the caller (a KG store's linked entities); without any, the ``k0`` nodes most similar
   to the question (the paper's 0-cell ranking).
2. **Relation relevance** of each 1-cell ``e`` (its relation texts, cosine ``s1(e)`` with the
   question, plus ``lexical x C(e)``, ``C(e)`` the question words the relation's own words name,
   :mod:`.word_match`; with ``synonyms`` also their synonyms: "appeared" names ``starred actors``):
   ``r(e) = (s1(e) - max_e' s1(e')) / tau <= 0``, a log-weight; the relation the question asks about has
   ``r = 0``. Whole-text cosines alone are noisy on movie graphs ("films" pulls
   ``starred actors`` above ``in language`` for "what languages are the films directed by X in").
3. **Path scores** (a max-product walk, ``hops`` rounds of Bellman-Ford over the 1-skeleton, both
   directions): ``L_0(v) = 0`` on seeds, ``-inf`` elsewhere;
   ``L_{h+1}(v) = max(L_h(v), max_{e = (u, v)} L_h(u) + r(e) - hop_cost)``.
   A hop may also pass through one **mediator** ``m`` (a Freebase compound-value node, :mod:`.mediators`)
   at one hop cost: ``max_{u -e1- m -e2- v} L_h(u) + r(e1) + r(e2) - hop_cost``, so "Polk -positions held->
   m.04j60kc -office-> Governor of Tennessee" is one hop, as it is one fact. Without mediators (every graph
   whose nodes are all named) this term is empty.
   A node two well-matching relations from a seed scores about ``-2 hop_cost``, a node behind a
   relation the question does not mention far below. Unlike personalised PageRank the score does not
   shrink with the bridge's degree, so all years of an actor's twenty films score alike.
4. **Prizes**: the top-``k0`` 0-cells by ``L`` (ties: higher cosine, then lower id) and the top-``k1``
   1-cells by ``L_e = max(L(u), L(v)) + r(e)`` (ties: the cosine of the triple, the mean of its three
   unit vectors, with the question: two "directed by" edges no longer tie) get the rank prizes
   ``k, ..., 1``; 2-cells get the paper's boundary prizes minus ``c2 x`` length; then the same PCST.
   With ``match > 0`` the ranking reads ``S = L + match (P - max P) / tau`` instead of ``L`` (and
   ``L_e`` from ``S``), where ``P`` is the whole relation path's match with the question
   (:mod:`.path_match`): "person place of birth" can then outrank relations that match the
   question's words better one at a time. The subcomplex keeps ``L`` as its node scores and ``P`` as
   its path match (the name reader's priors). ``P`` gains ``lexical x C(path)`` too, the question words the
   path's relations name together (each once), so the end of a two-relation question outranks its bridge.

Shapes: ``s0 (N,)``, ``s1 (M,)``, ``L (N,)``, ``L_e (M,)``; every round is a handful of numpy
scatter-max operations over the ``(M, 2)`` edge array (no Python loop over cells).

``k0 = k1 = 10`` by default: a knowledge-graph answer is often a list (an actor's films), and the
pipeline fits the text to the LLM's budget by prize afterwards (:mod:`.budget`), so a generous k
costs tokens only where they are free.
"""
from __future__ import annotations

import time

import numpy as np

from .mediators import mediator_mask
from .path_match import cell_word_masks, path_match, readable, word_masks
from .result import EmbeddedComplex, Subcomplex
from .seeds import link_nodes, name_index, norm, relation_words
from .toporag import CellPrizes, candidate_cells2, cell2_prizes, prized_subcomplex, rank_prizes
from .word_match import count

NEG = -1e9  # "unreachable" (finite, so sums stay finite and ranks stay defined)


def seed_nodes(ecx: EmbeddedComplex, question: str | np.ndarray, seeds=None) -> np.ndarray:
    """``(s,)`` sorted seed node ids: ``seeds`` (ids, or node texts matched by normalised name) when
    given, else the graph's own topic entities (``graph.meta["q_entity"]``: WebQSP records, KG-store cuts),
    else the nodes the question text names (empty for a question vector)."""
    cx = ecx.complex
    if "name-index" not in ecx.cache:
        ecx.cache["name-index"] = name_index(cx.graph.node_text)
        ecx.cache["relation-words"] = relation_words(cx.graph.edge_text)
    if isinstance(seeds, str):
        seeds = [s for s in seeds.split("|") if s.strip()]
    if not seeds:  # a record that names its topic entities (WebQSP's q_entity, a KG cut's seeds)
        seeds = [str(x) for x in (cx.graph.meta or {}).get("q_entity") or []]
    if seeds is not None and len(seeds):
        by = ecx.cache["name-index"][0]
        ids = [by.get(norm(s), np.zeros(0, np.int64)) if isinstance(s, str) else int(s) for s in seeds]
        flat = np.unique(np.concatenate([np.atleast_1d(np.asarray(i, np.int64)) for i in ids])) if ids else []
        found = np.asarray([i for i in flat if 0 <= i < cx.num_nodes], np.int64)
        if found.size:
            return found
    if not isinstance(question, str):
        return np.zeros(0, np.int64)
    return link_nodes(cx.graph.node_text, question, ecx.cache["name-index"], ecx.cache["relation-words"])[0]


def triple_cosines(ecx: EmbeddedComplex, question: str | np.ndarray) -> np.ndarray:
    """``(M,)`` cosine of the question with each 1-cell's triple vector ``x_u + x_e + x_v`` (unit vectors)."""
    from ..embed import single_thread_blas

    cx = ecx.complex
    if cx.num_edges == 0:
        return np.zeros(0)
    if "triple-unit" not in ecx.cache:
        u0, u1, _ = ecx.unit_vectors()
        t = u0[cx.edges[:, 0]] + u1 + u0[cx.edges[:, 1]]
        nt = np.linalg.norm(t, axis=1, keepdims=True)
        ecx.cache["triple-unit"] = np.ascontiguousarray(t / np.where(nt == 0, 1.0, nt), dtype=np.float32)
    q = ecx.question_vector(question)
    with single_thread_blas():
        return np.round(ecx.cache["triple-unit"] @ q, 5)


def relation_cosines(ecx: EmbeddedComplex, question: str | np.ndarray, s1: np.ndarray) -> np.ndarray:
    """``(M,)`` cosine of the question with each 1-cell's relations read as words (:func:`readable`; the best
    of a 1-cell's relations); the 1-cell's own cosine ``s1`` when the readable texts are the raw ones or
    there is no encoder. Each distinct relation is encoded once per graph (kept in ``ecx.cache``)."""
    cx = ecx.complex
    if cx.num_edges == 0 or ecx.encoder is None:
        return s1
    if "readable-relations" not in ecx.cache:
        g = cx.graph
        orig = np.flatnonzero(cx.edge_of_orig >= 0)  # original edges that belong to a 1-cell (no self-loops)
        words = [readable(g.edge_text[i]) for i in orig.tolist()]
        if all(w == g.edge_text[i] for w, i in zip(words, orig.tolist())):
            ecx.cache["readable-relations"] = None
        else:
            uniq, idx = np.unique(np.asarray(words, dtype=object), return_inverse=True)
            vec = ecx.encoder.encode([str(u) for u in uniq])
            vec = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
            ecx.cache["readable-relations"] = (vec.astype(np.float32), idx, cx.edge_of_orig[orig])
    got = ecx.cache["readable-relations"]
    if got is None:
        return s1
    vec, idx, owner = got
    cos = np.round(vec @ ecx.question_vector(question), 5)[idx]
    out = np.full(cx.num_edges, -1.0)
    np.maximum.at(out, owner, cos)
    return out


def path_scores(edges: np.ndarray, r: np.ndarray, seeds: np.ndarray, n: int, hops: int,
                hop_cost: float, mediator: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(L (N,), L_e (M,))``: the max-product walk of the module docstring (step 3) from ``seeds``;
    ``mediator``: ``(N,)`` bool, the nodes a hop may pass through at no extra hop cost."""
    L = np.full(n, NEG)
    L[seeds] = 0.0
    u, v = edges[:, 0], edges[:, 1]
    through = None
    if mediator is not None and mediator.any():  # the 1-cells with exactly one mediator end, oriented m -> w
        one = mediator[u] ^ mediator[v]
        m_end = np.where(mediator[u], u, v)[one]
        w_end = np.where(mediator[u], v, u)[one]
        through = (m_end, w_end, r[one])
    for _ in range(hops):
        step = r - hop_cost
        nxt = L.copy()
        np.maximum.at(nxt, v, L[u] + step)
        np.maximum.at(nxt, u, L[v] + step)
        if through is not None:  # into a mediator (no hop cost yet), then out of it: one hop in all
            m_end, w_end, rm = through
            into = np.full(n, NEG)
            np.maximum.at(into, m_end, L[w_end] + rm)
            np.maximum.at(nxt, w_end, into[m_end] + rm - hop_cost)
        nxt = np.maximum(nxt, NEG)
        if np.array_equal(nxt, L):
            break
        L = nxt
    Le = np.maximum(L[u], L[v]) + r if edges.size else np.zeros(0)
    return L, np.maximum(Le, NEG)


def seeded_prizes(ecx: EmbeddedComplex, question: str | np.ndarray, k0: int, k1: int, k2: int, c2: float,
                  hops: int, tau: float, hop_cost: float, seeds=None, match: float = 0.0, lexical: float = 0.0,
                  synonyms: bool = True):
    """``(CellPrizes, (s0, s1, s2), seed ids, path scores L, path match P)`` of the module docstring's
    steps 1-4 (``P``: :func:`~.path_match.path_match`, ``None`` without one)."""
    cx = ecx.complex
    s0, s1, s2 = ecx.similarities(question)
    seed = seed_nodes(ecx, question, seeds)
    if seed.size == 0:
        seed = np.argsort(-s0, kind="stable")[:max(1, k0)]
    rc = relation_cosines(ecx, question, s1)
    masks = word_masks(ecx, question, seed, synonyms) if lexical and isinstance(question, str) else None
    if masks is not None and rc.size:  # + lexical x the question words each relation names
        rc = rc + lexical * count(cell_word_masks(ecx, masks))
    r = (rc - rc.max()) / max(tau, 1e-6) if rc.size else rc
    if "mediators" not in ecx.cache:
        ecx.cache["mediators"] = mediator_mask(cx.graph.node_text)
    L, Le = path_scores(cx.edges, r, seed, cx.num_nodes, hops, hop_cost, ecx.cache["mediators"])
    P = path_match(ecx, question, seed, lexical=lexical, masks=masks)
    rank = L
    if match and P is not None:  # step 4 with the path's match: S = L + match (P - max P) / tau, 0 on seeds
        reached = P > -1
        gap = np.where(reached, P - (P[reached].max() if reached.any() else 0.0), 0.0)
        rank = np.where(L > NEG / 2, L + match * gap / max(tau, 1e-6), L)
        if cx.num_edges:
            Le = np.maximum(np.maximum(rank[cx.edges[:, 0]], rank[cx.edges[:, 1]]) + r, NEG)
    p0 = rank_prizes(rank, k0, tiebreak=s0)
    p0[L <= NEG / 2] = 0.0  # nothing unreachable gets a prize
    p1 = rank_prizes(Le, k1, tiebreak=triple_cosines(ecx, question)) if cx.num_edges else np.zeros(0)
    if p1.size:
        p1[Le <= NEG / 2] = 0.0
    p2 = cell2_prizes(cx, p0, p1, c2)
    return CellPrizes(p0, p1, p2, candidate_cells2(np.where(inside_cells2(cx, p0), p2, 0.0), k2), None), \
        (s0, s1, s2), seed, L, P


def inside_cells2(cx, p0: np.ndarray) -> np.ndarray:
    """``(F,)`` bool: the 2-cells whose every boundary node has a prize (a loop closed *among* the prized
    cells). Only these may become candidates: a long Freebase cycle through one prized node would take the
    whole context budget (2-cells are fitted first) for cells the question never reached."""
    if cx.num_cells2 == 0:
        return np.zeros(0, bool)
    bad = np.bincount(cx.cell2_index(), weights=(p0[cx.cell_nodes] <= 0).astype(float), minlength=cx.num_cells2)
    return bad == 0


def retrieve_seeded(ecx: EmbeddedComplex, question: str | np.ndarray, k0: int = 10, k1: int = 10, k2: int = 3,
                    c2: float = 0.5, edge_cost: float = 0.5, hops: int = 2, tau: float = 0.1,
                    hop_cost: float = 0.5, match: float = 1.0, lexical: float = 0.4, synonyms: bool = True,
                    seeds=None) -> Subcomplex:
    """Question-seeded TopoRAG (the module docstring); ``seeds``: node ids or names (default: linked)."""
    cx = ecx.complex
    if cx.num_nodes == 0:
        raise ValueError("cannot retrieve from an empty graph (no nodes)")
    t0 = time.perf_counter()
    prz, sims, seed, L, P = seeded_prizes(ecx, question, k0, k1, k2, c2, hops, tau, hop_cost, seeds, match,
                                          lexical, synonyms)
    t1 = time.perf_counter()
    params = dict(k0=k0, k1=k1, k2=k2, c2=c2, edge_cost=edge_cost, hops=hops, tau=tau, hop_cost=hop_cost,
                  match=match, lexical=lexical, synonyms=synonyms)
    sub = prized_subcomplex(cx, prz, edge_cost, "toporag-seeded", params, sims, t0, t1)
    sub.params["seeds"] = seed.tolist()
    sub.node_scores = L
    sub.path_match = P
    return sub
