"""Question-driven traversal with fusion and grafting under an FGW budget (KURISU-G2).

From the root, for ``depth = 1 .. max_depth`` at the current node ``u``:

1. **Score** the children ``j`` of ``u`` (tree and grafted edges): ``s_j = cos(q, x_j) +
   mention_bonus * named_j``, ``named_j = 1`` when ``j`` lies in a document (other than
   ``u``'s own) whose title the question or the text of a node on the path names (default
   bonus 0.5; ``0`` is the literal ``s_j = cos(q, x_j)``), existence weight ``w_j`` of the
   edge ``u -> j``. Why: a question names its entities, and MiniLM's cosine between a
   question and an article about an invented name barely depends on the name.
2. **Keep** ``K = {j : s_j > keep_ratio * max_i(w_i s_i)}`` (``keep_ratio`` is the source's
   tau, default 0.8), sorted by ``w_j s_j`` descending (the best child first). When no
   child passes (all scores <= 0) the best one is kept.
3. **Fuse**: the largest prefix ``K[:m]`` whose fusion keeps ``FGW(G, G') <= epsilon``
   (``G`` the original graph, ``G'`` the graph deformed by everything accepted so far plus
   this fusion), found by binary search over ``m in 2..|K|`` (``ceil(log2 |K|)`` FGW calls;
   ``search="linear"`` scans ``m = 2, 3, ...`` until the first failure). If ``m >= 2`` the
   prefix becomes one super-node: texts and contents concatenated, neighbours united,
   re-embedded (``fuse_embedding="reencode"``; ``"mean"`` takes the mass-weighted mean of
   the members' vectors), a merged edge's weight is the mean of the merged ones. The walk
   moves to the super-node, else to the best child.
4. **Graft**: grandchildren ``g`` reached through the children that were not fused into the
   next node, with ``s_g > keep_ratio * max_i(w_i s_i)``, best first, at most ``max_graft``:
   the largest prefix whose grafting (new edges ``next -> g``) keeps ``FGW <= epsilon``,
   again by binary search (``ceil(log2(G + 1))`` calls). A grafted edge's weight is
   ``clip(p0 + graft_gain * (s_g - graft_center), 0, 1)`` with ``p0 = s_g`` by default
   (``graft_base`` sets a constant ``p0``); the source's eta and tau here are
   ``graft_gain`` (0.5) and ``graft_center`` (0.5), distinct from ``keep_ratio``.
   With ``graft_mentions=True`` (default) the *first* candidates are, for every document
   named by the question or by the own text of a node on the path (title matched as a whole
   phrase, case-insensitive) that has nothing in the context yet, its best section by
   ``cos(q, .)``: the bridge article of a two-hop question ("the founder of O" -> O's
   paragraph "O was founded by P" names P). These are links the text itself makes, as
   HotpotQA's hyperlinks; the answer and the gold titles are never used.
   With ``graft_semantic=True`` (default) the remaining candidate slots go to "far" nodes:
   nodes of other articles joined by a semantic edge to a child of the next node, at that
   child's level, best edge cosine first, not filtered by the question (a bridge article is
   by nature unlike the question). ``graft_semantic=False`` is the literal reading.

**Query update** (``query_update``, default 0): after each move
``q <- normalise(q + query_update * x_next)``; measured in the benchmark (it does not help
on the generated data, so it is off).

So a question costs at most ``max_depth * 2 * ceil(log2(k + 1))`` FGW calls, ``k`` the most
candidates at one step. ``epsilon = 0`` means no deformation at all (no FGW call): the plain
greedy path. The **context** is the text of the nodes on the path, fused and grafted nodes
included, in document order; a selected node above paragraph level with no selected
descendant (e.g. a grafted section) brings its paragraphs, since a heading alone says nothing;
a sentence whose paragraph is already in the context is not repeated.

Shapes: ``x (n, d)`` node features, ``q (d,)`` the question vector, couplings ``(n, m)``.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .build import DOCUMENT, GRAFT, LEVELS, PARAGRAPH, SECTION, SEMANTIC, DocGraph
from .fgw import FGWConfig, FGWResult, GraphState, fgw_between, natural_coupling, structure_matrix

FUSE_EMBEDDINGS = ("reencode", "mean")
SEARCHES = ("binary", "linear")
MENTION_SCOPES = ("own", "content")


@dataclass
class TraversalConfig:
    """Traversal settings (defaults as stated in the module docstring and docs/docgraph.md).

    Attributes:
        max_depth: moves from the root, ``>= 1``.
        keep_ratio: tau of the keep rule, in ``(0, 1]``.
        epsilon: FGW budget, ``>= 0`` (0: plain greedy path).
        graft_gain, graft_center: eta and tau of the graft weight.
        graft_base: constant ``p0`` of the graft weight; ``None`` uses ``s_g``.
        max_graft: graft candidates per step at most (``0`` turns grafting off).
        graft_semantic: also offer, as graft candidates, the nodes joined by a semantic edge to a
            child of the next node ("far" nodes of other articles, ranked by the edge's cosine
            and not filtered by the question); on by default, ``False`` is the literal reading.
        mention_bonus: added to the score of a child whose document title the question names
            (``s_j = cos(q, x_j) + mention_bonus * [title named]``); ``0`` is the literal score.
        graft_mentions: first offer, as graft candidates, the best section (by the current query)
            of every document whose title the question or the text of a node on the path names
            and that is not yet in the context (the bridge article of a two-hop question);
            ``False`` is the literal reading.
        mention_scope: where a node on the path names titles: ``"own"`` (its own text: a document
            node names nothing but itself until the walk reaches its paragraphs) or ``"content"``
            (its whole subtree: a document names every title its text names, as an article's links
            do; what corpus retrieval uses, :mod:`.corpus_search`).
        query_update: after each move the query becomes ``normalise(q + query_update * x_next)``
            (``x_next`` the embedding of the node moved to); ``0`` keeps the question alone.
        fuse_embedding: ``"reencode"`` or ``"mean"``.
        search: ``"binary"`` or ``"linear"``.
        fgw: the FGW settings.
    """

    max_depth: int = 3
    keep_ratio: float = 0.8
    epsilon: float = 0.05
    graft_gain: float = 0.5
    graft_center: float = 0.5
    graft_base: float | None = None
    max_graft: int = 3
    graft_semantic: bool = True
    mention_bonus: float = 0.5
    graft_mentions: bool = True
    mention_scope: str = "own"
    query_update: float = 0.0
    fuse_embedding: str = "reencode"
    search: str = "binary"
    fgw: FGWConfig = field(default_factory=FGWConfig)

    def __post_init__(self) -> None:
        if isinstance(self.fgw, dict):
            self.fgw = FGWConfig(**self.fgw)
        if int(self.max_depth) < 1:
            raise ValueError(f"TraversalConfig.max_depth must be >= 1 (moves from the root), got {self.max_depth}")
        if not 0.0 < float(self.keep_ratio) <= 1.0:
            raise ValueError(f"TraversalConfig.keep_ratio must be in (0, 1], got {self.keep_ratio}")
        if not float(self.epsilon) >= 0.0:
            raise ValueError(f"TraversalConfig.epsilon must be >= 0 (an FGW budget), got {self.epsilon}")
        if int(self.max_graft) < 0:
            raise ValueError(f"TraversalConfig.max_graft must be >= 0, got {self.max_graft}")
        if not float(self.mention_bonus) >= 0.0:
            raise ValueError(f"TraversalConfig.mention_bonus must be >= 0, got {self.mention_bonus}")
        if not float(self.query_update) >= 0.0:
            raise ValueError(f"TraversalConfig.query_update must be >= 0, got {self.query_update}")
        if self.graft_base is not None and not 0.0 <= float(self.graft_base) <= 1.0:
            raise ValueError(f"TraversalConfig.graft_base must be in [0, 1] or None, got {self.graft_base}")
        if self.mention_scope not in MENTION_SCOPES:
            raise ValueError(f"TraversalConfig.mention_scope must be one of {MENTION_SCOPES}, "
                             f"got {self.mention_scope!r}")
        if self.fuse_embedding not in FUSE_EMBEDDINGS:
            raise ValueError(f"TraversalConfig.fuse_embedding must be one of {FUSE_EMBEDDINGS}, "
                             f"got {self.fuse_embedding!r}")
        if self.search not in SEARCHES:
            raise ValueError(f"TraversalConfig.search must be one of {SEARCHES}, got {self.search!r}")


# ----------------------------------------------------------------------------- deformations
def fuse(state: GraphState, nodes: list[int], encoder=None, how: str = "reencode") -> tuple[GraphState, np.ndarray]:
    """Fuse ``nodes`` (state indices, text order = given order) into one super-node.

    Returns ``(new state, remap (m,))`` with ``remap[old index] = new index``; the super-node
    takes the place of the smallest index. Edges are re-indexed, edges inside the group
    dropped, and parallel edges of one kind merged with the mean weight (vectorised).
    """
    m = state.num_nodes
    nodes = [int(v) for v in nodes]
    first = min(nodes)
    keep = np.ones(m, bool)
    keep[[v for v in nodes if v != first]] = False
    remap = np.cumsum(keep) - 1
    remap[nodes] = remap[first]
    s = int(remap[first])
    size = np.bincount(remap, weights=state.size, minlength=int(keep.sum()))
    kept = np.flatnonzero(keep)
    text = [state.text[i] for i in kept]
    content = [state.content[i] for i in kept]
    members = [state.members[i] for i in kept]
    text[s] = "\n".join(state.text[v] for v in nodes)
    content[s] = " ".join(state.content[v] for v in nodes)
    members[s] = np.sort(np.concatenate([state.members[v] for v in nodes]))
    x = state.x[kept].copy()
    if how == "reencode" and encoder is not None:
        x[s] = encoder.encode([content[s]])[0]
    else:
        v = (state.x[nodes].astype(np.float64) * state.size[nodes, None]).sum(0)
        x[s] = v / max(np.linalg.norm(v), 1e-12)
    e = remap[state.edges]
    live = e[0] != e[1]
    e, kind, p = e[:, live], state.edge_kind[live], state.p[live]
    sem = kind == SEMANTIC
    e[:, sem] = np.sort(e[:, sem], axis=0)
    n2 = len(kept)
    key = (kind * n2 + e[0]) * n2 + e[1]
    uniq, inv = np.unique(key, return_inverse=True)
    p_mean = np.bincount(inv, weights=p) / np.bincount(inv)
    kind_u = uniq // (n2 * n2)
    rest = uniq % (n2 * n2)
    edges = np.stack([rest // n2, rest % n2])
    new = GraphState(assign=remap[state.assign], x=x, size=size, level=state.level[kept], text=text,
                     content=content, edges=edges, edge_kind=kind_u, p=p_mean, members=members)
    return new, remap


def graft(state: GraphState, parent: int, nodes: list[int], weights: list[float]) -> GraphState:
    """Add grafted edges ``parent -> g`` (kind ``graft``) with the given existence weights."""
    if not nodes:
        return state
    add = np.array([[parent] * len(nodes), nodes], dtype=np.int64)
    return GraphState(assign=state.assign, x=state.x, size=state.size, level=state.level, text=state.text,
                      content=state.content, edges=np.concatenate([state.edges, add], axis=1),
                      edge_kind=np.concatenate([state.edge_kind, np.full(len(nodes), GRAFT)]),
                      p=np.concatenate([state.p, np.asarray(weights, np.float64)]), members=state.members)


def children(state: GraphState, u: int) -> tuple[np.ndarray, np.ndarray]:
    """``(child indices, edge weights)`` of ``u`` over tree and grafted edges."""
    sel = (state.edges[0] == u) & (state.edge_kind != SEMANTIC)
    return state.edges[1, sel], state.p[sel]


def _semantic_candidates(state: GraphState, nxt: int, exclude: np.ndarray) -> np.ndarray:
    """Nodes joined by a semantic edge to a child of ``nxt``, at the children's level, not already
    children of ``nxt``; best edge cosine first (each node once)."""
    kids, _ = children(state, nxt)
    if kids.size == 0:
        return np.zeros(0, np.int64)
    sem = state.edge_kind == SEMANTIC
    a, b, w = state.edges[0, sem], state.edges[1, sem], state.p[sem]
    hit_a, hit_b = np.isin(a, kids), np.isin(b, kids)
    cand = np.concatenate([b[hit_a & ~hit_b], a[hit_b & ~hit_a]])
    cw = np.concatenate([w[hit_a & ~hit_b], w[hit_b & ~hit_a]])
    keep = ~np.isin(cand, np.concatenate([kids, exclude]))
    cand, cw = cand[keep], cw[keep]
    order = np.lexsort((cand, -cw))
    _, first = np.unique(cand[order], return_index=True)
    return cand[order][np.sort(first)]


def _fuse_prefix(state: GraphState, order: list[int], encoder, how: str, m: int) -> tuple[GraphState, np.ndarray]:
    return fuse(state, order[:m], encoder, how)


def _graft_prefix(state: GraphState, parent: int, nodes: list[int], weights: list[float], m: int) -> GraphState:
    return graft(state, parent, nodes[:m], weights[:m])


def _prefix_search(k: int, lo: int, make: Callable[[int], Any], check: Callable[[int, Any], tuple[bool, Any]],
                   method: str) -> tuple[int, dict[int, tuple[Any, Any]]]:
    """:func:`largest_feasible_prefix` over candidates ``make(m)`` judged by ``check(m, candidate)``;
    returns the size and every ``(candidate, FGW result)`` tried, by size."""
    tried: dict[int, tuple[Any, Any]] = {}

    def feasible(m: int) -> bool:
        cand = make(m)
        ok, res = check(m, cand)
        tried[m] = (cand, res)
        return ok

    return largest_feasible_prefix(k, feasible, lo=lo, method=method), tried


def largest_feasible_prefix(k: int, feasible: Callable[[int], bool], lo: int = 0,
                            method: str = "binary") -> int:
    """Largest ``m in lo..k`` with ``feasible(m)``, ``lo`` being feasible by assumption.

    ``binary``: ``ceil(log2(k - lo + 1))`` calls at most; equal to ``linear`` (scan upwards,
    stop at the first failure) whenever feasibility is monotone in ``m``.
    """
    if method == "linear":
        best = lo
        for m in range(lo + 1, k + 1):
            if not feasible(m):
                break
            best = m
        return best
    a, b = lo, k
    while a < b:
        mid = (a + b + 1) // 2
        if feasible(mid):
            a = mid
        else:
            b = mid - 1
    return a


# ----------------------------------------------------------------------------- results
@dataclass
class Evaluation:
    """One FGW call of the traversal."""

    depth: int
    op: str  # "fuse" | "graft"
    size: int
    value: float
    ok: bool
    seconds: float


@dataclass
class Step:
    """What happened at one depth; node ids are *original* node ids (a state node = its members)."""

    depth: int
    at: list[int]
    children: list[list[int]]
    scores: list[float]
    weights: list[float]
    threshold: float
    kept: list[int]  # positions in `children`, best first
    fused: list[int]  # positions in `children` fused into the next node ([] when none)
    graft_candidates: list[list[int]]
    grafted: list[list[int]]
    graft_weights: list[float]
    next: list[int]
    candidates: int = 0
    mention_candidates: int = 0  # how many of `graft_candidates` (the first ones) come from named titles
    before: GraphState | None = field(default=None, repr=False)  # the graph this step started from
    u: int = 0  # index of the current node in `before`


@dataclass
class TraversalResult:
    """Path, fusions, grafts, every FGW value against epsilon, the final deformed graph."""

    question: str
    path: list[list[int]]
    steps: list[Step]
    evaluations: list[Evaluation]
    selected: np.ndarray
    context: str
    state: GraphState
    final_fgw: FGWResult | None
    epsilon: float
    timings: dict[str, float]
    base: GraphState | None = field(default=None, repr=False)

    @property
    def fgw_calls(self) -> int:
        return len(self.evaluations)

    def fusions(self) -> list[list[int]]:
        """Members (original ids) of every super-node the traversal made."""
        return [list(map(int, self.state.members[i])) for i in range(self.state.num_nodes)
                if len(self.state.members[i]) > 1]

    def grafts(self) -> list[dict[str, Any]]:
        return [{"depth": s.depth, "onto": s.next, "node": g, "weight": w}
                for s in self.steps for g, w in zip(s.grafted, s.graft_weights)]

    def to_dict(self, graph: DocGraph | None = None) -> dict[str, Any]:
        def label(ids: list[int]) -> Any:
            if graph is None:
                return ids
            return {"ids": ids, "level": LEVELS[int(graph.level[ids[0]])], "text": [graph.text[i][:80] for i in ids]}

        return {"question": self.question, "path": [label(p) for p in self.path], "fusions": self.fusions(),
                "grafts": self.grafts(), "epsilon": self.epsilon, "fgw_calls": self.fgw_calls,
                "fgw": [{"depth": e.depth, "op": e.op, "size": e.size, "value": e.value, "ok": e.ok,
                         "ms": 1000 * e.seconds} for e in self.evaluations],
                "final_fgw": None if self.final_fgw is None else self.final_fgw.value,
                "steps": [{"depth": s.depth, "at": s.at, "children": s.children, "scores": s.scores,
                           "weights": s.weights, "threshold": s.threshold, "kept": s.kept, "fused": s.fused,
                           "graft_candidates": s.graft_candidates, "grafted": s.grafted,
                           "graft_weights": s.graft_weights, "next": s.next} for s in self.steps],
                "selected": self.selected.tolist(), "context": self.context,
                "timings_ms": {k: 1000 * v for k, v in self.timings.items()}}


# ----------------------------------------------------------------------------- title mentions
def title_pattern(titles: list[str], min_chars: int = 3) -> re.Pattern | None:
    """One case-insensitive pattern matching any document title (at least ``min_chars``
    characters) as a whole phrase, longest titles first; ``None`` when there is none."""
    names = sorted({t.strip() for t in titles if len(t.strip()) >= min_chars}, key=len, reverse=True)
    if not names:
        return None
    return re.compile(r"(?<!\w)(" + "|".join(re.escape(t) for t in names) + r")(?!\w)", re.IGNORECASE)


def named_documents(graph: DocGraph, text: str, pattern: re.Pattern | None = None) -> np.ndarray:
    """Sorted document indices (``graph.doc`` values) whose title ``text`` names."""
    pattern = pattern if pattern is not None else title_pattern(graph.titles)
    if pattern is None or not text:
        return np.zeros(0, np.int64)
    found = {m.group(1).lower() for m in pattern.finditer(text)}
    return np.asarray([d for d, t in enumerate(graph.titles) if t.strip().lower() in found], np.int64)


# ----------------------------------------------------------------------------- the walk
def context_nodes(graph: DocGraph, selected: np.ndarray) -> np.ndarray:
    """The original nodes whose text the context shows: the selected ones, plus, under every
    selected node above paragraph level that has no selected descendant (a leaf of the
    selection, e.g. a grafted section), its paragraphs - a heading alone says nothing."""
    n = graph.num_nodes
    sel = np.zeros(n, bool)
    sel[np.asarray(selected, np.int64)] = True
    sel[0] = False
    anc = graph.ancestors()
    idx = np.flatnonzero(sel)
    above = anc[idx][np.arange(len(LEVELS))[None, :] < graph.level[idx][:, None]]
    has_desc = np.zeros(n, bool)
    has_desc[above[above >= 0]] = True
    leaf = sel & ~has_desc & (graph.level > 0) & (graph.level < PARAGRAPH)
    paras = np.flatnonzero(graph.level == PARAGRAPH)
    expand = np.zeros(paras.size, bool)
    for lv in (DOCUMENT, SECTION):
        a_lv = anc[paras, lv]
        expand |= (a_lv >= 0) & leaf[np.maximum(a_lv, 0)]
    show = sel.copy()
    show[paras[expand]] = True
    return np.flatnonzero(show)


def render_context(graph: DocGraph, selected: np.ndarray) -> str:
    """The context text of the selected original nodes (see :func:`context_nodes`), in document
    order: ``# title`` for documents, ``## heading`` for sections (``## title: heading`` when
    the document itself is not shown), paragraph / sentence text (prefixed ``title: `` when
    neither its document nor its section is shown); a sentence of a shown paragraph is not repeated."""
    n = graph.num_nodes
    show = np.zeros(n, bool)
    show[context_nodes(graph, selected)] = True
    anc = graph.ancestors()
    para = anc[:, PARAGRAPH]
    covered = (para >= 0) & (para != np.arange(n)) & show[np.maximum(para, 0)]
    doc_shown = show[np.maximum(anc[:, DOCUMENT], 0)]
    sec_shown = (anc[:, SECTION] >= 0) & show[np.maximum(anc[:, SECTION], 0)]
    lines = []
    for i in np.flatnonzero(show & ~covered):
        lv, title = int(graph.level[i]), graph.titles[int(graph.doc[i])]
        if lv == DOCUMENT:
            lines.append(f"# {graph.text[i]}")
        elif lv == SECTION:
            lines.append(f"## {graph.text[i]}" if doc_shown[i] else f"## {title}: {graph.text[i]}")
        else:
            lines.append(graph.text[i] if doc_shown[i] or sec_shown[i] else f"{title}: {graph.text[i]}")
    return "\n".join(lines)


class Traverser:
    """Runs :func:`traverse` questions against one graph (the encoder re-embeds fused nodes)."""

    def __init__(self, graph: DocGraph, encoder, config: TraversalConfig | None = None) -> None:
        self.graph, self.encoder = graph, encoder
        self.config = config or TraversalConfig()
        self.titles = title_pattern(graph.titles)
        anc = graph.ancestors()
        self._sections = anc[:, SECTION][graph.level == SECTION]  # original section ids, pre-order

    def _mention_grafts(self, state: GraphState, nxt: int, named: np.ndarray, shown: np.ndarray,
                        q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(state ids, scores)``: per named document not yet shown, its best section by ``cos(q, .)``
        (not ``nxt`` or one of its children), best document first."""
        g = self.graph
        docs = np.setdiff1d(named, np.unique(g.doc[shown]))
        secs = self._sections[np.isin(g.doc[self._sections], docs)]
        if secs.size == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        st = state.assign[secs]
        ok = ~np.isin(st, np.append(children(state, nxt)[0], nxt))
        st, d = st[ok], g.doc[secs[ok]]
        sc = state.x[st].astype(np.float64) @ q
        order = np.lexsort((st, -sc, d))  # per document, best section first
        first = np.r_[True, d[order][1:] != d[order][:-1]]
        best, bsc = st[order][first], sc[order][first]
        rank = np.lexsort((best, -bsc))
        return best[rank], bsc[rank]

    def question_vector(self, question: str) -> np.ndarray:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        q = np.asarray(self.encoder.encode([question])[0], np.float64)
        return q / max(np.linalg.norm(q), 1e-12)

    def run(self, question: str, qvec: np.ndarray | None = None) -> TraversalResult:
        cfg, g = self.config, self.graph
        t0 = time.perf_counter()
        q = self.question_vector(question) if qvec is None else np.asarray(qvec, np.float64)
        t_enc = time.perf_counter() - t0
        base = GraphState.from_graph(g)
        d1, scale = structure_matrix(base, cfg.fgw)
        state, u = base, 0
        path, steps, evals = [[0]], [], []
        grafted_members: list[np.ndarray] = []
        accepted: FGWResult | None = None
        fgw_time = 0.0
        deform = cfg.epsilon > 0

        def check(depth: int, op: str, size: int, cand: Any) -> tuple[bool, FGWResult]:
            cand = cand[0] if isinstance(cand, tuple) else cand
            nonlocal fgw_time
            d2, _ = structure_matrix(cand, cfg.fgw, scale)
            res = fgw_between(base, d1, cand, d2, cfg.fgw)
            fgw_time += res.seconds
            ok = res.value <= cfg.epsilon
            evals.append(Evaluation(depth, op, size, res.value, ok, res.seconds))
            return ok, res

        mentions = cfg.mention_bonus > 0 or (deform and cfg.graft_mentions and cfg.max_graft > 0)
        named = named_documents(g, question, self.titles) if mentions else np.zeros(0, np.int64)
        for depth in range(1, cfg.max_depth + 1):
            kids, w = children(state, u)
            if kids.size == 0:
                break
            cos = state.x[kids].astype(np.float64) @ q
            s = cos
            if cfg.mention_bonus > 0 and named.size:
                # a child in a named document that is not the current node's own document
                hit = np.isin(g.doc, named) & ~np.isin(g.doc, g.doc[state.members[u]])
                s = cos + cfg.mention_bonus * (np.bincount(state.assign, weights=hit,
                                                            minlength=state.num_nodes)[kids] > 0)
            ws = w * s
            thr = cfg.keep_ratio * float(ws.max())
            thr_cos = cfg.keep_ratio * float((w * cos).max())
            order = np.lexsort((kids, -ws))
            kept = [int(i) for i in order if s[i] > thr] or [int(order[0])]
            kept.sort(key=lambda i: (-ws[i], kids[i]))
            step = Step(depth=depth, at=[int(v) for v in state.members[u]],
                        children=[[int(v) for v in state.members[c]] for c in kids], scores=s.round(6).tolist(),
                        weights=w.round(6).tolist(), threshold=thr, kept=kept, fused=[], graft_candidates=[],
                        grafted=[], graft_weights=[], next=[], before=state, u=u)
            # -- fusion: largest prefix of the kept children within the budget
            msize, tried = 1, {}
            if deform and len(kept) > 1:
                make = partial(_fuse_prefix, state, [int(kids[i]) for i in kept], self.encoder, cfg.fuse_embedding)
                msize, tried = _prefix_search(len(kept), 1, make, partial(check, depth, "fuse"), cfg.search)
            if msize >= 2:
                (state, remap), accepted = tried[msize]
                step.fused = kept[:msize]
                nxt = int(remap[kids[kept[0]]])
                others = np.unique(remap[np.delete(kids, kept[:msize])])
            else:
                nxt = int(kids[kept[0]])
                others = np.delete(kids, kept[0])
            # -- grafting: grandchildren through the children not fused into `nxt`
            n_graft = 0
            u_cur = int(remap[u]) if msize >= 2 else u
            if cfg.query_update > 0:
                q = q + cfg.query_update * state.x[nxt].astype(np.float64)
                q = q / max(np.linalg.norm(q), 1e-12)
            if mentions:
                said = state.content[nxt] if cfg.mention_scope == "content" else state.text[nxt]
                named = np.union1d(named, named_documents(g, said, self.titles))
            if deform and cfg.max_graft > 0 and (others.size or cfg.graft_semantic or cfg.graft_mentions):
                mk = ms = np.zeros(0)
                if cfg.graft_mentions and named.size:
                    shown = np.concatenate([np.asarray(p, np.int64) for p in path] + grafted_members
                                           + [state.members[nxt]])
                    mk, ms = self._mention_grafts(state, nxt, named, shown, q)
                    mk, ms = mk[: cfg.max_graft], ms[: cfg.max_graft]
                gk = state.edges[1, np.isin(state.edges[0], others) & (state.edge_kind != SEMANTIC)]
                gk = np.setdiff1d(np.unique(gk), np.concatenate([children(state, nxt)[0], mk]))
                gs = state.x[gk].astype(np.float64) @ q if gk.size else np.zeros(0)
                ok_g = gs > thr_cos
                gk, gs = gk[ok_g], gs[ok_g]
                top = np.lexsort((gk, -gs))[: cfg.max_graft - mk.size]
                gk = np.concatenate([mk, gk[top]]).astype(np.int64)
                gs = np.concatenate([ms, gs[top]])
                step.mention_candidates = int(mk.size)
                if cfg.graft_semantic:
                    far = _semantic_candidates(state, nxt, np.concatenate([gk, [nxt, u_cur]]))
                    room = cfg.max_graft - gk.size
                    if room > 0 and far.size:
                        far = far[:room]
                        gk = np.concatenate([gk, far])
                        gs = np.concatenate([gs, state.x[far].astype(np.float64) @ q])
                base_p = gs if cfg.graft_base is None else np.full(gs.shape, float(cfg.graft_base))
                gw = np.clip(base_p + cfg.graft_gain * (gs - cfg.graft_center), 0.0, 1.0)
                step.graft_candidates = [[int(v) for v in state.members[c]] for c in gk]
                make_g = partial(_graft_prefix, state, nxt, gk.tolist(), gw.tolist())
                n_graft, tried_g = _prefix_search(int(gk.size), 0, make_g, partial(check, depth, "graft"), cfg.search)
                if n_graft:
                    state, accepted = tried_g[n_graft]
                    step.grafted = step.graft_candidates[:n_graft]
                    step.graft_weights = gw[:n_graft].round(6).tolist()
                    grafted_members.extend(np.asarray(m) for m in step.grafted)
                step.candidates = max(len(kept), int(gk.size))
            else:
                step.candidates = len(kept)
            u = nxt
            step.next = [int(v) for v in state.members[u]]
            path.append(step.next)
            steps.append(step)
        sel = np.unique(np.concatenate([np.asarray(p, np.int64) for p in path[1:]] + grafted_members
                                       + [np.zeros(0, np.int64)]))
        context = render_context(g, sel)
        if accepted is None:
            mu = base.masses(cfg.fgw.node_mass)
            accepted = FGWResult(0.0, natural_coupling(base.assign, mu, base.num_nodes), mu, mu, 0.0, 0.0)
        total = time.perf_counter() - t0
        return TraversalResult(question=question, path=path, steps=steps, evaluations=evals, selected=sel,
                               context=context, state=state, final_fgw=accepted, epsilon=cfg.epsilon,
                               timings={"total": total, "encode_question": t_enc, "fgw": fgw_time}, base=base)


def traverse(graph: DocGraph, question: str, encoder, config: TraversalConfig | None = None) -> TraversalResult:
    """One question: see the module docstring."""
    return Traverser(graph, encoder, config).run(question)


def fgw_call_bound(max_depth: int, k: int) -> int:
    """``max_depth * 2 * ceil(log2(k + 1))``: FGW calls per question at most."""
    return max_depth * 2 * math.ceil(math.log2(k + 1))


def prefix_curve(result: TraversalResult, depth: int, encoder,
                 config: TraversalConfig | None = None) -> list[tuple[int, float]]:
    """``[(m, FGW)]`` for *every* prefix size ``m = 1..|K|`` of the kept children at ``depth``
    (a linear scan for display; the traversal itself evaluates only the binary search's sizes)."""
    cfg = config or TraversalConfig()
    step = next((s for s in result.steps if s.depth == depth), None)
    if step is None:
        raise ValueError(f"depth {depth} is not on the path (1..{len(result.steps)})")
    base = result.base
    d1, scale = structure_matrix(base, cfg.fgw)
    state = step.before
    kids, _ = children(state, step.u)
    d2, _ = structure_matrix(state, cfg.fgw, scale)
    out = [(1, fgw_between(base, d1, state, d2, cfg.fgw).value)]
    for m in range(2, len(step.kept) + 1):
        cand, _ = fuse(state, [int(kids[i]) for i in step.kept[:m]], encoder, cfg.fuse_embedding)
        d2, _ = structure_matrix(cand, cfg.fgw, scale)
        out.append((m, fgw_between(base, d1, cand, d2, cfg.fgw).value))
    return out
