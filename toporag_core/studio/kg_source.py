"""The Home page's "Knowledge graph" source: a question's k-hop subgraph of a DuckDB triple store.

A knowledge graph too big to lift whole (:mod:`toporag_core.kg`) is never loaded as the current
graph; the question's neighbourhood is. The source is either

* a store on disk (``*.duckdb``, made by ``toporag kg import``), opened read-only, or
* triples (CSV / TSV ``head,relation,tail`` or Parquet), given as a path on disk or uploaded, which
  :meth:`~toporag_core.kg.KGStore.create` imports into a store of its own under
  ``$TOPORAG_CACHE/kg-imports/`` (kept under the content hash of an upload, or by path, size and
  modification time of a file on disk, so a rerun of the page never imports twice; the
  :data:`KEEP_IMPORTS` most recent are kept).

Then :func:`~toporag_core.kg.question_subgraph` links the question's entities (or takes the named
ones) and extracts their ``hops``-hop induced subgraph, reporting ``progress(fraction, text)``
after linking and after each hop (the page's progress bar). The subgraph becomes the current graph
with the question in ``graph.meta["question"]``, so Explore, the lab and Learn work on it. Bad
triple files raise :class:`~toporag_core.graph.GraphFormatError` naming the file (the uploaded
name, not the temporary copy), the line and the field; the page keeps the previous graph.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Callable

from ..graph import GraphFormatError, TextualGraph
from ..kg import LINK_MODES, KGStore, question_subgraph
from ..kg.store import TRIPLE_SUFFIXES

KEEP_IMPORTS = 4  # imported stores kept in the cache (least recently used removed)
STORE_SUFFIXES = (".duckdb", ".db")

Progress = Callable[[float, str], None]


def imports_dir() -> Path:
    from ..embed import default_cache_dir

    d = default_cache_dir() / "kg-imports"
    d.mkdir(parents=True, exist_ok=True)
    return d


NAMES_FILE = "names.json"  # {store file name: the uploaded file's name, de-duplicated}


def _names() -> dict[str, str]:
    try:
        names = json.loads((imports_dir() / NAMES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {}


def _name_upload(db: Path, filename: str) -> str:
    """Remember ``filename`` as the name of the uploaded store ``db``; a name another live store
    already has gets `` (2)``, `` (3)`` ... Returns the name."""
    names = {k: v for k, v in _names().items() if (imports_dir() / k).exists()}
    if db.name in names:
        return names[db.name]
    base = Path(filename).name or db.name
    taken, name, n = set(names.values()), base, 1
    while name in taken:
        n += 1
        name = f"{base} ({n})"
    names[db.name] = name
    path = imports_dir() / NAMES_FILE
    tmp = path.with_name(f"{NAMES_FILE}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(names, indent=1))
    os.replace(tmp, path)  # atomic: a killed write never leaves a half-written names file
    return name


def store_label(db: str | os.PathLike) -> str:
    """How a store is named to the user: an upload by its file name (see :func:`store_from_upload`),
    a store on disk by its own file name - never by the content hash its import is kept under."""
    p = Path(db)
    if p.parent == imports_dir():
        return _names().get(p.name, p.name)
    return p.name


def _prune(keep: Path) -> None:
    stores = sorted(imports_dir().glob("*.duckdb"), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in [p for p in stores if p != keep][KEEP_IMPORTS - 1:]:
        p.unlink(missing_ok=True)


def _import(files: list[Path], key: str, shown: dict[str, str], progress: Progress | None) -> Path:
    """The store of ``files`` under key ``key`` (imported once). ``shown`` maps a temporary path to
    the name the user knows, so errors name the uploaded file."""
    db = imports_dir() / f"{key}.duckdb"
    if db.exists():
        os.utime(db)
        return db
    if progress is not None:
        progress(0.0, "importing triples into DuckDB (once per file)")
    import duckdb

    try:
        KGStore.create(db, files, overwrite=True).close()
    except GraphFormatError as e:
        if e.file in shown:
            raise GraphFormatError(e.reason, file=shown[e.file], line=e.line, record=e.record,
                                   field=e.field) from None
        raise
    except duckdb.Error as e:  # e.g. a corrupt Parquet file: DuckDB's reader says what, not where
        name = shown.get(str(files[0]), str(files[0])) if len(files) == 1 else None
        raise GraphFormatError(f"could not read the triples ({str(e).splitlines()[0]})", file=name) from None
    _prune(db)
    return db


def store_from_upload(data: bytes, filename: str, progress: Progress | None = None) -> Path:
    """The store of uploaded triples (``.csv`` / ``.tsv`` / ``.txt`` / ``.parquet``), imported once per content."""
    suffix = Path(filename).suffix.lower()
    if suffix not in TRIPLE_SUFFIXES:
        raise GraphFormatError(f"unknown triple file type {suffix or '(none)'!r}: use "
                               f"{', '.join(TRIPLE_SUFFIXES)}", file=filename)
    key = hashlib.sha1(suffix.encode() + b"\0" + data).hexdigest()[:20]
    if (imports_dir() / f"{key}.duckdb").exists():
        db = _import([], key, {}, progress)  # imported before: only marks it recently used
    else:
        with tempfile.TemporaryDirectory() as tmp:
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(filename).name) or f"triples{suffix}"
            path = Path(tmp) / safe
            path.write_bytes(data)
            db = _import([path], key, {str(path): filename}, progress)
    _name_upload(db, filename)
    return db


def store_from_path(path: str | os.PathLike, progress: Progress | None = None) -> Path:
    """The store for a path on disk: a store itself, or a triple file imported once (per path, size, mtime)."""
    text = str(path).strip()
    if not text:
        raise ValueError("no knowledge-graph file given: type the path of a .duckdb store or a triple file")
    p = Path(text).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file")
    if p.is_dir():
        raise ValueError(f"{p}: a folder, not a knowledge-graph file (.duckdb store, or .csv/.tsv/.parquet triples)")
    if p.suffix.lower() in TRIPLE_SUFFIXES:
        st = p.stat()
        key = hashlib.sha1(f"{p.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:20]
        return _import([p], key, {}, progress)
    return p


def load_kg_subgraph(db: str | os.PathLike, question: str, hops: int = 2, link: str = "auto",
                     entities: list[str] | None = None, max_nodes: int | None = 50_000,
                     progress: Progress | None = None) -> TextualGraph:
    """The question's ``hops``-hop subgraph of the store ``db`` as a graph carrying the question.

    ``graph.meta``: ``question``, ``source`` (``kg:<store file name>``), ``kg`` (store, hops, hops done,
    linked entities) and, when ``max_nodes`` stopped the expansion early, a ``warnings`` entry."""
    question = str(question or "").strip()
    if not question and not entities:
        raise ValueError("type a question (its entities are linked), or name entities")
    if not 0 <= int(hops) <= 10:
        raise ValueError(f"hops must be between 0 and 10, got {hops}")
    with KGStore(db) as store:
        links, nb = question_subgraph(store, question, int(hops), link, entities or None, max_nodes, progress)
    g = nb.graph
    g.name = f"{hops}-hop subgraph of {store_label(db)}: " + ", ".join(lk.name for lk in links[:3]) + \
        (" ..." if len(links) > 3 else "")
    g.meta.update(question=question, source=f"kg:{Path(db).name}",
                  kg={"store": str(db), "hops": int(hops), "hops_done": nb.hops_done, "seeds": nb.seeds,
                      "links": [{"name": lk.name, "mention": lk.mention, "how": lk.how, "score": lk.score}
                                for lk in links]})
    if nb.truncated:
        g.meta["warnings"] = [f"stopped after {nb.hops_done} of {hops} hops: the next hop would exceed "
                              f"{max_nodes:,} entities"]
    return g


def parse_entities(text: str) -> list[str]:
    """Entity names typed one per line or separated by ``;`` (commas may be part of names)."""
    return [x.strip() for x in re.split(r"[;\n]", str(text or "")) if x.strip()]


__all__ = ["LINK_MODES", "KEEP_IMPORTS", "imports_dir", "store_label", "store_from_upload", "store_from_path",
           "load_kg_subgraph", "parse_entities"]
