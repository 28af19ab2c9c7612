"""A generated knowledge graph of any size (no download): the benchmark's and the tests' KG.

``n_entities`` entities named ``"<adjective> <noun> <i>"`` (unique, word-like, so that questions can
mention them), ``n_triples`` triples ``(head, relation, tail)`` with heads uniform and tails
preferential (a Zipf-like ``floor(n u^2)``: a few hubs, as real KGs have) over ``n_relations``
relation names; self-loops dropped. Written by DuckDB as CSV or Parquet.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

ADJ = ("red", "blue", "old", "new", "north", "south", "great", "little", "royal", "silver", "golden", "green")
NOUN = ("river", "city", "school", "film", "song", "tower", "club", "island", "bridge", "museum", "company", "lake")
REL = ("located in", "part of", "founded by", "named after", "member of", "directed by", "capital of", "born in",
       "works for", "owned by", "near", "sister of")


def entity_name(i: int) -> str:
    return f"{ADJ[i % len(ADJ)]} {NOUN[(i // len(ADJ)) % len(NOUN)]} {i}"


def generate_kg(path: str | os.PathLike, n_entities: int, n_triples: int, n_relations: int = 50,
                seed: int = 0) -> Path:
    """Write the generated KG to ``path`` (``.csv`` / ``.tsv`` / ``.parquet``, with a header); returns the path."""
    import duckdb

    if n_entities < 2 or n_triples < 1:
        raise ValueError("generate_kg needs n_entities >= 2 and n_triples >= 1")
    path = Path(path)
    rng = np.random.default_rng(seed)
    h = rng.integers(0, n_entities, n_triples)
    t = (n_entities * rng.random(n_triples) ** 2).astype(np.int64)
    r = rng.integers(0, n_relations, n_triples)
    keep = h != t
    h, t, r = h[keep], t[keep], r[keep]
    con = duckdb.connect()
    con.register("tri", {"h": h, "t": t, "r": r})
    adj = "[" + ",".join(f"'{a}'" for a in ADJ) + "]"
    noun = "[" + ",".join(f"'{a}'" for a in NOUN) + "]"
    rel = "[" + ",".join(f"'{a}'" for a in REL) + "]"

    def name(x: str) -> str:
        return (f"({adj}[({x} % {len(ADJ)}) + 1] || ' ' || {noun}[(({x} // {len(ADJ)}) % {len(NOUN)}) + 1] "
                f"|| ' ' || {x}::VARCHAR)")

    relname = f"({rel}[(r % {len(REL)}) + 1] || CASE WHEN r >= {len(REL)} THEN ' ' || (r // {len(REL)})::VARCHAR " \
              "ELSE '' END)"
    query = f"SELECT {name('h')} AS head, {relname} AS relation, {name('t')} AS tail FROM tri"
    fmt = "(FORMAT PARQUET)" if path.suffix == ".parquet" else \
        f"(HEADER, DELIMITER '{chr(9) if path.suffix == '.tsv' else ','}')"
    con.execute(f"COPY ({query}) TO '{str(path).replace(chr(39), chr(39) * 2)}' {fmt}")
    con.close()
    return path
