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
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..corpus import Corpus, Document
from ..graph import GraphFormatError
from .build import DOCUMENT, PARAGRAPH, SECTION, SENTENCE, Article, layout_articles, parse_text

INDEX_FORMAT, INDEX_VERSION = "toporag-docgraph-index", 1
EMBED_MODES = ("pooled", "every")
Progress = Callable[[int, int, float], None]  # (texts done, texts to encode, seconds left)


@dataclass
class IndexConfig:
    """How a corpus becomes a stored document graph (one source of defaults; see the module docstring).

    Attributes:
        embed: ``"pooled"`` (encode paragraphs; sections and documents get their mean) or ``"every"``.
        sentence_nodes: store sentences as nodes under their paragraph (about 5x the texts to encode).
        neighbours: semantic neighbours stored per paragraph (``0``: none).
        chunk_size: texts per encoder call and per stored work chunk (the unit of resumption).
        max_paragraph_chars: a longer paragraph is rejected naming the document.
        bm25_k1, bm25_b: BM25 parameters.
    """

    embed: str = "pooled"
    sentence_nodes: bool = False
    neighbours: int = 4
    chunk_size: int = 256
    max_paragraph_chars: int = 20_000
    bm25_k1: float = 1.5
    bm25_b: float = 0.75

    def __post_init__(self) -> None:
        if self.embed not in EMBED_MODES:
            raise ValueError(f"IndexConfig.embed must be one of {EMBED_MODES}, got {self.embed!r}")
        if int(self.neighbours) < 0:
            raise ValueError(f"IndexConfig.neighbours must be >= 0, got {self.neighbours}")
        if int(self.chunk_size) < 1:
            raise ValueError(f"IndexConfig.chunk_size must be >= 1, got {self.chunk_size}")
        if int(self.max_paragraph_chars) < 1:
            raise ValueError(f"IndexConfig.max_paragraph_chars must be >= 1, got {self.max_paragraph_chars}")
        if not float(self.bm25_k1) > 0 or not 0.0 <= float(self.bm25_b) <= 1.0:
            raise ValueError(f"IndexConfig: bm25_k1 must be > 0 and bm25_b in [0, 1], got {self.bm25_k1}, "
                             f"{self.bm25_b}")

    def layout_key(self) -> dict[str, Any]:
        """The settings stored rows depend on (an index built otherwise cannot be extended)."""
        return {"embed": self.embed, "sentence_nodes": self.sentence_nodes,
                "max_paragraph_chars": self.max_paragraph_chars}


# ----------------------------------------------------------------------------- documents -> nodes
def document_article(doc: Document, max_paragraph_chars: int = 20_000) -> Article:
    """A corpus document as an :class:`Article` (Markdown ``##`` headings open sections, blank lines
    separate paragraphs); its title is the document's name. Errors name the document's file and line."""
    try:
        art = parse_text(doc.text, source=doc.source or doc.id, title=doc.name,
                         max_paragraph_chars=max_paragraph_chars)
    except GraphFormatError as e:
        raise GraphFormatError(f"document {doc.id!r}: {e.reason}", file=doc.source or None,
                               line=doc.line if e.line is None else (doc.line or 1) + e.line - 1,
                               field="text") from None
    return Article(title=doc.name, sections=[(h if h != art.title else doc.name, p) for h, p in art.sections],
                   source=art.source)


@dataclass
class NodeBlock:
    """Rows of some documents (root dropped): the unit new documents are laid out and embedded in."""

    text: list[str]
    level: np.ndarray
    parent: np.ndarray  # row within the block; -1 for documents
    doc: np.ndarray  # document ordinal within the block
    embed_text: list[str]  # what is encoded (pooled: paragraphs and sentences; every: all contents)
    embed_rows: np.ndarray  # the rows those texts' vectors go to


def lay_out(articles: Sequence[Article], config: IndexConfig) -> NodeBlock:
    text, content, level, parent, doc = layout_articles(articles, "corpus", config.sentence_nodes)
    text, content = text[1:], content[1:]
    lv = np.asarray(level[1:], np.int8)
    par = np.asarray(parent[1:], np.int64) - 1  # the root (0) becomes -1
    dc = np.asarray(doc[1:], np.int64)
    if config.embed == "every":
        rows = np.arange(len(text))
        return NodeBlock(text, lv, par, dc, content, rows)
    rows = np.flatnonzero(lv >= PARAGRAPH)
    titles = [a.title for a in articles]
    emb = []
    for r in rows:
        if lv[r] == PARAGRAPH:
            title, heading = titles[dc[r]], text[par[r]]
            head = title if heading == title else f"{title}, {heading}"
            emb.append(f"{head}: {text[r]}")
        else:
            emb.append(text[r])
    return NodeBlock(text, lv, par, dc, emb, rows)


def pool_upwards(x: np.ndarray, level: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Sections and documents get the normalised sum of their paragraphs' vectors (vectorised)."""
    x = x.copy()
    paras = np.flatnonzero(level == PARAGRAPH)
    secs = parent[paras]
    x[level == SECTION] = 0.0
    np.add.at(x, secs, x[paras])
    docs_of_sec = parent[secs]
    x[level == DOCUMENT] = 0.0
    np.add.at(x, docs_of_sec, x[paras])
    up = level <= SECTION
    norm = np.linalg.norm(x[up], axis=1, keepdims=True)
    x[up] /= np.where(norm == 0, 1.0, norm)
    return x


# ----------------------------------------------------------------------------- resumable embedding
def _chunk_key(encoder_name: str, texts: Sequence[str]) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(encoder_name.encode())
    for t in texts:
        h.update(b"\x00")
        h.update(t.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def embed_resumable(texts: Sequence[str], encoder, work: Path | None, chunk_size: int = 256,
                    on_progress: Progress | None = None) -> np.ndarray:
    """``(len(texts), d)`` float32 vectors, ``chunk_size`` texts per encoder call; with a ``work``
    folder each chunk is stored there as it is done (temporary file + rename) and a chunk already
    stored is read instead of encoded. ``on_progress(done, total, seconds left)`` after each chunk
    encoded (``total`` counts the texts still to encode)."""
    from safetensors.numpy import load_file, save_file

    n = len(texts)
    out = np.zeros((n, int(encoder.dim)), np.float32)
    chunks = [(a, min(a + chunk_size, n)) for a in range(0, n, chunk_size)]
    name = str(getattr(encoder, "name", type(encoder).__name__))
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
    todo = []
    for a, b in chunks:
        f = None if work is None else work / f"{_chunk_key(name, texts[a:b])}.safetensors"
        if f is not None and f.is_file():
            try:
                v = load_file(str(f))["x"]
                if v.shape == (b - a, out.shape[1]):
                    out[a:b] = v
                    continue
            except Exception:  # a damaged chunk file (e.g. a full disk) is encoded again  # noqa: BLE001
                pass
        todo.append((a, b, f))
    total, done, t0 = sum(b - a for a, b, _ in todo), 0, time.perf_counter()
    for a, b, f in todo:
        v = np.asarray(encoder.encode(list(texts[a:b])), np.float32)
        out[a:b] = v
        if f is not None:
            tmp = f.with_suffix(f".tmp{os.getpid()}")
            save_file({"x": np.ascontiguousarray(v)}, str(tmp))
            os.replace(tmp, f)
        done += b - a
        if on_progress is not None:
            on_progress(done, total, (time.perf_counter() - t0) / done * (total - done))
    return out


# ----------------------------------------------------------------------------- neighbours, BM25
def top_neighbours(xq: np.ndarray, dq: np.ndarray, xa: np.ndarray, da: np.ndarray, k: int,
                   block: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the ``k`` rows of ``xa`` with the highest cosine whose document differs:
    ``(rows (q, k) int64, cos (q, k) float32)``, best first, ``-1`` / ``0`` where fewer. Blocked so the
    temporary is ``block x len(xa)``."""
    q = xq.shape[0]
    rows, sims = np.full((q, k), -1, np.int64), np.zeros((q, k), np.float32)
    if k == 0 or q == 0 or xa.shape[0] == 0:
        return rows, sims
    kk = min(k, xa.shape[0])
    for s in range(0, q, block):
        e = min(s + block, q)
        sim = xq[s:e] @ xa.T
        sim[dq[s:e, None] == da[None, :]] = -np.inf
        part = np.argpartition(-sim, kk - 1, axis=1)[:, :kk]
        ps = np.take_along_axis(sim, part, 1)
        order = np.argsort(-ps, axis=1, kind="stable")
        part, ps = np.take_along_axis(part, order, 1), np.take_along_axis(ps, order, 1)
        ok = np.isfinite(ps)
        rows[s:e, :kk] = np.where(ok, part, -1)
        sims[s:e, :kk] = np.where(ok, ps, 0.0)
    return rows, sims


def merge_neighbours(r1: np.ndarray, s1: np.ndarray, r2: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the ``k`` best of two neighbour lists per row (``-1`` entries last)."""
    k = r1.shape[1]
    r, s = np.concatenate([r1, r2], 1), np.concatenate([s1, s2], 1)
    key = np.where(r >= 0, s, -np.inf)
    order = np.argsort(-key, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(r, order, 1), np.take_along_axis(s, order, 1)


def doc_bm25_text(title: str, text: str) -> str:
    return f"{title}\n{text}"


class BM25Index:
    """BM25 (``bm25s``, Lucene variant, English stop words) over the documents' ``title + text``."""

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        import bm25s

        self.k1, self.b = float(k1), float(b)
        self.model = bm25s.BM25(k1=self.k1, b=self.b)
        self.num_docs = 0

    @staticmethod
    def tokenize(texts: list[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)

    def fit(self, texts: list[str]) -> BM25Index:
        self.model.index(self.tokenize(texts), show_progress=False)
        self.num_docs = len(texts)
        return self

    def scores(self, query: str) -> np.ndarray:
        """``(D,)`` BM25 scores of every document (zeros when no query word is in the vocabulary)."""
        toks = [t for t in self.tokenize([query])[0] if t in self.model.vocab_dict]
        if not toks:
            return np.zeros(self.num_docs, np.float32)
        return np.asarray(self.model.get_scores(toks), np.float32)

    def tensors(self) -> dict[str, np.ndarray]:
        s = self.model.scores
        return {"bm25_data": np.asarray(s["data"]), "bm25_indices": np.asarray(s["indices"]),
                "bm25_indptr": np.asarray(s["indptr"])}

    def meta(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "num_docs": self.num_docs, "vocab": self.model.vocab_dict}

    @classmethod
    def restore(cls, meta: dict, tensors: dict[str, np.ndarray]) -> BM25Index:
        out = cls(meta["k1"], meta["b"])
        out.num_docs = int(meta["num_docs"])
        out.model.scores = {"data": tensors["bm25_data"], "indices": tensors["bm25_indices"],
                            "indptr": tensors["bm25_indptr"], "num_docs": out.num_docs}
        out.model.vocab_dict = {str(k): int(v) for k, v in meta["vocab"].items()}
        out.model.unique_token_ids_set = set(out.model.vocab_dict.values())
        out.model.nonoccurrence_array = None  # the Lucene variant has none (bm25s' own load does the same)
        return out


# ----------------------------------------------------------------------------- the index
@dataclass
class DocGraphIndex:
    """A stored corpus document graph (see the module docstring); :meth:`load` / :func:`build_index`."""

    ids: list[str]
    titles: list[str]
    fingerprints: list[str]
    text: list[str]
    level: np.ndarray
    parent: np.ndarray
    doc: np.ndarray
    doc_ptr: np.ndarray
    x: np.ndarray
    knn: np.ndarray
    knn_sim: np.ndarray
    bm25: BM25Index
    encoder_name: str
    config: IndexConfig
    stats: dict[str, Any]

    @property
    def num_docs(self) -> int:
        return len(self.ids)

    @property
    def num_nodes(self) -> int:
        return len(self.text)

    def paragraph_rows(self) -> np.ndarray:
        return np.flatnonzero(self.level == PARAGRAPH)

    def article(self, i: int) -> Article:
        """Document ``i`` as an :class:`Article` rebuilt from the stored node texts (same layout)."""
        a, b = int(self.doc_ptr[i]), int(self.doc_ptr[i + 1])
        lv, par = self.level[a:b], self.parent[a:b]
        sections: list[tuple[str, list[list[str]]]] = []
        sec_pos: dict[int, int] = {}
        para_pos: dict[int, tuple[int, int]] = {}
        for r in range(a, b):
            k = int(lv[r - a])
            if k == SECTION:
                sec_pos[r] = len(sections)
                sections.append((self.text[r], []))
            elif k == PARAGRAPH:
                s = sec_pos[int(par[r - a])]
                para_pos[r] = (s, len(sections[s][1]))
                sections[s][1].append([] if self.config.sentence_nodes else [self.text[r]])
            elif k == SENTENCE:
                s, p = para_pos[int(par[r - a])]
                sections[s][1][p].append(self.text[r])
        return Article(title=self.titles[i], sections=sections, source=self.ids[i])

    # -- storage
    def tensors(self) -> dict[str, np.ndarray]:
        return {"x": np.ascontiguousarray(self.x, np.float32), "level": self.level.astype(np.int8),
                "parent": self.parent.astype(np.int64), "doc": self.doc.astype(np.int64),
                "doc_ptr": self.doc_ptr.astype(np.int64), "knn": self.knn.astype(np.int64),
                "knn_sim": self.knn_sim.astype(np.float32), **self.bm25.tensors()}

    def manifest(self) -> dict[str, Any]:
        return {"format": INDEX_FORMAT, "version": INDEX_VERSION, "encoder": self.encoder_name,
                "dim": int(self.x.shape[1]), "config": asdict(self.config),
                "documents": [[i, t, f] for i, t, f in zip(self.ids, self.titles, self.fingerprints)],
                "bm25": self.bm25.meta(), "stats": self.stats}

    def save(self, folder: str | os.PathLike) -> Path:
        """Write the index atomically (see the module docstring)."""
        from safetensors.numpy import save_file

        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        save_file(self.tensors(), str(tmp / "tensors.safetensors"))
        (tmp / "texts.json").write_text(json.dumps(self.text, ensure_ascii=False))
        (tmp / "index.json").write_text(json.dumps(self.manifest(), ensure_ascii=False))
        old = folder.parent / f".{folder.name}.old-{os.getpid()}"
        if folder.exists():
            os.replace(folder, old)
        os.replace(tmp, folder)
        if old.exists():
            shutil.rmtree(old, ignore_errors=True)
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike) -> DocGraphIndex:
        from safetensors.numpy import load_file

        folder = Path(folder)
        restore_aside(folder)
        man = folder / "index.json"
        if not man.is_file():
            raise FileNotFoundError(f"{folder} is not a document-graph index (no index.json); make one with "
                                    "`toporag docgraph index CORPUS --out DIR`")
        try:
            m = json.loads(man.read_text())
            if m.get("format") != INDEX_FORMAT:
                raise ValueError(f"format {m.get('format')!r} is not {INDEX_FORMAT!r}")
            if int(m.get("version", 0)) > INDEX_VERSION:
                raise ValueError(f"version {m['version']} is newer than this program's {INDEX_VERSION}")
            t = load_file(str(folder / "tensors.safetensors"))
            text = json.loads((folder / "texts.json").read_text())
            docs = m["documents"]
            out = cls(ids=[d[0] for d in docs], titles=[d[1] for d in docs], fingerprints=[d[2] for d in docs],
                      text=text, level=t["level"].astype(np.int64), parent=t["parent"], doc=t["doc"],
                      doc_ptr=t["doc_ptr"], x=t["x"], knn=t["knn"], knn_sim=t["knn_sim"],
                      bm25=BM25Index.restore(m["bm25"], t), encoder_name=m["encoder"],
                      config=IndexConfig(**m["config"]), stats=m.get("stats", {}))
        except (KeyError, TypeError, ValueError, OSError) as e:
            raise GraphFormatError(f"not a valid document-graph index ({e})", file=str(folder)) from None
        if not (out.x.shape[0] == len(out.text) == out.level.size and out.doc_ptr.size == out.num_docs + 1):
            raise GraphFormatError("index files disagree on the node / document counts", file=str(folder))
        return out


def restore_aside(folder: Path) -> None:
    """After a crash between the two renames of :meth:`DocGraphIndex.save`, put the old index back."""
    if folder.exists():
        return
    aside = sorted(folder.parent.glob(f".{folder.name}.old-*")) if folder.parent.is_dir() else []
    if aside:
        os.replace(aside[-1], folder)


def work_folder(out: Path) -> Path:
    return out.parent / f".{out.name}.work"


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


def _neighbours(x: np.ndarray, level: np.ndarray, doc: np.ndarray, k: int, old: DocGraphIndex | None,
                old_row_map: np.ndarray | None, n: int, only_added: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(knn rows, cosines, paragraph rows)``: extended in ``O(new x P)`` when documents were only added
    (old rows first, in their order), else recomputed."""
    paras = np.flatnonzero(level == PARAGRAPH)
    xp, dp = x[paras], doc[paras]
    if only_added and k and old is not None and old.knn.shape[1] == k:
        n_old_p = int((old.level == PARAGRAPH).sum())
        pos = np.full(n, -1, np.int64)
        pos[paras] = np.arange(paras.size)
        okn = np.where(old.knn >= 0, pos[old_row_map[np.maximum(old.knn, 0)]], -1)
        new_r, new_s = top_neighbours(xp[n_old_p:], dp[n_old_p:], xp, dp, k)
        add_r, add_s = top_neighbours(xp[:n_old_p], dp[:n_old_p], xp[n_old_p:], dp[n_old_p:], k)
        add_r = np.where(add_r >= 0, add_r + n_old_p, -1)
        old_r, old_s = merge_neighbours(okn, old.knn_sim, add_r, add_s)
        knn_pos, knn_sim = np.concatenate([old_r, new_r]), np.concatenate([old_s, new_s])
    else:
        knn_pos, knn_sim = top_neighbours(xp, dp, xp, dp, k)
    return np.where(knn_pos >= 0, paras[np.maximum(knn_pos, 0)], -1), knn_sim.astype(np.float32), paras


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
    old = None
    if out is not None and not rebuild:
        restore_aside(out)
        if (out / "index.json").is_file():
            old = DocGraphIndex.load(out)
            if old.encoder_name != name or old.config.layout_key() != cfg.layout_key():
                raise ValueError(f"{out} was built with encoder {old.encoder_name!r} and {old.config.layout_key()}; "
                                 f"this run uses {name!r} and {cfg.layout_key()}: pass --rebuild or another --out")
    keep_old, fresh, replaced, removed = _plan(corpus, old, prune)
    # -- lay out and embed the fresh documents
    t = time.perf_counter()
    arts = [document_article(d, cfg.max_paragraph_chars) for d in fresh]
    block = lay_out(arts, cfg) if arts else None
    t_layout = time.perf_counter() - t
    t = time.perf_counter()
    dim = int(encoder.dim)
    if block is not None:
        work = work_folder(out) if out is not None else None
        vecs = embed_resumable(block.embed_text, encoder, work, cfg.chunk_size, on_progress)
        xb = np.zeros((len(block.text), dim), np.float32)
        xb[block.embed_rows] = vecs
        if cfg.embed == "pooled":
            xb = pool_upwards(xb, block.level, block.parent)
    t_embed = time.perf_counter() - t
    # -- concatenate kept old rows and the new block
    parts_text, parts_lv, parts_par, parts_doc, parts_x = [], [], [], [], []
    ids, titles, fps, ptr = [], [], [], [0]
    old_row_map = None
    if keep_old:
        keep_rows = np.concatenate([np.arange(old.doc_ptr[i], old.doc_ptr[i + 1]) for i in keep_old])
        old_row_map = np.full(old.num_nodes, -1, np.int64)
        old_row_map[keep_rows] = np.arange(keep_rows.size)
        parts_text.append([old.text[r] for r in keep_rows])
        parts_lv.append(old.level[keep_rows])
        par = old.parent[keep_rows]
        parts_par.append(np.where(par >= 0, old_row_map[np.maximum(par, 0)], -1))
        doc_map = np.full(old.num_docs, -1, np.int64)
        doc_map[keep_old] = np.arange(len(keep_old))
        parts_doc.append(doc_map[old.doc[keep_rows]])
        parts_x.append(old.x[keep_rows])
        for i in keep_old:
            ids.append(old.ids[i])
            titles.append(old.titles[i])
            fps.append(old.fingerprints[i])
            ptr.append(ptr[-1] + int(old.doc_ptr[i + 1] - old.doc_ptr[i]))
    n_old_rows = sum(len(p) for p in parts_text)
    if block is not None:
        parts_text.append(block.text)
        parts_lv.append(block.level.astype(np.int64))
        parts_par.append(np.where(block.parent >= 0, block.parent + n_old_rows, -1))
        parts_doc.append(block.doc + len(ids))
        parts_x.append(xb)
        counts = np.bincount(block.doc, minlength=len(fresh))
        for d, c in zip(fresh, counts):
            ids.append(d.id)
            titles.append(d.name)
            fps.append(d.fingerprint())
            ptr.append(ptr[-1] + int(c))
    if not ids:
        raise GraphFormatError("no documents to index", file=corpus.name)
    text = [s for p in parts_text for s in p]
    level = np.concatenate(parts_lv).astype(np.int64)
    parent = np.concatenate(parts_par).astype(np.int64)
    doc = np.concatenate(parts_doc).astype(np.int64)
    x = np.concatenate(parts_x).astype(np.float32) if parts_x else np.zeros((0, dim), np.float32)
    # -- semantic neighbours of paragraphs
    t = time.perf_counter()
    knn, knn_sim, paras = _neighbours(x, level, doc, int(cfg.neighbours), old, old_row_map, len(text),
                                      old is not None and not replaced and removed == 0 and bool(keep_old))
    t_knn = time.perf_counter() - t
    # -- BM25 over title + text of every document
    t = time.perf_counter()
    bm_texts = []
    for i in range(len(ids)):
        a, b = ptr[i], ptr[i + 1]
        bm_texts.append(doc_bm25_text(titles[i], " ".join(text[r] for r in range(a, b)
                                                          if level[r] in (PARAGRAPH,))))
    bm25 = BM25Index(cfg.bm25_k1, cfg.bm25_b).fit(bm_texts)
    t_bm25 = time.perf_counter() - t
    stats = {"documents": len(ids), "nodes": len(text), "paragraphs": int(paras.size),
             "encoder_spec": encoder_spec or (old.stats.get("encoder_spec") if old else None) or name,
             "levels": {lv: int((level == i).sum()) for i, lv in enumerate(("document", "section", "paragraph",
                                                                                "sentence"), 1)}}
    index = DocGraphIndex(ids=ids, titles=titles, fingerprints=fps, text=text, level=level, parent=parent, doc=doc,
                          doc_ptr=np.asarray(ptr, np.int64), x=x, knn=knn, knn_sim=knn_sim,
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
