"""Which model answers a question on a graph, and why: one decision per (checkpoint, graph, question).

A checkpoint trained on one task answers that task's questions well and everything else in that
task's format: the ExplaGraphs checkpoint (a label set, ``answer_set`` support / counter) answered
"Which element named after Poland did Marie Curie discover?" with "counter" at 0.999. So the Ask
page does not hand every question to the checkpoint in its menu; :func:`route` picks, in order:

1. the selected checkpoint when it fits: trained on the loaded graph's task (and, for a label set,
   the question asks for one of its labels or is the example's own question), or an open-answer
   checkpoint whose task the registry does not know (it cannot be checked, so the user's choice
   stands), or a general checkpoint, or the zero-shot LLM chosen as such;
2. another offered checkpoint trained on the graph's task that fits;
3. a general checkpoint under ``assets/checkpoints/``: an open-answer checkpoint (no ``answer_set``)
   whose ``config.json`` says ``"dataset": "general"`` (:func:`general_checkpoint`;
   ``assets/checkpoints/general`` ships, trained on the ``general`` task's fact-store questions);
4. the zero-shot LLM: the packaged LLM reading the textualized retrieved context, no graph tokens
   (the same model as ``toporag eval --zero-shot`` and the menu's "no checkpoint").

The result is a :class:`Route` (which checkpoint, its name, the reason in one line); pages only
show it and load ``route.checkpoint``. Reading a checkpoint's ``config.json`` loads no model.
:func:`committed_checkpoints` lists what ``assets/checkpoints/`` holds and :func:`auto_checkpoint` is the
default choice for a graph (the checkpoint of its task, else the general one, else the zero-shot LLM):
``toporag ask`` without ``--checkpoint`` and the Ask page's default both start from it.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..metrics import normalize
from .pipeline import REPO_ROOT
from ..tasks import TASKS, task_of_graph
from ..io.samples import sample_task

CHECKPOINT_ROOT = REPO_ROOT / "assets" / "checkpoints"
ZERO_SHOT = "none"  # the menu value of the frozen LLM alone (no checkpoint)
GENERAL = "general"  # the ``dataset`` a general, open-answer checkpoint declares in its config.json
ZERO_SHOT_NAME = "the zero-shot LLM"
ZERO_SHOT_WHAT = "the packaged LLM reading the retrieved context as text, no graph tokens"


@dataclass(frozen=True)
class CheckpointInfo:
    """What a checkpoint's ``config.json`` says about the questions it answers."""

    value: str  # a checkpoint folder, or ZERO_SHOT
    name: str  # how the page names it
    dataset: str | None  # the task it was trained on
    answer_set: tuple[str, ...]  # its closed label set; () = open answers

    @property
    def is_general(self) -> bool:
        return self.dataset == GENERAL and not self.answer_set


def checkpoint_info(value: str, name: str = "") -> CheckpointInfo:
    """Read ``value``'s ``config.json`` (``dataset``, ``config.answer_set``); the zero-shot LLM or an
    unreadable folder reads as an open-answer model of no task."""
    if value == ZERO_SHOT:
        return CheckpointInfo(ZERO_SHOT, name or ZERO_SHOT_NAME, None, ())
    label = name or f"the checkpoint {Path(value).name}"
    try:
        meta = json.loads((Path(value).expanduser() / "config.json").read_text())
    except (OSError, ValueError):
        return CheckpointInfo(value, label, None, ())
    meta = meta if isinstance(meta, dict) else {}
    cfg = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    labels = tuple(str(a) for a in (cfg.get("answer_set") or ()))
    return CheckpointInfo(value, label, str(meta["dataset"]) if meta.get("dataset") else None, labels)


def checkpoint_root(root: Path | None = None) -> Path:
    """``root``, else ``$TOPORAG_CHECKPOINTS`` (a folder of checkpoint folders), else :data:`CHECKPOINT_ROOT`
    as it is now (read at call time, so a test can move it)."""
    if root is not None:
        return Path(root)
    env = os.environ.get("TOPORAG_CHECKPOINTS", "").strip()
    return Path(env).expanduser() if env else CHECKPOINT_ROOT


def general_checkpoint(root: Path | None = None) -> str | None:
    """The first folder under ``root`` (default :data:`CHECKPOINT_ROOT`; by name) whose config declares a
    general, open-answer checkpoint (``"dataset": "general"``, no ``answer_set``), else ``None``."""
    root = checkpoint_root(root)
    if not root.is_dir():
        return None
    for folder in sorted(p for p in Path(root).iterdir() if (p / "config.json").is_file()):
        if checkpoint_info(str(folder)).is_general:
            return str(folder)
    return None


COMMITTED_NAMES = {"expla_graphs": "ExplaGraphs", "scene_graphs": "SceneGraphs", "general": "General"}


def committed_checkpoints(root: Path | None = None) -> dict[str, str]:
    """``{folder: menu label}`` of the checkpoints under ``root`` (default :data:`CHECKPOINT_ROOT`; folders
    with a ``config.json``), the known ones first in :data:`COMMITTED_NAMES` order, labelled
    ``"<Name> (committed)"``."""
    root = checkpoint_root(root)
    if not root.is_dir():
        return {}
    folders = [p for p in sorted(Path(root).iterdir()) if (p / "config.json").is_file()]
    rank = {n: i for i, n in enumerate(COMMITTED_NAMES)}
    folders.sort(key=lambda p: (rank.get(p.name, len(rank)), p.name))
    return {str(p): f"{COMMITTED_NAMES.get(p.name, p.name)} (committed)" for p in folders}


def auto_checkpoint(graph, options: Mapping[str, str], root: Path | None = None, options_only: bool = False) -> str:
    """The default model for ``graph``: the first option trained on its task, else the general
    checkpoint (an option, else the one under ``root``, unless ``options_only``), else the zero-shot LLM."""
    task = graph_task(graph)
    if task is not None:
        for value in options:
            if value != ZERO_SHOT and checkpoint_info(value).dataset == task:
                return value
    for value in options:
        if value != ZERO_SHOT and checkpoint_info(value).is_general:
            return value
    return (None if options_only else general_checkpoint(root)) or ZERO_SHOT


def asks_for_labels(question: str, labels: tuple[str, ...]) -> bool:
    """Whether ``question`` names every label of ``labels`` as a whole word (ExplaGraphs' "Do argument
    1 and argument 2 support or counter each other?")."""
    words = f" {normalize(question)} "
    return bool(labels) and all(f" {normalize(a)} " in words for a in labels)


def graph_task(graph) -> str | None:
    """The registered task ``graph`` is an example of: the task registry's detection, else the task
    of the built-in sample it is (the breakfast-table scene is a scene graph without a GQA image id)."""
    return task_of_graph(graph) or sample_task(graph)


def own_question(graph, question: str) -> bool:
    """Whether ``question`` is the question that comes with ``graph`` (white space aside)."""
    own = " ".join(str(graph.meta.get("question") or "").split())
    return bool(own) and own == " ".join(str(question).split())


def label_question(graph, question: str, labels: tuple[str, ...]) -> bool:
    """Whether ``question`` may be answered with the label set ``labels``: it names every label, or it
    is the own question of an example whose task answers with the same labels (an ExplaGraphs row)."""
    if asks_for_labels(question, labels):
        return True
    task = graph_task(graph)
    same = task in TASKS and set(TASKS[task].answer_set or ()) == set(labels)
    return bool(labels) and same and own_question(graph, question)


@dataclass(frozen=True)
class Route:
    """The model that answers: ``checkpoint`` (a folder, or ``ZERO_SHOT``), its ``model`` name and the
    ``reason`` in one sentence; ``rerouted`` when it is not the checkpoint the user selected."""

    checkpoint: str
    model: str
    reason: str
    rerouted: bool = False

    def line(self) -> str:
        """One line for the page: which model answers and why."""
        return f"Answering model: **{self.model}** - {self.reason}"


def _misfit(info: CheckpointInfo, task: str | None, graph, question: str) -> str | None:
    """Why ``info`` should not answer ``question`` on a graph of ``task``; ``None`` when it fits."""
    if info.value == ZERO_SHOT or info.is_general:
        return None
    labels = " / ".join(info.answer_set)
    if info.dataset in TASKS and info.dataset != task:
        what = f"a **{task}** example" if task else "a graph of no trained task"
        only = f" (it answers only {labels})" if labels else ""
        return f"{info.name} was trained on **{info.dataset}**{only}, but the loaded graph is {what}"
    if info.answer_set and not label_question(graph, question, info.answer_set):
        return f"{info.name} answers only {labels}, and this question asks for neither"
    return None


def _fits_because(info: CheckpointInfo, task: str | None, options: Mapping[str, str]) -> str:
    if info.value == ZERO_SHOT:
        return f"the model chosen ({ZERO_SHOT_WHAT})"
    if info.is_general:
        own = [v for v in options if v not in (info.value, ZERO_SHOT) and task and checkpoint_info(v).dataset == task]
        if own:
            return "a general checkpoint, trained for open questions on any graph (chosen over the checkpoint of " \
                   f"this graph's task, **{task}**)"
        what = f"a **{task}** example" if task else "a graph of no trained task"
        return f"no task-specific checkpoint matches the loaded graph ({what}); the general checkpoint is " \
               "trained for open questions on any graph"
    if info.dataset in TASKS:
        return f"trained on **{info.dataset}**, the loaded graph's task"
    return f"the checkpoint chosen in the sidebar (trained on {info.dataset or 'an unnamed task'}; not checked)"


def route(selected: str, graph, question: str, options: Mapping[str, str] | None = None,
          root: Path | None = None) -> Route:
    """Which model answers ``question`` on ``graph`` when ``selected`` is the checkpoint in the menu.

    Args:
        selected: a checkpoint folder or ``ZERO_SHOT``.
        options: ``{value: label}`` of the offered checkpoints (the menu), searched for one trained on
            the graph's task when ``selected`` does not fit; labels name the models.
        root: where a general checkpoint is looked for (:func:`general_checkpoint`; default
            :data:`CHECKPOINT_ROOT`).
    """
    options = dict(options or {})
    task = graph_task(graph)
    info = checkpoint_info(selected, _named(selected, options.get(selected)))
    if info.is_general and not options.get(selected):
        info = checkpoint_info(selected, _general_name(selected))
    why_not = _misfit(info, task, graph, question)
    if why_not is None:
        return Route(selected, info.name, _fits_because(info, task, options) + ".")
    for value, label in options.items():
        other = checkpoint_info(value, _named(value, label))
        if value not in (selected, ZERO_SHOT) and other.dataset == task and _misfit(other, task, graph, question) \
                is None:
            return Route(value, other.name, f"{why_not}; {other.name} was trained on this graph's task.", True)
    general = next((v for v in options if v not in (selected, ZERO_SHOT) and checkpoint_info(v).is_general), None) \
        or general_checkpoint(root)
    if general is not None and general != selected:
        other = checkpoint_info(general, _named(general, options.get(general)) or _general_name(general))
        return Route(general, other.name, f"{why_not}; a general checkpoint answers open questions.", True)
    return Route(ZERO_SHOT, ZERO_SHOT_NAME, f"{why_not}; {ZERO_SHOT_WHAT} answers instead.", True)


def _general_name(folder: str) -> str:
    name = Path(folder).name
    return "the general checkpoint" if name == GENERAL else f"the general checkpoint {name}"


def _named(value: str, label: str | None) -> str:
    """A menu label as a model name: "ExplaGraphs (committed)" -> "the ExplaGraphs checkpoint"."""
    if not label or value == ZERO_SHOT:
        return ""
    base = re.sub(r"\s*\(.*\)\s*$", "", label).strip()
    return f"the {base} checkpoint" if base else ""
