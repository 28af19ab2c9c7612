"""Entry points: a path, pasted text or uploaded bytes -> :class:`~toporag_core.graph.TextualGraph`.

``format="auto"`` asks the registry (:mod:`.formats`): multi-file formats first look at the
path itself (a csv-pair folder, a GQA scene file), then every format's ``detect`` rule looks
at the content in priority order (``triples`` is the fallback). ``record`` picks one record
of a multi-record file (ExplaGraphs TSV row, WebQSP record index or id, GQA image id).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..graph import GraphFormatError, TextualGraph
from .formats import GraphFormat, Source, detect_path, detect_source, get_format
from .text import Limits, decode, read_file


def _limits(max_nodes: int, max_edges: int, max_bytes: int) -> Limits:
    return Limits(max_nodes, max_edges, max_bytes)


def _resolve(src: Source, format: str) -> GraphFormat:
    return detect_source(src) if format == "auto" else get_format(format)


def detect_format(path: str | os.PathLike) -> str:
    """The format :func:`load_graph` would use for ``format="auto"`` (see the module docstring)."""
    p = Path(path)
    f = detect_path(p) if p.exists() else None
    if f is not None:
        return f.name
    return detect_source(Source(read_file(p, Limits()), str(p))).name


def load_graph(path: Any, format: str = "auto", *, max_nodes: int = 200_000, max_edges: int = 1_000_000,
               max_bytes: int = 200_000_000, nodes_path: str | os.PathLike | None = None,
               record: int | str | None = None) -> TextualGraph:
    """Load a graph file (or a multi-file format's folder); a ``networkx`` graph is converted directly."""
    if hasattr(path, "nodes") and hasattr(path, "edges") and not isinstance(path, (str, os.PathLike)):
        return TextualGraph.from_networkx(path)
    if format == "networkx":
        raise ValueError("format 'networkx' is not a file format: pass the networkx graph itself")
    limits, p = _limits(max_nodes, max_edges, max_bytes), Path(path)
    if not p.exists():
        raise GraphFormatError("file not found", file=str(p))
    fmt = detect_path(p) if format == "auto" else get_format(format)
    if fmt is not None and fmt.load_path is not None:
        return fmt.load_path(p, limits, {"record": record, "nodes_path": nodes_path})
    src = Source(read_file(p, limits), str(p), limits, p.stem)
    return (fmt or detect_source(src)).load(src, record)


def load_graph_from_text(text: str, format: str = "auto", name: str = "pasted", *, record: int | str | None = None,
                         max_nodes: int = 200_000, max_edges: int = 1_000_000,
                         max_bytes: int = 200_000_000) -> TextualGraph:
    """Pasted text -> graph; ``name`` is used as the file name in error messages."""
    limits = _limits(max_nodes, max_edges, max_bytes)
    if not text.strip():
        raise GraphFormatError("text is empty", file=name)
    limits.check_bytes(len(text.encode("utf-8", "surrogatepass")), name)
    src = Source(text, name, limits, name)
    return _resolve(src, format).load(src, record)


def load_graph_from_bytes(data: bytes, filename: str, format: str = "auto", *, record: int | str | None = None,
                          max_nodes: int = 200_000, max_edges: int = 1_000_000,
                          max_bytes: int = 200_000_000) -> TextualGraph:
    """An uploaded file (bytes + its name) -> graph. A csv pair needs :func:`load_csv_pair_from_bytes`."""
    limits = _limits(max_nodes, max_edges, max_bytes)
    src = Source(decode(data, filename, limits), filename, limits, Path(filename).stem)
    return _resolve(src, format).load(src, record)


def list_records(data: bytes | str, filename: str, format: str = "auto") -> tuple[str, list[str]]:
    """``(format name, record labels)`` of an upload or text: one label per record of a
    multi-record file (WebQSP list, ExplaGraphs TSV rows, GQA scenes), ``[]`` for a single graph."""
    limits = Limits()
    text = decode(data, filename, limits) if isinstance(data, bytes) else data
    src = Source(text, filename, limits, Path(filename).stem)
    fmt = _resolve(src, format)
    return fmt.name, (fmt.records(src) if fmt.records is not None else [])
