"""Graphs the app can load without an upload: built-in samples and the shared benchmark data.

Built-in samples live in ``assets/samples/`` (written by the project, not copied from any
dataset) and are read with the ordinary loaders, so they exercise the same code path as an
upload. Benchmark rows (ExplaGraphs, WebQSP) come from ``../shared/data`` when it exists.
Every loader puts a suggested question into ``graph.meta["question"]``, and each built-in sample the
gold answer of that question (the ExplaGraphs row's ``label``, else :attr:`Sample.answers` as
``meta["gold_answers"]``; not ``answers``, which would make the graph look like a WebQSP row to the task
registry), so the Ask page judges an answer to it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..graph import TextualGraph


def assets_dir() -> Path:
    """``$TOPORAG_ASSETS`` or ``<repo root>/assets`` (the package sits in the repo root)."""
    env = os.environ.get("TOPORAG_ASSETS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "assets"


@dataclass(frozen=True)
class Sample:
    """One built-in sample graph: catalogue key, title, file under ``assets/samples``, what it shows."""

    key: str
    title: str
    file: str
    description: str
    question: str
    task: str | None = None  # the registered task the sample is an example of (its checkpoint answers it)
    answers: tuple[str, ...] = ()  # the gold answer(s) of ``question`` (the file's own label, if any, wins)
    every_answer: bool = False  # a question in several parts: a right answer names every one of ``answers``


SAMPLES: tuple[Sample, ...] = (
    Sample("scene", "Scene: a breakfast table", "scene_breakfast.csv",
           "Objects on a table with colours, materials and spatial relations; shared materials and "
           "colours close loops (cup - ceramic - plate, apple - red - cup, ...), like TopoRAG's Figure 1.",
           "What is the red cup made of, and what is it next to on the table?", task="scene_graphs",
           answers=("ceramic", "plate"), every_answer=True),
    Sample("kg", "Knowledge graph: the Curies", "kg_curie.json",
           "A small encyclopaedic knowledge graph (people, places, prizes, discoveries) with many cycles "
           "through shared prizes, cities and discoveries.",
           "Which element named after Poland did Marie Curie discover?", answers=("polonium",)),
    Sample("argument", "Argument graph (ExplaGraphs style)", "argument_libraries.tsv",
           "One argument pair with its explanation graph, in the ExplaGraphs TSV layout "
           "(arg1, arg2, label, graph); the graph has one closed loop of reasons.",
           ""),
)
SAMPLE_KEYS = tuple(s.key for s in SAMPLES)


def sample(key: str) -> Sample:
    for s in SAMPLES:
        if s.key == key:
            return s
    raise ValueError(f"unknown sample {key!r}; choose one of {', '.join(SAMPLE_KEYS)}")


def sample_task(graph: TextualGraph) -> str | None:
    """The task a built-in sample is an example of (``Sample.task``, by ``meta["source"]``), else ``None``."""
    src = str(graph.meta.get("source") or "")
    key = src.split(":", 1)[1] if src.startswith("sample:") else None
    return sample(key).task if key in SAMPLE_KEYS else None


def load_sample(key: str) -> TextualGraph:
    """Load a built-in sample by key (``scene`` | ``kg`` | ``argument``) with the ordinary loaders."""
    s = sample(key)
    path = assets_dir() / "samples" / s.file
    if s.file.endswith(".tsv"):  # ExplaGraphs layout: one row with its arguments and label
        from .explagraphs import explagraphs_row_to_graph, read_explagraphs

        g = explagraphs_row_to_graph(read_explagraphs(path)[0], file=str(path))
    else:
        from . import load_graph

        g = load_graph(path)
    g.name = s.title
    g.meta.setdefault("question", s.question)
    if s.answers and g.meta.get("label") in (None, "") and not g.meta.get("answers"):
        g.meta["gold_answers"] = list(s.answers)
        if s.every_answer:
            g.meta["answers_needed"] = "all"
    g.meta["source"] = f"sample:{s.key}"
    return g


# ------------------------------------------------------------------ shared benchmark data
def shared_data_dir() -> Path | None:
    """``$TOPORAG_SHARED_DATA`` if set, else ``<repo root>/../shared/data`` if it exists, else ``None``
    (the one rule; the task registry reads it from here)."""
    env = os.environ.get("TOPORAG_SHARED_DATA")
    d = Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "data"
    return d if d.is_dir() else None


def explagraphs_path() -> Path | None:
    d = shared_data_dir()
    p = d / "expla_graphs_train_dev.tsv" if d else None
    return p if p is not None and p.is_file() else None


def webqsp_path() -> Path | None:
    d = shared_data_dir()
    p = d / "webqsp_sample.json" if d else None
    return p if p is not None and p.is_file() else None


def explagraphs_rows() -> list[dict[str, Any]]:
    """All ExplaGraphs rows (raw: ``id, arg1, arg2, label, graph, line``); ``[]`` without shared data."""
    p = explagraphs_path()
    if p is None:
        return []
    from .explagraphs import read_explagraphs

    return read_explagraphs(p)


def explagraphs_graph(row: dict[str, Any]) -> TextualGraph:
    """One ExplaGraphs row -> graph with the benchmark prompt as its question."""
    from .explagraphs import explagraphs_row_to_graph

    g = explagraphs_row_to_graph(row, file=str(explagraphs_path()))
    g.meta["source"] = f"explagraphs:{row.get('id')}"
    return g


def webqsp_records() -> list[dict[str, Any]]:
    """The WebQSP sample records (``id, question, answers, nodes, edges``); ``[]`` without shared data."""
    p = webqsp_path()
    if p is None:
        return []
    from .webqsp import read_webqsp

    return read_webqsp(p)


def webqsp_graph(rec: dict[str, Any], index: int) -> TextualGraph:
    """One WebQSP record -> graph; its question and answers land in ``meta``."""
    from .webqsp import webqsp_record_to_graph

    g = webqsp_record_to_graph(rec, file=str(webqsp_path()), record=index)
    g.meta.setdefault("question", rec.get("question", ""))
    g.meta.setdefault("answers", rec.get("answers", []))
    g.meta["source"] = f"webqsp:{rec.get('id', index)}"
    g.name = g.name or f"WebQSP {rec.get('id', index)}"
    return g


# ------------------------------------------------------------------ graphs named by a source string
def graph_from_source(source: str) -> TextualGraph:
    """The graph a ``meta["source"]`` string names: ``sample:<key>``, ``explagraphs:<row id>`` or
    ``webqsp:<record id>`` (what the app keeps in the page address so a reload finds it again).
    ``ValueError`` naming the source when it cannot be found here."""
    kind, _, ident = str(source).partition(":")
    if kind == "sample":
        return load_sample(ident)
    if kind == "explagraphs":
        for row in explagraphs_rows():
            if str(row.get("id")) == ident:
                return explagraphs_graph(row)
    elif kind == "webqsp":
        for j, rec in enumerate(webqsp_records()):
            if str(rec.get("id", j)) == ident:
                return webqsp_graph(rec, j)
    raise ValueError(f"graph {source!r} is not available on this machine")


def restorable_source(graph: TextualGraph) -> str | None:
    """The graph's ``source`` when :func:`graph_from_source` can load it again, else ``None`` (uploads)."""
    src = str(graph.meta.get("source") or "")
    return src if src.partition(":")[0] in ("sample", "explagraphs", "webqsp") else None
