"""A stored corpus document graph: its settings, its arrays, and its files (written atomically).

:class:`IndexConfig` holds how a corpus becomes the index (one source of defaults);
:class:`DocGraphIndex` holds the rows (``level``, ``parent``, ``doc``, ``doc_ptr``, texts), the
vectors ``x (n, d)``, the paragraph neighbours ``knn`` / ``knn_sim (P, k)`` and the BM25 model,
and reads and writes ``DIR/index.json``, ``texts.json`` and ``tensors.safetensors``. A save goes
to a temporary sibling folder renamed into place (an existing index renamed aside first, removed
after), so ``DIR`` is always a complete index; :func:`restore_aside` puts the old one back after a
crash between the two renames.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import GraphFormatError
from .bm25 import BM25Index
from .build import PARAGRAPH, SECTION, SENTENCE, Article

INDEX_FORMAT, INDEX_VERSION = "toporag-docgraph-index", 1
EMBED_MODES = ("pooled", "every")


@dataclass
class IndexConfig:
    """How a corpus becomes a stored document graph (one source of defaults; see the module docstring).
    ``toporag docgraph``'s options are made from the fields whose metadata carries a ``help``.

    Attributes:
        embed: ``"pooled"`` (encode paragraphs; sections and documents get their mean) or ``"every"``.
        sentence_nodes: store sentences as nodes under their paragraph (about 5x the texts to encode).
        neighbours: semantic neighbours stored per paragraph (``0``: none).
        chunk_size: texts per encoder call and per stored work chunk (the unit of resumption).
        max_paragraph_chars: a longer paragraph is rejected naming the document.
        bm25_k1, bm25_b: BM25 parameters.
    """

    embed: str = field(default="pooled", metadata={
        "help": "pooled: encode paragraphs, sections/documents get their mean; every: each node",
        "choices": EMBED_MODES})
    sentence_nodes: bool = field(default=False, metadata={"help": "store sentence nodes too (~5x the texts to encode)",
                                                          "flag": "--sentences"})
    neighbours: int = field(default=4, metadata={"help": "semantic neighbours stored per paragraph"})
    chunk_size: int = field(default=256, metadata={"help": "texts per encoder call / resumable chunk"})
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
