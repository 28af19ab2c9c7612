"""Dataset preprocessing for training and evaluation, cached on disk.

Per example: parse the graph -> lift to a cell complex -> embed the cells (the packaged
sentence encoder behind the SQLite :class:`~toporag_core.embed.CachedEncoder`) -> retrieve a
subcomplex for the question (:class:`RetrievalSetting`) -> keep the subcomplex tensors
(:class:`~toporag_core.nn.SubcomplexTensors`), the textualized context, the question, the
label and the retrieved cells' texts (for the error-analysis page).

Cache: ``$TOPORAG_CACHE/prep/<dataset>/<setting key>/<split>.safetensors`` (all tensors of a
split, keys ``"<i>.x0"`` ...) and ``<split>.json`` (texts). Both are written to a temporary
file and moved into place (``os.replace``), the JSON last, and both carry one random token, so
a half-written pair is detected and rebuilt. Reruns of one (dataset, setting) are instant.

Datasets are a registry, ``DATASETS: name -> loader``. A loader takes the shared-data folder
(or ``None``) and returns ``{"train": [...], "val": [...], "test": [...]}`` lists of
:class:`RawExample`. Add one with :func:`register_dataset` (the SceneGraphs module does:
``register_dataset("scene_graphs", load_scene_examples)``); ``metric`` names the
:mod:`toporag_core.metrics` function to score it (defaults to the dataset name).

Ablation switches live here as data settings: ``method="shortest-path"`` is "w/o TSR",
``use_cells2=False`` ("w/o CRL") drops 2-cells from the tensors and from the text;
``method="whole"`` takes every cell of the graph (no retrieval).
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .graph import TextualGraph
from .nn import SubcomplexTensors, subcomplex_tensors

PREP_VERSION = 2  # 2: 1-cell tie-break, 1e-5 rounding, 2-cell mapping fix in retrieval
SPLITS = ("train", "val", "test")


# ----------------------------------------------------------------------------- types
@dataclass
class RawExample:
    """One question on one graph, before preprocessing.

    ``label`` is what the metric compares against (a string, or a list of gold answers for
    WebQSP); ``answer`` is the training target text; ``query`` is the text used for
    retrieval (defaults to the question); ``qtype`` an optional question type tag.
    """

    id: str
    graph: TextualGraph
    question: str
    label: Any
    answer: str
    query: str | None = None
    qtype: str | None = None


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

    def meta(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "context": self.context, "label": self.label,
                "answer": self.answer, "cells": self.cells, "qtype": self.qtype}


@dataclass
class RetrievalSetting:
    """How the subcomplex shown to the model is chosen (``method="whole"``: every cell)."""

    method: str = "toporag"
    k0: int = 3
    k1: int = 3
    k2: int = 3
    c2: float = 0.5
    edge_cost: float = 0.5
    use_cells2: bool = True
    tree: str = "bfs"

    def key(self) -> str:
        """A readable, unique folder name for the cache."""
        base = "whole" if self.method == "whole" else (
            f"{self.method}-k{self.k0}.{self.k1}.{self.k2}-c{self.c2:g}-e{self.edge_cost:g}")
        return f"{base}-{self.tree}{'' if self.use_cells2 else '-no2cells'}-v{PREP_VERSION}"


# ----------------------------------------------------------------------------- registry
LoaderFn = Callable[[Path | None], dict[str, list[RawExample]]]
DATASETS: dict[str, LoaderFn] = {}
METRIC_OF: dict[str, str] = {}


def register_dataset(name: str, loader: LoaderFn, metric: str | None = None) -> None:
    """Make ``name`` available to ``toporag train/eval --dataset name``."""
    DATASETS[name] = loader
    METRIC_OF[name] = metric or name


def _data_dir(data_dir: str | os.PathLike | None) -> Path:
    from .datasets import shared_data_dir

    d = Path(data_dir) if data_dir is not None else shared_data_dir()
    if d is None or not Path(d).is_dir():
        raise FileNotFoundError("shared data folder not found: set TOPORAG_SHARED_DATA or pass --data-dir")
    return Path(d)


def load_expla_graphs(data_dir: Path | None) -> dict[str, list[RawExample]]:
    """ExplaGraphs with the benchmark's seeded 60/20/20 split; retrieval query = both arguments."""
    from .datasets import EXPLAGRAPHS_FILE, explagraphs_question, explagraphs_row_to_graph, explagraphs_split, \
        read_explagraphs

    path = _data_dir(data_dir) / EXPLAGRAPHS_FILE
    rows = read_explagraphs(path)
    out: dict[str, list[RawExample]] = {}
    for split, idx in zip(SPLITS, explagraphs_split(len(rows), seed=42)):
        out[split] = [RawExample(id=str(rows[i]["id"]), graph=explagraphs_row_to_graph(rows[i], file=str(path)),
                                 question=explagraphs_question(rows[i]["arg1"], rows[i]["arg2"]),
                                 label=rows[i]["label"], answer=rows[i]["label"],
                                 query=f"{rows[i]['arg1']} {rows[i]['arg2']}") for i in idx]
    return out


def load_webqsp(data_dir: Path | None) -> dict[str, list[RawExample]]:
    """The 12-question WebQSP sample (checks only): seeded 60/20/20 split like ExplaGraphs."""
    from .datasets import WEBQSP_FILE, explagraphs_split, read_webqsp, webqsp_record_to_graph

    path = _data_dir(data_dir) / WEBQSP_FILE
    recs = read_webqsp(path)
    out: dict[str, list[RawExample]] = {}
    for split, idx in zip(SPLITS, explagraphs_split(len(recs), seed=42)):
        out[split] = []
        for i in idx:
            r = recs[i]
            answers = [str(a) for a in r.get("answers", [])]
            out[split].append(RawExample(id=str(r.get("id", i)), graph=webqsp_record_to_graph(r, file=str(path), record=i),
                                         question=f"Question: {r['question']}\nAnswer:", label=answers,
                                         answer="|".join(answers), query=str(r["question"])))
    return out


register_dataset("expla_graphs", load_expla_graphs)
register_dataset("webqsp", load_webqsp)


def load_raw(dataset: str, data_dir: str | os.PathLike | None = None) -> dict[str, list[RawExample]]:
    """Raw splits of a registered dataset (``scene_graphs`` registers itself on import)."""
    if dataset not in DATASETS and dataset == "scene_graphs":
        try:  # the SceneGraphs module registers its loader when imported
            import importlib

            importlib.import_module("toporag_core.scenes")
        except ModuleNotFoundError:
            pass
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; registered: {sorted(DATASETS)}")
    return DATASETS[dataset](Path(data_dir) if data_dir is not None else None)


# ----------------------------------------------------------------------------- one example
def whole_subcomplex(ecx):
    """Every cell of the complex as a :class:`~toporag_core.retrieval.Subcomplex` (no retrieval)."""
    from .retrieval.result import make_subcomplex

    cx = ecx.complex
    zeros = (np.zeros(cx.num_nodes), np.zeros(cx.num_edges), np.zeros(cx.num_cells2))
    return make_subcomplex(cx, np.arange(cx.num_nodes), np.arange(cx.num_edges), np.arange(cx.num_cells2),
                           zeros, "whole", {}, {})


def retrieve_for(ecx, query: str | np.ndarray, setting: RetrievalSetting):
    """The subcomplex for one question under ``setting``."""
    from .retrieval import retrieve

    if setting.method == "whole":
        return whole_subcomplex(ecx)
    return retrieve(ecx, query, method=setting.method, k0=setting.k0, k1=setting.k1, k2=setting.k2,
                    c2=setting.c2, edge_cost=setting.edge_cost)


def retrieved_cells(sub, include_cells2: bool = True) -> dict[str, Any]:
    """Texts of the retrieved cells (what the error-analysis page shows)."""
    d = sub.to_dict()
    return {"nodes": d["nodes"], "edges": d["edges"], "cells2": d["cells2"] if include_cells2 else [],
            "counts": d["counts"]}


def prepare_example(raw: RawExample, encoder, setting: RetrievalSetting) -> Example:
    """Lift, embed, retrieve, textualize one example."""
    from .retrieval import EmbeddedComplex, textualize

    ecx = EmbeddedComplex.from_graph(raw.graph, encoder, tree=setting.tree)
    sub = retrieve_for(ecx, raw.query or raw.question, setting)
    return Example(id=raw.id, question=raw.question, context=textualize(sub, include_cells2=setting.use_cells2),
                   label=raw.label, answer=raw.answer,
                   tensors=subcomplex_tensors(sub, ecx.emb, use_cells2=setting.use_cells2),
                   cells=retrieved_cells(sub, setting.use_cells2), qtype=raw.qtype)


# ----------------------------------------------------------------------------- cache
def prep_cache_dir(dataset: str, setting: RetrievalSetting, encoder_name: str,
                   cache_dir: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None) -> Path:
    """``<root>/<dataset>/<setting key>-<hash of encoder name and data folder>``."""
    from .embed import default_cache_dir

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "prep"
    source = encoder_name if data_dir is None else f"{encoder_name}|{Path(data_dir).resolve()}"
    return root / dataset / f"{setting.key()}-{hashlib.sha1(source.encode()).hexdigest()[:8]}"


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
                        cells=m.get("cells", {}), qtype=m.get("qtype"))
                for i, m in enumerate(meta["examples"])]
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return None  # corrupt: rebuild


def default_encoder(cache_dir: str | os.PathLike | None = None):
    """The packaged sentence encoder behind the persistent embedding cache."""
    from .embed import CachedEncoder, SentenceTransformerEncoder

    return CachedEncoder(SentenceTransformerEncoder(), cache_dir=cache_dir)


def prepare_dataset(dataset: str, setting: RetrievalSetting | None = None, splits: tuple[str, ...] = SPLITS,
                    encoder=None, data_dir: str | os.PathLike | None = None,
                    cache_dir: str | os.PathLike | None = None, show_progress: bool = True) -> dict[str, list[Example]]:
    """Preprocessed splits of ``dataset`` under ``setting``, from the cache when possible."""
    from tqdm.auto import tqdm

    setting = setting or RetrievalSetting()
    enc_name = getattr(encoder, "name", "all-MiniLM-L6-v2") if encoder is not None else "all-MiniLM-L6-v2"
    folder = prep_cache_dir(dataset, setting, enc_name, cache_dir, data_dir)
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
    encoder = encoder or default_encoder()
    # Encode every text of the missing splits in one deduplicated, batched call first.
    texts = [t for s in todo for r in raw[s] for t in (*r.graph.node_text, *r.graph.edge_text, r.query or r.question)]
    encoder.encode(texts, show_progress=show_progress)
    for s in todo:
        exs = [prepare_example(r, encoder, setting)
               for r in tqdm(raw[s], desc=f"prep {dataset}/{s}", disable=not show_progress)]
        save_split(folder, s, exs)
        out[s] = exs
    (folder / "setting.json").write_text(json.dumps({"dataset": dataset, "encoder": enc_name, **asdict(setting)}))
    return out
