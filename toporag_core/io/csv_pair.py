"""G-Retriever's node/edge CSV pair: ``nodes.csv`` (``node_id,node_attr``) + ``edges.csv`` (``src,edge_attr,dst``).

Node ids are matched as stripped strings; node/edge texts are kept verbatim (not stripped).
A pair is two files, so it loads from a path (a folder, or either file of the pair) or from two
uploads (:func:`load_csv_pair_from_bytes`); detection looks at a file's header line.
"""
from __future__ import annotations

import os
from array import array
from pathlib import Path
from typing import Iterable

import numpy as np

from ..graph import GraphFormatError, TextualGraph
from .formats import GraphFormat, Source, register_format
from .text import HEAD_BYTES, CsvRecords, Limits, bytes_chunks, check_path, file_chunks, iter_byte_lines, iter_lines, \
    near_match, require_columns, row_cell, text_field


def _header(reader: CsvRecords, file: str, required: tuple[str, ...]):
    it = iter(reader)
    first = next(it, None)
    if first is None:
        raise GraphFormatError("file is empty", file=file)
    hl, header = first
    reader.columns = [h.strip() for h in header]
    return it, header, require_columns(header, hl, file, required)


def parse_csv_pair(nodes_text: str | Iterable[str], edges_text: str | Iterable[str], nodes_name: str = "nodes.csv",
                   edges_name: str = "edges.csv", limits: Limits = Limits(), name: str = "") -> TextualGraph:
    """G-Retriever's node/edge CSV pair -> graph; ``node_ids`` keeps the ids. Each file is a text or a stream
    of lines (read record by record, limits checked as it goes)."""
    def lines(t):
        return iter_lines(t) if isinstance(t, str) else t

    body, header, c = _header(CsvRecords(lines(nodes_text), nodes_name, ",", limits.max_text_chars), nodes_name,
                              ("node_id", "node_attr"))
    ids: dict[str, int] = {}
    texts: list[str] = []
    mx = limits.max_text_chars
    for line, row in body:
        nid = text_field(row_cell(row, c["node_id"], len(header), line, nodes_name), nodes_name, "node_id", line=line,
                         max_chars=mx)
        if nid in ids:
            raise GraphFormatError(f"duplicate node id '{nid}'", file=nodes_name, line=line, field="node_id")
        ids[nid] = len(texts)
        texts.append(text_field(row[c["node_attr"]], nodes_name, "node_attr", line=line, strip=False, max_chars=mx))
        if len(texts) > limits.max_nodes:
            limits.check_counts(len(texts), 0, nodes_name, line=line)
    if not texts:
        raise GraphFormatError("the graph has no nodes (only a header)", file=nodes_name)
    body, header, c = _header(CsvRecords(lines(edges_text), edges_name, ",", mx), edges_name,
                              ("src", "edge_attr", "dst"))
    src, dst, rel = array("q"), array("q"), []
    for line, row in body:
        ends = []
        for key in ("src", "dst"):
            nid = text_field(row_cell(row, c[key], len(header), line, edges_name), edges_name, key, line=line)
            if nid not in ids:
                raise GraphFormatError(f"unknown node id '{nid}' (not in {nodes_name})", file=edges_name,
                                       line=line, field=key)
            ends.append(ids[nid])
        src.append(ends[0])
        dst.append(ends[1])
        rel.append(text_field(row[c["edge_attr"]], edges_name, "edge_attr", line=line, strip=False, max_chars=mx))
        if len(rel) > limits.max_edges:
            limits.check_counts(len(texts), len(rel), edges_name, line=line)
    ei = np.stack([np.frombuffer(src, np.int64), np.frombuffer(dst, np.int64)]) if rel else np.zeros((2, 0), np.int64)
    return TextualGraph(node_text=texts, edge_index=ei, edge_text=rel, node_ids=list(ids),
                        name=name or Path(nodes_name).stem)


def load_csv_pair_from_bytes(nodes_bytes: bytes, edges_bytes: bytes, nodes_name: str = "nodes.csv",
                             edges_name: str = "edges.csv", *, max_nodes: int = 200_000, max_edges: int = 1_000_000,
                             max_bytes: int = 200_000_000) -> TextualGraph:
    """Two uploaded files (bytes + names, as Streamlit gives them) -> graph."""
    limits = Limits(max_nodes, max_edges, max_bytes)
    for data, file in ((nodes_bytes, nodes_name), (edges_bytes, edges_name)):
        limits.check_bytes(len(data), file)
    return parse_csv_pair(iter_byte_lines(bytes_chunks(nodes_bytes), nodes_name),
                          iter_byte_lines(bytes_chunks(edges_bytes), edges_name), nodes_name, edges_name, limits)


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
    cols = [c.strip().lower() for c in first_line.split(",")]
    for role, names in (("nodes", ("node_id", "node_attr")), ("edges", ("src", "edge_attr", "dst"))):
        exact = [n in cols for n in names]
        # every column there, or misspelt (then loading says which column it expected: "did you mean")
        if any(exact) and all(e or near_match(n, cols) for n, e in zip(names, exact)):
            return role
    return None


def _sniff_csv_pair(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            return _pair_role(f.readline(HEAD_BYTES))  # bounded: a one-line 200 MB JSON is not a header
    except OSError:
        return None


def load_csv_pair_path(path: Path, limits: Limits, options: dict | None = None) -> TextualGraph:
    """A csv-pair folder, or either file of the pair (the other is found by name, or ``options["nodes_path"]``)."""
    npath, epath = _csv_pair_paths(path, (options or {}).get("nodes_path"))
    name = path.name if path.is_dir() else npath.stem
    for p in (npath, epath):
        check_path(p)
        limits.check_bytes(p.stat().st_size, str(p))
    return parse_csv_pair(iter_byte_lines(file_chunks(npath), str(npath)),
                          iter_byte_lines(file_chunks(epath), str(epath)), str(npath), str(epath), limits, name)


def _from_text(src: Source, record=None) -> TextualGraph:
    raise GraphFormatError("csv-pair needs two files (nodes.csv and edges.csv): use load_graph on the "
                           "folder or load_csv_pair_from_bytes", file=src.file)


register_format(GraphFormat(
    name="csv-pair", label="G-Retriever nodes.csv + edges.csv", load=_from_text,
    detect=lambda s: not s.is_json and _pair_role(s.first_line.lower()) is not None,
    extensions=("csv",), priority=50, load_path=load_csv_pair_path,
    detect_path=lambda p: p.is_dir() or _sniff_csv_pair(p) is not None,
    help="two files: nodes.csv (node_id,node_attr) and edges.csv (src,edge_attr,dst); a folder or either file"))
