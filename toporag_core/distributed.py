"""Training and evaluation past one process: PyTorch DDP under ``torchrun``, and evaluation shards.

**Training** (:func:`train_distributed`) is :func:`toporag_core.train.train`'s loop (same
:class:`~toporag_core.train.TrainConfig`, same :func:`~toporag_core.train.make_batch`, same
checkpoint files) run by every process of a ``torchrun --nproc_per_node=W`` job, the trainable
parts wrapped in :class:`~torch.nn.parallel.DistributedDataParallel` (gloo on CPU, NCCL on GPUs):

* **data**: a :class:`~torch.utils.data.DistributedSampler` with ``shuffle=True, seed=cfg.seed``
  and ``set_epoch(e)`` permutes with ``randperm(seed + e)``, exactly ``train``'s epoch order;
  rank ``r`` takes positions ``r, r + W, ...`` of it, so its local batch ``k`` (``B / W``
  examples) and the other ranks' together are exactly the one-process global batch ``k``
  (``cfg.batch_size = B`` is the *global* batch; it must be divisible by ``W``; when ``B`` does
  not divide the training set the sampler repeats a few examples to even the ranks out);
* **the loss**: the one-process loss is the mean over all ``N`` answer tokens of the global
  batch. Rank ``r`` holds ``n_r`` of them with local mean ``L_r``; DDP averages gradients over
  the ``W`` ranks, so each rank back-propagates ``L_r * n_r * W / N`` (``N = all_reduce(n_r)``)
  and the averaged gradient is that of ``sum_r L_r n_r / N``, the global-batch loss. Clipping
  and AdamW then act on identical gradients in every rank, which keep identical weights;
* **rank 0** evaluates the validation loss (broadcast to all, so every rank stops at the same
  step), writes ``best/``, ``last/`` (model + AdamW moments + ``trainer.json``), ``log.jsonl``
  (one line per step with the global-batch loss, one per evaluation) and ``summary.json``;
* **resume**: every rank reads ``last/`` (a shared folder) and skips the batches already done.

One process (no ``torchrun``) runs the same code with ``W = 1``. ``tests/test_distributed.py``
checks that 2 gloo processes give the one-process loss curve.

**Evaluation** shards the test set by stride, ``shard(items, i, n) = items[i::n]`` (``--shard i/n``,
or the rank and world of a ``torchrun`` job), each shard writes its own JSONL, and
:func:`merge_jsonl` joins them (one line per id, in the original order when given).
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.distributed as dist

from .model import TopoRAGModel
from .tasks.prep import Example
from .train import TrainConfig, evaluate_loss, make_batch, seed_everything


# ----------------------------------------------------------------------------- the process group
@dataclass(frozen=True)
class DistEnv:
    """This process's place in the job: ``rank`` of ``world``, ``local_rank`` on its machine."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> "DistEnv":
        """From ``torchrun``'s ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` (one process without them)."""
        try:
            return cls(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                       int(os.environ.get("LOCAL_RANK", 0)))
        except ValueError as e:
            raise ValueError(f"RANK / WORLD_SIZE / LOCAL_RANK must be whole numbers ({e})") from None


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


# ----------------------------------------------------------------------------- optimiser state (train.py's format)
def save_optimizer(opt: torch.optim.Optimizer, names: dict[int, str], path: Path) -> None:
    """AdamW moments as ``{param name}::{key}`` safetensors (the layout ``train.py`` writes)."""
    from safetensors.torch import save_file

    flat = {f"{names[id(p)]}::{k}": (v if torch.is_tensor(v) else torch.tensor(float(v))).detach().cpu().contiguous()
            for p, st in opt.state.items() for k, v in st.items()}
    tmp = path.with_name(path.name + ".tmp")
    save_file(flat, str(tmp))
    os.replace(tmp, path)


def load_optimizer(opt: torch.optim.Optimizer, params: dict[str, torch.nn.Parameter], path: Path) -> None:
    from safetensors.torch import load_file

    for key, v in load_file(str(path)).items():
        name, k = key.split("::", 1)
        if name not in params:
            raise ValueError(f"{path}: optimiser state for unknown parameter {name}")
        opt.state[params[name]][k] = v.to(params[name].device) if k != "step" else v


def answer_tokens(model: TopoRAGModel, answers: Sequence[str]) -> int:
    """Answer tokens (+ EOS) that carry a loss in a batch: the ``N`` of the loss weighting above
    (the label rule of :meth:`TopoRAGModel.build_inputs`: the answer cut at ``max_new_tokens``, then EOS)."""
    tok, cap = model.tokenizer, model.config.max_new_tokens
    eos = 1 if tok.eos_token_id is not None else 0
    return sum(len(tok(a, add_special_tokens=False)["input_ids"][:cap]) + eos for a in answers)


# ----------------------------------------------------------------------------- training
def train_distributed(model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
                      out: str | os.PathLike, resume: bool = False, extra_meta: dict[str, Any] | None = None,
                      env: DistEnv | None = None) -> dict[str, Any]:
    """:func:`toporag_core.train.train` across the ranks of a ``torchrun`` job (see the module
    docstring). Every rank calls it with the same data and an identically built model; rank 0
    writes the files. Returns the summary (every rank), with ``"losses"``: the global-batch loss
    of every step of this run."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DistributedSampler

    env = env or DistEnv.from_env()
    if env.world > 1 and not dist.is_initialized():
        raise RuntimeError("call init_distributed() first (under torchrun)")
    if not train_set or not val_set:
        raise ValueError("train_distributed needs a non-empty training and validation set")
    if cfg.batch_size % env.world:
        raise ValueError(f"TrainConfig.batch_size ({cfg.batch_size}, the global batch) must be divisible by the "
                         f"number of processes ({env.world})")
    out = Path(out)
    if env.main:
        out.mkdir(parents=True, exist_ok=True)
    seed_everything(cfg.seed)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError("this model has no trainable parameters")
    names = {id(p): n for n, p in params.items()}
    opt = torch.optim.AdamW(list(params.values()), lr=cfg.lr, weight_decay=cfg.weight_decay)
    meta = {"train": asdict(cfg), "world_size": env.world, **(extra_meta or {})}
    state = {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_val": math.inf, "best_step": -1,
             "bad_evals": 0, "seen": 0, "train_seconds": 0.0, "done": False}
    last = out / "last"
    if resume and (last / "trainer.json").is_file():
        from safetensors.torch import load_file

        state.update(json.loads((last / "trainer.json").read_text()))
        model.load_trainable(load_file(str(last / "model.safetensors")), where=str(last))
        load_optimizer(opt, params, last / "optimizer.safetensors")
        state["done"] = False
    net = DDP(model) if env.world > 1 else model  # DDP broadcasts rank 0's weights at construction
    local_bs = cfg.batch_size // env.world
    sampler = DistributedSampler(range(len(train_set)), num_replicas=env.world, rank=env.rank, shuffle=True,
                                 seed=cfg.seed)
    steps_per_epoch = math.ceil(len(sampler) / local_bs)
    eval_every = cfg.eval_every or steps_per_epoch
    t_start = time.perf_counter() - state["train_seconds"]
    log = open(out / "log.jsonl", "a") if env.main else None
    losses: list[float] = []

    def all_sum(x: float) -> float:
        if env.world == 1:
            return x
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t)
        return float(t.item())

    def broadcast(x: float) -> float:
        if env.world == 1:
            return x
        t = torch.tensor([x], dtype=torch.float64)
        dist.broadcast(t, src=0)
        return float(t.item())

    def write_state(path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)

    def checkpoint() -> bool:
        """Rank 0 evaluates and writes; every rank gets the same val loss and the same decision."""
        val = evaluate_loss(model, val_set, cfg.eval_batch_size) if env.main else 0.0
        val = broadcast(val)
        improved = val < state["best_val"]
        if improved:
            state.update(best_val=val, best_step=state["step"], bad_evals=0)
        else:
            state["bad_evals"] += 1
        state["train_seconds"] = time.perf_counter() - t_start
        if env.main:
            if improved:
                model.save(out / "best", extra={**meta, "best_step": state["step"], "val_loss": val})
            model.save(last, extra=meta)
            save_optimizer(opt, names, last / "optimizer.safetensors")
            write_state(last / "trainer.json")
            log.write(json.dumps({"step": state["step"], "epoch": state["epoch"], "val_loss": val, "best": improved,
                                  "seen": state["seen"], "seconds": state["train_seconds"]}) + "\n")
            log.flush()
        return state["bad_evals"] >= cfg.patience

    def over_budget() -> bool:
        hit = ((cfg.max_steps is not None and state["step"] >= cfg.max_steps) or
               (cfg.time_budget_s is not None and time.perf_counter() - t_start >= cfg.time_budget_s))
        return bool(broadcast(float(hit)))  # rank 0's clock decides for everyone

    model.train()
    stop = over_budget()
    while state["epoch"] < cfg.epochs and not stop:
        sampler.set_epoch(state["epoch"])
        order = list(sampler)
        for b in range(state["batch_in_epoch"], steps_per_epoch):
            chunk = [train_set[i] for i in order[b * local_bs:(b + 1) * local_bs]]
            n_local = answer_tokens(model, [e.answer for e in chunk])
            n_total = all_sum(float(n_local))
            loss = net(make_batch(chunk, use_graph=model.config.use_graph).to(model.device))
            (loss * (n_local * env.world / n_total)).backward()
            global_loss = all_sum(float(loss.detach()) * n_local) / n_total
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(list(params.values()), cfg.grad_clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            state["step"] += 1
            state["seen"] += int(all_sum(float(len(chunk))))
            state["batch_in_epoch"] = b + 1
            losses.append(global_loss)
            if log is not None:
                log.write(json.dumps({"step": state["step"], "loss": global_loss}) + "\n")
            budget_hit = over_budget()
            if state["step"] % eval_every == 0 or budget_hit or b + 1 == steps_per_epoch:
                if state["batch_in_epoch"] == steps_per_epoch:
                    state["epoch"] += 1
                    state["batch_in_epoch"] = 0
                stop = checkpoint() or budget_hit
                model.train()
            if stop or state["batch_in_epoch"] == 0:
                break
    state["done"] = True
    state["train_seconds"] = time.perf_counter() - t_start
    summary = {**meta, "steps": state["step"], "examples_seen": state["seen"], "best_val_loss": state["best_val"],
               "best_step": state["best_step"], "train_seconds": state["train_seconds"],
               "examples_per_s": state["seen"] / max(state["train_seconds"], 1e-9),
               "trainable_params": model.num_trainable()}
    if env.main:
        (last).mkdir(parents=True, exist_ok=True)
        write_state(last / "trainer.json")
        log.close()
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if env.world > 1:
        dist.barrier()  # nobody reads the checkpoint before rank 0 has written it
    return {**summary, "losses": losses}


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
    """:func:`toporag_core.evaluate.evaluate` on shard ``i`` of ``n``, written to :func:`shard_path`."""
    from .evaluate import evaluate

    return evaluate(model, shard(examples, i, n), dataset, out=shard_path(out, i, n), **kwargs)


def merge_jsonl(parts: Sequence[str | os.PathLike], out: str | os.PathLike,
                order: Sequence[str] | None = None) -> dict[str, Any]:
    """Join shard files into ``out``: one line per ``id`` (the same id twice with different content
    is an error naming both files), in ``order`` (ids) when given, else shard by shard. Returns
    ``{"n", "correct", "accuracy", "missing"}`` (``missing``: ids of ``order`` in no shard)."""
    rows: dict[str, tuple[str, dict]] = {}
    for part in parts:
        for ln, line in enumerate(Path(part).read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                key = str(rec["id"])
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{part}, line {ln}: not a prediction record ({e})") from None
            if key in rows and rows[key][1] != rec:
                raise ValueError(f"{part}, line {ln}, field 'id': {key!r} also in {rows[key][0]} with other content")
            rows.setdefault(key, (str(part), rec))
    keys = [str(k) for k in order if str(k) in rows] if order is not None else list(rows)
    missing = [str(k) for k in order if str(k) not in rows] if order is not None else []
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(json.dumps(rows[k][1]) + "\n" for k in keys))
    os.replace(tmp, out)
    correct = sum(bool(rows[k][1].get("correct")) for k in keys)
    return {"n": len(keys), "correct": correct, "accuracy": correct / max(len(keys), 1), "missing": missing}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m toporag_core.distributed merge OUT PART [PART ...] [--order-from FILE]``: join
    evaluation shards (``toporag eval --shard i/n`` outputs) into one JSONL; prints the summary."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m toporag_core.distributed", description=main.__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="merge evaluation shard JSONL files")
    m.add_argument("out")
    m.add_argument("parts", nargs="+")
    m.add_argument("--order-from", default=None, help="a JSONL (or one id per line) giving the order of the ids")
    args = ap.parse_args(argv)
    order = None
    if args.order_from:
        order = []
        for line in Path(args.order_from).read_text().splitlines():
            line = line.strip()
            if line:
                order.append(str(json.loads(line)["id"]) if line.startswith("{") else line)
    print(json.dumps(merge_jsonl(args.parts, args.out, order=order)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
