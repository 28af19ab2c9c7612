"""WebQSP records: ``{"id", "question", "q_entity", "answers", "nodes", "edges": [[h, r, t], ..]}``.

One record or a list of them (``record`` = list index or ``id``; default 0). Nodes are the names in
``"nodes"`` (exact, not stripped) in that order; a name used only in ``"edges"`` is **added** after
them (the count is in ``meta["nodes_from_edges"]``), so a record whose edges name an absent node
still loads.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..graph import GraphFormatError, TextualGraph
from .formats import GraphFormat, Source, register_format
from .text import Limits, parse_json, read_file, text_field

WEBQSP_FILE = "webqsp_sample.json"


def read_webqsp(path: str | os.PathLike) -> list[dict[str, Any]]:
    """WebQSP JSON (one record or a list of records) -> list of record dicts (not yet graphs)."""
    file = str(path)
    data = parse_json(read_file(Path(path), Limits()), file)
    records = [data] if isinstance(data, dict) else data
    if not isinstance(records, list):
        raise GraphFormatError("expected a WebQSP record or a list of records", file=file)
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise GraphFormatError(f"expected a JSON object, got {type(rec).__name__}", file=file, record=i)
        if "edges" not in rec:
            raise GraphFormatError("missing key 'edges'", file=file, record=i, field="edges")
    return records


def webqsp_record_to_graph(rec: Any, file: str | None = None, record: int | str | None = None,
                           limits: Limits = Limits()) -> TextualGraph:
    """One WebQSP record -> graph; ``meta`` keeps every key except ``nodes``/``edges``.

    Nodes are the names in ``rec["nodes"]`` in order (exact strings, not stripped; a duplicate is an error).
    A name used in ``rec["edges"]`` but absent from ``rec["nodes"]`` is *added* after them rather than
    rejected (Freebase subgraphs are sometimes pruned inconsistently); ``meta["nodes_from_edges"]`` counts them.
    Edges ``[h, r, t]`` keep their direction; parallel edges and self-loops are kept as given.
    """
    if not isinstance(rec, dict):
        raise GraphFormatError(f"expected a JSON object, got {type(rec).__name__}", file=file, record=record)
    nodes, edges = rec.get("nodes", []), rec.get("edges")
    for key, val in (("nodes", nodes), ("edges", edges)):
        if not isinstance(val, list):
            raise GraphFormatError(f"expected a list, got {type(val).__name__}", file=file, record=record, field=key)
    limits.check_counts(len(nodes), len(edges), file or "", record=record)
    index: dict[str, int] = {}
    for i, v in enumerate(nodes):
        nm = text_field(v, file, f"nodes[{i}]", record=record, strip=False)
        if nm in index:
            raise GraphFormatError(f"duplicate node name '{nm}' (first at nodes[{index[nm]}])", file=file,
                                   record=record, field=f"nodes[{i}]")
        index[nm] = i
    src, dst, rel = [], [], []
    for j, e in enumerate(edges):
        if not isinstance(e, (list, tuple)) or len(e) != 3:
            got = f"{len(e)} fields" if isinstance(e, (list, tuple)) else type(e).__name__
            raise GraphFormatError(f"malformed triple: expected [head, relation, tail], got {got}", file=file,
                                   record=record, field=f"edges[{j}]")
        h, r, t = (text_field(v, file, f"edges[{j}][{k}]", record=record, strip=False) for k, v in enumerate(e))
        src.append(index.setdefault(h, len(index)))
        dst.append(index.setdefault(t, len(index)))
        rel.append(r)
    limits.check_counts(len(index), len(rel), file or "", record=record)
    meta = {k: v for k, v in rec.items() if k not in ("nodes", "edges")}
    meta["nodes_from_edges"] = len(index) - len(nodes)
    return TextualGraph(node_text=list(index), edge_index=[src, dst], edge_text=rel,
                        name=str(rec.get("id", "") or f"{Path(file or 'webqsp').stem}[{record}]"), meta=meta)


def webqsp_from_json(data: Any, file: str, record: int | str | None = None, limits: Limits = Limits()) -> TextualGraph:
    """Parsed WebQSP JSON (a record or a list) -> the graph of ``record`` (list index or ``id``; default 0)."""
    if isinstance(data, dict):
        return webqsp_record_to_graph(data, file=file, record=record, limits=limits)
    if not isinstance(data, list) or not data:
        raise GraphFormatError("expected a WebQSP record or a non-empty list of records", file=file)
    if isinstance(record, str) and not record.isdigit():
        idx = next((i for i, r in enumerate(data) if isinstance(r, dict) and str(r.get("id")) == record), None)
        if idx is None:
            raise GraphFormatError(f"no record with id '{record}'", file=file, record=record, field="id")
    else:
        idx = 0 if record is None else int(record)
        if not 0 <= idx < len(data):
            raise GraphFormatError(f"record {idx} out of range (file has {len(data)})", file=file, record=idx)
    return webqsp_record_to_graph(data[idx], file=file, record=idx, limits=limits)


_RECORD_START = re.compile(r'\s*\[?\s*\{')


def _is_webqsp(src: Source) -> bool:
    """A JSON object (or a list starting with one) with ``"edges"``/``"nodes"`` in the first 64 KiB: read from
    the head only, so a big triples list is never parsed whole just to be told apart."""
    if not src.is_json:
        return False
    head = src.head
    return bool(_RECORD_START.match(head)) and ('"edges"' in head or '"nodes"' in head)


def _records(src: Source) -> list[str]:
    data = src.json
    recs = data if isinstance(data, list) else [data]
    return [f"{i}: {r.get('id', i)} - {str(r.get('question', ''))[:60]}" if isinstance(r, dict) else str(i)
            for i, r in enumerate(recs)]


register_format(GraphFormat(
    name="webqsp", label="WebQSP JSON record(s)", load=lambda s, record=None: webqsp_from_json(
        s.json, s.file, record, s.limits),
    detect=_is_webqsp, extensions=("json",), priority=20, records=_records,
    help="one WebQSP record or a list (--record picks one by index or id)"))
