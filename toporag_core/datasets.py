"""Dataset readers for the benchmark data in ``../shared/data`` (ExplaGraphs TSV, WebQSP sample JSON).

Rows are returned as plain dicts so callers (training, evaluation, the app) choose which graphs to
parse; graph parsing itself lives in :mod:`toporag_core.io`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .graph import GraphFormatError, TextualGraph
from .io import Limits, _columns, _json, _read, _rows, _text, parse_explagraphs_graph

__all__ = ["read_explagraphs", "explagraphs_question", "explagraphs_row_to_graph", "explagraphs_split",
           "explagraphs_from_text", "read_webqsp", "webqsp_record_to_graph", "webqsp_from_json", "shared_data_dir"]

EXPLAGRAPHS_FILE = "expla_graphs_train_dev.tsv"
WEBQSP_FILE = "webqsp_sample.json"


def shared_data_dir() -> Path | None:
    """``$TOPORAG_SHARED_DATA`` if set, else ``<repo root>/../shared/data`` if it exists, else ``None``.

    The repo root is the parent of the ``toporag_core`` package folder.
    """
    env = os.environ.get("TOPORAG_SHARED_DATA")
    if env:
        return Path(env)
    d = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return d if d.is_dir() else None


# ------------------------------------------------------------------ ExplaGraphs
def read_tsv_records(text: str, file: str, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """A headed TSV -> ``[(line, {column: cell})]``; checks the required columns and the field count."""
    rows = _rows(text, file, "\t")
    if not rows:
        raise GraphFormatError("file is empty", file=file)
    (hl, header), body = rows[0], rows[1:]
    _columns(header, hl, file, required)
    names = [c.strip().lower() for c in header]
    out = []
    for line, row in body:
        if len(row) != len(names):
            raise GraphFormatError(f"expected {len(names)} tab-separated fields, got {len(row)}", file=file, line=line)
        out.append((line, dict(zip(names, row))))
    return out


def read_explagraphs(path: str | os.PathLike) -> list[dict[str, Any]]:
    """ExplaGraphs TSV (header ``arg1 arg2 label graph``) -> rows.

    Each row: ``{"id": row index (0-based), "arg1", "arg2", "label", "graph": raw triple string,
    "line": 1-based line in the file}``. Quoting follows the CSV rules (as ``pandas.read_csv`` does), so
    ``"The ""three strikes"" law"`` reads as ``The "three strikes" law``. Graphs are not parsed here.
    """
    file = str(path)
    records = read_tsv_records(_read(Path(path), Limits()), file, ("arg1", "arg2", "label", "graph"))
    return [_row(i, line, r) for i, (line, r) in enumerate(records)]


def _row(i: int, line: int, r: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": i, **{k: r[k] for k in ("arg1", "arg2") if k in r}}
    if "label" in r:
        row["label"] = r["label"].strip()
    return {**row, "graph": r["graph"], "line": line}


def explagraphs_question(arg1: str, arg2: str) -> str:
    """The GraphQA benchmark prompt for one ExplaGraphs row."""
    return (f"Argument 1: {arg1}\nArgument 2: {arg2}\nQuestion: Do argument 1 and argument 2 support or counter "
            "each other? Answer in one word in the form of 'support' or 'counter'.\n\nAnswer:")


def explagraphs_row_to_graph(row: dict[str, Any], file: str | None = None) -> TextualGraph:
    """A :func:`read_explagraphs` row -> graph with ``meta`` = id, arg1, arg2, label, question."""
    meta = {k: row[k] for k in ("id", "arg1", "arg2", "label") if k in row}
    if "arg1" in row and "arg2" in row:
        meta["question"] = explagraphs_question(row["arg1"], row["arg2"])
    return parse_explagraphs_graph(row["graph"], name=f"explagraphs[{row.get('id', '')}]", file=file,
                                   line=row.get("line"), meta=meta)


def explagraphs_from_text(text: str, file: str, record: int | None = None, name: str = "") -> TextualGraph:
    """An ExplaGraphs file's text -> graph: a bare ``(h; r; t)...`` string, or row ``record`` (0-based,
    default 0) of a TSV with a ``graph`` column (``arg1``/``arg2``/``label`` optional, kept in ``meta``)."""
    if text.lstrip().startswith("("):
        return parse_explagraphs_graph(text, name=name, file=file)
    rows = read_tsv_records(text, file, ("graph",))
    idx = 0 if record is None else int(record)
    if not 0 <= idx < len(rows):
        raise GraphFormatError(f"row {idx} out of range (file has {len(rows)} rows)", file=file, record=idx)
    g = explagraphs_row_to_graph(_row(idx, *rows[idx]), file=file)
    g.name = f"{name or Path(file).stem}[{idx}]"
    return g


def explagraphs_split(n: int, seed: int = 42) -> tuple[list[int], list[int], list[int]]:
    """The 60/20/20 split: ``perm = numpy.random.default_rng(seed).permutation(n)``; train = the first
    ``int(0.6 n)``, val = the next ``int(0.2 n)``, test = the rest. For n = 2,766: 1,659 / 553 / 554."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    perm = np.random.default_rng(seed).permutation(n).tolist()
    a, b = int(0.6 * n), int(0.6 * n) + int(0.2 * n)
    return perm[:a], perm[a:b], perm[b:]


# ------------------------------------------------------------------ WebQSP
def read_webqsp(path: str | os.PathLike) -> list[dict[str, Any]]:
    """WebQSP JSON (one record or a list of records) -> list of record dicts (not yet graphs)."""
    file = str(path)
    data = _json(_read(Path(path), Limits()), file)
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
        nm = _text(v, file, f"nodes[{i}]", record=record, strip=False)
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
        h, r, t = (_text(v, file, f"edges[{j}][{k}]", record=record, strip=False) for k, v in enumerate(e))
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
