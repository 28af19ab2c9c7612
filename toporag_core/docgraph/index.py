"""A document-graph index of a whole corpus: built once, stored on disk, grown incrementally.

``toporag docgraph index CORPUS --out DIR`` reads any registered corpus format
(:func:`toporag_core.corpus.read_corpus`) and stores the corpus's document graph, without the
all-pairs parts that only a question's neighbourhood needs (:mod:`.corpus_search` builds those):

* **nodes** ``n`` in pre-order per document, documents one after the other: ``level (n,)``
  (document, section, paragraph, and sentence with ``sentence_nodes``), ``parent (n,)`` (global
  row; ``-1`` for a document, whose parent is the implicit root), ``doc (n,)`` (document ordinal),
  ``doc_ptr (D + 1,)`` (the rows of document ``i`` are ``doc_ptr[i]:doc_ptr[i + 1]``), own texts;
* **vectors** ``x (n, d)`` float32, unit rows. ``embed="pooled"`` (default) encodes each paragraph
  once, as ``"title: text"`` (``"title, heading: text"`` under a heading that is not the title), and
  gives a section / document the normalised mean of its paragraphs' vectors: one encoder call per
  paragraph, not three (document, section and paragraph contents of a one-paragraph article are
  nearly the same text). ``embed="every"`` encodes every node's content as
  :func:`~toporag_core.docgraph.build.build_docgraph` does;
* **semantic neighbours** of each paragraph: ``knn (P, k)`` rows of the ``k`` most similar paragraphs
  of *other* documents and their cosines ``knn_sim (P, k)`` (``-1`` / ``0`` where fewer), from blocked
  ``X_b X^T`` products (``O(P^2 d)`` once, never per question);
* **BM25** over ``title + text`` of each document (``bm25s``; its sparse score matrix in safetensors,
  its vocabulary in JSON: no pickle).

Files (``DIR/``): ``index.json`` (format, encoder, config, documents ``[id, title, fingerprint]``,
BM25 vocabulary and parameters), ``texts.json`` (node texts), ``tensors.safetensors``.

**Atomic.** An index is written into a temporary sibling folder and renamed into place (an existing
index is renamed aside first and removed after), so ``DIR`` is either the old complete index or the
new complete one, never half-written; a crash between the two renames leaves the old one aside,
restored by the next run.

**Resumable.** Texts are encoded ``chunk_size`` at a time; each chunk's vectors go to a work folder
beside ``DIR`` (``.DIR.work/``, file named by a hash of the encoder and the chunk's texts) as they are
done, with a progress callback; a stopped run re-started with the same corpus encodes only the
chunks not yet stored. The work folder is removed once the index is in place.

**Incremental.** Indexing into an existing ``DIR`` (same encoder and settings) keeps the stored
rows of every document whose id and fingerprint (hash of title and text) are unchanged and encodes
only new or changed documents; documents absent from the new corpus are kept unless ``prune``.
Neighbour lists are extended in ``O(new x P)`` when documents were only added, recomputed when some
were replaced or removed; BM25 is rebuilt (seconds for 100k documents).

The parts live beside this module and are re-exported here: the settings and the stored index
(:mod:`.index_store`), the row layout and pooling (:mod:`.index_layout`), resumable embedding
(:mod:`.embed_chunks`), neighbours (:mod:`.neighbours`) and BM25 (:mod:`.bm25`); this module plans
and assembles a build.
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..corpus import Corpus, Document
from ..graph import GraphFormatError
from .bm25 import BM25Index, doc_bm25_text
from .build import PARAGRAPH
from .embed_chunks import Progress, embed_resumable
from .index_layout import NodeBlock, document_article, lay_out, pool_upwards
from .index_store import EMBED_MODES, INDEX_FORMAT, INDEX_VERSION, DocGraphIndex, IndexConfig, restore_aside
from .neighbours import merge_neighbours, paragraph_neighbours, top_neighbours


def work_folder(out: Path) -> Path:
    return out.parent / f".{out.name}.work"


@dataclass
class Rows:
    """The rows of the index being built: kept old documents' rows first, then the new block's."""

    ids: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)
    fps: list[str] = field(default_factory=list)
    ptr: list[int] = field(default_factory=lambda: [0])
    text: list[list[str]] = field(default_factory=list)
    level: list[np.ndarray] = field(default_factory=list)
    parent: list[np.ndarray] = field(default_factory=list)
    doc: list[np.ndarray] = field(default_factory=list)
    x: list[np.ndarray] = field(default_factory=list)
    old_row_map: np.ndarray | None = None

    def add_old(self, old: DocGraphIndex, keep_old: list[int]) -> None:
        """The rows of the old documents kept, re-numbered."""
        keep_rows = np.concatenate([np.arange(old.doc_ptr[i], old.doc_ptr[i + 1]) for i in keep_old])
        self.old_row_map = np.full(old.num_nodes, -1, np.int64)
        self.old_row_map[keep_rows] = np.arange(keep_rows.size)
        self.text.append([old.text[r] for r in keep_rows])
        self.level.append(old.level[keep_rows])
        par = old.parent[keep_rows]
        self.parent.append(np.where(par >= 0, self.old_row_map[np.maximum(par, 0)], -1))
        doc_map = np.full(old.num_docs, -1, np.int64)
        doc_map[keep_old] = np.arange(len(keep_old))
        self.doc.append(doc_map[old.doc[keep_rows]])
        self.x.append(old.x[keep_rows])
        for i in keep_old:
            self.ids.append(old.ids[i])
            self.titles.append(old.titles[i])
            self.fps.append(old.fingerprints[i])
            self.ptr.append(self.ptr[-1] + int(old.doc_ptr[i + 1] - old.doc_ptr[i]))

    def add_block(self, block: NodeBlock, xb: np.ndarray, fresh: list[Document]) -> None:
        """The rows of the newly laid out documents, after the old ones."""
        n_old_rows = sum(len(p) for p in self.text)
        self.text.append(block.text)
        self.level.append(block.level.astype(np.int64))
        self.parent.append(np.where(block.parent >= 0, block.parent + n_old_rows, -1))
        self.doc.append(block.doc + len(self.ids))
        self.x.append(xb)
        counts = np.bincount(block.doc, minlength=len(fresh))
        for d, c in zip(fresh, counts):
            self.ids.append(d.id)
            self.titles.append(d.name)
            self.fps.append(d.fingerprint())
            self.ptr.append(self.ptr[-1] + int(c))

    def arrays(self, dim: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(text, level, parent, doc, x)`` of all rows."""
        text = [s for p in self.text for s in p]
        level = np.concatenate(self.level).astype(np.int64)
        parent = np.concatenate(self.parent).astype(np.int64)
        doc = np.concatenate(self.doc).astype(np.int64)
        x = np.concatenate(self.x).astype(np.float32) if self.x else np.zeros((0, dim), np.float32)
        return text, level, parent, doc, x


def _plan(corpus: Corpus, old: DocGraphIndex | None, prune: bool) -> tuple[list[int], list[Document], int, int]:
    """``(old documents kept, documents to lay out and embed, replaced, removed)``."""
    old_pos = {d: i for i, d in enumerate(old.ids)} if old else {}
    fresh, replaced, seen = [], 0, set()
    for d in corpus.documents:
        seen.add(d.id)
        i = old_pos.get(d.id)
        if i is not None and old.fingerprints[i] == d.fingerprint():
            continue
        replaced += i is not None
        fresh.append(d)
    if old is None:
        return [], fresh, 0, 0
    fresh_ids = {d.id for d in fresh}
    keep_old = [i for i, d in enumerate(old.ids) if d not in fresh_ids and (not prune or d in seen)]
    return keep_old, fresh, replaced, old.num_docs - len(keep_old) - replaced


def _open_old(out: Path | None, rebuild: bool, name: str, cfg: IndexConfig) -> DocGraphIndex | None:
    """The index already in ``out`` to extend (``None`` with ``rebuild`` or when there is none); one
    built with another encoder or layout is refused."""
    if out is None or rebuild:
        return None
    restore_aside(out)
    if not (out / "index.json").is_file():
        return None
    old = DocGraphIndex.load(out)
    if old.encoder_name != name or old.config.layout_key() != cfg.layout_key():
        raise ValueError(f"{out} was built with encoder {old.encoder_name!r} and {old.config.layout_key()}; "
                         f"this run uses {name!r} and {cfg.layout_key()}: pass --rebuild or another --out")
    return old


def _embed_fresh(fresh: list[Document], encoder, cfg: IndexConfig, out: Path | None,
                 on_progress: Progress | None) -> tuple[NodeBlock | None, np.ndarray | None, float, float]:
    """``(block, its vectors, layout seconds, embed seconds)`` of the documents to add (``None`` when none)."""
    t = time.perf_counter()
    arts = [document_article(d, cfg.max_paragraph_chars) for d in fresh]
    block = lay_out(arts, cfg) if arts else None
    t_layout = time.perf_counter() - t
    t = time.perf_counter()
    xb = None
    if block is not None:
        work = work_folder(out) if out is not None else None
        vecs = embed_resumable(block.embed_text, encoder, work, cfg.chunk_size, on_progress)
        xb = np.zeros((len(block.text), int(encoder.dim)), np.float32)
        xb[block.embed_rows] = vecs
        if cfg.embed == "pooled":
            xb = pool_upwards(xb, block.level, block.parent)
    return block, xb, t_layout, time.perf_counter() - t


def _fit_bm25(rows: Rows, text: list[str], level: np.ndarray, cfg: IndexConfig) -> BM25Index:
    """BM25 over the title and the paragraphs of every document."""
    bm_texts = []
    for i in range(len(rows.ids)):
        a, b = rows.ptr[i], rows.ptr[i + 1]
        bm_texts.append(doc_bm25_text(rows.titles[i], " ".join(text[r] for r in range(a, b)
                                                               if level[r] in (PARAGRAPH,))))
    return BM25Index(cfg.bm25_k1, cfg.bm25_b).fit(bm_texts)


def build_index(corpus: Corpus, encoder, out: str | os.PathLike | None = None, config: IndexConfig | None = None,
                on_progress: Progress | None = None, prune: bool = False, rebuild: bool = False,
                log: Callable[[str], None] | None = None,
                encoder_spec: str | None = None) -> tuple[DocGraphIndex, dict[str, Any]]:
    """Index ``corpus`` (into ``out`` when given: resumable, incremental, atomic; see the module
    docstring). Returns ``(index, report)``, the report counting added / replaced / kept / removed
    documents, texts encoded and seconds per stage. ``encoder_spec`` (what :func:`~toporag_core.embed.get_encoder`
    is given to load the encoder again) is stored for ``retrieve`` / ``eval``."""
    cfg = config or IndexConfig()
    t_all = time.perf_counter()
    out = None if out is None else Path(out)
    name = str(getattr(encoder, "name", type(encoder).__name__))
    old = _open_old(out, rebuild, name, cfg)
    keep_old, fresh, replaced, removed = _plan(corpus, old, prune)
    block, xb, t_layout, t_embed = _embed_fresh(fresh, encoder, cfg, out, on_progress)
    rows = Rows()
    if keep_old:
        rows.add_old(old, keep_old)
    if block is not None:
        rows.add_block(block, xb, fresh)
    if not rows.ids:
        raise GraphFormatError("no documents to index", file=corpus.name)
    text, level, parent, doc, x = rows.arrays(int(encoder.dim))
    t = time.perf_counter()
    knn, knn_sim, paras = paragraph_neighbours(x, level, doc, int(cfg.neighbours), old, rows.old_row_map, len(text),
                                               old is not None and not replaced and removed == 0 and bool(keep_old))
    t_knn = time.perf_counter() - t
    t = time.perf_counter()
    bm25 = _fit_bm25(rows, text, level, cfg)
    t_bm25 = time.perf_counter() - t
    ids = rows.ids
    stats = {"documents": len(ids), "nodes": len(text), "paragraphs": int(paras.size),
             "encoder_spec": encoder_spec or (old.stats.get("encoder_spec") if old else None) or name,
             "levels": {lv: int((level == i).sum()) for i, lv in enumerate(("document", "section", "paragraph",
                                                                                "sentence"), 1)}}
    index = DocGraphIndex(ids=ids, titles=rows.titles, fingerprints=rows.fps, text=text, level=level, parent=parent,
                          doc=doc, doc_ptr=np.asarray(rows.ptr, np.int64), x=x, knn=knn, knn_sim=knn_sim,
                          bm25=bm25, encoder_name=name, config=cfg, stats=stats)
    t = time.perf_counter()
    if out is not None:
        index.save(out)
        shutil.rmtree(work_folder(out), ignore_errors=True)
    t_save = time.perf_counter() - t
    report = {"out": None if out is None else str(out), "documents": len(ids), "added": len(fresh) - replaced,
              "replaced": replaced, "kept": len(keep_old), "removed": removed,
              "texts_encoded": 0 if block is None else len(block.embed_text), "nodes": len(text),
              "paragraphs": int(paras.size), "encoder": name, "skipped": list(corpus.skipped),
              "seconds": {"layout": t_layout, "embed": t_embed, "neighbours": t_knn, "bm25": t_bm25,
                          "save": t_save, "total": time.perf_counter() - t_all}}
    if log is not None:
        log(f"indexed {len(ids):,} documents ({report['added']:,} added, {replaced:,} replaced, "
            f"{len(keep_old):,} kept, {removed:,} removed), {len(text):,} nodes")
    return index, report


__all__ = ["IndexConfig", "DocGraphIndex", "build_index", "work_folder", "restore_aside", "BM25Index", "NodeBlock",
           "Progress", "Rows", "EMBED_MODES", "INDEX_FORMAT", "INDEX_VERSION", "document_article", "lay_out",
           "pool_upwards", "embed_resumable", "top_neighbours", "merge_neighbours", "paragraph_neighbours",
           "doc_bm25_text"]
