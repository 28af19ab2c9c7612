"""Document-graph retrieval over a stored corpus index: candidates, a neighbourhood, the traversal there.

Per question (``q`` the unit question vector, ``D`` documents, ``P`` paragraphs):

1. **Candidates** (nothing all-pairs): BM25 scores of every document (``bm25s``, sparse), dense
   scores ``max over a document's paragraphs of x_p . q`` (one ``(P, d) @ (d,)`` product; exact
   search: a 100k-paragraph MiniLM index is 150 MB and one product takes milliseconds, so an
   approximate index would not pay here), and the titles the question names
   (:class:`~toporag_core.docgraph.mentions.TitleMatcher`). The BM25 and dense top lists are fused
   by reciprocal rank, ``sum 1 / (rrf_k + rank)``.
2. **Neighbourhood** (at most ``max_articles`` documents, in this priority): documents the question
   names; the ``seed`` best fused candidates; documents whose titles the texts of those name (one
   hop along the links the text makes, as Wikipedia's hyperlinks); the stored semantic neighbours
   (cosine above ``theta``) of the best candidates' paragraphs; then the rest of the fused list.
3. **Graph**: the neighbourhood's document graph assembled from stored rows (no encoder call); only
   its semantic edges (``cos > theta`` among at most a few hundred nodes) are computed here.
4. **Traversal** with fusion and grafting under the FGW budget (:class:`~.traverse.Traverser`).

The result is a **ranking**: the documents the traversal's context shows, in the order the walk
reached them (path, then its grafts, step by step); then the rest of the neighbourhood, then the
fused candidates, up to ``k``. ``articles`` (``A``) is the number the context shows: the budget the
baselines get in evaluation.

Baselines at the same ``A``: BM25 top-``A``, dense top-``A``, and the **title rule** (no graph):
dense top-1 plus the documents whose titles the question or that document's text names.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .build import PARAGRAPH, BuildConfig, DocGraph, assemble_docgraph
from .context import context_nodes
from .index import DocGraphIndex
from .mentions import TitleMatcher
from .traverse import TraversalConfig, TraversalResult, Traverser


@dataclass
class SearchConfig:
    """Candidate generation and neighbourhood settings (see the module docstring).
    ``toporag docgraph``'s options are made from the fields whose metadata carries a ``help``.

    Attributes:
        bm25_candidates, dense_candidates: top documents taken from each list, ``>= 1``.
        seed: best fused candidates whose texts' named titles and semantic neighbours join.
        max_articles: documents in the neighbourhood the traversal walks, ``>= 1``.
        rrf_k: the reciprocal-rank-fusion constant.
        theta: semantic edge threshold (neighbourhood graph and stored-neighbour expansion).
        k: length of the returned ranking.
        traversal: the traversal's settings; here by default ``mention_scope="content"`` (a document
            names the titles its text names) and ``fuse_embedding="mean"`` (a fused node's vector is
            its members' mean: no encoder call inside the walk, which re-encoding made ~4x slower).
    """

    bm25_candidates: int = field(default=8, metadata={"help": "BM25 candidates"})
    dense_candidates: int = field(default=8, metadata={"help": "dense candidates"})
    seed: int = field(default=3, metadata={"help": "best candidates whose named titles and neighbours join",
                                           "flag": "--seed-candidates", "metavar": "SEED_CANDIDATES"})
    max_articles: int = field(default=10, metadata={"help": "documents in the neighbourhood"})
    rrf_k: int = 60
    theta: float = 0.6
    k: int = field(default=10, metadata={"help": "length of the ranking"})
    traversal: TraversalConfig = field(default_factory=lambda: TraversalConfig(mention_scope="content",
                                                                               fuse_embedding="mean"))

    def __post_init__(self) -> None:
        if isinstance(self.traversal, dict):
            self.traversal = TraversalConfig(**self.traversal)
        for name in ("bm25_candidates", "dense_candidates", "max_articles", "k", "rrf_k"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"SearchConfig.{name} must be >= 1, got {getattr(self, name)}")
        if int(self.seed) < 0:
            raise ValueError(f"SearchConfig.seed must be >= 0, got {self.seed}")
        if not -1.0 <= float(self.theta) <= 1.0:
            raise ValueError(f"SearchConfig.theta must be in [-1, 1], got {self.theta}")


@dataclass
class CorpusRanking:
    """One question's answer from the index."""

    question: str
    ranking: list[int]  # document ordinals, best first
    articles: int  # how many of the first ranked the context shows (A)
    context: str
    neighbourhood: list[int]
    named: list[int]
    timings: dict[str, float]
    graph: DocGraph | None = field(default=None, repr=False)
    result: TraversalResult | None = field(default=None, repr=False)

    def to_dict(self, index: DocGraphIndex) -> dict[str, Any]:
        return {"question": self.question, "articles": self.articles,
                "ranking": [{"rank": r + 1, "id": index.ids[i], "title": index.titles[i],
                             "in_context": r < self.articles} for r, i in enumerate(self.ranking)],
                "neighbourhood": [index.titles[i] for i in self.neighbourhood],
                "named_in_question": [index.titles[i] for i in self.named], "context": self.context,
                "fgw_calls": self.result.fgw_calls if self.result else 0,
                "timings_ms": {k: 1000 * v for k, v in self.timings.items()}}


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first (ties by index)."""
    k = min(k, scores.size)
    if k <= 0:
        return np.zeros(0, np.int64)
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]


def _unique(seq) -> list[int]:
    return list(dict.fromkeys(int(i) for i in seq))


class CorpusSearcher:
    """Answers questions against one :class:`DocGraphIndex` with one encoder (loaded once)."""

    def __init__(self, index: DocGraphIndex, encoder, config: SearchConfig | None = None) -> None:
        name = str(getattr(encoder, "name", ""))
        if index.encoder_name and name and name != index.encoder_name:
            raise ValueError(f"the index was built with encoder {index.encoder_name!r}, not {name!r}: "
                             f"pass --encoder {index.encoder_name}")
        self.index, self.encoder = index, encoder
        self.config = config or SearchConfig()
        self.matcher = TitleMatcher(index.titles)
        self.para = index.paragraph_rows()
        self.para_x = np.ascontiguousarray(index.x[self.para])
        self.para_start = np.searchsorted(index.doc[self.para], np.arange(index.num_docs))
        self.title_of = {t: i for i, t in reversed(list(enumerate(index.titles)))}

    # -- scores and baselines
    def question_vector(self, question: str) -> np.ndarray:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        q = np.asarray(self.encoder.encode([question])[0], np.float32)
        return q / max(float(np.linalg.norm(q)), 1e-12)

    def dense_scores(self, qvec: np.ndarray) -> np.ndarray:
        """``(D,)``: each document's best paragraph cosine."""
        return np.maximum.reduceat(self.para_x @ np.asarray(qvec, np.float32), self.para_start)

    def bm25_scores(self, question: str) -> np.ndarray:
        return self.index.bm25.scores(question)

    def doc_text(self, i: int) -> str:
        a, b = int(self.index.doc_ptr[i]), int(self.index.doc_ptr[i + 1])
        return " ".join(self.index.text[r] for r in range(a, b) if self.index.level[r] == PARAGRAPH)

    def bm25_ranking(self, question: str, k: int) -> list[int]:
        return _top(self.bm25_scores(question), k).tolist()

    def dense_ranking(self, qvec: np.ndarray, k: int) -> list[int]:
        return _top(self.dense_scores(qvec), k).tolist()

    def title_rule(self, question: str, qvec: np.ndarray) -> list[int]:
        """Dense top-1, then the documents the question names, then those its text names (no graph)."""
        top = int(_top(self.dense_scores(qvec), 1)[0])
        return _unique([top, *self.matcher.named(question), *self.matcher.named(self.doc_text(top))])

    # -- the document graph
    def neighbourhood(self, question: str, qvec: np.ndarray,
                      config: SearchConfig | None = None) -> tuple[list[int], list[int], list[int]]:
        """``(neighbourhood, question-named documents, fused candidate list)``."""
        cfg = config or self.config
        bm = _top(self.bm25_scores(question), cfg.bm25_candidates)
        de = _top(self.dense_scores(qvec), cfg.dense_candidates)
        rrf: dict[int, float] = {}
        for lst in (bm, de):
            for r, i in enumerate(lst.tolist()):
                rrf[i] = rrf.get(i, 0.0) + 1.0 / (cfg.rrf_k + r + 1)
        fused = sorted(rrf, key=lambda i: (-rrf[i], i))
        named = self.matcher.named(question)
        seeds = _unique([*named, *fused[: cfg.seed]])
        hops = [j for i in seeds for j in self.matcher.named(self.doc_text(i))]
        near = []
        for i in seeds[: max(cfg.seed, len(named))]:
            a, b = self.para_start[i], (self.para_start[i + 1] if i + 1 < self.index.num_docs else self.para.size)
            rows = self.index.knn[a:b].ravel()
            ok = (rows >= 0) & (self.index.knn_sim[a:b].ravel() > cfg.theta)
            near.extend(self.index.doc[rows[ok]].tolist())
        order = _unique([*seeds, *hops, *near, *fused])
        return order[: cfg.max_articles], named, fused

    def subgraph(self, docs: list[int], theta: float | None = None) -> DocGraph:
        """The neighbourhood's document graph from stored rows (root vector: mean of the documents')."""
        idx = self.index
        rows = np.concatenate([np.arange(idx.doc_ptr[i], idx.doc_ptr[i + 1]) for i in docs])
        root = idx.x[idx.doc_ptr[np.asarray(docs)]].astype(np.float64).sum(0)
        root /= max(float(np.linalg.norm(root)), 1e-12)
        x = np.concatenate([root[None, :].astype(np.float32), idx.x[rows]])
        cfg = BuildConfig(sim_threshold=self.config.theta if theta is None else theta,
                          sentence_nodes=idx.config.sentence_nodes)
        return assemble_docgraph([idx.article(i) for i in docs], x, cfg, name="neighbourhood",
                                 encoder_name=idx.encoder_name)

    def search(self, question: str, qvec: np.ndarray | None = None,
               config: SearchConfig | None = None) -> CorpusRanking:
        """One question (``config`` overrides the searcher's settings for this call)."""
        cfg = config or self.config
        t0 = time.perf_counter()
        q = self.question_vector(question) if qvec is None else np.asarray(qvec, np.float32)
        t_enc = time.perf_counter() - t0
        t = time.perf_counter()
        nb, named, fused = self.neighbourhood(question, q, cfg)
        t_cand = time.perf_counter() - t
        t = time.perf_counter()
        g = self.subgraph(nb, cfg.theta)
        t_graph = time.perf_counter() - t
        res = Traverser(g, self.encoder, cfg.traversal).run(question, q.astype(np.float64))
        shown = context_nodes(g, res.selected)
        deep = shown[g.level[shown] >= PARAGRAPH]
        in_ctx = set(np.unique(g.doc[deep]).tolist())
        walk = []
        for s in res.steps:
            walk.extend(int(g.doc[v]) for v in s.next if g.doc[v] >= 0)
            walk.extend(int(g.doc[v]) for m in s.grafted for v in m if g.doc[v] >= 0)
        ctx_local = [d for d in _unique([*walk, *sorted(in_ctx)]) if d in in_ctx]
        ctx = [nb[d] for d in ctx_local]
        ranking = _unique([*ctx, *nb, *fused])[: max(cfg.k, len(ctx))]
        total = time.perf_counter() - t0
        return CorpusRanking(question=question, ranking=ranking, articles=len(ctx), context=res.context,
                             neighbourhood=nb, named=named, graph=g, result=res,
                             timings={"total": total, "encode_question": t_enc, "candidates": t_cand,
                                      "graph": t_graph, "traversal": res.timings["total"],
                                      "fgw": res.timings["fgw"]})
