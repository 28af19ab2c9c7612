"""Textualize a subcomplex the way the LLM reads it.

Three sections, preserving the hierarchy of the complex: 0-cells (a nodes CSV),
1-cells (an edges CSV with every original relation, G-Retriever's layout), and
2-cells (each cycle written out in order, e.g. ``cup -[left of]-> plate -[on]-> table
<-[under]- cup``: ``-[r]->`` when the relation points along the walk, ``<-[r]-`` against, and
``<-[s]-[r]->`` when a 1-cell holds relations in both directions, so every relation of the
boundary is read). A 2-cell is named by its id in the complex (``c7``), as in the prize tables.

A walk names each node by :func:`node_label`: the node's text when it is a plain name (ExplaGraphs
concepts, WebQSP entities), else its first field plus its ``node_id`` in the nodes table
(``"name: cup; attribute: red; (x,y,w,h): ..."`` -> ``cup [3]``). Why: a scene node's text is ~35
tokens with attributes and box; repeating it at every step of every loop made 2-cell sections ~3x
longer than the nodes table they refer to (generated SceneGraphs: contexts 1,084 tokens on average,
so a 512-token model never read a single 2-cell).
"""
from __future__ import annotations

import csv
import io

from .result import Subcomplex


def _csv_field(s: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([s])
    return buf.getvalue()


def node_label(text: str, node_id: int | None = None) -> str:
    """How a walk names a node: ``text`` itself when it has no ``;``-separated fields; else its first
    field without a ``key:`` prefix, followed by ``[node_id]`` when given (``"name: cup; ..."`` -> ``cup [3]``)."""
    if ";" not in text:
        return text
    head = text.split(";", 1)[0].strip()
    if ": " in head:
        head = head.split(": ", 1)[1].strip()
    head = head or text
    return head if node_id is None else f"{head} [{node_id}]"


def cycle_text(sub_or_cx, f: int, local: dict[int, int] | None = None) -> str:
    """One 2-cell as a walk: ``a -[r]-> b <-[s]- c ... -> a``; nodes named by :func:`node_label`, with
    ``local[node]`` (the nodes table's ``node_id``) when given."""
    cx = getattr(sub_or_cx, "complex", sub_or_cx)
    g = cx.graph
    nodes = cx.cell2_nodes(f).tolist()
    edges = cx.cell2_edges(f).tolist()
    local = local or {}

    def name(n: int) -> str:
        return node_label(g.node_text[n], local.get(n))

    parts = [name(nodes[0])]
    for j, e in enumerate(edges):
        a, b = nodes[j], nodes[(j + 1) % len(nodes)]
        fwd, bwd = [], []
        for i in cx.edge_members(e).tolist():
            (fwd if int(g.edge_index[0, i]) == a else bwd).append(g.edge_text[i])
        back = f"<-[{' / '.join(bwd)}]-" if bwd else ""
        ahead = f"-[{' / '.join(fwd)}]->" if fwd else ""
        link = f" {back}{ahead[1:] if back and ahead else ahead} "
        parts.append(link + name(b))
    return "".join(parts)


def textualize(sub: Subcomplex, include_cells2: bool = True) -> str:
    """The subcomplex as text: nodes CSV, edges CSV, then the 2-cells section."""
    g = sub.complex.graph
    local = {n: i for i, n in enumerate(sub.nodes.tolist())}
    lines = ["node_id,node_attr"]
    lines += [f"{local[n]},{_csv_field(g.node_text[n])}" for n in sub.nodes.tolist()]
    lines += ["", "src,edge_attr,dst"]
    cx = sub.complex
    for e in sub.edges.tolist():
        for i in cx.edge_members(e).tolist():
            a, b = g.edge_index[:, i].tolist()
            lines.append(f"{local[a]},{_csv_field(g.edge_text[i])},{local[b]}")
    for i in cx.self_loops.tolist():
        a = int(g.edge_index[0, i])
        if a in local:
            lines.append(f"{local[a]},{_csv_field(g.edge_text[i])},{local[a]}")
    if include_cells2 and sub.cells2.size:
        lines += ["", "2-cells (closed loops)"]
        lines += [f"c{f}: {cycle_text(cx, f, local)}" for f in sub.cells2.tolist()]
    return "\n".join(lines)
