"""Where a training process stands in its job: :class:`ProcessEnv`, the one process, and seeding.

:func:`~toporag_core.training.loop.train` talks to the job only through a :class:`ProcessEnv`: ``rank`` and
``world``, ``main`` (rank 0 validates, decides and writes), the collectives ``all_sum`` and ``broadcast``,
``wrap`` (the module forward/backward runs through), ``no_sync`` (gradient accumulation) and ``barrier``.
Here they are the identity of one process; :class:`~toporag_core.training.distributed.DistEnv` is the
``torchrun`` one over ``torch.distributed``. :func:`seed_everything` seeds Python, NumPy and torch.
"""
from __future__ import annotations

import contextlib
import random
from typing import Sequence

import numpy as np
import torch


class ProcessEnv:
    """Where this process stands in a training job: here the one process (rank 0 of 1), whose
    collectives are the identity. :class:`toporag_core.training.distributed.DistEnv` is the ``torchrun``
    one (same methods over ``torch.distributed``); :func:`~toporag_core.training.loop.train` talks to the
    job only through these."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        """Rank 0: validates, decides and writes the files."""
        return self.rank == 0

    def all_sum(self, xs: Sequence[float]) -> list[float]:
        """Element-wise sum of ``xs`` over the ranks (float64; one collective for the whole list)."""
        return [float(x) for x in xs]

    def broadcast(self, xs: Sequence[float]) -> list[float]:
        """Rank 0's ``xs`` in every rank (the other ranks' values are ignored)."""
        return [float(x) for x in xs]

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The module the training forward/backward runs through (DDP when there are several ranks)."""
        return model

    def no_sync(self, net: torch.nn.Module) -> contextlib.AbstractContextManager:
        """Context for a backward whose gradient must not be reduced yet (gradient accumulation)."""
        return contextlib.nullcontext()

    def barrier(self) -> None:
        """Wait until every rank is here."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)

