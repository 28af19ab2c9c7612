"""A triple store on DuckDB for knowledge graphs too big to lift whole.

Real KGQA systems never lift Freebase: they link the question's entities, cut out a small
neighbourhood and reason on that. :class:`KGStore` does the same over an on-disk DuckDB file
(embedded, no server):

* **import** (:meth:`KGStore.create`): CSV / TSV (``head, relation, tail``; an optional header
  line ``head,relation,tail`` or ``subject,predicate,object``) or Parquet (columns ``head``,
  ``relation``, ``tail``), millions of triples read by DuckDB's own readers. Bad input raises
  :class:`~toporag_core.graph.GraphFormatError` naming the file, the line (CSV: 1-based line of
  the file; Parquet: 1-based row) and the field. Tables::

      entities(id INTEGER, name VARCHAR, norm VARCHAR)   -- ids 0..n-1, names sorted
      triples(h INTEGER, r VARCHAR, t INTEGER)
      tokens(token VARCHAR, id INTEGER)                  -- words of normalised names (fuzzy linking)

* **k-hop extraction** (:meth:`KGStore.k_hop_nodes`, :meth:`KGStore.subgraph`): the nodes within
  ``k`` hops of the seed entities, edges followed in *both* directions (a hop is one triple), and
  the subgraph **induced** on them (every triple whose head and tail are both within ``k`` hops),
  as a :class:`~toporag_core.graph.TextualGraph`. Each hop is one semi-join of the triple table with
  the frontier. ``max_nodes`` stops before a hop that would exceed it (``hops_done`` says how far
  it got), so a hub entity cannot pull in half the graph.

Entity linking lives in :mod:`toporag_core.kg.link`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..graph import GraphFormatError, TextualGraph
from ..retrieval.seeds import relation_words

TRIPLE_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet")  # what KGStore.create imports
HEADERS = ({"head", "relation", "tail"}, {"subject", "predicate", "object"}, {"h", "r", "t"})


def normalize_name(text: str) -> str:
    """Lower case, punctuation to spaces, single spaces: the form names are matched in."""
    return " ".join(re.findall(r"[a-z0-9]+", str(text).lower()))


NORM_SQL = "trim(regexp_replace(regexp_replace(lower({x}), '[^a-z0-9]+', ' ', 'g'), ' +', ' ', 'g'))"


def _sql_str(s: str) -> str:
    return "'" + str(s).replace("'", "''") + "'"


@dataclass
class Neighbourhood:
    """The result of a k-hop extraction: the graph, its seed nodes (indices into the graph) and how far it got."""

    graph: TextualGraph
    seeds: list[int]
    hops: int
    hops_done: int
    truncated: bool


class KGStore:
    """A DuckDB triple store (see the module docstring). Open an existing one with ``KGStore(path)``."""

    def __init__(self, path: str | os.PathLike, read_only: bool = True) -> None:
        import duckdb

        self.path = Path(path)
        self._longest: int | None = None
        self._relation_words: frozenset[str] | None = None
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no such knowledge-graph store (create one with `toporag kg import`)")
        if self.path.suffix.lower() in TRIPLE_SUFFIXES:
            raise ValueError(f"{self.path}: a triple file, not a store (import it first: `toporag kg import`)")
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
            have = {r[0] for r in self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        except duckdb.Error as e:
            raise ValueError(f"{self.path}: not a DuckDB knowledge-graph store ({str(e).splitlines()[0]})") from None
        if not {"entities", "triples", "tokens"} <= have:
            self.con.close()
            raise ValueError(f"{self.path}: not a toporag knowledge-graph store (tables entities/triples missing)")

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "KGStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------------- import
    @classmethod
    def create(cls, path: str | os.PathLike, files: Sequence[str | os.PathLike], overwrite: bool = False) -> "KGStore":
        """Build a store at ``path`` from triple files (CSV / TSV / Parquet). Writes to a temporary
        file and renames it into place, so a failed import leaves no half-built store."""
        import duckdb

        path = Path(path)
        if path.exists() and not overwrite:
            raise ValueError(f"{path}: already exists (add --overwrite to replace it; overwrite=True in Python)")
        if not files:
            raise ValueError("no triple files given")
        tmp = path.with_name(path.name + ".part")
        tmp.unlink(missing_ok=True)
        con = duckdb.connect(str(tmp))
        try:
            con.execute("CREATE TEMP TABLE raw(line BIGINT, head VARCHAR, relation VARCHAR, tail VARCHAR)")
            for f in files:
                _load_file(con, Path(f))
            con.execute(f"""
                CREATE TABLE entities AS
                SELECT (row_number() OVER (ORDER BY name)) - 1 AS id, name, {NORM_SQL.format(x='name')} AS norm
                FROM (SELECT DISTINCT head AS name FROM raw UNION SELECT DISTINCT tail FROM raw)""")
            con.execute("""
                CREATE TABLE triples AS
                SELECT eh.id::INTEGER AS h, raw.relation AS r, et.id::INTEGER AS t
                FROM raw JOIN entities eh ON eh.name = raw.head JOIN entities et ON et.name = raw.tail
                ORDER BY raw.line""")
            con.execute("""
                CREATE TABLE tokens AS
                SELECT DISTINCT unnest(string_split(norm, ' ')) AS token, id::INTEGER AS id FROM entities
                WHERE norm <> ''""")
            con.execute("CHECKPOINT")
        except BaseException:
            con.close()
            tmp.unlink(missing_ok=True)
            raise
        con.close()
        os.replace(tmp, path)
        return cls(path)

    # ----------------------------------------------------------------- sizes
    def counts(self) -> dict[str, int]:
        e = self.con.execute("SELECT count(*) FROM entities").fetchone()[0]
        t = self.con.execute("SELECT count(*) FROM triples").fetchone()[0]
        r = self.con.execute("SELECT count(DISTINCT r) FROM triples").fetchone()[0]
        return {"entities": int(e), "triples": int(t), "relations": int(r)}

    def longest_name(self) -> int:
        """Words in the longest normalised entity name (linking tries question n-grams up to this length)."""
        if self._longest is None:
            got = self.con.execute("SELECT max(len(string_split(norm, ' '))) FROM entities WHERE norm <> ''"
                                   ).fetchone()[0]
            self._longest = int(got or 1)
        return self._longest

    def relation_words(self) -> frozenset[str]:
        """The words of the stored relation names (:func:`~toporag_core.retrieval.seeds.relation_words`), once."""
        if self._relation_words is None:
            rows = self.con.execute("SELECT DISTINCT r FROM triples").fetchall()
            self._relation_words = relation_words(r for (r,) in rows)
        return self._relation_words

    def names(self, ids: Sequence[int]) -> list[str]:
        """Entity names of ``ids`` (in that order)."""
        ids = [int(i) for i in ids]
        if not ids:
            return []
        rows = dict(self.con.execute("SELECT id, name FROM entities WHERE id IN (SELECT unnest(?))", [ids]).fetchall())
        return [rows[i] for i in ids]

    def lookup(self, names: Sequence[str]) -> list[int]:
        """Ids of entities whose normalised name equals a normalised ``names`` entry."""
        norms = sorted({normalize_name(n) for n in names} - {""})
        if not norms:
            return []
        rows = self.con.execute("SELECT id FROM entities WHERE norm IN (SELECT unnest(?)) ORDER BY id", [norms])
        return [int(r[0]) for r in rows.fetchall()]

    # ----------------------------------------------------------------- k hops
    def k_hop_nodes(self, seeds: Sequence[int], hops: int, max_nodes: int | None = None,
                    progress: Callable[[int, int, int], None] | None = None) -> tuple[np.ndarray, int]:
        """Sorted entity ids within ``hops`` hops of ``seeds`` (both directions) and the hops completed.
        ``progress(hops done, hops, nodes so far)`` is called before the first hop and after each."""
        if hops < 0:
            raise ValueError(f"hops must be >= 0, got {hops}")
        seen = np.unique(np.asarray(list(seeds), dtype=np.int64))
        frontier, done = seen, 0
        if progress is not None:
            progress(0, hops, int(seen.size))
        for _ in range(hops):
            if not frontier.size:
                done += 1
                continue
            nb = self.con.execute("""
                WITH f AS (SELECT unnest(?) AS id)
                SELECT t FROM triples WHERE h IN (SELECT id FROM f)
                UNION SELECT h FROM triples WHERE t IN (SELECT id FROM f)""", [frontier.tolist()]).fetchnumpy()
            nb = np.unique(np.asarray(next(iter(nb.values())), dtype=np.int64))
            new = nb[~np.isin(nb, seen)]
            if max_nodes is not None and seen.size + new.size > max_nodes:
                break
            seen = np.union1d(seen, new)
            frontier, done = new, done + 1
            if progress is not None:
                progress(done, hops, int(seen.size))
        return seen, done

    def subgraph(self, seeds: Sequence[int], hops: int = 2, max_nodes: int | None = 50_000,
                 progress: Callable[[int, int, int], None] | None = None) -> Neighbourhood:
        """The subgraph induced on the ``hops``-hop neighbourhood of ``seeds`` (see the module docstring);
        ``progress`` as in :meth:`k_hop_nodes`."""
        nodes, done = self.k_hop_nodes(seeds, hops, max_nodes, progress)
        ids = nodes.tolist()
        # Triples sorted by (head name, relation, tail name) and nodes in their order of first appearance
        # (then any seed without a triple): exactly the graph that reading the exported CSV (`kg subgraph
        # --out`, written in this order) gives back, so both retrieve and answer alike.
        tri = self.con.execute("""
            WITH n AS (SELECT unnest(?) AS id)
            SELECT h, r, t FROM triples JOIN entities eh ON eh.id = h JOIN entities et ON et.id = t
            WHERE h IN (SELECT id FROM n) AND t IN (SELECT id FROM n)
            ORDER BY eh.name, r, et.name""", [ids]).fetchnumpy()
        h = np.asarray(tri["h"], dtype=np.int64)
        t = np.asarray(tri["t"], dtype=np.int64)
        seen = np.stack([h, t], 1).reshape(-1)
        _, first = np.unique(seen, return_index=True)
        order = seen[np.sort(first)]
        order = np.concatenate([order, np.setdiff1d(np.asarray(ids, np.int64), order)])
        local = np.empty(int(order.max()) + 1 if order.size else 0, np.int64)
        local[order] = np.arange(order.size)
        graph = TextualGraph(self.names(order.tolist()), np.stack([local[h], local[t]]).reshape(2, -1),
                             [str(r) for r in tri["r"]], node_ids=[str(i) for i in order.tolist()],
                             name=f"{hops}-hop subgraph of {self.path.name}")
        seed_idx = sorted(local[np.unique(np.asarray(list(seeds), dtype=np.int64))].tolist())
        return Neighbourhood(graph, seed_idx, hops, done, done < hops)


def _header_and_delim(path: Path) -> tuple[bool, str]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        first = fh.readline()
    if not first.strip():
        raise GraphFormatError("empty file or empty first line (expected head, relation, tail)", file=str(path),
                               line=1)
    delim = "\t" if "\t" in first else ","
    fields = {x.strip().lower() for x in first.rstrip("\r\n").split(delim)}
    return any(fields == h for h in HEADERS), delim


def _load_file(con, path: Path) -> None:
    """Append ``path``'s triples to the temp table ``raw``, or raise naming file, line and field."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    suffix = path.suffix.lower()
    base = con.execute("SELECT coalesce(max(line), 0) FROM raw").fetchone()[0]
    if suffix == ".parquet":
        cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({_sql_str(path)})").fetchall()]
        for need in ("head", "relation", "tail"):
            if need not in cols:
                raise GraphFormatError(f"missing column (columns: {', '.join(cols)})", file=str(path), field=need)
        src = f"SELECT head::VARCHAR AS head, relation::VARCHAR AS relation, tail::VARCHAR AS tail " \
              f"FROM read_parquet({_sql_str(path)})"
        first_line = 1
    elif suffix in TRIPLE_SUFFIXES:
        header, delim = _header_and_delim(path)
        src = (f"SELECT column0 AS head, column1 AS relation, column2 AS tail FROM read_csv({_sql_str(path)}, "
               f"delim={_sql_str(delim)}, header=false, skip={1 if header else 0}, quote='\"', escape='\"', "
               "columns={'column0': 'VARCHAR', 'column1': 'VARCHAR', 'column2': 'VARCHAR'}, "
               "strict_mode=false, null_padding=true, parallel=false, auto_detect=false)")
        first_line = 2 if header else 1
        _check_field_counts(path, delim, header)
    else:
        raise GraphFormatError(f"unknown triple file type {suffix!r}: use .csv, .tsv or .parquet", file=str(path))
    con.execute("CREATE OR REPLACE TEMP TABLE part AS SELECT (row_number() OVER ()) AS row, * FROM (" + src + ")")
    for field in ("head", "relation", "tail"):
        bad = con.execute(f"SELECT min(row) FROM part WHERE {field} IS NULL OR trim({field}) = ''").fetchone()[0]
        if bad is not None:
            where = dict(line=int(bad) + first_line - 1) if suffix != ".parquet" else dict(record=int(bad))
            raise GraphFormatError("empty value", file=str(path), field=field, **where)
    con.execute(f"INSERT INTO raw SELECT row + {int(base)}, trim(head), trim(relation), trim(tail) FROM part")
    con.execute("DROP TABLE part")


def _check_field_counts(path: Path, delim: str, header: bool) -> None:
    """Every data line has exactly 3 fields (quotes respected): DuckDB with ``null_padding`` would
    silently pad or drop them. Streams the file once with the csv module (C speed)."""
    import csv
    import itertools

    with open(path, encoding="utf-8", errors="strict", newline="") as fh:
        try:
            reader = csv.reader(fh, delimiter=delim)
            for row in itertools.islice(reader, 1 if header else 0, None):
                if len(row) != 3 and any(x.strip() for x in row):
                    raise GraphFormatError(f"expected 3 fields (head, relation, tail), got {len(row)}",
                                           file=str(path), line=reader.line_num)
                if not any(x.strip() for x in row):
                    raise GraphFormatError("empty line", file=str(path), line=reader.line_num)
        except UnicodeDecodeError as e:
            raise GraphFormatError(f"not UTF-8 text ({e.reason})", file=str(path)) from None
        except csv.Error as e:
            raise GraphFormatError(f"CSV error: {e}", file=str(path), line=reader.line_num) from None
