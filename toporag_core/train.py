"""Training loop: AdamW on the trainable parts only, early stopping on validation, resumable.

* Batches: :func:`make_batch` collates preprocessed :class:`~toporag_core.tasks.prep.Example`\\ s;
  padding is dynamic (each batch pads to its own longest row) and, with ``bucket > 1``, batches
  are cut from length-sorted windows of ``bucket x batch_size`` shuffled examples (less padding),
  then shuffled.
* Order: epoch ``e`` derives its batches from ``randperm(seed + e)``, so a resumed run skips
  exactly the batches already done and sees the same data as an uninterrupted run.
* Cheap steps: with ``graph_position="suffix"`` the frozen part of every example (chat prefix,
  context, question) has a key/value cache that no trainable parameter changes; :class:`KVStore`
  computes it once (no grad, float16 safetensors shards on disk, memory-mapped) and every epoch
  reuses it, so a step runs only the few tail positions with grad. ``grad_accum`` sums gradients
  over several batches per optimiser step; ``lr_schedule="cosine"`` warms up linearly over
  ``warmup_steps`` then decays to 10% (a pure function of the step: resumes exactly).
* Selection: ``select="loss"`` (validation answer loss) or ``"accuracy"`` (validation accuracy
  with label scoring over the model's ``answer_set``; ties go to the lower loss).
* Checkpoints under ``out``: ``best/`` (lowest validation loss; what ``toporag eval`` loads) and
  ``last/`` (model + AdamW moments + ``trainer.json`` with epoch/step/best/patience, all as
  safetensors/JSON, no pickle) written after every evaluation; ``log.jsonl`` has one line per
  evaluation; ``summary.json`` at the end.
* Budgets: ``max_steps`` (optimiser steps), ``time_budget_s`` (wall seconds), ``eval_every``
  (steps; default: once per epoch) so a short CPU run still selects on validation.
"""
from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .tasks.prep import Example
from .model import QABatch, TopoRAGModel
from .nn import collate


@dataclass
class TrainConfig:
    """Optimisation settings. Defaults: the paper's AdamW, lr 1e-5, batch 8, <= 10 epochs, patience 2;
    weight decay 0.05 and gradient-norm clipping at 0.1 are G-Retriever's (its training code), not the paper's."""

    lr: float = 1e-5
    weight_decay: float = 0.05
    epochs: int = 10
    batch_size: int = 8
    eval_batch_size: int = 16
    patience: int = 2
    grad_clip: float = 0.1  # G-Retriever clips the gradient norm at 0.1
    seed: int = 0
    max_steps: int | None = None
    stop_after_steps: int | None = None  # stop here without shortening the schedule (match another run's budget)
    eval_every: int | None = None
    time_budget_s: float | None = None
    show_progress: bool = True
    grad_accum: int = 1
    bucket: int = 1  # > 1: batches from length-sorted windows of bucket x batch_size examples
    lr_schedule: str = "constant"  # "constant" | "cosine" (linear warm-up, cosine decay to 10%)
    warmup_steps: int = 0
    select: str = "loss"  # "loss" | "accuracy" (closed answer sets: label-scoring accuracy on validation)

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size", "grad_accum", "bucket"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name}: must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"TrainConfig.lr: must be > 0, got {self.lr}")
        if self.lr_schedule not in ("constant", "cosine"):
            raise ValueError(f"TrainConfig.lr_schedule: 'constant' or 'cosine', got {self.lr_schedule!r}")
        if self.select not in ("loss", "accuracy"):
            raise ValueError(f"TrainConfig.select: 'loss' or 'accuracy', got {self.select!r}")

    def lr_at(self, step: int, total: int) -> float:
        """Learning rate of optimiser step ``step`` (0-based) out of ``total``."""
        if self.lr_schedule == "constant":
            return self.lr
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        t = min(1.0, (step - self.warmup_steps) / max(1, total - self.warmup_steps))
        return self.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def make_batch(examples: list[Example], with_answers: bool = True, use_graph: bool = True,
               kv: KVStore | None = None) -> QABatch:
    """Collate examples into a :class:`QABatch` (tensors on CPU); ``kv``: attach cached frozen parts."""
    return QABatch(cells=collate([e.tensors for e in examples]) if use_graph else None,
                   questions=[e.question for e in examples], contexts=[e.context for e in examples],
                   answers=[e.answer for e in examples] if with_answers else None,
                   kv=kv.get([e.id for e in examples]) if kv is not None else None)


class KVStore:
    """Frozen-part key/value caches of many examples, as float16 safetensors shards in ``folder``.

    ``build(model, examples)`` computes what is missing (shards of ``shard_size`` examples,
    written atomically, so an interrupted build resumes); ``get(ids)`` reads memory-mapped
    tensors ``(layers, 2, kv_heads, S_i, head_dim)``. ``folder`` must be specific to the LLM, the
    prompt layout and the data (:func:`kv_store_key` names it).
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._where: dict[str, Path] = {}
        self._handles: dict[Path, Any] = {}
        self._scan()

    def _scan(self) -> None:
        from safetensors import safe_open

        for f in sorted(self.folder.glob("shard_*.safetensors")):
            if f not in self._handles:
                self._handles[f] = safe_open(str(f), framework="pt")
                for k in self._handles[f].keys():  # noqa: SIM118 (a safetensors handle)
                    self._where[k] = f

    def __contains__(self, key: str) -> bool:
        return str(key) in self._where

    def __len__(self) -> int:
        return len(self._where)

    def build(self, model: TopoRAGModel, examples: list[Example], batch_size: int = 8, shard_size: int = 64,
              show_progress: bool = True) -> KVStore:
        from safetensors.torch import save_file
        from tqdm.auto import tqdm

        # longest-first by text length: rows of one forward pass have similar lengths (little padding)
        todo = sorted((e for e in examples if str(e.id) not in self._where),
                      key=lambda e: -(len(e.context) + len(e.question)))
        was = model.training
        model.eval()
        for s0 in tqdm(range(0, len(todo), shard_size), disable=not show_progress, desc="kv cache"):
            shard = {}
            for b0 in range(s0, min(s0 + shard_size, len(todo)), batch_size):
                chunk = todo[b0:min(b0 + batch_size, s0 + shard_size, len(todo))]
                kvs = model.context_kv(make_batch(chunk, with_answers=False, use_graph=False))
                shard.update({str(e.id): t.to(torch.float16).cpu().contiguous() for e, t in zip(chunk, kvs)})
            path = self.folder / f"shard_{len(list(self.folder.glob('shard_*.safetensors'))):05d}.safetensors"
            tmp = path.with_name(path.name + ".tmp")
            save_file(shard, str(tmp))
            os.replace(tmp, path)
            self._scan()
        model.train(was)
        return self

    def get(self, ids: list[str]) -> list[torch.Tensor]:
        missing = [i for i in ids if str(i) not in self._where]
        if missing:
            raise KeyError(f"KVStore {self.folder}: no cache for examples {missing[:5]}")
        return [self._handles[self._where[str(i)]].get_tensor(str(i)) for i in ids]


def kv_store_key(model: TopoRAGModel, data_key: str) -> str:
    """A folder name that changes with the LLM, the prompt layout, the input budget and the data."""
    import hashlib

    lay = model.prompt_layout_ids()
    h = hashlib.sha1(json.dumps([model.config.llm, lay, model.config.max_input_tokens,
                                 str(model.dtype), data_key]).encode()).hexdigest()[:12]
    return f"{data_key}-{h}"


def epoch_batches(n: int, lengths: list[int], cfg: TrainConfig, epoch: int) -> list[list[int]]:
    """The batches (example indices) of one epoch: seeded shuffle, optional length buckets."""
    g = torch.Generator().manual_seed(cfg.seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    bs = cfg.batch_size
    if cfg.bucket <= 1:
        return [order[i:i + bs] for i in range(0, n, bs)]
    batches = []
    win = bs * cfg.bucket
    for w in range(0, n, win):
        window = sorted(order[w:w + win], key=lambda i: lengths[i])
        batches += [window[i:i + bs] for i in range(0, len(window), bs)]
    perm = torch.randperm(len(batches), generator=g).tolist()
    return [batches[i] for i in perm]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


@torch.no_grad()
def evaluate_loss(model: TopoRAGModel, examples: list[Example], batch_size: int = 16,
                  kv: KVStore | None = None) -> float:
    """Mean per-batch answer loss over ``examples`` (weighted by batch size)."""
    return validate(model, examples, batch_size, kv, accuracy=False)[0]


@torch.no_grad()
def validate(model: TopoRAGModel, examples: list[Example], batch_size: int = 16, kv: KVStore | None = None,
             accuracy: bool = True) -> tuple[float, float | None]:
    """``(mean answer loss, label-scoring accuracy or None)`` over ``examples``. Accuracy needs the
    model's ``answer_set``; a prediction is right when it equals the example's answer."""
    was = model.training
    model.eval()
    total, n, right = 0.0, 0, 0
    scoring = accuracy and bool(model.config.answer_set)
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        batch = make_batch(chunk, use_graph=model.config.use_graph, kv=kv).to(model.device)
        total += float(model(batch)) * len(chunk)
        n += len(chunk)
        if scoring:
            preds = model.answer(batch)
            right += sum(p["answer"].strip().lower() == e.answer.strip().lower() for p, e in zip(preds, chunk))
    model.train(was)
    return total / max(n, 1), (right / max(n, 1) if scoring else None)


# ----------------------------------------------------------------------------- optimiser state I/O
def _save_optimizer(opt: torch.optim.Optimizer, names: dict[int, str], path: Path) -> None:
    from safetensors.torch import save_file

    flat = {}
    for p, st in opt.state.items():
        for k, v in st.items():
            t = v if torch.is_tensor(v) else torch.tensor(float(v))
            flat[f"{names[id(p)]}::{k}"] = t.detach().cpu().contiguous()
    tmp = path.with_name(path.name + ".tmp")
    save_file(flat, str(tmp))
    os.replace(tmp, path)


def _load_optimizer(opt: torch.optim.Optimizer, params: dict[str, torch.nn.Parameter], path: Path) -> None:
    from safetensors.torch import load_file

    flat = load_file(str(path))
    for key, v in flat.items():
        name, k = key.split("::", 1)
        if name not in params:
            raise ValueError(f"{path}: optimiser state for unknown parameter {name}")
        p = params[name]
        opt.state[p][k] = v.to(p.device) if k != "step" else v


# ----------------------------------------------------------------------------- the loop
def train(model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
          out: str | os.PathLike, resume: bool = False, extra_meta: dict[str, Any] | None = None,
          kv: KVStore | None = None) -> dict[str, Any]:
    """Train ``model`` in place; the best validation weights are saved to ``out/best``.

    ``kv``: a :class:`KVStore` holding the frozen parts of ``train_set`` and ``val_set``
    (``graph_position="suffix"`` only; missing entries are computed first).
    Returns a summary dict (steps, best validation loss / accuracy, seconds, examples/s ...).
    """
    from tqdm.auto import tqdm

    if not train_set:
        raise ValueError("empty training set")
    if not val_set:
        raise ValueError("empty validation set (needed for model selection)")
    if cfg.select == "accuracy" and not model.config.answer_set:
        raise ValueError("TrainConfig.select='accuracy' needs a model with a closed answer_set")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_everything(cfg.seed)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError("this model has no trainable parameters")
    names = {id(p): n for n, p in params.items()}
    opt = torch.optim.AdamW(list(params.values()), lr=cfg.lr, weight_decay=cfg.weight_decay)
    meta = {"train": asdict(cfg), **(extra_meta or {})}
    state = {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_val": math.inf, "best_acc": -1.0, "best_step": -1,
             "bad_evals": 0, "seen": 0, "train_seconds": 0.0, "kv_seconds": 0.0, "done": False}
    last = out / "last"
    last.mkdir(parents=True, exist_ok=True)
    if resume and (last / "trainer.json").is_file():
        from safetensors.torch import load_file

        state.update(json.loads((last / "trainer.json").read_text()))
        model.load_trainable(load_file(str(last / "model.safetensors")), where=str(last))
        _load_optimizer(opt, params, last / "optimizer.safetensors")
        state["done"] = False  # a finished run resumed with a larger budget simply goes on
    if kv is not None:
        t_kv = time.perf_counter()
        kv.build(model, train_set + val_set, batch_size=cfg.eval_batch_size, show_progress=cfg.show_progress)
        state["kv_seconds"] += time.perf_counter() - t_kv
    lengths = [len(e.context) + len(e.question) for e in train_set]
    batches_per_epoch = math.ceil(len(train_set) / cfg.batch_size)
    steps_per_epoch = math.ceil(batches_per_epoch / cfg.grad_accum)
    total_steps = min(cfg.epochs * steps_per_epoch, cfg.max_steps or 10 ** 12)
    eval_every = cfg.eval_every or steps_per_epoch
    t_start = time.perf_counter() - state["train_seconds"]
    log = open(out / "log.jsonl", "a")

    def checkpoint(val_loss: float, val_acc: float | None) -> bool:
        """Evaluate-time bookkeeping; returns True when early stopping triggers."""
        if cfg.select == "accuracy":
            improved = (val_acc, -val_loss) > (state["best_acc"], -state["best_val"])
        else:
            improved = val_loss < state["best_val"]
        if improved:
            state.update(best_val=val_loss, best_acc=val_acc if val_acc is not None else -1.0,
                         best_step=state["step"], bad_evals=0)
            model.save(out / "best", extra={**meta, "best_step": state["step"], "val_loss": val_loss,
                                            "val_accuracy": val_acc, "val_examples": len(val_set)})
        else:
            state["bad_evals"] += 1
        state["train_seconds"] = time.perf_counter() - t_start
        model.save(last, extra=meta)
        _save_optimizer(opt, names, last / "optimizer.safetensors")
        tmp = last / "trainer.json.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, last / "trainer.json")
        log.write(json.dumps({"step": state["step"], "epoch": state["epoch"], "val_loss": val_loss,
                              "val_accuracy": val_acc, "best": improved, "seen": state["seen"],
                              "seconds": state["train_seconds"]}) + "\n")
        log.flush()
        return state["bad_evals"] >= cfg.patience

    def over_budget() -> bool:
        return ((cfg.max_steps is not None and state["step"] >= cfg.max_steps) or
                (cfg.stop_after_steps is not None and state["step"] >= cfg.stop_after_steps) or
                (cfg.time_budget_s is not None and time.perf_counter() - t_start >= cfg.time_budget_s))

    model.train()
    stop = over_budget()
    bar = tqdm(total=total_steps, initial=state["step"], disable=not cfg.show_progress, desc="train")
    use_graph = model.config.use_graph
    while state["epoch"] < cfg.epochs and not stop:
        batches = epoch_batches(len(train_set), lengths, cfg, state["epoch"])
        groups = [batches[i:i + cfg.grad_accum] for i in range(0, len(batches), cfg.grad_accum)]
        for b in range(state["batch_in_epoch"], len(groups)):
            for g in opt.param_groups:
                g["lr"] = cfg.lr_at(state["step"], total_steps)
            opt.zero_grad(set_to_none=True)
            n_ex = sum(len(x) for x in groups[b])
            loss_sum = 0.0
            for idx in groups[b]:
                chunk = [train_set[i] for i in idx]
                loss = model(make_batch(chunk, use_graph=use_graph, kv=kv).to(model.device))
                (loss * len(chunk) / n_ex).backward()  # example-weighted mean over the accumulated batches
                loss_sum += float(loss.detach()) * len(chunk)
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(list(params.values()), cfg.grad_clip)
            opt.step()
            state["step"] += 1
            state["seen"] += n_ex
            state["batch_in_epoch"] = b + 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss_sum / n_ex:.4f}", best_val=f"{state['best_val']:.4f}")
            budget_hit = over_budget()
            if state["step"] % eval_every == 0 or budget_hit or b + 1 == len(groups):
                if state["batch_in_epoch"] == len(groups):  # epoch finished: resume starts the next one
                    state["epoch"] += 1
                    state["batch_in_epoch"] = 0
                v_loss, v_acc = validate(model, val_set, cfg.eval_batch_size, kv, accuracy=cfg.select == "accuracy")
                stop = checkpoint(v_loss, v_acc) or budget_hit
                model.train()
            if stop or state["batch_in_epoch"] == 0:
                break
    bar.close()
    state["done"] = True
    state["train_seconds"] = time.perf_counter() - t_start
    tmp = last / "trainer.json.tmp"
    tmp.write_text(json.dumps(state))
    os.replace(tmp, last / "trainer.json")
    log.close()
    summary = {**meta, "steps": state["step"], "examples_seen": state["seen"], "best_val_loss": state["best_val"],
               "best_val_accuracy": state["best_acc"] if state["best_acc"] >= 0 else None,
               "best_step": state["best_step"], "train_seconds": state["train_seconds"],
               "kv_cache_seconds": state["kv_seconds"],
               "examples_per_s": state["seen"] / max(state["train_seconds"], 1e-9),
               "trainable_params": model.num_trainable()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
