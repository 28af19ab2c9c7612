"""Triples: a TSV/CSV table ``head,relation,tail`` or a JSON list of triples.

The table's header may name the columns ``head,relation,tail`` (aliases ``subject/predicate/object``,
``source/src``, ``target/dst``, ``edge_attr``); without a recognised header the table has 3 columns.
JSON: a list of ``[head, relation, tail]`` or of ``{"head", "relation", "tail"}`` objects. Nodes are
identified by their stripped text; relation text is stripped. This is the fallback format of
auto-detection.
"""
from __future__ import annotations

from typing import Any

from ..graph import GraphFormatError, TextualGraph
from .formats import GraphFormat, Source, register_format
from .text import Limits, csv_rows, delimiter_of, text_field

HEAD = {"head", "subject", "source", "src"}
REL = {"relation", "predicate", "edge_attr", "rel"}
TAIL = {"tail", "object", "target", "dst"}


def _triples_from_table(text: str, file: str, limits: Limits, name: str) -> TextualGraph:
    rows = csv_rows(text, file, delimiter_of(text, file))
    cols = (0, 1, 2)
    width = 3
    head = [c.strip().lower() for c in rows[0][1]] if rows else []
    if any(h in HEAD for h in head) and any(h in REL for h in head) and any(h in TAIL for h in head):
        cols = tuple(next(i for i, h in enumerate(head) if h in s) for s in (HEAD, REL, TAIL))
        width = len(head)
        rows = rows[1:]
    triples = []
    for line, row in rows:
        if len(row) != width:
            raise GraphFormatError(f"malformed triple: expected {width} fields (head, relation, tail), got {len(row)}",
                                   file=file, line=line)
        triples.append(tuple(text_field(row[i], file, f, line=line)
                             for i, f in zip(cols, ("head", "relation", "tail"))))
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
            picked = [next((keys[k] for k in s if k in keys), None) for s in (HEAD, REL, TAIL)]
            if None in picked:
                raise GraphFormatError("object needs keys head, relation, tail", file=file, record=i,
                                       field=("head", "relation", "tail")[picked.index(None)])
            item = [item[k] for k in picked]
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            got = f"{len(item)} fields" if isinstance(item, (list, tuple)) else type(item).__name__
            raise GraphFormatError(f"malformed triple: expected [head, relation, tail], got {got}", file=file, record=i)
        triples.append(tuple(text_field(v, file, f, record=i) for v, f in zip(item, ("head", "relation", "tail"))))
    return _triples_graph(triples, file, limits, name)


def _triples_graph(triples: list, file: str, limits: Limits, name: str) -> TextualGraph:
    g = TextualGraph.from_triples(triples, name=name)
    limits.check_counts(g.num_nodes, g.num_edges, file)
    return g


def load_triples(src: Source, record=None) -> TextualGraph:
    if src.is_json:
        return _triples_from_json(src.json, src.file, src.limits, src.name)
    return _triples_from_table(src.text, src.file, src.limits, src.name)


register_format(GraphFormat(
    name="triples", label="Triples (CSV/TSV table or JSON list)", load=load_triples, detect=lambda s: True,
    extensions=("csv", "tsv", "txt", "json"), priority=100,
    help="head,relation,tail rows (CSV/TSV, header optional) or a JSON list of [head, relation, tail]"))
