"""Triples: a TSV/CSV table ``head,relation,tail`` or a JSON list of triples.

The table's header may name the columns ``head,relation,tail`` (aliases ``subject/predicate/object``,
``source/src``, ``target/dst``, ``edge_attr``); without a recognised header the table has 3 columns.
JSON: a list of ``[head, relation, tail]`` or of ``{"head", "relation", "tail"}`` objects. Nodes are
identified by their stripped text; relation text is stripped. This is the fallback format of
auto-detection. A table read without a header says so: a warning in ``meta["warnings"]`` and
``meta["headerless"] = True`` (the app asks before such a read replaces a loaded graph).
"""
from __future__ import annotations

from array import array
from typing import Any, Iterable

import numpy as np

from ..graph import GraphFormatError, TextualGraph
from .formats import GraphFormat, Source, register_format
from .text import CsvRecords, Limits, delimiter_of, near_match, stream_json_list, text_field

HEAD = {"head", "subject", "source", "src"}
REL = {"relation", "predicate", "edge_attr", "rel"}
TAIL = {"tail", "object", "target", "dst"}
ROLES = (("head", HEAD), ("relation", REL), ("tail", TAIL))
NO_HEADER = "line 1 read as data: no header recognised (a header is head,relation,tail or an alias)"


class TripleBuilder:
    """Triples -> :class:`TextualGraph`, one at a time, with the limits checked at every triple.

    Memory stays bounded by what was kept when a limit trips: node texts (<= ``max_nodes``), two int64
    arrays and the relation texts (repeated relations share one string).
    """

    def __init__(self, file: str, limits: Limits, name: str) -> None:
        self.file, self.limits, self.name = file, limits, name
        self.index: dict[str, int] = {}
        self.src, self.dst = array("q"), array("q")
        self.rel: list[str] = []
        self._pool: dict[str, str] = {}

    def add(self, h: str, r: str, t: str, line: int | None = None, record: int | None = None) -> None:
        index = self.index
        self.src.append(index.setdefault(h, len(index)))
        self.dst.append(index.setdefault(t, len(index)))
        pool = self._pool
        r = pool.get(r) or (pool.setdefault(r, r) if len(pool) < 65536 else r)
        self.rel.append(r)
        lim = self.limits
        if len(index) > lim.max_nodes or len(self.rel) > lim.max_edges:
            lim.check_counts(len(index), len(self.rel), self.file, line=line, record=record)

    def graph(self, meta: dict | None = None) -> TextualGraph:
        ei = np.stack([np.frombuffer(self.src, np.int64), np.frombuffer(self.dst, np.int64)]) if self.rel \
            else np.zeros((2, 0), np.int64)
        return TextualGraph(node_text=list(self.index), edge_index=ei, edge_text=self.rel, name=self.name,
                            meta=dict(meta or {}))


def header_columns(cells: list[str], file: str, line: int = 1) -> tuple[int, int, int] | None:
    """Column indices (head, relation, tail) when line 1 is a header; ``None`` when it is data.

    Line 1 is a header when every role has a recognised name. When two or more cells are names or
    near misses (``relaton``) but a role is missing, it is a header with a mistake: an error naming
    the expected columns and the near match. Fewer (``cup,on,table``, ``foo,bar,baz``): data.
    """
    head = [c.strip().lower() for c in cells]
    found = [next((i for i, h in enumerate(head) if h in names), None) for _, names in ROLES]
    if None not in found:
        return tuple(found)  # type: ignore[return-value]
    known = HEAD | REL | TAIL
    near = {i: near_match(h, known) for i, h in enumerate(head) if h and h not in known}
    near = {i: m for i, m in near.items() if m}
    if sum(h in known for h in head) + len(near) < 2:
        return None
    expected = "expected a header naming head, relation and tail (" + "; ".join(
        f"{role}: {', '.join(sorted(names))}" for role, names in ROLES) + ")"
    if near:
        i, m = next(iter(near.items()))
        raise GraphFormatError(f"header not recognised: unknown column '{cells[i].strip()}', did you mean '{m}'? "
                               f"{expected}", file=file, line=line, field=cells[i].strip())
    role = ROLES[found.index(None)][0]
    raise GraphFormatError(f"header not recognised: no {role} column; {expected}", file=file, line=line,
                          field=role)


def _triples_from_table(lines: Iterable[str], delimiter: str, file: str, limits: Limits,
                        name: str) -> TextualGraph:
    reader = CsvRecords(lines, file, delimiter, limits.max_text_chars)
    b = TripleBuilder(file, limits, name)
    cols, width, first, warnings = (0, 1, 2), 3, True, []
    for line, row in reader:
        if first:
            first = False
            found = header_columns(row, file, line)
            if found is not None:
                cols, width = found, len(row)
                reader.columns = [c.strip() for c in row]
                continue
            reader.columns = ["head", "relation", "tail"]
            warnings.append(NO_HEADER.replace("line 1", f"line {line}"))
        if len(row) != width:
            raise GraphFormatError(f"malformed triple: expected {width} fields (head, relation, tail), got {len(row)}",
                                   file=file, line=line)
        h, r, t = (text_field(row[i], file, f, line=line, max_chars=limits.max_text_chars)
                   for i, f in zip(cols, ("head", "relation", "tail")))
        b.add(h, r, t, line=line)
    if not b.rel:
        raise GraphFormatError("no triples (only a header)" if not first else "no triples", file=file)
    return b.graph({"warnings": warnings, "headerless": True} if warnings else None)


def _triple_of(item: Any, i: int, file: str, limits: Limits) -> tuple[str, str, str]:
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
    return tuple(text_field(v, file, f, record=i, max_chars=limits.max_text_chars)  # type: ignore[return-value]
                 for v, f in zip(item, ("head", "relation", "tail")))


def _triples_from_json(src: Source) -> TextualGraph:
    file, limits = src.file, src.limits
    # decoded one item at a time, from the file or bytes piece by piece: limits trip before the list is built
    items = stream_json_list(src.pieces(), file)
    if items is None:
        src.json  # noqa: B018  (a syntax error is reported as such)
        raise GraphFormatError("expected a non-empty JSON list of [head, relation, tail]", file=file)
    b = TripleBuilder(file, limits, src.name)
    for i, item in enumerate(items):
        b.add(*_triple_of(item, i, file, limits), record=i)
    if not b.rel:
        raise GraphFormatError("expected a non-empty JSON list of [head, relation, tail]", file=file)
    return b.graph()


def load_triples(src: Source, record=None) -> TextualGraph:
    if src.is_json:
        return _triples_from_json(src)
    return _triples_from_table(src.lines(), delimiter_of(src.head, src.file), src.file, src.limits, src.name)


register_format(GraphFormat(
    name="triples", label="Triples (CSV/TSV table or JSON list)", load=load_triples, detect=lambda s: True,
    extensions=("csv", "tsv", "txt", "json"), priority=100,
    help="head,relation,tail rows (CSV/TSV, header optional) or a JSON list of [head, relation, tail]"))
