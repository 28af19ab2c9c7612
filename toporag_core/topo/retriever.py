"""Topology-aware node retrieval (Wang et al., "Topology-aware Retrieval-augmented
Generation for text generation"): the texts of the nodes most similar to a target node,
by proximity, by structural role, or (baselines) by text or at random.

:class:`TopoNodeIndex` embeds the graph once and precomputes a top-``K`` dictionary
``node -> [(neighbour, score), ...]``, so each lookup is a dictionary access;
:func:`retrieve_nodes` resolves the target (a node id, or the node whose text best
matches a question) and returns a :class:`TopoRetrieval`; :func:`build_topo_prompt`
puts the retrieved texts before the (partial) text of the target.
"""
from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .proximity import cosine_rows, graph_adjacency, proximity_embedding
from .role import ROLE_EPS, role_embedding

METHODS = ("proximity", "role", "text", "random")
SCORE_NAMES = {"proximity": "cosine of proximity embeddings", "role": "1 / L2 distance of GraphWave embeddings",
               "text": "cosine of text embeddings", "random": "uniform random (baseline)"}


def _scores_block(method: str, emb: np.ndarray, rows: np.ndarray, seed: int) -> np.ndarray:
    """``(len(rows), N)`` similarity of nodes ``rows`` to every node (higher is more similar)."""
    if method == "role":
        sq = np.einsum("ij,ij->i", emb, emb)
        d2 = sq[rows, None] + sq[None, :] - 2.0 * emb[rows] @ emb.T
        return 1.0 / np.maximum(np.sqrt(np.maximum(d2, 0.0)), ROLE_EPS)
    if method == "random":  # one stream per row: a node's list does not depend on the block it is in
        return np.stack([np.random.default_rng([seed, int(r)]).random(emb.shape[0]) for r in rows])
    return emb[rows] @ emb.T  # rows are unit length (cosine_rows)


def _top_k(method: str, emb: np.ndarray, k: int, seed: int, block: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """``(N, k)`` neighbour ids and scores per node, best first, the node itself excluded.

    Rows are processed in blocks so memory is ``O(block x N)``, all with array operations:
    the ``k``-th score of each row is found by partition; among nodes tied at it the lowest
    ids are kept, and the result is sorted by ``(-score, id)``, so lists are deterministic
    (ties are common: every leaf of a hub has the same role).
    """
    n = emb.shape[0]
    k = min(k, max(n - 1, 0))
    idx = np.zeros((n, k), dtype=np.int64)
    val = np.zeros((n, k))
    if k == 0:  # a graph with one node (or none) has no neighbours to list
        return idx, val
    for start in range(0, n, block):
        rows = np.arange(start, min(n, start + block))
        s = _scores_block(method, emb, rows, seed)
        s[np.arange(rows.size), rows] = -np.inf  # the target is never its own neighbour
        kth = -np.partition(-s, k - 1, axis=1)[:, k - 1:k]  # (B, 1) k-th best score, finite as k <= N-1
        better = s > kth
        tied = s == kth
        room = k - better.sum(axis=1, keepdims=True)  # how many tied nodes still fit, lowest ids first
        keep = better | tied
        over = np.flatnonzero(tied.sum(axis=1) > room[:, 0])  # rows with more ties than room (rare but real)
        if over.size:
            keep[over] = better[over] | (tied[over] & (np.cumsum(tied[over], axis=1) <= room[over]))
        cand = np.nonzero(keep)[1].reshape(rows.size, k)  # exactly k per row, in id order
        cs = np.take_along_axis(s, cand, axis=1)
        order = np.lexsort((cand, -cs), axis=-1)
        idx[rows], val[rows] = np.take_along_axis(cand, order, 1), np.take_along_axis(cs, order, 1)
    return idx, val


@dataclass
class TopoNodeIndex:
    """A graph embedded for one similarity ``method`` with its top-``K`` dictionary.

    Attributes:
        graph: the :class:`~toporag_core.graph.TextualGraph`.
        method: ``"proximity" | "role" | "text" | "random"``.
        emb: ``(N, d)`` node embedding the scores come from (unit rows for cosine methods).
        topk: ``{node: [(neighbour, score), ...]}``, ``K`` entries, best first.
        params: the parameters used; ``timings``: seconds for ``embed`` and ``topk``.
    """

    graph: Any
    method: str
    emb: np.ndarray
    topk: dict[int, list[tuple[int, float]]]
    K: int
    seed: int = 0
    encoder: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    _text_emb: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, graph, method: str = "proximity", K: int = 20, encoder=None, seed: int = 0,
              proximity_kw: dict | None = None, role_kw: dict | None = None) -> "TopoNodeIndex":
        """Embed ``graph`` (undirected simple skeleton) and precompute its top-``K`` lists.

        ``encoder`` is required for ``method="text"`` (and later for question targets);
        ``proximity_kw`` / ``role_kw`` go to :func:`proximity_embedding` / :func:`role_embedding`.
        """
        if method not in METHODS:
            raise ValueError(f"unknown topology retrieval method {method!r}; choose one of {', '.join(METHODS)}")
        if K < 1:
            raise ValueError(f"K must be >= 1, got {K}")
        t0 = time.perf_counter()
        params: dict[str, Any] = {"K": K, "seed": seed}
        text_emb: dict[str, np.ndarray] = {}
        if method == "proximity":
            kw = {"seed": seed, **(proximity_kw or {})}
            emb = cosine_rows(proximity_embedding(graph_adjacency(graph), **kw))
            params.update(kw)
        elif method == "role":
            kw = dict(role_kw or {})
            emb = role_embedding(graph_adjacency(graph), **kw)
            params.update(kw)
        elif method == "text":
            if encoder is None:
                raise ValueError("method 'text' needs an encoder "
                                 "(e.g. HashingEncoder() or SentenceTransformerEncoder())")
            emb = cosine_rows(np.asarray(encoder.encode(graph.node_text), dtype=np.float64))
            text_emb[encoder.name] = emb
            params["encoder"] = encoder.name
        else:
            emb = np.zeros((graph.num_nodes, 0))
        t1 = time.perf_counter()
        idx, val = _top_k(method, emb, K, seed)
        topk = {i: list(zip(idx[i].tolist(), val[i].tolist())) for i in range(graph.num_nodes)}
        t2 = time.perf_counter()
        return cls(graph=graph, method=method, emb=emb, topk=topk, K=K, seed=seed, encoder=encoder, params=params,
                   timings={"embed": t1 - t0, "topk": t2 - t1}, _text_emb=text_emb)

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    def neighbours(self, node: int, k: int | None = None) -> list[tuple[int, float]]:
        """The ``k`` most similar nodes to ``node`` (default ``K``), best first, ``node`` excluded.

        ``k <= K`` is a dictionary lookup; a larger ``k`` scores that one row on the fly.
        """
        k = self.K if k is None else k
        if k <= self.K:
            return self.topk[node][:k]
        idx, val = _top_k_row(self, node, k)
        return list(zip(idx.tolist(), val.tolist()))

    def text_embeddings(self, encoder) -> np.ndarray:
        """``(N, d)`` unit text embeddings of the node texts (cached per encoder name)."""
        if encoder.name not in self._text_emb:
            self._text_emb[encoder.name] = cosine_rows(np.asarray(encoder.encode(self.graph.node_text), np.float64))
        return self._text_emb[encoder.name]

    def target_for_question(self, question: str, encoder=None) -> tuple[int, float]:
        """``(node, cosine)`` of the node whose text is most similar to ``question``."""
        encoder = encoder or self.encoder
        if encoder is None:
            raise ValueError("choosing the target from a question needs an encoder")
        if self.num_nodes == 0:
            raise ValueError("the graph has no nodes")
        q = cosine_rows(np.asarray(encoder.encode([question]), np.float64))[0]
        sims = self.text_embeddings(encoder) @ q
        best = int(np.argmax(sims))  # first maximum: ties go to the lowest node id
        return best, float(sims[best])


def _top_k_row(index: TopoNodeIndex, node: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    s = _scores_block(index.method, index.emb, np.array([node]), index.seed)[0]
    s[node] = -np.inf
    k = min(k, index.num_nodes - 1)
    order = np.lexsort((np.arange(s.size), -s))[:k]
    return order, s[order]


@dataclass
class TopoRetrieval:
    """Nodes retrieved for a target: ids, texts and scores best first, plus provenance."""

    target: int
    target_text: str
    nodes: list[int]
    texts: list[str]
    scores: list[float]
    method: str
    question: str | None = None
    target_score: float | None = None  # cosine of the question with the target's text, if chosen by question
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "score": SCORE_NAMES[self.method], "target": self.target,
                "target_text": self.target_text, "question": self.question, "target_score": self.target_score,
                "nodes": list(self.nodes), "texts": list(self.texts), "scores": [float(s) for s in self.scores],
                "timings": dict(self.timings)}


def retrieve_nodes(index: TopoNodeIndex, target: int | None = None, question: str | None = None, encoder=None,
                   k: int = 5) -> TopoRetrieval:
    """The ``k`` nodes most similar to ``target`` under ``index.method`` (target excluded).

    Give ``target`` (a node index), or ``question``: then the target is the node whose text
    is most similar to it under ``encoder`` (default: the index's encoder).
    """
    t0 = time.perf_counter()
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    target_score = None
    if target is None:
        if not question:
            raise ValueError("give a target node or a question to choose it")
        target, target_score = index.target_for_question(question, encoder)
    if isinstance(target, (bool, np.bool_)) or not isinstance(target, (int, np.integer)):
        raise ValueError(f"target must be a node index, got {target!r}")
    target = int(target)
    if not 0 <= target < index.num_nodes:
        raise ValueError(f"target node {target} is outside 0..{index.num_nodes - 1}")
    t1 = time.perf_counter()
    hits = index.neighbours(target, k)
    t2 = time.perf_counter()
    nodes = [j for j, _ in hits]
    return TopoRetrieval(target=target, target_text=index.graph.node_text[target], nodes=nodes,
                         texts=[index.graph.node_text[j] for j in nodes], scores=[s for _, s in hits],
                         method=index.method, question=question, target_score=target_score,
                         timings={"target": t1 - t0, "lookup": t2 - t1,
                                  **{f"index_{a}": b for a, b in index.timings.items()}})


def build_topo_prompt(graph, result: TopoRetrieval, partial_text: str = "", task: str | None = None) -> str:
    """The generation prompt of topology-aware RAG: retrieved node texts, then the target.

    As in Wang et al., the retrieved texts are context for writing the target node's
    text; ``partial_text`` is what is known of it (default: its own text, when the task is
    to describe it). ``task`` overrides the closing instruction.
    """
    lines = [f"Context: nodes related to the target by {SCORE_NAMES[result.method]}:"]
    lines += [f"{r}. {text} (score {score:.3g})" for r, (text, score) in enumerate(zip(result.texts, result.scores), 1)]
    if not result.texts:
        lines.append("(none)")
    lines.append(f"Target node: {graph.node_text[result.target]}")
    if partial_text:
        lines.append(f"Partial text of the target: {partial_text}")
    if result.question:
        lines.append(f"Question: {result.question}")
    lines.append(task or ("Continue the text of the target node, using the related nodes above." if partial_text
                          else "Describe the target node, using the related nodes above."))
    return "\n".join(lines)


def resolve_target(graph, target: str | int) -> int:
    """A node index from an index (int or digit string) or a node text (exact, then case-insensitive).

    Raises ``ValueError`` naming the target and suggesting close node texts when not found.
    """
    n = graph.num_nodes
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
        if 0 <= int(target) < n:
            return int(target)
        raise ValueError(f"target node {int(target)} is outside 0..{n - 1}")
    text = str(target).strip()
    exact = [i for i, t in enumerate(graph.node_text) if t == text]
    if exact:
        return exact[0]
    if text.lstrip("-").isdigit():
        i = int(text)
        if 0 <= i < n:
            return i
        raise ValueError(f"target node {i} is outside 0..{n - 1} and no node has the text {text!r}")
    if graph.node_ids is not None and text in graph.node_ids:
        return graph.node_ids.index(text)
    folded = [i for i, t in enumerate(graph.node_text) if t.strip().casefold() == text.casefold()]
    if folded:
        return folded[0]
    close = difflib.get_close_matches(text, graph.node_text, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"no node with index or text {text!r} in graph {graph.name or '(unnamed)'} ({n} nodes){hint}")


def retrieve_for_cli(graph, method: str, target: str | int | None, k: int = 5, question: str | None = None,
                     encoder=None) -> dict[str, Any]:
    """One-call retrieval for ``toporag retrieve --method proximity|role --target NODE``.

    ``target`` is a node index or node text (or ``None`` with a ``question``). Returns a
    JSON-ready dict: ``method``, ``target`` (text), ``target_index``, ``nodes`` (texts),
    ``node_indices``, ``scores``, ``score``, ``seconds``. Bad input raises ``ValueError``.
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"unknown topology retrieval method {method!r}; choose one of {', '.join(METHODS)}")
    node = resolve_target(graph, target) if target is not None and str(target) != "" else None
    if node is None and not question:
        raise ValueError("give --target NODE (index or text) or a question")
    if encoder is None and (method == "text" or node is None):
        from ..embed import SentenceTransformerEncoder

        encoder = SentenceTransformerEncoder()
    index = TopoNodeIndex.build(graph, method=method, K=max(k, 1), encoder=encoder)
    res = retrieve_nodes(index, target=node, question=question if node is None else None, encoder=encoder, k=k)
    return {"method": method, "target": res.target_text, "target_index": res.target, "nodes": res.texts,
            "node_indices": res.nodes, "scores": [float(s) for s in res.scores], "score": SCORE_NAMES[method],
            "seconds": time.perf_counter() - t0}
