"""Hierarchical document graphs: corpus -> document -> section -> paragraph -> sentence.

A :class:`DocGraph` holds ``n`` nodes in pre-order (a parent always comes before its
children), each with

* ``text[i]``: its *own* text (document: title, section: heading, paragraph: its
  sentences joined, sentence: the sentence; the root: the graph's name);
* ``content[i]``: the recursive concatenation of its subtree (title / heading first),
  which is what gets embedded: ``x (n, d)`` float32, rows L2-normalised;
* ``level[i]`` in ``0..4`` (:data:`LEVELS`), ``parent[i]`` (``-1`` for the root) and
  ``doc[i]``, the article it belongs to (``-1`` for the root).

Edges ``edges (2, E)`` carry a kind (:data:`TREE` parent -> child, :data:`SEMANTIC`
undirected and stored ``u < v``) and an **existence weight** ``p (E,)`` in ``[0, 1]``:
tree edges start at 1, a semantic edge at its cosine. Semantic edges join nodes whose
embeddings have ``cos > sim_threshold`` (theta, default 0.6); by default only nodes of
the same level are compared (``semantic_scope="same_level"``; ``"all"`` compares every
pair that is not a tree edge).

Input: :class:`Article` (title, sections of paragraphs of sentences), parsed from plain
text / Markdown files (``# title``, ``## section``, blank line between paragraphs,
sentences split by a punctuation rule) or from HotpotQA distractor records (see
:mod:`toporag_core.docgraph.records`). Bad input raises
:class:`~toporag_core.graph.GraphFormatError` naming the file and line.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import GraphFormatError

LEVELS = ("root", "document", "section", "paragraph", "sentence")
ROOT, DOCUMENT, SECTION, PARAGRAPH, SENTENCE = range(5)
TREE, SEMANTIC, GRAFT = 0, 1, 2
EDGE_KINDS = ("tree", "semantic", "graft")
TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".text")
_SENT_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]*[A-Z0-9])")


@dataclass
class BuildConfig:
    """How documents become a graph.
    ``toporag docgraph``'s options are made from the fields whose metadata carries a ``help``.

    Attributes:
        sim_threshold: theta; a semantic edge joins two nodes with cosine above it.
        semantic_scope: ``"same_level"`` (default) or ``"all"`` node pairs are compared.
        max_paragraph_chars: a longer paragraph is rejected with a message naming the file
            and line (one huge paragraph would be one node that swamps every context).
        sentence_nodes: a sentence is a node under its paragraph; ``False`` makes the paragraph the
            leaf (what the corpus index stores by default: the traversal's default depth of 3 ends
            at paragraphs, and sentences would multiply the texts to embed by ~5).
    """

    sim_threshold: float = field(default=0.6, metadata={"help": "semantic edge threshold", "flag": "--theta",
                                                        "metavar": "THETA"})
    semantic_scope: str = "same_level"
    max_paragraph_chars: int = 20_000
    sentence_nodes: bool = True

    def __post_init__(self) -> None:
        if not -1.0 <= float(self.sim_threshold) <= 1.0:
            raise ValueError(f"BuildConfig.sim_threshold must be in [-1, 1], got {self.sim_threshold}")
        if self.semantic_scope not in ("same_level", "all"):
            raise ValueError(f"BuildConfig.semantic_scope must be 'same_level' or 'all', got {self.semantic_scope!r}")
        if int(self.max_paragraph_chars) < 1:
            raise ValueError(f"BuildConfig.max_paragraph_chars must be >= 1, got {self.max_paragraph_chars}")


@dataclass
class Article:
    """One document: ``sections = [(heading, [paragraph, ...]), ...]``, a paragraph being a list
    of sentences. ``source`` names where it came from (for messages)."""

    title: str
    sections: list[tuple[str, list[list[str]]]]
    source: str = ""

    def sentences(self) -> list[str]:
        return [s for _, paras in self.sections for para in paras for s in para]


def split_sentences(text: str) -> list[str]:
    """Rule-based sentence split: after ``.!?`` (and closing quotes) before an upper-case
    letter or digit. Good enough for encyclopedic prose; no model needed."""
    text = " ".join(text.split())
    return [s.strip() for s in _SENT_SPLIT.split(text) if s.strip()] if text else []


def parse_text(text: str, source: str = "<text>", title: str | None = None,
               max_paragraph_chars: int = 20_000) -> Article:
    """Parse one plain-text / Markdown document.

    ``# Title`` on the first non-empty line names it (else ``title`` or the file stem);
    ``## Heading`` (or ``### ...``) opens a section; paragraphs are separated by blank lines.
    Raises :class:`GraphFormatError` for an empty document or an over-long paragraph.
    """
    lines = text.splitlines()
    sections: list[tuple[str, list[list[str]]]] = []
    heading, paras, buf, buf_line = "", [], [], 0
    doc_title = None

    def flush() -> None:
        nonlocal buf
        if buf:
            para = " ".join(buf)
            if len(para) > max_paragraph_chars:
                raise GraphFormatError(
                    f"paragraph of {len(para):,} characters exceeds max_paragraph_chars={max_paragraph_chars:,}; "
                    "separate paragraphs with blank lines or raise the limit", file=source, line=buf_line)
            sents = split_sentences(para)
            if sents:
                paras.append(sents)
        buf = []

    for no, raw in enumerate(lines, 1):
        line = raw.strip()
        m = re.match(r"^(#{1,6})\s+(.*)$", line)
        if m and len(m.group(1)) == 1 and doc_title is None and not sections and not paras and not buf:
            doc_title = m.group(2).strip()
            continue
        if m:
            flush()
            if paras:
                sections.append((heading, paras))
            heading, paras = m.group(2).strip(), []
            continue
        if not line:
            flush()
            continue
        if not buf:
            buf_line = no
        buf.append(line)
    flush()
    if paras:
        sections.append((heading, paras))
    if not sections:
        raise GraphFormatError("empty document: no sentence found", file=source)
    name = doc_title or title or Path(source).stem or "untitled"
    return Article(title=name, sections=[(h or name, p) for h, p in sections], source=source)


def read_document(path: str | os.PathLike, max_paragraph_chars: int = 20_000) -> Article:
    """Read and parse one text file; binary or non-UTF-8 files get a clear :class:`GraphFormatError`."""
    path = Path(path)
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise GraphFormatError("binary file (NUL bytes), not a text document", file=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise GraphFormatError(f"not UTF-8 text (byte {e.start})", file=str(path), line=line) from None
    return parse_text(text, source=str(path), title=path.stem, max_paragraph_chars=max_paragraph_chars)


def read_folder(folder: str | os.PathLike, max_paragraph_chars: int = 20_000) -> tuple[list[Article], list[str]]:
    """Every text file of ``folder`` (sorted): ``(articles, skipped)`` where ``skipped`` holds one
    message per file that could not be read. Raises when no file is usable."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder")
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    articles, skipped = [], []
    for f in files:
        try:
            articles.append(read_document(f, max_paragraph_chars))
        except (GraphFormatError, OSError) as e:
            skipped.append(str(e))
    if not articles:
        why = "; ".join(skipped[:3]) if skipped else "no files"
        raise GraphFormatError(f"no usable document ({why})", file=str(folder))
    return articles, skipped


# ----------------------------------------------------------------------------- the graph
@dataclass
class DocGraph:
    """A hierarchical document graph with semantic edges (see the module docstring)."""

    text: list[str]
    content: list[str]
    level: np.ndarray
    parent: np.ndarray
    doc: np.ndarray
    x: np.ndarray
    edges: np.ndarray
    edge_kind: np.ndarray
    p: np.ndarray
    titles: list[str]
    encoder_name: str = ""
    config: BuildConfig = field(default_factory=BuildConfig)
    name: str = "documents"
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.text)

    @property
    def num_edges(self) -> int:
        return int(self.edges.shape[1])

    def children(self, i: int) -> np.ndarray:
        """Tree children of node ``i`` in pre-order."""
        return np.flatnonzero(self.parent == i)

    def ancestors(self) -> np.ndarray:
        """``(n, 5)`` ancestor at each level (``-1`` where none); row ``i`` includes ``i`` itself."""
        n = self.num_nodes
        anc = np.full((n, len(LEVELS)), -1, dtype=np.int64)
        anc[np.arange(n), self.level] = np.arange(n)
        for lv in range(1, len(LEVELS)):  # parents precede children: fill level by level
            rows = np.flatnonzero(self.level == lv)
            anc[rows, :lv] = anc[self.parent[rows], :lv]
        return anc

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "content": self.content, "level": self.level.tolist(),
                "parent": self.parent.tolist(), "doc": self.doc.tolist(), "titles": self.titles,
                "encoder": self.encoder_name, "config": asdict(self.config), "name": self.name, "meta": self.meta}

    def save(self, folder: str | os.PathLike) -> Path:
        """``graph.json`` (texts, structure, config) + ``tensors.safetensors`` (x, edges, kinds, p),
        each written to a temporary file and renamed (atomic)."""
        from safetensors.numpy import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tmp_t, tmp_j = folder / ".tensors.safetensors.tmp", folder / ".graph.json.tmp"
        save_file({"x": np.ascontiguousarray(self.x, np.float32), "edges": np.ascontiguousarray(self.edges),
                   "edge_kind": self.edge_kind.astype(np.int64), "p": self.p.astype(np.float64)}, str(tmp_t))
        tmp_j.write_text(json.dumps(self.to_dict(), ensure_ascii=False))
        os.replace(tmp_t, folder / "tensors.safetensors")
        os.replace(tmp_j, folder / "graph.json")
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike) -> DocGraph:
        from safetensors.numpy import load_file

        folder = Path(folder)
        j, t = folder / "graph.json", folder / "tensors.safetensors"
        for f in (j, t):
            if not f.is_file():
                raise FileNotFoundError(f"{f} not found (not a document-graph folder; build one with "
                                        "`toporag docgraph build`)")
        try:
            d = json.loads(j.read_text())
            ts = load_file(str(t))
            return cls(text=d["text"], content=d["content"], level=np.asarray(d["level"], np.int64),
                       parent=np.asarray(d["parent"], np.int64), doc=np.asarray(d["doc"], np.int64),
                       x=ts["x"], edges=ts["edges"].astype(np.int64), edge_kind=ts["edge_kind"].astype(np.int64),
                       p=ts["p"].astype(np.float64), titles=d["titles"], encoder_name=d.get("encoder", ""),
                       config=BuildConfig(**d.get("config", {})), name=d.get("name", ""), meta=d.get("meta", {}))
        except (KeyError, TypeError, ValueError) as e:
            raise GraphFormatError(f"not a valid document graph ({e})", file=str(folder)) from None


def layout_articles(articles: Sequence[Article], name: str = "documents",
                    sentence_nodes: bool = True) -> tuple[list[str], list[str], list[int], list[int], list[int]]:
    """``(text, content, level, parent, doc)`` of the nodes in pre-order, the root first (see the module
    docstring). With ``sentence_nodes=False`` a paragraph is a leaf (the corpus index's default layout)."""
    if not articles:
        raise GraphFormatError("no documents to build a graph from")
    text, content, level, parent, doc = [name], [""], [ROOT], [-1], [-1]
    for a_i, art in enumerate(articles):
        if not art.sections or not art.sentences():
            raise GraphFormatError("empty document: no sentence found", file=art.source or art.title)
        d_id = len(text)
        text.append(art.title)
        level.append(DOCUMENT)
        parent.append(0)
        doc.append(a_i)
        content.append("")
        doc_parts = [art.title]
        for heading, paras in art.sections:
            s_id = len(text)
            text.append(heading)
            level.append(SECTION)
            parent.append(d_id)
            doc.append(a_i)
            content.append("")
            sec_parts = [heading]
            for para in paras:
                p_text = " ".join(para)
                text.append(p_text)
                content.append(p_text)
                level.append(PARAGRAPH)
                parent.append(s_id)
                doc.append(a_i)
                p_id = len(text) - 1
                for sent in para if sentence_nodes else ():
                    text.append(sent)
                    content.append(sent)
                    level.append(SENTENCE)
                    parent.append(p_id)
                    doc.append(a_i)
                sec_parts.append(p_text)
            content[s_id] = ". ".join([sec_parts[0], " ".join(sec_parts[1:])])
            doc_parts.append(content[s_id])
        content[d_id] = ". ".join([doc_parts[0], " ".join(doc_parts[1:])])
    content[0] = " ".join(content[i] for i in range(len(text)) if level[i] == DOCUMENT)
    return text, content, level, parent, doc


def semantic_edges(x: np.ndarray, level: np.ndarray, parent: np.ndarray,
                   config: BuildConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(edges (2, S) with u < v, cos (S,))``: node pairs with ``cos > theta`` (not the root, not a tree
    edge; same level unless ``semantic_scope="all"``). All pairs of ``x``: meant for one question's
    graph or a neighbourhood, not a whole corpus."""
    sim = x @ x.T
    iu, ju = np.triu_indices(len(level), k=1)
    ok = (sim[iu, ju] > config.sim_threshold) & (level[iu] > ROOT) & (level[ju] > ROOT)
    ok &= (parent[ju] != iu) & (parent[iu] != ju)
    if config.semantic_scope == "same_level":
        ok &= level[iu] == level[ju]
    return np.stack([iu[ok], ju[ok]]), np.clip(sim[iu[ok], ju[ok]], 0.0, 1.0)


def assemble_docgraph(articles: Sequence[Article], x: np.ndarray, config: BuildConfig | None = None,
                      name: str = "documents", meta: dict | None = None, encoder_name: str = "",
                      layout: tuple | None = None) -> DocGraph:
    """The graph of ``articles`` with given node vectors ``x (n, d)`` (rows in :func:`layout_articles`
    order, the root first): tree edges ``p = 1``, semantic edges ``p = cos`` where ``cos > theta``."""
    config = config or BuildConfig()
    text, content, level, parent, doc = layout or layout_articles(articles, name, config.sentence_nodes)
    lv, par = np.asarray(level, np.int64), np.asarray(parent, np.int64)
    x = np.asarray(x, dtype=np.float32)
    if x.shape[0] != len(text):
        raise ValueError(f"assemble_docgraph: {x.shape[0]} vectors for {len(text)} nodes")
    kids = np.flatnonzero(par >= 0)
    tree = np.stack([par[kids], kids])
    sem, cos = semantic_edges(x, lv, par, config)
    edges = np.concatenate([tree, sem], axis=1).astype(np.int64)
    kind = np.concatenate([np.full(tree.shape[1], TREE), np.full(sem.shape[1], SEMANTIC)]).astype(np.int64)
    p = np.concatenate([np.ones(tree.shape[1]), cos]).astype(np.float64)
    return DocGraph(text=text, content=content, level=lv, parent=par, doc=np.asarray(doc, np.int64), x=x,
                    edges=edges, edge_kind=kind, p=p, titles=[a.title for a in articles],
                    encoder_name=encoder_name, config=config, name=name, meta=dict(meta or {}))


def build_docgraph(articles: Sequence[Article], encoder, config: BuildConfig | None = None,
                   name: str = "documents", meta: dict | None = None) -> DocGraph:
    """Build the graph: nodes in pre-order, contents embedded in one encoder call, tree edges
    ``p = 1``, semantic edges ``p = cos`` where ``cos > theta``."""
    config = config or BuildConfig()
    layout = layout_articles(articles, name, config.sentence_nodes)
    x = np.asarray(encoder.encode(layout[1]), dtype=np.float32)
    return assemble_docgraph(articles, x, config, name, meta, getattr(encoder, "name", ""), layout)


def build_from_folder(folder: str | os.PathLike, encoder,
                      config: BuildConfig | None = None) -> tuple[DocGraph, list[str]]:
    """A graph from every readable text file of ``folder``; returns ``(graph, skipped-file messages)``."""
    config = config or BuildConfig()
    articles, skipped = read_folder(folder, config.max_paragraph_chars)
    return build_docgraph(articles, encoder, config, name=Path(folder).name or "documents"), skipped


def docgraph_to_textual_graph(graph: DocGraph, result=None, name: str | None = None):
    """The document graph as a :class:`~toporag_core.graph.TextualGraph` (so Explore and the
    Retrieval lab, i.e. TopoRAG and its baselines, run on the same documents).

    Nodes: the root, titles, section headings (``title / heading``), paragraphs and sentences;
    edges: ``has section`` / ``has paragraph`` / ``has sentence`` tree edges and ``similar``
    semantic edges. With a traversal ``result``, its grafted edges are added as ``grafted``.
    ``meta`` keeps the level, article and existence weight of every node / edge.
    """
    from ..graph import TextualGraph

    rel = {DOCUMENT: "has document", SECTION: "has section", PARAGRAPH: "has paragraph", SENTENCE: "has sentence"}
    node_text = []
    for i, t in enumerate(graph.text):
        lv = int(graph.level[i])
        node_text.append(f"{graph.titles[graph.doc[i]]} / {t}" if lv == SECTION else t or graph.name)
    ei = [graph.edges]
    etext = [rel[int(graph.level[v])] if k == TREE else "similar" for k, v in zip(graph.edge_kind, graph.edges[1])]
    if result is not None:
        for g in result.grafts():
            ei.append(np.array([[g["onto"][0]], [g["node"][0]]], dtype=np.int64))
            etext.append("grafted")
    return TextualGraph(node_text=node_text, edge_index=np.concatenate(ei, axis=1), edge_text=etext,
                        node_ids=[f"{LEVELS[int(lv)][0]}{i}" for i, lv in enumerate(graph.level)],
                        name=name or f"document graph: {graph.name}",
                        meta={"source": "docgraph", "level": graph.level.tolist(), "doc": graph.doc.tolist(),
                              "p": graph.p.tolist()})
