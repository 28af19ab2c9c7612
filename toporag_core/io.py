"""Graph loaders: files, uploads and pasted text -> :class:`~toporag_core.graph.TextualGraph`.

Formats (``format=``):

* ``"csv-pair"``: G-Retriever's ``nodes.csv`` (``node_id,node_attr``) + ``edges.csv`` (``src,edge_attr,dst``).
  Node ids are matched as stripped strings; node/edge texts are kept verbatim (not stripped).
* ``"triples"``: TSV/CSV with header ``head,relation,tail`` (aliases ``subject/predicate/object``,
  ``source/src``, ``target/dst``, ``edge_attr``), or headerless 3 columns; or a JSON list of
  ``[head, relation, tail]`` (or of ``{"head", "relation", "tail"}`` objects). Nodes are identified by
  their stripped text; relation text is stripped.
* ``"explagraphs"``: one ``(h; r; t)(h; r; t)...`` string, or an ExplaGraphs TSV (``arg1 arg2 label graph``)
  of which row ``record`` (default 0) is used. Exactly as the GraphQA benchmark: head/tail/relation are
  lower-cased and stripped.
* ``"webqsp"``: one record ``{"id","question","q_entity","answers","nodes","edges":[[h,r,t],..]}`` or a list
  of them (``record`` = list index or ``id``; default 0). Nodes are the names in ``"nodes"`` (exact, not
  stripped) in that order; a name used only in ``"edges"`` is **added** after them (the count is in
  ``meta["nodes_from_edges"]``), so a record whose edges name an absent node still loads.

The ExplaGraphs TSV and WebQSP record handling lives in :mod:`toporag_core.datasets` (imported lazily here);
the ``(h; r; t)`` string parser is :func:`parse_explagraphs_graph` below.

Decisions: empty (or all-space) node text **and empty relation text are errors** (a 1-cell with no text
embeds to nothing useful). Parallel edges and self-loops are kept as given; :func:`toporag_core.lift.lift`
decides how they enter the complex. Every failure is a :class:`GraphFormatError` naming the file, the
line (1-based, the header being line 1) or record (0-based list/row index), and the field.
"""
from __future__ import annotations

import csv
import io as _stdio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .graph import GraphFormatError, TextualGraph

FORMATS = ("csv-pair", "triples", "explagraphs", "webqsp")
_HEAD = {"head", "subject", "source", "src"}
_REL = {"relation", "predicate", "edge_attr", "rel"}
_TAIL = {"tail", "object", "target", "dst"}


@dataclass(frozen=True)
class Limits:
    """Size limits; input over any of them is rejected before it can exhaust memory."""

    max_nodes: int = 200_000
    max_edges: int = 1_000_000
    max_bytes: int = 200_000_000

    def check_bytes(self, n: int, file: str) -> None:
        if n > self.max_bytes:
            raise GraphFormatError(f"file is {n} bytes, over the limit max_bytes={self.max_bytes}", file=file)

    def check_counts(self, nodes: int, edges: int, file: str, line: int | None = None,
                     record: int | str | None = None) -> None:
        if nodes > self.max_nodes:
            raise GraphFormatError(f"more than max_nodes={self.max_nodes} nodes", file=file, line=line, record=record)
        if edges > self.max_edges:
            raise GraphFormatError(f"more than max_edges={self.max_edges} edges", file=file, line=line, record=record)


# ------------------------------------------------------------------ helpers
def _decode(data: bytes, file: str, limits: Limits) -> str:
    """UTF-8 (a BOM is allowed) -> str; a bad byte is reported with its offset and line."""
    limits.check_bytes(len(data), file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise GraphFormatError(f"not UTF-8: byte 0x{data[e.start]:02x} at byte offset {e.start}",
                               file=file, line=line) from None
    if not text.strip():
        raise GraphFormatError("file is empty", file=file)
    return text


def _read(path: Path, limits: Limits) -> str:
    if not path.exists():
        raise GraphFormatError("file not found", file=str(path))
    if path.is_dir():
        raise GraphFormatError("is a directory, not a file (a directory is only valid for csv-pair)", file=str(path))
    limits.check_bytes(path.stat().st_size, str(path))
    return _decode(path.read_bytes(), str(path), limits)


def _text(value: Any, file: str, field: str, *, line: int | None = None, record: int | str | None = None,
          strip: bool = True, lower: bool = False) -> str:
    """One text field: must be a non-empty string (numbers are converted)."""
    if value is None or isinstance(value, (dict, list, tuple, bool)):
        raise GraphFormatError(f"expected text, got {type(value).__name__}", file=file, line=line,
                               record=record, field=field)
    s = str(value)
    if not s.strip():
        raise GraphFormatError("empty text", file=file, line=line, record=record, field=field)
    s = s.strip() if strip else s
    return s.lower() if lower else s


def _rows(text: str, file: str, delimiter: str) -> list[tuple[int, list[str]]]:
    """``[(line number, cells)]`` of a CSV/TSV text, blank lines dropped; ``csv.Error`` is wrapped."""
    reader = csv.reader(_stdio.StringIO(text, newline=""), delimiter=delimiter)
    out = []
    try:
        for row in reader:
            if row and any(c.strip() for c in row):
                out.append((reader.line_num, row))
    except csv.Error as e:
        raise GraphFormatError(f"malformed {'TSV' if delimiter == chr(9) else 'CSV'}: {e}", file=file,
                               line=reader.line_num) from None
    return out


def _columns(header: list[str], line: int, file: str, required: tuple[str, ...]) -> dict[str, int]:
    cols = {c.strip().lower(): i for i, c in enumerate(header)}
    for name in required:
        if name not in cols:
            raise GraphFormatError(f"missing column '{name}' (header has {[c.strip() for c in header]})",
                                   file=file, line=line, field=name)
    return {name: cols[name] for name in required}


def _cell(row: list[str], idx: int, width: int, line: int, file: str) -> str:
    if len(row) != width:
        raise GraphFormatError(f"expected {width} fields, got {len(row)}", file=file, line=line)
    return row[idx]


def _json(text: str, file: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise GraphFormatError(f"invalid JSON at column {e.colno}: {e.msg}", file=file, line=e.lineno) from None
    except RecursionError:
        raise GraphFormatError("invalid JSON: nested too deeply", file=file) from None


def _delimiter(text: str, file: str) -> str:
    first = text.lstrip("\r\n").split("\n", 1)[0]
    if file.lower().endswith((".tsv", ".tab")) or "\t" in first:
        return "\t"
    return ","


# ------------------------------------------------------------------ csv pair
def parse_csv_pair(nodes_text: str, edges_text: str, nodes_name: str = "nodes.csv", edges_name: str = "edges.csv",
                   limits: Limits = Limits(), name: str = "") -> TextualGraph:
    """G-Retriever's node/edge CSV pair (already decoded) -> graph; ``node_ids`` keeps the ids."""
    rows = _rows(nodes_text, nodes_name, ",")
    if not rows:
        raise GraphFormatError("file is empty", file=nodes_name)
    (hl, header), body = rows[0], rows[1:]
    c = _columns(header, hl, nodes_name, ("node_id", "node_attr"))
    ids: dict[str, int] = {}
    texts: list[str] = []
    for line, row in body:
        nid = _text(_cell(row, c["node_id"], len(header), line, nodes_name), nodes_name, "node_id", line=line)
        if nid in ids:
            raise GraphFormatError(f"duplicate node id '{nid}'", file=nodes_name, line=line, field="node_id")
        ids[nid] = len(texts)
        texts.append(_text(row[c["node_attr"]], nodes_name, "node_attr", line=line, strip=False))
        limits.check_counts(len(texts), 0, nodes_name, line=line)
    rows = _rows(edges_text, edges_name, ",")
    if not rows:
        raise GraphFormatError("file is empty", file=edges_name)
    (hl, header), body = rows[0], rows[1:]
    c = _columns(header, hl, edges_name, ("src", "edge_attr", "dst"))
    src, dst, rel = [], [], []
    for line, row in body:
        ends = []
        for key in ("src", "dst"):
            nid = _text(_cell(row, c[key], len(header), line, edges_name), edges_name, key, line=line)
            if nid not in ids:
                raise GraphFormatError(f"unknown node id '{nid}' (not in {nodes_name})", file=edges_name,
                                       line=line, field=key)
            ends.append(ids[nid])
        src.append(ends[0])
        dst.append(ends[1])
        rel.append(_text(row[c["edge_attr"]], edges_name, "edge_attr", line=line, strip=False))
        limits.check_counts(len(texts), len(rel), edges_name, line=line)
    return TextualGraph(node_text=texts, edge_index=[src, dst], edge_text=rel, node_ids=list(ids),
                        name=name or Path(nodes_name).stem)


def load_csv_pair_from_bytes(nodes_bytes: bytes, edges_bytes: bytes, nodes_name: str = "nodes.csv",
                             edges_name: str = "edges.csv", *, max_nodes: int = 200_000, max_edges: int = 1_000_000,
                             max_bytes: int = 200_000_000) -> TextualGraph:
    """Two uploaded files (bytes + names, as Streamlit gives them) -> graph."""
    limits = Limits(max_nodes, max_edges, max_bytes)
    return parse_csv_pair(_decode(nodes_bytes, nodes_name, limits), _decode(edges_bytes, edges_name, limits),
                          nodes_name, edges_name, limits)


def _csv_pair_paths(path: Path, nodes_path: str | os.PathLike | None) -> tuple[Path, Path]:
    """Find (nodes.csv, edges.csv) from a directory, either file of the pair, or an explicit ``nodes_path``.

    Siblings: ``x_nodes.csv`` <-> ``x_edges.csv`` (last occurrence swapped) in the same folder, or G-Retriever's
    layout ``.../nodes/7.csv`` <-> ``.../edges/7.csv``.
    """
    if nodes_path is not None:
        return Path(nodes_path), path
    if path.is_dir():
        return path / "nodes.csv", path / "edges.csv"
    name = path.name
    is_edges = _sniff_csv_pair(path) == "edges"
    a, b = ("edges", "nodes") if is_edges else ("nodes", "edges")
    if a in name:
        i = name.rfind(a)
        other = path.with_name(name[:i] + b + name[i + len(a):])
    elif path.parent.name == a:
        other = path.parent.parent / b / name
    else:
        raise GraphFormatError(f"cannot find the {b} file of the csv pair: name the files '{a}.csv'/'{b}.csv' "
                               f"or pass nodes_path", file=str(path))
    return (other, path) if is_edges else (path, other)


def _pair_role(first_line: str) -> str | None:
    """``"nodes"``/``"edges"`` if a CSV header line is G-Retriever's nodes.csv/edges.csv header."""
    cols = {c.strip().lower() for c in first_line.split(",")}
    return "nodes" if {"node_id", "node_attr"} <= cols else "edges" if {"src", "edge_attr", "dst"} <= cols else None


def _sniff_csv_pair(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            return _pair_role(f.readline())
    except OSError:
        return None


# ------------------------------------------------------------------ triples
def _triples_from_table(text: str, file: str, limits: Limits, name: str) -> TextualGraph:
    rows = _rows(text, file, _delimiter(text, file))
    cols = (0, 1, 2)
    width = 3
    head = [c.strip().lower() for c in rows[0][1]] if rows else []
    if any(h in _HEAD for h in head) and any(h in _REL for h in head) and any(h in _TAIL for h in head):
        cols = tuple(next(i for i, h in enumerate(head) if h in s) for s in (_HEAD, _REL, _TAIL))
        width = len(head)
        rows = rows[1:]
    triples = []
    for line, row in rows:
        if len(row) != width:
            raise GraphFormatError(f"malformed triple: expected {width} fields (head, relation, tail), got {len(row)}",
                                   file=file, line=line)
        triples.append(tuple(_text(row[i], file, f, line=line) for i, f in zip(cols, ("head", "relation", "tail"))))
        limits.check_counts(0, len(triples), file, line=line)
    if not triples:
        raise GraphFormatError("no triples (only a header)", file=file)
    return _triples_graph(triples, file, limits, name)


def _triples_from_json(data: Any, file: str, limits: Limits, name: str) -> TextualGraph:
    if not isinstance(data, list) or not data:
        raise GraphFormatError("expected a non-empty JSON list of [head, relation, tail]", file=file)
    limits.check_counts(0, len(data), file)
    triples = []
    for i, item in enumerate(data):
        if isinstance(item, dict):
            keys = {k.lower(): k for k in item}
            picked = [next((keys[k] for k in s if k in keys), None) for s in (_HEAD, _REL, _TAIL)]
            if None in picked:
                raise GraphFormatError("object needs keys head, relation, tail", file=file, record=i,
                                       field=("head", "relation", "tail")[picked.index(None)])
            item = [item[k] for k in picked]
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            got = f"{len(item)} fields" if isinstance(item, (list, tuple)) else type(item).__name__
            raise GraphFormatError(f"malformed triple: expected [head, relation, tail], got {got}", file=file, record=i)
        triples.append(tuple(_text(v, file, f, record=i) for v, f in zip(item, ("head", "relation", "tail"))))
    return _triples_graph(triples, file, limits, name)


def _triples_graph(triples: list, file: str, limits: Limits, name: str) -> TextualGraph:
    g = TextualGraph.from_triples(triples, name=name)
    limits.check_counts(g.num_nodes, g.num_edges, file)
    return g


# ------------------------------------------------------------------ ExplaGraphs
def parse_explagraphs_graph(text: str, name: str = "", *, file: str | None = None, line: int | None = None,
                            record: int | None = None, meta: dict | None = None) -> TextualGraph:
    """``(h; r; t)(h; r; t)...`` -> graph, lower-cased and stripped as the GraphQA benchmark does.

    Stricter than the benchmark's regex: text outside parentheses, a nested or unclosed ``(``, a triple
    without exactly two ``;`` or with an empty part is a :class:`GraphFormatError` naming the triple (1-based).
    """
    triples: list[tuple[str, str, str]] = []
    i, n = 0, len(text)

    def fail(msg: str) -> None:
        raise GraphFormatError(f"triple {len(triples) + 1}: {msg}", file=file, line=line, record=record, field="graph")

    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        if text[i] != "(":
            fail(f"unbalanced parentheses: unexpected ')' at character {i + 1}" if text[i] == ")" else
                 f"expected '(' at character {i + 1}, found {text[i]!r}")
        close, nested = text.find(")", i + 1), text.find("(", i + 1)
        if close < 0:
            fail(f"unbalanced parentheses: '(' at character {i + 1} is never closed")
        if 0 <= nested < close:
            fail(f"unbalanced parentheses: '(' at character {i + 1} is not closed before the next '('")
        parts = text[i + 1:close].split(";")
        if len(parts) != 3:
            fail(f"expected '(head; relation; tail)' with 2 ';', found {len(parts) - 1} in '{text[i:close + 1]}'")
        h, r, t = (p.lower().strip() for p in parts)
        for value, role in ((h, "head"), (r, "relation"), (t, "tail")):
            if not value:
                fail(f"empty {role} in '{text[i:close + 1]}'")
        triples.append((h, r, t))
        i = close + 1
    if not triples:
        raise GraphFormatError("no triples in the graph string", file=file, line=line, record=record, field="graph")
    return TextualGraph.from_triples(triples, name=name, meta=meta)


# ------------------------------------------------------------------ detection + entry points
def _sniff(text: str, file: str) -> tuple[str, Any]:
    """(format, parsed JSON or None) from content; see :func:`detect_format`."""
    s = text.lstrip()
    if file.lower().endswith(".json") or s[:1] in ("[", "{"):
        data = _json(text, file)
        first = data[0] if isinstance(data, list) and data else data
        if isinstance(first, dict) and ("edges" in first or "nodes" in first):
            return "webqsp", data
        return "triples", data
    if s.startswith("("):
        return "explagraphs", None
    first_line = s.split("\n", 1)[0].lower()
    if _pair_role(first_line):
        return "csv-pair", None
    if "graph" in {c.strip() for c in first_line.split("\t")}:
        return "explagraphs", None
    return "triples", None


def detect_format(path: str | os.PathLike) -> str:
    """The format :func:`load_graph` would use for ``format="auto"``.

    Rules, in order: a directory is ``csv-pair``; a ``.json`` name or content starting with ``[``/``{`` is
    parsed as JSON: ``webqsp`` if it (or its first element) is an object with ``edges``/``nodes``, else
    ``triples``; content starting with ``(`` is ``explagraphs``; a CSV header with ``node_id,node_attr`` or
    ``src,edge_attr,dst`` is ``csv-pair``; a tab-separated header with a ``graph`` column is ``explagraphs``;
    anything else is a ``triples`` table (tab-separated if the name ends ``.tsv`` or line 1 has a tab, else CSV).
    """
    p = Path(path)
    if p.is_dir():
        return "csv-pair"
    return _sniff(_read(p, Limits()), str(p))[0]


def _from_text(text: str, file: str, fmt: str, record: int | str | None, limits: Limits, name: str) -> TextualGraph:
    parsed = None
    if fmt == "auto":
        fmt, parsed = _sniff(text, file)
    if fmt == "triples":
        s = text.lstrip()
        if parsed is None and (file.lower().endswith(".json") or s[:1] in ("[", "{")):
            parsed = _json(text, file)
        return (_triples_from_json(parsed, file, limits, name) if parsed is not None
                else _triples_from_table(text, file, limits, name))
    if fmt == "webqsp":
        from .datasets import webqsp_from_json  # late import: datasets imports this module

        return webqsp_from_json(_json(text, file) if parsed is None else parsed, file, record, limits)
    if fmt == "explagraphs":
        from .datasets import explagraphs_from_text

        return explagraphs_from_text(text, file, None if record is None else int(record), name)
    if fmt == "csv-pair":
        raise GraphFormatError("csv-pair needs two files (nodes.csv and edges.csv): use load_graph on the "
                               "folder or load_csv_pair_from_bytes", file=file)
    raise ValueError(f"unknown format {fmt!r}; expected 'auto' or one of {FORMATS}")


def load_graph(path: Any, format: str = "auto", *, max_nodes: int = 200_000, max_edges: int = 1_000_000,
               max_bytes: int = 200_000_000, nodes_path: str | os.PathLike | None = None,
               record: int | str | None = None) -> TextualGraph:
    """Load a graph file (or a csv-pair folder); a ``networkx`` graph object is converted directly.

    ``record`` picks the ExplaGraphs TSV row (0-based) or the WebQSP record (index or ``id``); default 0.
    """
    if hasattr(path, "nodes") and hasattr(path, "edges") and not isinstance(path, (str, os.PathLike)):
        return TextualGraph.from_networkx(path)
    if format == "networkx":
        raise ValueError("format 'networkx' is not a file format: pass the networkx graph itself")
    limits, p = Limits(max_nodes, max_edges, max_bytes), Path(path)
    if not p.exists():
        raise GraphFormatError("file not found", file=str(p))
    if format == "csv-pair" or (format == "auto" and (p.is_dir() or _sniff_csv_pair(p))):
        npath, epath = _csv_pair_paths(p, nodes_path)
        name = p.name if p.is_dir() else npath.stem
        return parse_csv_pair(_read(npath, limits), _read(epath, limits), str(npath), str(epath), limits, name)
    return _from_text(_read(p, limits), str(p), format, record, limits, p.stem)


def load_graph_from_text(text: str, format: str = "auto", name: str = "pasted", *, record: int | str | None = None,
                         max_nodes: int = 200_000, max_edges: int = 1_000_000,
                         max_bytes: int = 200_000_000) -> TextualGraph:
    """Pasted text -> graph; ``name`` is used as the file name in error messages."""
    limits = Limits(max_nodes, max_edges, max_bytes)
    if not text.strip():
        raise GraphFormatError("text is empty", file=name)
    limits.check_bytes(len(text.encode("utf-8", "surrogatepass")), name)
    return _from_text(text, name, format, record, limits, name)


def load_graph_from_bytes(data: bytes, filename: str, format: str = "auto", *, record: int | str | None = None,
                          max_nodes: int = 200_000, max_edges: int = 1_000_000,
                          max_bytes: int = 200_000_000) -> TextualGraph:
    """An uploaded file (bytes + its name) -> graph. A csv pair needs :func:`load_csv_pair_from_bytes`."""
    limits = Limits(max_nodes, max_edges, max_bytes)
    return _from_text(_decode(data, filename, limits), filename, format, record, limits, Path(filename).stem)
