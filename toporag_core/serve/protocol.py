"""The wire format of the core service: plain JSON, the same on the server and in the client.

No pickle anywhere: a graph travels as ``{"nodes": [text, ...], "edges": [[src, dst, relation], ...],
"name": str}`` and is referred to afterwards by its **content hash**

    graph_id = sha256( canonical JSON of {"nodes", "edges"} )   (64 hex digits)

which the client computes itself (:func:`graph_id`), so it can ask with the id first and send the
graph only when the server answers ``404 unknown_graph`` (a slider move never resends a
2,000-node graph). The name is not part of the id (same content, same embeddings).

A retrieved subcomplex travels as the ids of its cells into the parent complex (``node_ids``,
``edge_ids``, ``cell2_ids``), their roles and the full prize arrays ``(p0 (N,), p1 (M,), p2 (F,))``;
lifting is deterministic (same graph, tree, seed: same complex), so the client rebuilds an equal
:class:`~toporag_core.retrieval.Subcomplex` on its own lifted complex
(:func:`subcomplex_from_json`) and checks the complex sizes the server reports.

:class:`Limits` bounds every request (nodes, edges, characters of one text, of the question,
body bytes); :func:`graph_from_json` checks them and names the offending field.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..cells.complex import CellComplex
from ..graph import TextualGraph
from ..cells.checks import InputError, check_int, check_text
from ..retrieval import Subcomplex


class RequestError(ValueError):
    """A bad request: ``status`` (4xx), a short machine ``code`` and a message naming the field."""

    def __init__(self, message: str, status: int = 400, code: str = "bad_request") -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class Limits:
    """Request size limits of the service (every one checked; exceeding one is a 413 naming it)."""

    max_body_bytes: int = 16 * 2 ** 20
    max_nodes: int = 20_000
    max_edges: int = 100_000
    max_text_chars: int = 2_000
    max_question_chars: int = 4_000
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive whole number, got {value!r}")


# ----------------------------------------------------------------------------- graphs
def graph_to_json(graph: TextualGraph) -> dict[str, Any]:
    """``{"nodes", "edges", "name"}`` of a graph (what the client sends)."""
    s, t = graph.edge_index.tolist() if graph.num_edges else ([], [])
    return {"nodes": list(graph.node_text), "edges": [[a, b, r] for a, b, r in zip(s, t, graph.edge_text)],
            "name": graph.name}


def graph_id(graph: TextualGraph | dict[str, Any]) -> str:
    """The content hash of a graph (or of its JSON form): 64 hex digits, name and meta excluded."""
    d = graph_to_json(graph) if isinstance(graph, TextualGraph) else graph
    canon = json.dumps({"nodes": d["nodes"], "edges": d["edges"]}, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def graph_from_json(d: Any, limits: Limits) -> TextualGraph:
    """A :class:`TextualGraph` from its JSON form, within ``limits``, by the rules of
    :mod:`toporag_core.cells.checks` (texts non-empty valid Unicode, node indices whole numbers in
    range); :class:`~toporag_core.cells.checks.InputError` naming the field (``graph.nodes[3]``,
    ``graph.edges[7][1]``) otherwise."""
    if not isinstance(d, dict):
        raise InputError("graph", "must be an object {nodes, edges, name}")
    for key in ("nodes", "edges"):
        if not isinstance(d.get(key), list):
            raise InputError(f"graph.{key}", "required: a list" + (" ([] for none)" if key == "edges" else ""))
    nodes, edges = d["nodes"], d["edges"]
    if not nodes:
        raise InputError("graph.nodes", "a graph needs at least one node")
    if len(nodes) > limits.max_nodes:
        raise InputError("graph.nodes", f"{len(nodes)} nodes, the limit is {limits.max_nodes}", 413)
    if len(edges) > limits.max_edges:
        raise InputError("graph.edges", f"{len(edges)} edges, the limit is {limits.max_edges}", 413)
    for i, t in enumerate(nodes):
        check_text(t, f"graph.nodes[{i}]", limits.max_text_chars)
    src, dst, rel = edge_columns(edges, len(nodes), limits)
    name = d.get("name") or ""
    if not isinstance(name, str) or len(name) > limits.max_text_chars:
        raise InputError("graph.name", "must be a string within the text limit")
    if name.strip():
        check_text(name, "graph.name")
    return TextualGraph(node_text=nodes, edge_index=np.array([src, dst], np.int64).reshape(2, -1), edge_text=rel,
                        name=name)


def edge_columns(edges: list, n: int, limits: Limits) -> tuple[list[int], list[int], list[str]]:
    """``(src, dst, relation)`` of the JSON edge list ``[[src, dst, relation], ...]`` over ``n`` nodes."""
    src, dst, rel = [], [], []
    for i, e in enumerate(edges):
        if not (isinstance(e, list) and len(e) == 3):
            raise InputError(f"graph.edges[{i}]", "expected [src, dst, relation]")
        src.append(check_int(e[0], f"graph.edges[{i}][0]", 0, n - 1))
        dst.append(check_int(e[1], f"graph.edges[{i}][1]", 0, n - 1))
        rel.append(check_text(e[2], f"graph.edges[{i}][2]", limits.max_text_chars))
    return src, dst, rel


# ----------------------------------------------------------------------------- subcomplexes
def _finite(values: np.ndarray) -> list[float]:
    return [float(v) if math.isfinite(v) else 0.0 for v in np.asarray(values, np.float64).tolist()]


def subcomplex_to_json(sub: Subcomplex) -> dict[str, Any]:
    """:meth:`Subcomplex.to_dict` plus the full prize arrays and the parent complex's sizes."""
    d = sub.to_dict()
    d["prizes"] = [_finite(p) for p in sub.prizes]
    cx = sub.complex
    d["complex"] = {"nodes": int(cx.num_nodes), "edges": int(cx.num_edges), "cells2": int(cx.num_cells2)}
    d["params"] = {k: v for k, v in dict(sub.params).items() if isinstance(v, (int, float, str, bool, type(None)))}
    return d


def subcomplex_from_json(d: dict[str, Any], cx: CellComplex) -> Subcomplex:
    """An equal :class:`Subcomplex` on the caller's own lifted complex ``cx`` (``ValueError`` when the
    server's complex had other sizes: a different tree, seed or graph)."""
    sizes = d.get("complex", {})
    mine = {"nodes": int(cx.num_nodes), "edges": int(cx.num_edges), "cells2": int(cx.num_cells2)}
    if sizes and sizes != mine:
        raise ValueError(f"the core lifted this graph to {sizes}, here it is {mine}: different tree, seed or graph")

    def ids(key: str) -> np.ndarray:
        return np.asarray(d.get(key, []), np.int64)

    def roles(key: str) -> np.ndarray:
        r = d.get(key, [])
        return np.asarray(r).astype(str) if r else np.zeros(0, dtype=str)

    p = d.get("prizes") or [[], [], []]
    return Subcomplex(complex=cx, nodes=ids("node_ids"), edges=ids("edge_ids"), cells2=ids("cell2_ids"),
                      node_roles=roles("node_roles"), edge_roles=roles("edge_roles"),
                      cell2_roles=roles("cell2_roles"), prizes=tuple(np.asarray(x, np.float64) for x in p),
                      method=d.get("method", ""), params=dict(d.get("params", {})), timings=dict(d.get("timings", {})))
