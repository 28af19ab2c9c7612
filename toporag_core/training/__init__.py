"""Training: AdamW on the trainable parts only, early stopping on validation, resumable; one loop for one
process and for ``torchrun``.

* :mod:`.config` - :class:`TrainConfig`, the optimisation settings, each field with its command-line help
  (:func:`~.config.config_field`), and the learning-rate schedule.
* :mod:`.data` - what the loop trains on and in which order: evidence-first targets, graph-only rows,
  :func:`~.data.epoch_batches` (the seeded, resumable data order, each rank's share).
* :mod:`.batching` - :func:`~.batching.make_batch`, examples collated into the model's batch.
* :mod:`.kv_shards` - :class:`DiskKVShards`, the frozen part's key/value cache of every example, computed
  once and kept as safetensors shards on disk, and the folder names that keep caches of two settings apart.
* :mod:`.env` - :class:`ProcessEnv`, where a process stands in its job (the one process), and seeding.
* :mod:`.validation` - the validation loss / accuracy and the graph tokens' spread each evaluation logs.
* :mod:`.optim_state` - AdamW's moments on disk as safetensors (what a resumed run reads back).
* :mod:`.loop` - :func:`train` and :class:`~.loop.TrainingRun`: steps, evaluations, checkpoints, budgets.
* :mod:`.align` - the alignment stage (the LLM learns to read cells from their graph tokens) and the joint
  stage's readback term.
* :mod:`.distributed` - :class:`~.distributed.DistEnv` (``torchrun``) and evaluation shards.

The names below are importable from the package; each loads its module on first use, so importing a light
module (``training.config`` for the command line's options) does not load torch and the model.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import LR_SCHEDULES, SELECT_MODES, TrainConfig, config_field  # noqa: F401
    from .data import GRAPH_ONLY_SUFFIX, epoch_batches, with_evidence_targets, with_graph_only_rows  # noqa: F401
    from .env import ProcessEnv, seed_everything  # noqa: F401
    from .kv_shards import DiskKVShards, kv_data_key, kv_store_key, open_kv_store  # noqa: F401
    from .loop import GRAPH_PARTS, TrainingRun, check_training_inputs, param_groups, train  # noqa: F401
    from .optim_state import load_optimizer, save_optimizer  # noqa: F401
    from .validation import token_spread, validation_loss  # noqa: F401

_EXPORTS = {
    "config": ("LR_SCHEDULES", "SELECT_MODES", "TrainConfig", "config_field"),
    "data": ("GRAPH_ONLY_SUFFIX", "epoch_batches", "with_evidence_targets", "with_graph_only_rows"),
    "env": ("ProcessEnv", "seed_everything"),
    "kv_shards": ("DiskKVShards", "kv_data_key", "kv_store_key", "open_kv_store"),
    "loop": ("GRAPH_PARTS", "TrainingRun", "check_training_inputs", "param_groups", "train"),
    "optim_state": ("load_optimizer", "save_optimizer"),
    "validation": ("token_spread", "validation_loss"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """A re-exported name, from its module (imported on first use)."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
