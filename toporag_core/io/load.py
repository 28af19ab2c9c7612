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
from .text import HEAD_BYTES, Limits, check_path, decode

#: The one rule for an empty graph, in every format: a graph needs at least one node (a graph of
#: isolated nodes, with no edge, is valid). A header-only CSV, a WebQSP record with no nodes and
#: no edges, or an empty triples list are rejected at load, naming the file.
EMPTY_GRAPH = "the graph has no nodes (every format needs at least one node)"


def _limits(max_nodes: int, max_edges: int, max_bytes: int) -> Limits:
    return Limits(max_nodes, max_edges, max_bytes)


def _resolve(src: Source, format: str) -> GraphFormat:
    return detect_source(src) if format == "auto" else get_format(format)


def _check_not_empty(src: Source, size: int) -> None:
    """A small input is decoded now (strict UTF-8, not all space); a big one as it is streamed."""
    if size <= HEAD_BYTES:
        src.text  # noqa: B018  (decode() raises "file is empty" / "not UTF-8: byte ... at byte offset N")


def finish(load: Any, file: str) -> TextualGraph:
    """Run ``load()``; a :class:`GraphFormatError` without a file gets ``file``; a graph with no nodes is
    rejected (:data:`EMPTY_GRAPH`). Every entry point, so every format, goes through here."""
    try:
        graph = load()
    except GraphFormatError as e:
        if e.file:
            raise
        raise GraphFormatError(e.reason, file=file, line=e.line, record=e.record, field=e.field) from None
    if isinstance(graph, TextualGraph) and graph.num_nodes == 0:
        raise GraphFormatError(EMPTY_GRAPH, file=file)
    return graph


def detect_format(path: str | os.PathLike) -> str:
    """The format :func:`load_graph` would use for ``format="auto"`` (see the module docstring)."""
    p = Path(path)
    if not p.is_dir():
        check_path(p)
    f = detect_path(p)
    if f is not None:
        return f.name
    return detect_source(Source(path=p, file=str(p))).name


def load_graph(path: Any, format: str = "auto", *, max_nodes: int = 200_000, max_edges: int = 1_000_000,
               max_bytes: int = 200_000_000, nodes_path: str | os.PathLike | None = None,
               record: int | str | None = None) -> TextualGraph:
    """Load a graph file (or a multi-file format's folder); a ``networkx`` graph is converted directly."""
    if hasattr(path, "nodes") and hasattr(path, "edges") and not isinstance(path, (str, os.PathLike)):
        return TextualGraph.from_networkx(path)
    if format == "networkx":
        raise ValueError("format 'networkx' is not a file format: pass the networkx graph itself")
    limits, p = _limits(max_nodes, max_edges, max_bytes), Path(path)
    if not p.is_dir():
        check_path(p)  # missing, a symlink loop, unreadable: each said as such
        limits.check_bytes(p.stat().st_size, str(p))
    fmt = detect_path(p) if format == "auto" else get_format(format)
    if fmt is not None and fmt.load_path is not None:
        return finish(lambda: fmt.load_path(p, limits, {"record": record, "nodes_path": nodes_path}), str(p))
    src = Source(path=p, file=str(p), limits=limits, name=p.stem)
    _check_not_empty(src, p.stat().st_size)
    return finish(lambda: (fmt or detect_source(src)).load(src, record), str(p))


def load_graph_from_text(text: str, format: str = "auto", name: str = "pasted", *, record: int | str | None = None,
                         max_nodes: int = 200_000, max_edges: int = 1_000_000,
                         max_bytes: int = 200_000_000) -> TextualGraph:
    """Pasted text -> graph; ``name`` is used as the file name in error messages."""
    limits = _limits(max_nodes, max_edges, max_bytes)
    if not text.strip():
        raise GraphFormatError("text is empty", file=name)
    limits.check_bytes(len(text.encode("utf-8", "surrogatepass")), name)
    src = Source(text, name, limits, name)
    return finish(lambda: _resolve(src, format).load(src, record), name)


def load_graph_from_bytes(data: bytes, filename: str, format: str = "auto", *, record: int | str | None = None,
                          max_nodes: int = 200_000, max_edges: int = 1_000_000,
                          max_bytes: int = 200_000_000) -> TextualGraph:
    """An uploaded file (bytes + its name) -> graph. A csv pair needs :func:`load_csv_pair_from_bytes`."""
    limits = _limits(max_nodes, max_edges, max_bytes)
    limits.check_bytes(len(data), filename)
    src = Source(file=filename, limits=limits, name=Path(filename).stem, data=data)  # streamed, not decoded whole
    _check_not_empty(src, len(data))
    return finish(lambda: _resolve(src, format).load(src, record), filename)


def list_records(data: bytes | str, filename: str, format: str = "auto") -> tuple[str, list[str]]:
    """``(format name, record labels)`` of an upload or text: one label per record of a
    multi-record file (WebQSP list, ExplaGraphs TSV rows, GQA scenes), ``[]`` for a single graph."""
    limits = Limits()
    text = decode(data, filename, limits) if isinstance(data, bytes) else data
    src = Source(text, filename, limits, Path(filename).stem)
    fmt = _resolve(src, format)
    return fmt.name, (fmt.records(src) if fmt.records is not None else [])
