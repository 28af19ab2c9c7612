"""Dataset preprocessing for training and evaluation, cached on disk.

Per example: parse the graph -> lift to a cell complex -> embed the cells (the encoder of
:func:`~toporag_core.embed.get_encoder`, behind its SQLite cache) -> retrieve a subcomplex
for the question (:class:`PrepConfig`: a :class:`~toporag_core.retrieval.RetrievalSetting`,
the spanning-tree method and the 2-cell switch) -> keep the subcomplex tensors
(:class:`~toporag_core.nn.SubcomplexTensors`), the textualized context, the question, the
label and the retrieved cells' texts (for the error-analysis page). For a question whose raw
example names its answer-bearing nodes (``support``: SceneGraphs), ``covered`` records whether
retrieval kept all of them (:func:`support_covered`), so evaluation can tell a retrieval miss from a
reading mistake (``toporag compare --by coverage``, the error page's verdicts).

Cache: ``$TOPORAG_CACHE/prep/<dataset>/<config key>-<hash>/<split>.safetensors`` (all tensors
of a split, keys ``"<i>.x0"`` ...) and ``<split>.json`` (texts). Both are written to a
temporary file and moved into place (``os.replace``), the JSON last, and both carry one random
token, so a half-written pair is detected and rebuilt. Reruns of one (dataset, config) are instant.

Ablations are retrieval settings plus one switch: ``method="shortest-path"`` is "w/o TSR"
(no 2-cells), ``use_cells2=False`` is "w/o CRL": retrieval with ``k2 = 0`` and no 2-cells in
the tensors or the text; ``method="whole"`` takes every cell (no retrieval). ``text`` picks the
text format (``"csv"``, the default, or ``"compact"``; :data:`~toporag_core.retrieval.TEXT_FORMATS`).
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..cells.lift import LIFTINGS
from ..nn import SubcomplexTensors, subcomplex_tensors
from ..retrieval import EmbeddedComplex, RetrievalSetting, retrieve, textualize
from ..retrieval.textualize import DEFAULT_TEXT, check_text_format
from .registry import SPLITS, RawExample, load_raw

PREP_VERSION = 5  # 3: registry settings, w/o TSR without 2-cells, w/o CRL with k2 = 0, G-Retriever self-loops;
# 4: 2-cell walks name attribute-rich nodes by label + node_id (retrieval.textualize.node_label);
# 5: Example.covered (answer-bearing objects retrieved); texts and tensors as in 4


@dataclass
class Example:
    """A preprocessed example: what the model and the evaluator need, nothing else."""

    id: str
    question: str
    context: str
    label: Any
    answer: str
    tensors: SubcomplexTensors
    cells: dict[str, Any] = field(default_factory=dict)  # retrieved nodes / edges / cells2 texts
    qtype: str | None = None
    covered: bool | None = None  # all answer-bearing nodes retrieved (None: the data does not say which)

    def meta(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "context": self.context, "label": self.label,
                "answer": self.answer, "cells": self.cells, "qtype": self.qtype, "covered": self.covered}


@dataclass(frozen=True)
class PrepConfig:
    """How the subcomplex shown to the model is chosen: a retrieval setting, the spanning-tree
    method of the lifting, and whether 2-cells are used (``False``: "w/o CRL", retrieval with
    ``k2 = 0``)."""

    retrieval: RetrievalSetting = field(default_factory=RetrievalSetting)
    use_cells2: bool = True
    tree: str = "bfs"
    text: str = DEFAULT_TEXT  # how the subcomplex is written for the LLM (retrieval.textualize.TEXT_FORMATS)

    def __post_init__(self) -> None:
        check_text_format(self.text)
        if self.tree not in LIFTINGS:
            raise ValueError(f"tree must be one of {LIFTINGS}, got {self.tree!r}")
        if self.retrieval.spec.dimension != "cells":
            raise ValueError(f"method {self.retrieval.method!r} retrieves nodes, not a subcomplex")

    @property
    def effective(self) -> RetrievalSetting:
        """The setting retrieval runs with (``k2 = 0`` without 2-cells)."""
        return self.retrieval if self.use_cells2 else self.retrieval.without_cells2()

    def key(self) -> str:
        """A readable, unique folder name for the cache."""
        text = "" if self.text == DEFAULT_TEXT else f"-text={self.text}"  # csv keys are unchanged
        return f"{self.effective.key()}-{self.tree}{'' if self.use_cells2 else '-no2cells'}{text}-v{PREP_VERSION}"

    def to_dict(self) -> dict[str, Any]:
        return {**self.retrieval.to_dict(), "use_cells2": self.use_cells2, "tree": self.tree, "text": self.text}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, **overrides: Any) -> "PrepConfig":
        """From :meth:`to_dict` output or an older flat dict (``method, k0, ..., use_cells2, tree``);
        a dict without ``text`` (written before text formats existed) reads the CSV layout."""
        d = dict(d or {})
        use_cells2, tree = bool(d.pop("use_cells2", True)), str(d.pop("tree", "bfs"))
        text = str(d.pop("text", DEFAULT_TEXT))
        return cls(RetrievalSetting.from_dict(d, **overrides), use_cells2, tree, text)


def support_covered(sub, support: Sequence[int]) -> bool:
    """All ``support`` node indices are 0-cells of the subcomplex (``False`` when unknown)."""
    return len(support) > 0 and bool(np.isin(np.asarray(support), np.asarray(sub.nodes)).all())


def prepare_example(raw: RawExample, encoder, config: PrepConfig) -> Example:
    """Lift, embed, retrieve, textualize one example."""
    ecx = EmbeddedComplex.from_graph(raw.graph, encoder, tree=config.tree)
    sub = retrieve(ecx, raw.query or raw.question, setting=config.effective)
    support = getattr(raw, "support", None)
    return Example(id=raw.id, question=raw.question,
                   context=textualize(sub, include_cells2=config.use_cells2, fmt=config.text),
                   label=raw.label, answer=raw.answer,
                   tensors=subcomplex_tensors(sub, ecx.emb, use_cells2=config.use_cells2),
                   cells=sub.cell_texts(config.use_cells2), qtype=raw.qtype,
                   covered=support_covered(sub, support) if support else None)


# ----------------------------------------------------------------------------- cache
def prep_cache_dir(dataset: str, config: PrepConfig, encoder_name: str,
                   cache_dir: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None) -> Path:
    """``<root>/<dataset>/<config key>-<hash of encoder name and data folder>``."""
    from ..embed import default_cache_dir

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "prep"
    source = encoder_name
    if data_dir is not None:  # a user's file or folder: its path, and for a file its size and time (edits rebuild)
        p = Path(data_dir).resolve()
        st = p.stat() if p.is_file() else None
        source += f"|{p}" + (f"|{st.st_size}|{st.st_mtime_ns}" if st else "")
    return root / dataset / f"{config.key()}-{hashlib.sha1(source.encode()).hexdigest()[:8]}"


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def save_split(folder: Path, split: str, examples: list[Example]) -> None:
    """``<split>.safetensors`` + ``<split>.json`` (same random token in both), atomically."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    tensors = {}
    for i, ex in enumerate(examples):
        tensors.update(ex.tensors.to_dict(prefix=f"{i}."))
    _atomic_write(folder / f"{split}.safetensors", lambda p: save_file(tensors, str(p), metadata={"token": token}))
    meta = {"version": PREP_VERSION, "token": token, "count": len(examples), "examples": [ex.meta() for ex in examples]}
    _atomic_write(folder / f"{split}.json", lambda p: p.write_text(json.dumps(meta)))


def load_split(folder: Path, split: str) -> list[Example] | None:
    """The cached split, or ``None`` when missing, stale or half-written."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    jp, tp = folder / f"{split}.json", folder / f"{split}.safetensors"
    if not (jp.is_file() and tp.is_file()):
        return None
    try:
        meta = json.loads(jp.read_text())
        with safe_open(str(tp), framework="pt") as f:
            token = (f.metadata() or {}).get("token")
        if meta.get("version") != PREP_VERSION or token != meta.get("token"):
            return None
        tensors = load_file(str(tp))
        return [Example(id=m["id"], question=m["question"], context=m["context"], label=m["label"],
                        answer=m["answer"], tensors=SubcomplexTensors.from_dict(tensors, prefix=f"{i}."),
                        cells=m.get("cells", {}), qtype=m.get("qtype"), covered=m.get("covered"))
                for i, m in enumerate(meta["examples"])]
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return None  # corrupt: rebuild


def prepare_dataset(dataset: str, config: PrepConfig | None = None, splits: tuple[str, ...] = SPLITS,
                    encoder=None, data_dir: str | os.PathLike | None = None,
                    cache_dir: str | os.PathLike | None = None, show_progress: bool = True) -> dict[str, list[Example]]:
    """Preprocessed splits of ``dataset`` under ``config``, from the cache when possible
    (``splits`` may name ``"all"``: every split in order).

    ``encoder``: default :func:`~toporag_core.embed.get_encoder` (honours ``TOPORAG_ENCODER``).
    """
    from tqdm.auto import tqdm

    from ..embed import get_encoder

    config = config or PrepConfig()
    encoder = encoder or get_encoder()
    folder = prep_cache_dir(dataset, config, encoder.name, cache_dir, data_dir)
    out: dict[str, list[Example]] = {}
    todo = []
    for s in splits:
        cached = load_split(folder, s)
        if cached is None:
            todo.append(s)
        else:
            out[s] = cached
    if not todo:
        return out
    raw = load_raw(dataset, data_dir)
    raw.setdefault("all", [r for s in SPLITS for r in raw.get(s, [])])  # a user's file or folder, evaluated whole
    # Encode every text of the missing splits in one deduplicated, batched call first.
    texts = [t for s in todo for r in raw[s] for t in (*r.graph.node_text, *r.graph.edge_text, r.query or r.question)]
    encoder.encode(texts, show_progress=show_progress)
    for s in todo:
        exs = [prepare_example(r, encoder, config)
               for r in tqdm(raw[s], desc=f"prep {dataset}/{s}", disable=not show_progress)]
        save_split(folder, s, exs)
        out[s] = exs
    (folder / "setting.json").write_text(json.dumps({"dataset": dataset, "encoder": encoder.name,
                                                     **config.to_dict()}))
    return out
