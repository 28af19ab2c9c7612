"""The result type every retriever returns: a subcomplex with prizes, roles and timings."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cells.complex import CellComplex
from ..embed import CellEmbeddings, TextEncoder

TERMINAL, STEINER, CLOSURE = "terminal", "steiner", "closure"
ROLES = (TERMINAL, STEINER, CLOSURE)


@dataclass
class EmbeddedComplex:
    """A complex with its cell embeddings and the encoder that made them.

    Build it once per graph (``from_graph``); every retrieval afterwards only encodes
    the question (cached too), never the cells again.

    ``cache`` is the public per-graph memo of what methods derive from the embeddings once
    (unit vectors, relation and triple vectors, topology node indices): key -> value.
    """

    complex: CellComplex
    emb: CellEmbeddings
    encoder: TextEncoder | None = None
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_graph(cls, graph, encoder: TextEncoder, tree: str = "bfs", seed: int = 0,
                   max_cycle_len: int | None = None, show_progress: bool = False) -> "EmbeddedComplex":
        from ..embed import embed_complex
        from ..cells.lift import lift

        cx = lift(graph, tree=tree, seed=seed, max_cycle_len=max_cycle_len)
        return cls(cx, embed_complex(cx, encoder, show_progress=show_progress), encoder)

    @classmethod
    def unembedded(cls, cx: CellComplex, encoder: TextEncoder | None = None) -> "EmbeddedComplex":
        """A complex without cell embeddings (``(0, 0)`` arrays): enough for node methods, which
        only read the graph (and the encoder, to place a question)."""
        z = np.zeros((0, encoder.dim if encoder is not None else 0), np.float32)
        return cls(cx, CellEmbeddings(z, z, z), encoder)

    def question_vector(self, question: str | np.ndarray) -> np.ndarray:
        """``(d,)`` unit vector for a question text (or a given vector, normalised)."""
        if isinstance(question, str):
            if self.encoder is None:
                raise ValueError("this EmbeddedComplex has no encoder; pass the question as a vector")
            q = self.encoder.encode([question])[0]
        else:
            q = np.asarray(question, dtype=np.float32).reshape(-1)
        n = float(np.linalg.norm(q))
        return q / n if n > 0 else q

    def similarities(self, question: str | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cosine of the question with every 0-, 1- and 2-cell."""
        from ..embed import single_thread_blas

        q = self.question_vector(question)
        with single_thread_blas():
            sims = tuple(u @ q for u in self._unit())
        # Sentence embeddings of one text differ in the last float digits with batch padding
        # and thread count; rounding makes equal texts tie exactly, so the app, the CLI and
        # another process rank cells the same way.
        return tuple(np.round(x, 5) for x in sims)  # type: ignore[return-value]

    def unit_vectors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row-normalised ``(N, d)``, ``(M, d)``, ``(F, d)`` cell embeddings (computed once, kept in :attr:`cache`)."""
        return self._unit()

    def _unit(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row-normalised cell embeddings, computed once (every slider move reuses them)."""
        cache = self.cache
        if "unit" not in cache:
            def unit(x: np.ndarray) -> np.ndarray:
                nx = np.linalg.norm(x, axis=1, keepdims=True)
                return np.ascontiguousarray(x / np.where(nx == 0, 1.0, nx), dtype=np.float32)

            cache["unit"] = (unit(self.emb.x0), unit(self.emb.x1), unit(self.emb.x2))
        return cache["unit"]


@dataclass
class Subcomplex:
    """A subcomplex selected for a question.

    ``nodes``, ``edges``, ``cells2`` are sorted cell ids of the parent complex;
    ``*_roles`` align with them (``terminal`` had a prize and was chosen, ``steiner``
    was chosen to connect, ``closure`` came in only as the boundary of a chosen cell).
    ``prizes`` holds the full prize arrays ``(p0 (N,), p1 (M,), p2 (F,))``.
    """

    complex: CellComplex
    nodes: np.ndarray
    edges: np.ndarray
    cells2: np.ndarray
    node_roles: np.ndarray
    edge_roles: np.ndarray
    cell2_roles: np.ndarray
    prizes: tuple[np.ndarray, np.ndarray, np.ndarray]
    method: str = "toporag"
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    similarities: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    warnings: list[str] = field(default_factory=list)  # things the user should know (shown by the CLI and app)
    # (N,) the method's own score of every node before the rank prizes (toporag-seeded: the relation-path
    # score from the question's entities), else None; the name reader's prior (retrieval/candidates.py)
    node_scores: np.ndarray | None = None
    # (N,) cosine of the question with the relation words on the best 1- or 2-hop path from a seed to each
    # node, -1 where none reaches (toporag-seeded: :mod:`.path_match`); None for other methods
    path_match: np.ndarray | None = None

    @property
    def counts(self) -> tuple[int, int, int]:
        """Number of selected cells per rank."""
        return int(self.nodes.size), int(self.edges.size), int(self.cells2.size)

    def is_empty(self) -> bool:
        return self.nodes.size == 0

    def node_texts(self) -> list[str]:
        t = self.complex.graph.node_text
        return [t[i] for i in self.nodes.tolist()]

    def triples(self) -> list[tuple[str, str, str]]:
        """Original ``(head, relation, tail)`` triples of the selected 1-cells (and self-loops of selected nodes)."""
        cx = self.complex
        out = []
        for e in self.edges.tolist():
            out.extend(cx.edge_relations(e))
        g = cx.graph
        sel = set(self.nodes.tolist())
        for i in cx.self_loops.tolist():
            a = int(g.edge_index[0, i])
            if a in sel:
                out.append((g.node_text[a], g.edge_text[i], g.node_text[a]))
        return out

    def cycles(self) -> list[list[str]]:
        """Each selected 2-cell as its node texts in cycle order."""
        t = self.complex.graph.node_text
        return [[t[i] for i in self.complex.cell2_nodes(f).tolist()] for f in self.cells2.tolist()]

    def role_of(self, rank: int) -> dict[int, str]:
        ids, roles = [(self.nodes, self.node_roles), (self.edges, self.edge_roles),
                      (self.cells2, self.cell2_roles)][rank]
        return dict(zip(ids.tolist(), roles.tolist()))

    def cell_texts(self, include_cells2: bool = True) -> dict[str, Any]:
        """Texts of the retrieved cells: ``nodes``, ``edges`` (triples), ``cells2`` (cycles), ``counts``."""
        return {"nodes": self.node_texts(), "edges": [list(t) for t in self.triples()],
                "cells2": self.cycles() if include_cells2 else [],
                "counts": dict(zip(("nodes", "edges", "cells2"), self.counts))}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the ``toporag retrieve --json`` keys plus roles/prizes)."""
        p0, p1, p2 = self.prizes
        cx = self.complex
        return {
            "method": self.method,
            "params": self.params,
            "nodes": self.node_texts(),
            "edges": [list(t) for t in self.triples()],
            "cells2": self.cycles(),
            "counts": dict(zip(("nodes", "edges", "cells2"), self.counts)),
            "node_ids": self.nodes.tolist(),
            "edge_ids": self.edges.tolist(),
            "cell2_ids": self.cells2.tolist(),
            "node_roles": self.node_roles.tolist(),
            "edge_roles": self.edge_roles.tolist(),
            "cell2_roles": self.cell2_roles.tolist(),
            "node_prizes": [float(p0[i]) for i in self.nodes.tolist()],
            "edge_prizes": [float(p1[i]) for i in self.edges.tolist()],
            "cell2_prizes": [float(p2[i]) for i in self.cells2.tolist()] if p2.size else [],
            "edge_pairs": [cx.edges[e].tolist() for e in self.edges.tolist()],
            "timings": self.timings,
            "warnings": list(self.warnings),
        }


def close_under_boundary(cx: CellComplex, nodes: np.ndarray, edges: np.ndarray,
                         cells2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and edges after adding every boundary cell of the chosen 2- and 1-cells."""
    if cells2.size:
        mask = np.isin(cx.cell2_index(), cells2)
        edges = np.union1d(edges, cx.cell_edges[mask])
    if edges.size:
        nodes = np.union1d(nodes, cx.edges[edges].reshape(-1))
    return np.asarray(nodes, np.int64), np.asarray(edges, np.int64)


def cell_roles(ids: np.ndarray, chosen: np.ndarray, prize: np.ndarray) -> np.ndarray:
    """The role of each selected cell ``ids`` (one rank): ``terminal`` when chosen and prized,
    ``steiner`` when chosen without a prize, ``closure`` when only added to close the boundaries."""
    r = np.full(ids.size, CLOSURE, dtype=object)
    picked = np.isin(ids, chosen)
    r[picked] = STEINER
    r[picked & (prize[ids] > 0)] = TERMINAL
    return r.astype(str) if ids.size else np.zeros(0, dtype=str)


def make_subcomplex(cx: CellComplex, chosen_nodes: np.ndarray, chosen_edges: np.ndarray, cells2: np.ndarray,
                    prizes: tuple[np.ndarray, np.ndarray, np.ndarray], method: str, params: dict,
                    timings: dict, similarities=None) -> Subcomplex:
    """Close the chosen cells under boundaries and assign roles."""
    chosen_nodes = np.unique(np.asarray(chosen_nodes, np.int64))
    chosen_edges = np.unique(np.asarray(chosen_edges, np.int64))
    cells2 = np.unique(np.asarray(cells2, np.int64))
    nodes, edges = close_under_boundary(cx, chosen_nodes, chosen_edges, cells2)
    p0, p1, p2 = prizes

    return Subcomplex(
        complex=cx, nodes=nodes, edges=edges, cells2=cells2,
        node_roles=cell_roles(nodes, chosen_nodes, p0), edge_roles=cell_roles(edges, chosen_edges, p1),
        cell2_roles=np.full(cells2.size, TERMINAL).astype(str) if cells2.size else np.zeros(0, dtype=str),
        prizes=prizes, method=method, params=params, timings=timings, similarities=similarities,
    )
