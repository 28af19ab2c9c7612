"""Training and evaluation past one process: the ``torchrun`` job environment, and evaluation shards.

**Training** has one loop, :func:`toporag_core.training.train`. Under ``torchrun --nproc_per_node=W``
every process calls it with the same data, an identically built model and the :class:`DistEnv`
that :func:`init_distributed` returns (gloo on CPU, NCCL on GPUs); ``DistEnv`` is the loop's view
of the job (``rank``, ``world``, ``main``, ``all_sum``, ``broadcast``, ``wrap``, ``no_sync``,
``barrier``), and :class:`~toporag_core.training.ProcessEnv` is the one-process one. So everything
``train`` does (selection on loss or accuracy, ``max_steps`` / ``stop_after_steps`` / time
budgets, the cosine schedule ``lr_at``, gradient accumulation, length buckets, resume, the log)
holds for any ``W``:

* **data**: :func:`~toporag_core.training.epoch_batches` gives every rank the same global batches
  (``randperm(seed + e)``, buckets included); rank ``r`` takes positions ``r, r + W, ...`` of
  each (``cfg.batch_size = B`` is the *global* batch and must be divisible by ``W``; a short last
  batch can leave a rank an empty share: it runs a forward with weight 0, so DDP's gradient
  reduction still meets every rank);
* **the loss**: one process minimises, per optimiser step of micro-batches ``j`` (``grad_accum``
  of them, ``E_j`` examples each, ``E = sum_j E_j``), ``sum_j (E_j / E) * L_j`` with ``L_j`` the
  mean over the ``T_j`` answer tokens (+ EOS) of micro-batch ``j``. Rank ``r`` holds ``t_jr`` of
  them with local mean ``L_jr``, so ``L_j = sum_r t_jr L_jr / T_j`` (``T_j = all_sum(t_jr)``). The
  ``W`` ranks' gradients are *averaged* by DDP, so rank ``r`` back-propagates
  ``L_jr * (t_jr / T_j) * W * (E_j / E)`` and the average is exactly the one-process gradient;
  the accumulated micro-batches are reduced once (``no_sync``). Clipping and AdamW then act on
  identical gradients in every rank, which keep identical weights.
* **rank 0** validates (loss, and accuracy for ``select="accuracy"``) and broadcasts the numbers,
  so every rank takes the same selection / early-stopping decision; its clock decides the time
  budget for everyone; it alone writes ``best/``, ``last/`` (model + AdamW moments +
  ``trainer.json``), ``log.jsonl`` (one line per step with the global-batch loss and lr, one per
  evaluation) and ``summary.json``;
* **resume**: every rank reads ``last/`` (a shared folder) and skips the batches already done;
* **not supported with W > 1**: the :class:`~toporag_core.training.DiskKVShards` (every rank would build
  the same shard files in one folder; ``train`` raises and names ``--no-kv-cache``).

``tests/test_distributed.py`` checks that 2 gloo processes give the one-process loss curve, with
the default settings and with the cosine schedule, ``stop_after_steps``, accumulation, buckets and
a short last batch.

**Evaluation** shards the test set by stride, ``shard(items, i, n) = items[i::n]`` (``--shard i/n``,
or the rank and world of a ``torchrun`` job), each shard writes its own JSONL, and
``toporag eval merge`` (:func:`toporag_core.predictions.merge`) joins them (one line per id, in the
original order when given).
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.distributed as dist

from ..model import TopoRAGModel
from ..tasks.prep import Example
from .env import ProcessEnv


# ----------------------------------------------------------------------------- the process group
@dataclass(frozen=True)
class DistEnv(ProcessEnv):
    """This process's place in the job: ``rank`` of ``world``, ``local_rank`` on its machine, and
    the collectives :func:`toporag_core.training.train` uses (identity when ``world == 1``)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls) -> "DistEnv":
        """From ``torchrun``'s ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` (one process without them)."""
        try:
            return cls(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                       int(os.environ.get("LOCAL_RANK", 0)))
        except ValueError as e:
            raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be whole numbers ({e})") from None

    def _tensor(self, xs: Sequence[float]) -> torch.Tensor:
        if not dist.is_initialized():
            raise RuntimeError("call init_distributed() first (under torchrun)")
        dev = f"cuda:{self.local_rank}" if dist.get_backend() == "nccl" else "cpu"  # NCCL reduces GPU tensors only
        return torch.tensor([float(x) for x in xs], dtype=torch.float64, device=dev)

    def all_sum(self, xs: Sequence[float]) -> list[float]:
        if self.world == 1:
            return super().all_sum(xs)
        t = self._tensor(xs)
        dist.all_reduce(t)
        return t.tolist()

    def broadcast(self, xs: Sequence[float]) -> list[float]:
        if self.world == 1:
            return super().broadcast(xs)
        t = self._tensor(xs)
        dist.broadcast(t, src=0)
        return t.tolist()

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        if self.world == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel as DDP

        if not dist.is_initialized():
            raise RuntimeError("call init_distributed() first (under torchrun)")
        return DDP(model)

    def no_sync(self, net: torch.nn.Module) -> contextlib.AbstractContextManager:
        return net.no_sync() if self.world > 1 else contextlib.nullcontext()

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


def init_distributed(backend: str | None = None) -> DistEnv:
    """Join the ``torchrun`` job (``env://``): gloo on CPU, NCCL when CUDA is there (``backend``
    overrides). With one process and no job, nothing is initialised."""
    env = DistEnv.from_env()
    if env.world > 1 and not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            torch.cuda.set_device(env.local_rank)
        dist.init_process_group(backend=backend, init_method="env://")
    return env


def device_for(env: DistEnv) -> str:
    """``cuda:<local_rank>`` on a GPU machine, else ``cpu`` (one GPU per process)."""
    return f"cuda:{env.local_rank}" if torch.cuda.is_available() else "cpu"


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


# ----------------------------------------------------------------------------- evaluation shards
def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n``; ``ValueError`` naming ``--shard`` otherwise."""
    try:
        i, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"--shard {text}: need 0 <= i < n")
    return i, n


def shard(items: Sequence[Any], i: int, n: int) -> list[Any]:
    """Shard ``i`` of ``n``: ``items[i::n]`` (sizes differ by at most one; every item in one shard)."""
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard {i}/{n}: need 0 <= i < n")
    return list(items[i::n])


def shard_path(out: str | os.PathLike, i: int, n: int) -> Path:
    """``preds.jsonl`` -> ``preds.shard-1-of-4.jsonl``."""
    out = Path(out)
    return out.with_name(f"{out.stem}.shard-{i}-of-{n}{out.suffix or '.jsonl'}")


def evaluate_shard(model: TopoRAGModel, examples: list[Example], dataset: str, out: str | os.PathLike, i: int,
                   n: int, **kwargs: Any) -> dict[str, Any]:
    """:func:`toporag_core.evaluation.evaluate.evaluate` on shard ``i`` of ``n``, written to :func:`shard_path`."""
    from ..evaluation.evaluate import evaluate

    return evaluate(model, shard(examples, i, n), dataset, out=shard_path(out, i, n), **kwargs)
