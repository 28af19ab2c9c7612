"""Tasks: the question-answering datasets (a registry), their loaders and cached preprocessing.

* :mod:`.registry`: :class:`Task`, :func:`register_task`, :func:`load_raw`, :class:`RawExample`.
* :mod:`.explagraphs`, :mod:`.webqsp`: the shared-data benchmarks (register themselves).
* :mod:`.scenes`: GQA-format scene graphs, a faithful generator and the ``scene_graphs`` task.
* :mod:`.prep`: lift + embed + retrieve + textualize every example once, cached on disk.
"""
from .registry import (SPLITS, TASKS, RawExample, Task, data_dir_or_shared, get_task, load_raw, register_task,
                       metric_of, seeded_split, shared_data_dir, task_of_graph, unregister_task)
from . import explagraphs, webqsp  # noqa: E402,F401  (register the built-in tasks)
from .scenes import dataset as _scenes  # noqa: E402,F401  (registers scene_graphs)
from .general import dataset as _general  # noqa: E402,F401  (registers general)

__all__ = ["SPLITS", "TASKS", "RawExample", "Task", "register_task", "unregister_task", "get_task", "load_raw",
           "task_of_graph", "metric_of", "shared_data_dir", "data_dir_or_shared", "seeded_split"]
