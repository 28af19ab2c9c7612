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

The pieces live beside this module: the deformations (:mod:`.deform`), the prefix search
(:mod:`.prefix`), title mentions (:mod:`.mentions`), the context (:mod:`.context`) and the result
(:mod:`.results`); this module holds the settings and the walk, and re-exports those names.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .build import SECTION, SEMANTIC, DocGraph
from .context import context_nodes, render_context
from .deform import children, fuse, graft, semantic_candidates
from .fgw import FGWConfig, FGWResult, GraphState, fgw_between, natural_coupling, structure_matrix
from .mentions import named_documents, title_pattern
from .prefix import largest_feasible_prefix, prefix_search
from .results import Evaluation, Step, TraversalResult

FUSE_EMBEDDINGS = ("reencode", "mean")
SEARCHES = ("binary", "linear")
MENTION_SCOPES = ("own", "content")


@dataclass
class TraversalConfig:
    """Traversal settings (defaults as stated in the module docstring and docs/docgraph.md).
    ``toporag docgraph``'s options are made from the fields whose metadata carries a ``help``.

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

    max_depth: int = field(default=3, metadata={"help": "moves from the root"})
    keep_ratio: float = field(default=0.8, metadata={"help": "tau of the keep rule"})
    epsilon: float = field(default=0.05, metadata={"help": "FGW budget; 0 = plain greedy path"})
    graft_gain: float = 0.5
    graft_center: float = 0.5
    graft_base: float | None = None
    max_graft: int = 3
    graft_semantic: bool = field(default=True, metadata={"help": "graft tree grandchildren only (literal)",
                                                         "flag": "--no-semantic-graft"})
    mention_bonus: float = field(default=0.5, metadata={
        "help": "score bonus of a child whose document title the question names; 0 = literal"})
    graft_mentions: bool = field(default=True, metadata={
        "help": "do not graft sections of documents named on the path (literal reading)", "flag": "--no-mention-graft"})
    mention_scope: str = "own"
    query_update: float = field(default=0.0, metadata={
        "help": "after each move q <- normalise(q + w * x_next); 0 = the question alone"})
    fuse_embedding: str = field(default="reencode", metadata={
        "help": "vector of a fused node: re-encode its text, or its members' mean", "choices": FUSE_EMBEDDINGS})
    search: str = field(default="binary", metadata={"help": "how the largest feasible prefix is found",
                                                     "choices": SEARCHES})
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


# ----------------------------------------------------------------------------- deformations of a prefix
def _fuse_prefix(state: GraphState, order: list[int], encoder, how: str, m: int) -> tuple[GraphState, np.ndarray]:
    return fuse(state, order[:m], encoder, how)


def _graft_prefix(state: GraphState, parent: int, nodes: list[int], weights: list[float], m: int) -> GraphState:
    return graft(state, parent, nodes[:m], weights[:m])


# ----------------------------------------------------------------------------- the walk
@dataclass
class Walk:
    """The state of one question's walk: the query, the original graph ``base`` and its structure
    matrix ``d1`` (with ``scale``), the deformed graph ``state`` and the current node ``u`` in it,
    the documents named so far, and what was recorded (path, steps, FGW calls, grafted members,
    the last accepted FGW result, FGW seconds)."""

    q: np.ndarray
    base: GraphState
    d1: np.ndarray
    scale: float
    named: np.ndarray
    state: GraphState
    u: int = 0
    path: list[list[int]] = field(default_factory=lambda: [[0]])
    steps: list[Step] = field(default_factory=list)
    evals: list[Evaluation] = field(default_factory=list)
    grafted_members: list[np.ndarray] = field(default_factory=list)
    accepted: FGWResult | None = None
    fgw_time: float = 0.0


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

    @property
    def _deform(self) -> bool:
        return self.config.epsilon > 0

    @property
    def _mentions(self) -> bool:
        cfg = self.config
        return cfg.mention_bonus > 0 or (self._deform and cfg.graft_mentions and cfg.max_graft > 0)

    def run(self, question: str, qvec: np.ndarray | None = None) -> TraversalResult:
        cfg, g = self.config, self.graph
        t0 = time.perf_counter()
        q = self.question_vector(question) if qvec is None else np.asarray(qvec, np.float64)
        t_enc = time.perf_counter() - t0
        base = GraphState.from_graph(g)
        d1, scale = structure_matrix(base, cfg.fgw)
        named = named_documents(g, question, self.titles) if self._mentions else np.zeros(0, np.int64)
        walk = Walk(q, base, d1, scale, named, state=base)
        for depth in range(1, cfg.max_depth + 1):
            if not self._step(walk, depth):
                break
        sel = np.unique(np.concatenate([np.asarray(p, np.int64) for p in walk.path[1:]] + walk.grafted_members
                                       + [np.zeros(0, np.int64)]))
        context = render_context(g, sel)
        accepted = walk.accepted
        if accepted is None:
            mu = base.masses(cfg.fgw.node_mass)
            accepted = FGWResult(0.0, natural_coupling(base.assign, mu, base.num_nodes), mu, mu, 0.0, 0.0)
        total = time.perf_counter() - t0
        return TraversalResult(question=question, path=walk.path, steps=walk.steps, evaluations=walk.evals,
                               selected=sel, context=context, state=walk.state, final_fgw=accepted,
                               epsilon=cfg.epsilon, timings={"total": total, "encode_question": t_enc,
                                                             "fgw": walk.fgw_time}, base=base)

    def _check(self, walk: Walk, depth: int, op: str, size: int, cand: Any) -> tuple[bool, FGWResult]:
        """One FGW call: the candidate graph against the original, recorded; ``ok`` when within epsilon."""
        cfg = self.config
        cand = cand[0] if isinstance(cand, tuple) else cand
        d2, _ = structure_matrix(cand, cfg.fgw, walk.scale)
        res = fgw_between(walk.base, walk.d1, cand, d2, cfg.fgw)
        walk.fgw_time += res.seconds
        ok = res.value <= cfg.epsilon
        walk.evals.append(Evaluation(depth, op, size, res.value, ok, res.seconds))
        return ok, res

    def _scores(self, walk: Walk, kids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(s, cos)`` of the children: ``cos(q, x_j)`` plus the mention bonus of a child in a named
        document that is not the current node's own."""
        cfg, g, state = self.config, self.graph, walk.state
        cos = state.x[kids].astype(np.float64) @ walk.q
        if not (cfg.mention_bonus > 0 and walk.named.size):
            return cos, cos
        hit = np.isin(g.doc, walk.named) & ~np.isin(g.doc, g.doc[state.members[walk.u]])
        named_kid = np.bincount(state.assign, weights=hit, minlength=state.num_nodes)[kids] > 0
        return cos + cfg.mention_bonus * named_kid, cos

    def _step(self, walk: Walk, depth: int) -> bool:
        """One move from ``walk.u`` (score, keep, fuse, graft); ``False`` when ``u`` has no child."""
        cfg, state, u = self.config, walk.state, walk.u
        kids, w = children(state, u)
        if kids.size == 0:
            return False
        s, cos = self._scores(walk, kids)
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
        nxt, others, u_cur = self._fuse(walk, step, kids)
        if cfg.query_update > 0:
            q = walk.q + cfg.query_update * walk.state.x[nxt].astype(np.float64)
            walk.q = q / max(np.linalg.norm(q), 1e-12)
        if self._mentions:
            said = walk.state.content[nxt] if cfg.mention_scope == "content" else walk.state.text[nxt]
            walk.named = np.union1d(walk.named, named_documents(self.graph, said, self.titles))
        if self._deform and cfg.max_graft > 0 and (others.size or cfg.graft_semantic or cfg.graft_mentions):
            step.candidates = max(len(kept), self._graft(walk, step, nxt, others, u_cur, thr_cos))
        else:
            step.candidates = len(kept)
        walk.u = nxt
        step.next = [int(v) for v in walk.state.members[nxt]]
        walk.path.append(step.next)
        walk.steps.append(step)
        return True

    def _fuse(self, walk: Walk, step: Step, kids: np.ndarray) -> tuple[int, np.ndarray, int]:
        """Fuse the largest prefix of the kept children within the budget; ``(next node, the children
        not fused into it, the current node)``, indices of the graph after the fusion."""
        cfg, state, kept = self.config, walk.state, step.kept
        msize, tried = 1, {}
        if self._deform and len(kept) > 1:
            make = partial(_fuse_prefix, state, [int(kids[i]) for i in kept], self.encoder, cfg.fuse_embedding)
            msize, tried = prefix_search(len(kept), 1, make, partial(self._check, walk, step.depth, "fuse"),
                                         cfg.search)
        if msize < 2:
            return int(kids[kept[0]]), np.delete(kids, kept[0]), walk.u
        (walk.state, remap), walk.accepted = tried[msize]
        step.fused = kept[:msize]
        return int(remap[kids[kept[0]]]), np.unique(remap[np.delete(kids, kept[:msize])]), int(remap[walk.u])

    def _graft_candidates(self, walk: Walk, step: Step, nxt: int, others: np.ndarray, u_cur: int,
                          thr_cos: float) -> tuple[np.ndarray, np.ndarray]:
        """``(candidates, scores)``: sections of named documents first, then grandchildren through
        ``others`` above the cosine threshold, then semantic "far" nodes, ``max_graft`` at most."""
        cfg, state, q = self.config, walk.state, walk.q
        mk = ms = np.zeros(0)
        if cfg.graft_mentions and walk.named.size:
            shown = np.concatenate([np.asarray(p, np.int64) for p in walk.path] + walk.grafted_members
                                   + [state.members[nxt]])
            mk, ms = self._mention_grafts(state, nxt, walk.named, shown, q)
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
            far = semantic_candidates(state, nxt, np.concatenate([gk, [nxt, u_cur]]))
            room = cfg.max_graft - gk.size
            if room > 0 and far.size:
                far = far[:room]
                gk = np.concatenate([gk, far])
                gs = np.concatenate([gs, state.x[far].astype(np.float64) @ q])
        return gk, gs

    def _graft(self, walk: Walk, step: Step, nxt: int, others: np.ndarray, u_cur: int, thr_cos: float) -> int:
        """Graft the largest prefix of the candidates within the budget; returns how many were offered."""
        cfg, state = self.config, walk.state
        gk, gs = self._graft_candidates(walk, step, nxt, others, u_cur, thr_cos)
        base_p = gs if cfg.graft_base is None else np.full(gs.shape, float(cfg.graft_base))
        gw = np.clip(base_p + cfg.graft_gain * (gs - cfg.graft_center), 0.0, 1.0)
        step.graft_candidates = [[int(v) for v in state.members[c]] for c in gk]
        make_g = partial(_graft_prefix, state, nxt, gk.tolist(), gw.tolist())
        n_graft, tried_g = prefix_search(int(gk.size), 0, make_g, partial(self._check, walk, step.depth, "graft"),
                                         cfg.search)
        if n_graft:
            walk.state, walk.accepted = tried_g[n_graft]
            step.grafted = step.graft_candidates[:n_graft]
            step.graft_weights = gw[:n_graft].round(6).tolist()
            walk.grafted_members.extend(np.asarray(m) for m in step.grafted)
        return int(gk.size)


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


__all__ = ["TraversalConfig", "Traverser", "Walk", "traverse", "fgw_call_bound", "prefix_curve", "FUSE_EMBEDDINGS",
           "SEARCHES", "MENTION_SCOPES", "TraversalResult", "Step", "Evaluation", "fuse", "graft", "children",
           "largest_feasible_prefix", "context_nodes", "render_context", "named_documents", "title_pattern"]
