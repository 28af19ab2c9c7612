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

Text formats (:data:`TEXT_FORMATS`, a registry: name -> function giving the owned lines):

* ``"csv"`` (default, G-Retriever's layout, what the paper's prompts read): the nodes CSV with the
  node's full text, the edges CSV with local ids, the 2-cells section.
* ``"compact"`` (beyond the paper): no CSV and no id look-ups for relations: a node line is
  ``label: details`` (``desk [0]: green, wooden`` -- the node's other fields, key prefixes and
  letter-free fields such as bounding boxes dropped), a relation line names both ends
  (``plant [3] behind desk [0]``), the 2-cells section is the same. Why: a scene node's box is ~20
  of its ~35 tokens and answers no question, and a relation line that names its ends reads on its
  own, where a CSV row needs two joins on ``node_id`` (which a 135M model learns slowly). Plain-name
  nodes (ExplaGraphs, WebQSP) print as themselves, so there it is the triple list ``dog capable of bark``.

Two more formats were measured and retired (``keyed``: relation lines key first; ``short-loops``:
2-cells as node lists): docs/results/retired_experiments.md.

Every format writes one line per cell and says which cell owns it (:func:`text_lines`: ``("n", node)``,
``("e", 1-cell)``, ``("f", 2-cell)`` or ``None`` for headers), so the token-budget cut
(:mod:`~toporag_core.retrieval.budget`) keeps or drops whole cells in any format.
"""
from __future__ import annotations

import csv
import io
import re
from typing import Callable

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


Owner = tuple  # ("n", node) | ("e", 1-cell) | ("f", 2-cell)


def node_details(text: str) -> str:
    """A node's fields after the first, ``key:`` prefixes and letter-free fields dropped, ``"; "``-joined
    (``"name: cup; attribute: red, ceramic; (x,y,w,h): (1, 2, 3, 4)"`` -> ``"red, ceramic"``; ``""`` for
    a plain name)."""
    if ";" not in text:
        return ""
    out = []
    for field_ in text.split(";")[1:]:
        v = field_.strip()
        if ": " in v:
            v = v.split(": ", 1)[1].strip()
        if any(ch.isalpha() for ch in v):
            out.append(v)
    return "; ".join(out)


def _relation_rows(sub: Subcomplex) -> list[tuple[int, int, str, Owner]]:
    """``(src, dst, relation, owner)`` for every relation of every retrieved 1-cell, then the retrieved
    nodes' self-loops (owned by their node), in textualize order."""
    cx, g = sub.complex, sub.complex.graph
    rows = []
    for e in sub.edges.tolist():
        for i in cx.edge_members(e).tolist():
            a, b = g.edge_index[:, i].tolist()
            rows.append((a, b, g.edge_text[i], ("e", e)))
    kept = set(sub.nodes.tolist())
    for i in cx.self_loops.tolist():
        a = int(g.edge_index[0, i])
        if a in kept:
            rows.append((a, a, g.edge_text[i], ("n", a)))
    return rows


def _cells2_lines(sub: Subcomplex, local: dict[int, int], include_cells2: bool) -> list[tuple[str, Owner | None]]:
    if not (include_cells2 and sub.cells2.size):
        return []
    return [("", None), ("2-cells (closed loops)", None)] + \
        [(f"c{f}: {cycle_text(sub.complex, f, local)}", ("f", f)) for f in sub.cells2.tolist()]


def _csv_lines(sub: Subcomplex, include_cells2: bool = True) -> list[tuple[str, Owner | None]]:
    g = sub.complex.graph
    local = {n: i for i, n in enumerate(sub.nodes.tolist())}
    lines: list[tuple[str, Owner | None]] = [("node_id,node_attr", None)]
    lines += [(f"{local[n]},{_csv_field(g.node_text[n])}", ("n", n)) for n in sub.nodes.tolist()]
    lines += [("", None), ("src,edge_attr,dst", None)]
    lines += [(f"{local[a]},{_csv_field(r)},{local[b]}", o) for a, b, r, o in _relation_rows(sub)]
    return lines + _cells2_lines(sub, local, include_cells2)


def _compact_lines(sub: Subcomplex, include_cells2: bool = True) -> list[tuple[str, Owner | None]]:
    g = sub.complex.graph
    local = {n: i for i, n in enumerate(sub.nodes.tolist())}

    def name(n: int) -> str:
        return node_label(g.node_text[n], local[n])

    lines: list[tuple[str, Owner | None]] = [("nodes", None)]
    for n in sub.nodes.tolist():
        d = node_details(g.node_text[n])
        lines.append((f"{name(n)}: {d}" if d else name(n), ("n", n)))
    lines += [("", None), ("relations", None)]
    lines += [(f"{name(a)} {r} {name(b)}", o) for a, b, r, o in _relation_rows(sub)]
    return lines + _cells2_lines(sub, local, include_cells2)


TEXT_FORMATS: dict[str, Callable[..., list[tuple[str, Owner | None]]]] = {"csv": _csv_lines,
                                                                          "compact": _compact_lines}
DEFAULT_TEXT = "csv"


# A compact node line: ``lamp [6]: brown, glass, small`` (name, local index, attributes) or ``cup [2]``.
NODE_LINE = re.compile(r"^(?P<name>[^\s\[][^\[\]]*?) (?P<index>\[\d+\])(?:: (?P<attrs>\S.*))?$")


def names_only(context: str, slots: int) -> str:
    """``context`` with the attributes of the compact node lines of local index below ``slots`` dropped (``lamp [6]:
    brown, glass, small`` -> ``lamp [6]`` when ``slots > 6``), everything else unchanged: what a model with
    ``token_text = "names"`` reads, whose first ``slots`` nodes have graph tokens that carry their attributes
    (:class:`~toporag_core.model.TopoRAGConfig`). The index, not the line's position, says which node it is, so a
    context whose token-budget fit dropped some node lines (:mod:`~toporag_core.retrieval.budget` keeps
    textualize's local ids) still strips exactly the nodes that have tokens. Only the first block (up to the first
    blank line) holds node lines; a context in another format comes back unchanged."""
    head, sep, rest = context.partition("\n\n")
    out = []
    for line in head.split("\n"):
        m = NODE_LINE.match(line)
        out.append(f"{m['name']} {m['index']}" if m and int(m["index"][1:-1]) < slots else line)
    return "\n".join(out) + sep + rest


# A CSV relation line: ``0,capable of,2`` (source's local id, relation, target's local id); its block starts with
# the header ``src,edge_attr,dst`` (:func:`_csv_lines`).
RELATION_HEADER = "src,edge_attr,dst"
RELATION_LINE = re.compile(r"^(?P<src>\d+),(?P<relation>.*),(?P<dst>\d+)$")
HIDDEN_RELATION = "?"


def relation_block(context: str) -> str:
    """The CSV relation block of ``context``: from the line :data:`RELATION_HEADER` to the next blank line
    (``""`` when the context has none, e.g. compact text)."""
    lines = context.split("\n")
    if RELATION_HEADER not in lines:
        return ""
    return context.split("\n", lines.index(RELATION_HEADER))[-1].split("\n\n")[0].strip()


def relation_groups(context: str) -> list[list[int]]:
    """The CSV relation lines of ``context`` grouped by 1-cell, in text order: each group lists the line numbers
    (of ``context.split("\n")``) of one 1-cell's relations (:func:`_relation_rows` writes a 1-cell's relations
    one after another, all between the same two nodes). Self-loop lines (a node's own relations, written after the
    1-cells) belong to no 1-cell and are left out; so is every line outside the block under
    :data:`RELATION_HEADER`. A context in another format has no groups."""
    lines = context.split("\n")
    if RELATION_HEADER not in lines:
        return []
    groups: list[list[int]] = []
    last = None
    for i in range(lines.index(RELATION_HEADER) + 1, len(lines)):
        m = RELATION_LINE.match(lines[i])
        if not m:
            break
        pair = frozenset((m["src"], m["dst"]))
        if len(pair) == 1:
            last = None
            continue
        if pair != last:
            groups.append([])
        groups[-1].append(i)
        last = pair
    return groups


def relations_hidden(context: str, slots: int) -> str:
    """``context`` with the relation of the first ``slots`` 1-cells replaced by :data:`HIDDEN_RELATION`
    (``0,capable of,2`` -> ``0,?,2``), everything else unchanged: what a model with ``token_text = "relations"``
    reads, whose first ``slots`` 1-cells have graph tokens that carry their relation (relations first). A 1-cell
    with several relations between its two nodes hides its first line, the one :func:`relation_words` gives its
    tokens; the others stay in the text. A context in another format comes back unchanged. CSV relation lines name
    no 1-cell, so the groups are counted in text order: a context whose token-budget fit dropped relation lines
    (:mod:`~toporag_core.retrieval.budget`) hides the first ``slots`` 1-cells it still has."""
    lines = context.split("\n")
    for first, *_ in relation_groups(context)[:slots]:
        m = RELATION_LINE.match(lines[first])
        lines[first] = f"{m['src']},{HIDDEN_RELATION},{m['dst']}"
    return "\n".join(lines)


def relation_words(context: str) -> list[list[str]]:
    """The words of each 1-cell's relation (its first line's), in text order (``0,not capable of,2`` ->
    ``["not", "capable", "of"]``): the words its graph tokens carry under ``token_text = "relations"``."""
    lines = context.split("\n")
    return [RELATION_LINE.match(lines[g[0]])["relation"].split() for g in relation_groups(context)]


def check_text_format(fmt: str) -> str:
    """``fmt`` when registered, else a ``ValueError`` listing :data:`TEXT_FORMATS`."""
    if fmt not in TEXT_FORMATS:
        raise ValueError(f"unknown text format {fmt!r}; registered: {', '.join(TEXT_FORMATS)}")
    return fmt


def text_lines(sub: Subcomplex, include_cells2: bool = True, fmt: str = DEFAULT_TEXT) -> list[tuple[str, Owner | None]]:
    """The lines of :func:`textualize`, each with the cell that owns it (``None``: a header or blank)."""
    return TEXT_FORMATS[check_text_format(fmt)](sub, include_cells2)


def drop_cell_lines(context: str, sub: Subcomplex, cells, include_cells2: bool = True,
                    fmt: str = DEFAULT_TEXT) -> str:
    """``context`` without the lines owned by ``cells`` (owners as in :func:`text_lines`: ``("n", node)``,
    ``("e", 1-cell)``, ``("f", 2-cell)``), every other line (headers included) unchanged and in place.

    ``context`` is ``textualize(sub, include_cells2, fmt)`` or a token-budget cut of it
    (:mod:`~toporag_core.retrieval.budget` keeps a subset of its lines, in order), so its lines are matched
    to the full layout's in order (a subsequence match) to learn who owns each. A context that is not such
    a subset (another format, an edited text) is a ``ValueError``."""
    drop = set(cells)
    if not drop:
        return context
    full = text_lines(sub, include_cells2, fmt)
    out, j = [], 0
    for line in context.split("\n"):
        while j < len(full) and full[j][0] != line:
            j += 1
        if j == len(full):
            raise ValueError("drop_cell_lines: the context is not a subset of the subcomplex's text lines "
                             f"(format {fmt!r}); line {line[:60]!r}")
        if full[j][1] not in drop:
            out.append(line)
        j += 1
    return "\n".join(out)


def textualize(sub: Subcomplex, include_cells2: bool = True, fmt: str = DEFAULT_TEXT) -> str:
    """The subcomplex as text in format ``fmt`` (:data:`TEXT_FORMATS`; default the G-Retriever CSV
    layout: nodes CSV, edges CSV, then the 2-cells section)."""
    return "\n".join(t for t, _ in text_lines(sub, include_cells2, fmt))
