"""A record's retrieved subcomplex, rebuilt from the cell texts stored in a predictions file: as a
small graph, re-lifted for the drill-down's view (:func:`subcomplex_complex`), and exported as JSON or GraphML.
"""
from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from ...cells.complex import CellComplex
from ...cells.lift import lift
from ...graph import TextualGraph
from .verdicts import verdict


def subcomplex_graph(rec: dict[str, Any]) -> TextualGraph:
    """The retrieved cells of a record as a small graph: nodes by text (stored texts are all a
    record has, so two nodes with one text become one), edges from the stored triples."""
    c = rec["cells"]
    index: dict[str, int] = {}
    for n in c["nodes"]:
        index.setdefault(n, len(index))
    src, dst, rel = [], [], []
    for h, r, t in c["edges"]:
        src.append(index.setdefault(h, len(index)))
        dst.append(index.setdefault(t, len(index)))
        rel.append(r)
    return TextualGraph(node_text=list(index), edge_index=np.array([src, dst], dtype=np.int64).reshape(2, -1),
                        edge_text=rel, name=f"retrieved for {rec['id']}", meta={"question": rec.get("question", "")})


def subcomplex_complex(graph: TextualGraph) -> CellComplex:
    """The rebuilt subcomplex graph (:func:`subcomplex_graph`) lifted with the default lifting, for the view;
    :func:`matching_cells2` finds the stored 2-cells in it."""
    return lift(graph)


def matching_cells2(cx, rec: dict[str, Any]) -> list[int]:
    """2-cells of the re-lifted small complex ``cx`` whose node texts equal a stored 2-cell's."""
    want = {frozenset(cyc) for cyc in rec["cells"]["cells2"]}
    t = cx.graph.node_text
    return [f for f in range(cx.num_cells2) if frozenset(t[i] for i in cx.cell2_nodes(f).tolist()) in want]


def subcomplex_json(rec: dict[str, Any]) -> str:
    """The record's retrieved subcomplex (and the example it belongs to) as JSON text."""
    keys = ("id", "question", "label", "prediction", "correct", "qtype", "method", "dataset")
    return json.dumps({**{k: rec.get(k) for k in keys}, "verdict": verdict(rec)[0],
                       "nodes": rec["cells"]["nodes"], "edges": rec["cells"]["edges"],
                       "cells2": rec["cells"]["cells2"]}, indent=2, ensure_ascii=False)


def subcomplex_graphml(rec: dict[str, Any]) -> str:
    """GraphML (networkx) of the retrieved subcomplex: nodes and edges carry ``text``; each
    stored 2-cell is a graph attribute ``cell2_<j>`` (its node texts joined by `` -> ``)."""
    import networkx as nx

    g = subcomplex_graph(rec).to_networkx()
    g.graph = {"id": rec["id"], "question": rec.get("question", "")}
    for j, cyc in enumerate(rec["cells"]["cells2"]):
        g.graph[f"cell2_{j}"] = " -> ".join(cyc)
    buf = io.BytesIO()
    nx.write_graphml(g, buf)
    return buf.getvalue().decode("utf-8")
