"""Uploaded graphs kept on disk by fingerprint, so that a page reload finds them again.

Built-in and benchmark graphs are named in the page address (``?graph=sample:kg``) and reloaded
from their files. An uploaded, pasted or knowledge-graph-extracted graph has no file to go back
to, so the app writes it here when it becomes the current graph and names it in the address as
``?graph=upload:<fingerprint>`` (:func:`~.state.graph_fingerprint`, 20 hex digits); a new visit
with that address loads it back with :func:`load`.

* one JSON file per graph, ``<cache dir>/studio_graphs/<fingerprint>.json``
  (:func:`~toporag_core.embed.default_cache_dir`, so ``TOPORAG_CACHE`` moves it), holding the
  node texts, ``edge_index`` as two index lists, edge texts, node ids, name and ``meta``
  (values JSON cannot hold are written as their text); JSON, never pickle, so a cache file can
  not run code;
* written atomically (a temporary file in the same folder, then ``os.replace``), so a reader never
  sees half a file;
* bounded: at most :data:`MAX_GRAPHS` files (least recently used removed first) and
  :data:`MAX_BYTES` per file (a bigger graph is not kept: its reload falls back, and says so);
* checked on load (:func:`~.state.current_graph`): a file whose graph does not hash to its name is
  treated as lost.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

from ..embed import default_cache_dir
from ..graph import TextualGraph

KIND = "upload"  # the address names a kept graph as ``upload:<fingerprint>``
MAX_GRAPHS = 32
MAX_BYTES = 64 * 1024 * 1024
FINGERPRINT = re.compile(r"\A[0-9a-f]{20}\Z")
VERSION = 1


def store_dir() -> Path:
    return default_cache_dir() / "studio_graphs"


def source_of(fingerprint: str) -> str:
    """The address name of a kept graph: ``upload:<fingerprint>``."""
    return f"{KIND}:{fingerprint}"


def _path(fingerprint: str) -> Path:
    if not FINGERPRINT.match(str(fingerprint)):
        raise ValueError(f"{fingerprint!r} is not a graph fingerprint (20 hex digits)")
    return store_dir() / f"{fingerprint}.json"


def graph_to_json(graph: TextualGraph) -> str:
    ei = np.asarray(graph.edge_index, dtype=np.int64)
    return json.dumps({"version": VERSION, "name": graph.name, "node_text": graph.node_text,
                       "edge_index": ei.tolist(), "edge_text": graph.edge_text, "node_ids": graph.node_ids,
                       "meta": graph.meta}, ensure_ascii=False, default=str)


def graph_from_json(text: str) -> TextualGraph:
    d = json.loads(text)
    if not isinstance(d, dict) or d.get("version") != VERSION:
        raise ValueError("not a kept graph of this version")
    ei = np.asarray(d["edge_index"], dtype=np.int64).reshape(2, -1)
    return TextualGraph(node_text=d["node_text"], edge_index=ei, edge_text=d["edge_text"], node_ids=d.get("node_ids"),
                        name=str(d.get("name") or ""), meta=dict(d.get("meta") or {}))


def is_kept(fingerprint: str) -> bool:
    try:
        return _path(fingerprint).is_file()
    except ValueError:
        return False


def save(graph: TextualGraph, fingerprint: str) -> bool:
    """Keep ``graph`` under ``fingerprint`` (atomic write, then the oldest files beyond
    :data:`MAX_GRAPHS` removed). ``False`` when it cannot be kept (over :data:`MAX_BYTES`, or the
    cache folder is not writable): the app then cannot restore it after a reload."""
    path = _path(fingerprint)
    data = graph_to_json(graph).encode("utf-8")
    if len(data) > MAX_BYTES:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{fingerprint}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _evict(path.parent)
    except OSError:
        return False
    return True


def _evict(folder: Path) -> None:
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[MAX_GRAPHS:]:
        old.unlink(missing_ok=True)


def load(fingerprint: str) -> TextualGraph:
    """The graph kept under ``fingerprint``; ``LookupError`` when it is gone (never kept, evicted,
    the cache cleared) or its file cannot be read."""
    path = _path(fingerprint)
    try:
        graph = graph_from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LookupError(f"no graph {fingerprint} is kept on this machine") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LookupError(f"the kept graph {fingerprint} cannot be read ({e})") from None
    try:
        os.utime(path)  # recently used: evicted last
    except OSError:
        pass
    return graph
