"""Textual graphs: nodes and directed edges that carry text.

A :class:`TextualGraph` is the input of everything else. It is deliberately close
to the raw data: directed edges, possibly parallel (several relations between one
pair, in either direction) and possibly self-loops, as WebQSP's Freebase subgraphs
have. How those enter the cell complex is decided by :func:`toporag_core.cells.lift.lift`:

* **Parallel edges** (same unordered pair, any direction) become *one* 1-cell of the
  simple undirected skeleton; the 1-cell keeps every original edge id, so all their
  texts are still embedded (mean) and textualized.
* **Self-loops** are not 1-cells (a loop would make the complex non-regular and would
  bound no 2-cell usefully); they stay attached to their node as extra facts: they are
  listed with the node's edges when the node is textualized, and nothing else.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

#: The one length limit of a node or relation text, in characters, in every input format (and for a
#: graph built in code). Far above what an encoder reads (MiniLM truncates at 256 tokens), low enough
#: that one cell cannot hold a whole file.
MAX_TEXT_CHARS = 100_000

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_ALL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def safe_text(text: str, keep_newlines: bool = True) -> str:
    """``text`` for a terminal or a log: control characters (ANSI escape sequences start with ESC, ``\\x1b``)
    are written as visible ``\\x1b`` escapes, so user text can neither recolour nor rewrite the screen.
    ``keep_newlines=False`` also escapes newlines and tabs (a one-line message stays one line)."""
    pat = _CONTROL if keep_newlines else _CONTROL_ALL
    return pat.sub(lambda m: repr(m.group())[1:-1], text)


def check_text(text: str, max_chars: int = MAX_TEXT_CHARS) -> str | None:
    """Why ``text`` cannot be a cell text (too long, a lone surrogate), or ``None``."""
    if len(text) > max_chars:
        return f"text is {len(text)} characters, over the limit max_text_chars={max_chars}"
    if "\x00" in text:
        return f"text contains a NUL character (at character {text.index(chr(0)) + 1})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return (f"invalid Unicode: lone surrogate U+{ord(text[e.start]):04X} at character {e.start + 1} "
                "(a JSON \\ud800-\\udfff escape that is not half of a pair)")
    return None


class GraphFormatError(ValueError):
    """Bad input graph. Says *where*: file, line or record, and field.

    ``str(err)`` is one line, e.g. ``edges.csv, line 4, field 'dst': unknown node id '17'``.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 record: int | str | None = None, field: str | None = None) -> None:
        self.file, self.line, self.record, self.field, self.reason = file, line, record, field, message
        where = []
        if file:
            where.append(str(file))
        if line is not None:
            where.append(f"line {line}")
        if record is not None:
            where.append(f"record {record}")
        if field:
            where.append(f"field '{field}'")
        super().__init__(safe_text((", ".join(where) + ": " if where else "") + message, keep_newlines=False))


def _check_texts(texts: list[str], kind: str) -> None:
    """Every text valid Unicode and within :data:`MAX_TEXT_CHARS` (one vectorised pass; a loop only on failure)."""
    if not texts:
        return
    longest = max(map(len, texts))
    try:
        joined = "\x01".join(texts)
        joined.encode("utf-8")
        ok = longest <= MAX_TEXT_CHARS and "\x00" not in joined
    except UnicodeEncodeError:
        ok = False
    if not ok:
        i, problem = next((i, p) for i, t in enumerate(texts) if (p := check_text(t)))
        raise GraphFormatError(problem, record=i, field=kind)


@dataclass
class TextualGraph:
    """A directed multigraph whose nodes and edges carry text.

    Attributes:
        node_text: ``N`` node texts.
        edge_index: ``(2, E)`` int64 array of (source, target) node indices.
        edge_text: ``E`` edge (relation) texts.
        node_ids: optional original ids of the nodes (as in the input file).
        name: a display name.
        meta: free-form metadata (question, answers, label, ...).
    """

    node_text: list[str]
    edge_index: np.ndarray
    edge_text: list[str]
    node_ids: list[str] | None = None
    name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.node_text = [str(t) for t in self.node_text]
        self.edge_text = [str(t) for t in self.edge_text]
        ei = np.asarray(self.edge_index, dtype=np.int64)
        if ei.size == 0:
            ei = ei.reshape(2, 0)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise GraphFormatError(f"edge_index must have shape (2, E), got {ei.shape}", field="edge_index")
        self.edge_index = ei
        if len(self.edge_text) != ei.shape[1]:
            raise GraphFormatError(
                f"{ei.shape[1]} edges but {len(self.edge_text)} edge texts", field="edge_text")
        if ei.size and (ei.min() < 0 or ei.max() >= len(self.node_text)):
            bad = int(np.flatnonzero((ei < 0).any(0) | (ei >= len(self.node_text)).any(0))[0])
            raise GraphFormatError(f"edge {bad} refers to a node index outside 0..{len(self.node_text) - 1}",
                                   record=bad, field="edge_index")
        if self.node_ids is not None and len(self.node_ids) != len(self.node_text):
            raise GraphFormatError("node_ids and node_text differ in length", field="node_ids")
        for kind, texts in (("node_text", self.node_text), ("edge_text", self.edge_text)):
            _check_texts(texts, kind)

    # ------------------------------------------------------------------ basics
    @property
    def num_nodes(self) -> int:
        return len(self.node_text)

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def triples(self) -> list[tuple[str, str, str]]:
        """``[(head text, relation text, tail text), ...]`` in edge order."""
        s, t = self.edge_index
        return [(self.node_text[a], r, self.node_text[b]) for a, r, b in zip(s.tolist(), self.edge_text, t.tolist())]

    @classmethod
    def from_triples(cls, triples: Iterable[Sequence[str]], name: str = "", meta: dict | None = None) -> "TextualGraph":
        """Build a graph from ``(head, relation, tail)`` triples; nodes are identified by their text."""
        index: dict[str, int] = {}
        src, dst, rel = [], [], []
        for h, r, t in triples:
            src.append(index.setdefault(h, len(index)))
            dst.append(index.setdefault(t, len(index)))
            rel.append(r)
        return cls(node_text=list(index), edge_index=np.array([src, dst], dtype=np.int64).reshape(2, -1),
                   edge_text=rel, name=name, meta=dict(meta or {}))

    # ------------------------------------------------------------ conversions
    def to_networkx(self):
        """A ``networkx.MultiDiGraph`` with ``text`` attributes on nodes and edges."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for i, t in enumerate(self.node_text):
            g.add_node(i, text=t, **({"id": self.node_ids[i]} if self.node_ids else {}))
        for (a, b), r in zip(self.edge_index.T.tolist(), self.edge_text):
            g.add_edge(a, b, text=r)
        return g

    @classmethod
    def from_networkx(cls, g, text_attr: str = "text", name: str = "") -> "TextualGraph":
        """From any networkx graph. Node text: attribute ``text_attr`` or the node key;
        edge text: attribute ``text_attr`` (or ``relation``/``label``) or ``""``."""
        nodes = list(g.nodes)
        pos = {n: i for i, n in enumerate(nodes)}
        node_text = [str(g.nodes[n].get(text_attr, n)) for n in nodes]
        src, dst, rel = [], [], []
        edges = g.edges(data=True)
        for a, b, d in edges:
            src.append(pos[a])
            dst.append(pos[b])
            rel.append(str(d.get(text_attr, d.get("relation", d.get("label", "")))))
        return cls(node_text=node_text, edge_index=np.array([src, dst], dtype=np.int64).reshape(2, -1),
                   edge_text=rel, node_ids=[str(n) for n in nodes], name=name or str(g.name or ""))

    def to_pyg(self, node_emb: np.ndarray | None = None, edge_emb: np.ndarray | None = None):
        """A ``torch_geometric.data.Data`` with ``edge_index``, texts, and optional ``x``/``edge_attr``."""
        import torch
        from torch_geometric.data import Data

        data = Data(edge_index=torch.as_tensor(self.edge_index, dtype=torch.long), num_nodes=self.num_nodes)
        data.node_text = list(self.node_text)
        data.edge_text = list(self.edge_text)
        if node_emb is not None:
            data.x = torch.as_tensor(np.asarray(node_emb), dtype=torch.float32)
        if edge_emb is not None:
            data.edge_attr = torch.as_tensor(np.asarray(edge_emb), dtype=torch.float32)
        return data

    def __repr__(self) -> str:
        return f"TextualGraph(name={self.name!r}, nodes={self.num_nodes}, edges={self.num_edges})"
