"""The task (dataset) registry: what a question-answering dataset is, in one place.

A :class:`Task` names a dataset for ``toporag train/eval --dataset``, the pages and the
pipeline: its ``loader`` (shared-data folder or ``None`` -> ``{"train", "val", "test"}``
lists of :class:`RawExample`), its ``metric`` (a :mod:`toporag_core.metrics` function name),
its closed ``answer_set`` when answers come from a fixed label set (ExplaGraphs
``support``/``counter``: such answers are scored by label likelihood, not generated), and
``matches(graph)``: whether a loaded graph belongs to this task (from its ``meta``), so the
Ask page can default to, and warn about, the checkpoint of the graph's task. ``evidence(raw)``
(optional) gives the sentence a yes/no answer rests on (GQA's full answer without its
"Yes,"/"No,"), for evidence-first training (``toporag train --answer-style evidence``).
``citation(raw, example)`` (optional) gives, for an open question, the lines of the example's
*retrieved context* its answer rests on, copied verbatim (``toporag train --answer-style cited``);
it sees the prepared :class:`~toporag_core.tasks.prep.Example` because a citation names the node
ids of that context, which only exist after retrieval. ``prompt`` names how the task's examples phrase a question (a
:data:`~toporag_core.model.QUESTION_FORMS` key: ``"graphqa"`` = ``Question: ... Answer:`` for scenes
and WebQSP); training stores it in the checkpoint's config, where answering reads it, so ``toporag
ask``, the Ask page and the core service prompt a checkpoint as its training did.

Built-in tasks register themselves in :mod:`.explagraphs`, :mod:`.webqsp` and
:mod:`.scenes.dataset`; ``toporag_core.tasks`` imports all three.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..graph import TextualGraph
from ..io.samples import shared_data_dir
from ..model import QUESTION_FORMS

SPLITS = ("train", "val", "test")


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


LoaderFn = Callable[[Path | None], dict[str, list[RawExample]]]


@dataclass(frozen=True)
class Task:
    """A registered dataset (see the module docstring); ``metric`` and ``label`` default to ``name``.

    ``evidence``: the sentence a yes/no answer rests on, per raw example (``None`` where there is none),
    for ``toporag train --answer-style evidence``; ``citation``: the context lines an open answer rests on,
    per raw example and its prepared example, for ``--answer-style cited``; ``prompt``: the
    :data:`~toporag_core.model.QUESTION_FORMS` name of how the task's examples phrase a question for the
    LLM; training stores it as the checkpoint's ``question_form`` and the pipeline applies it to a user's
    question, so a checkpoint reads at answer time what it read in training.
    """

    name: str
    loader: LoaderFn
    metric: str = ""  # a toporag_core.metrics function name; "" = name
    label: str = ""  # the name the pages show; "" = name
    answer_set: tuple[str, ...] | None = None
    matches: Callable[[TextualGraph], bool] | None = None
    evidence: Callable[[RawExample], str | None] | None = None  # answer_style="evidence" targets
    citation: Callable[..., str | None] | None = None  # styles with open_citations: (raw, Example)
    prompt: str = "plain"  # a model.QUESTION_FORMS name: how the task's examples phrase a question

    def __post_init__(self) -> None:
        if self.prompt not in QUESTION_FORMS:
            raise ValueError(f"Task({self.name!r}): unknown prompt form {self.prompt!r}; choose one of "
                             f"{sorted(QUESTION_FORMS)}")
        object.__setattr__(self, "metric", self.metric or self.name)
        object.__setattr__(self, "label", self.label or self.name)
        object.__setattr__(self, "answer_set", tuple(self.answer_set) if self.answer_set else None)


TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    """Make ``task.name`` available to ``toporag train/eval --dataset`` and :func:`get_task` (the same
    name replaces); returns ``task``."""
    if not isinstance(task, Task):
        raise TypeError(f"register_task takes a Task, got {type(task).__name__}")
    TASKS[task.name] = task
    return task


def unregister_task(name: str) -> None:
    TASKS.pop(name, None)


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown dataset {name!r}; registered: {sorted(TASKS)}")
    return TASKS[name]


def task_of_graph(graph: TextualGraph) -> str | None:
    """The registered task whose ``matches`` accepts ``graph`` (first in registration order), or ``None``."""
    for t in TASKS.values():
        if t.matches is not None and t.matches(graph):
            return t.name
    return None


def metric_of(dataset: str) -> str:
    """The metric name of a registered task; any other name is taken as a metric name itself."""
    return TASKS[dataset].metric if dataset in TASKS else dataset


def load_raw(dataset: str, data_dir: str | os.PathLike | None = None) -> dict[str, list[RawExample]]:
    """Raw splits of a registered dataset; ``data_dir``: a folder, or a data file the task's loader accepts."""
    return get_task(dataset).loader(Path(data_dir) if data_dir is not None else None)


def data_dir_or_shared(data_dir: str | os.PathLike | None) -> Path:
    """``data_dir``, else the shared data folder; ``FileNotFoundError`` with what to do when neither exists."""
    d = Path(data_dir) if data_dir is not None else shared_data_dir()
    if d is None or not Path(d).is_dir():
        raise FileNotFoundError("shared data folder not found: set TOPORAG_SHARED_DATA or pass --data-dir")
    return Path(d)


def seeded_split(n: int, seed: int = 42) -> tuple[list[int], list[int], list[int]]:
    """The 60/20/20 split: ``perm = numpy.random.default_rng(seed).permutation(n)``; train = the first
    ``int(0.6 n)``, val = the next ``int(0.2 n)``, test = the rest. For n = 2,766: 1,659 / 553 / 554."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    perm = np.random.default_rng(seed).permutation(n).tolist()
    a, b = int(0.6 * n), int(0.6 * n) + int(0.2 * n)
    return perm[:a], perm[a:b], perm[b:]
