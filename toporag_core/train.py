"""Training loop: AdamW on the trainable parts only, early stopping on validation loss, resumable.

* Batches: :func:`make_batch` collates preprocessed :class:`~toporag_core.tasks.prep.Example`\\ s.
* Order: epoch ``e`` visits the training set in ``randperm(seed + e)`` order, so a resumed run
  skips exactly the batches already done and sees the same data as an uninterrupted run.
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
    """Optimisation settings (paper: AdamW, lr 1e-5, wd 0.05, batch 8, <= 10 epochs, patience 2)."""

    lr: float = 1e-5
    weight_decay: float = 0.05
    epochs: int = 10
    batch_size: int = 8
    eval_batch_size: int = 16
    patience: int = 2
    grad_clip: float = 0.1  # G-Retriever clips the gradient norm at 0.1
    seed: int = 0
    max_steps: int | None = None
    eval_every: int | None = None
    time_budget_s: float | None = None
    show_progress: bool = True


def make_batch(examples: list[Example], with_answers: bool = True, use_graph: bool = True) -> QABatch:
    """Collate examples into a :class:`QABatch` (tensors on CPU)."""
    return QABatch(cells=collate([e.tensors for e in examples]) if use_graph else None,
                   questions=[e.question for e in examples], contexts=[e.context for e in examples],
                   answers=[e.answer for e in examples] if with_answers else None)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)


@torch.no_grad()
def evaluate_loss(model: TopoRAGModel, examples: list[Example], batch_size: int = 16) -> float:
    """Mean per-batch answer loss over ``examples`` (weighted by batch size)."""
    was = model.training
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        loss = model(make_batch(chunk, use_graph=model.config.use_graph).to(model.device))
        total += float(loss) * len(chunk)
        n += len(chunk)
    model.train(was)
    return total / max(n, 1)


# ----------------------------------------------------------------------------- optimiser state I/O
def _save_optimizer(opt: torch.optim.Optimizer, names: dict[int, str], path: Path) -> None:
    from safetensors.torch import save_file

    flat = {}
    for p, st in opt.state.items():
        for k, v in st.items():
            flat[f"{names[id(p)]}::{k}"] = (v if torch.is_tensor(v) else torch.tensor(float(v))).detach().cpu().contiguous()
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
    return None


# ----------------------------------------------------------------------------- the loop
def train(model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
          out: str | os.PathLike, resume: bool = False, extra_meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train ``model`` in place; the best (validation-loss) weights are saved to ``out/best``.

    Returns a summary dict (steps, best validation loss, seconds, examples/s ...).
    """
    from tqdm.auto import tqdm

    if not train_set:
        raise ValueError("empty training set")
    if not val_set:
        raise ValueError("empty validation set (needed for model selection)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_everything(cfg.seed)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise ValueError("this model has no trainable parameters")
    names = {id(p): n for n, p in params.items()}
    opt = torch.optim.AdamW(list(params.values()), lr=cfg.lr, weight_decay=cfg.weight_decay)
    meta = {"train": asdict(cfg), **(extra_meta or {})}
    state = {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_val": math.inf, "best_step": -1,
             "bad_evals": 0, "seen": 0, "train_seconds": 0.0, "done": False}
    last = out / "last"
    last.mkdir(parents=True, exist_ok=True)
    if resume and (last / "trainer.json").is_file():
        from safetensors.torch import load_file

        state.update(json.loads((last / "trainer.json").read_text()))
        model.load_trainable(load_file(str(last / "model.safetensors")), where=str(last))
        _load_optimizer(opt, params, last / "optimizer.safetensors")
        state["done"] = False  # a finished run resumed with a larger budget simply goes on
    bs = cfg.batch_size
    steps_per_epoch = math.ceil(len(train_set) / bs)
    eval_every = cfg.eval_every or steps_per_epoch
    t_start = time.perf_counter() - state["train_seconds"]
    log = open(out / "log.jsonl", "a")

    def checkpoint(val_loss: float) -> bool:
        """Evaluate-time bookkeeping; returns True when early stopping triggers."""
        improved = val_loss < state["best_val"]
        if improved:
            state.update(best_val=val_loss, best_step=state["step"], bad_evals=0)
            model.save(out / "best", extra={**meta, "best_step": state["step"], "val_loss": val_loss})
        else:
            state["bad_evals"] += 1
        state["train_seconds"] = time.perf_counter() - t_start
        model.save(last, extra=meta)
        _save_optimizer(opt, names, last / "optimizer.safetensors")
        tmp = last / "trainer.json.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, last / "trainer.json")
        log.write(json.dumps({"step": state["step"], "epoch": state["epoch"], "val_loss": val_loss,
                              "best": improved, "seen": state["seen"], "seconds": state["train_seconds"]}) + "\n")
        log.flush()
        return state["bad_evals"] >= cfg.patience

    def over_budget() -> bool:
        return ((cfg.max_steps is not None and state["step"] >= cfg.max_steps) or
                (cfg.time_budget_s is not None and time.perf_counter() - t_start >= cfg.time_budget_s))

    model.train()
    stop = over_budget()
    bar = tqdm(total=min(cfg.epochs * steps_per_epoch, cfg.max_steps or 10 ** 12), initial=state["step"],
               disable=not cfg.show_progress, desc="train")
    while state["epoch"] < cfg.epochs and not stop:
        order = torch.randperm(len(train_set), generator=torch.Generator().manual_seed(cfg.seed + state["epoch"]))
        for b in range(state["batch_in_epoch"], steps_per_epoch):
            chunk = [train_set[i] for i in order[b * bs:(b + 1) * bs].tolist()]
            loss = model(make_batch(chunk, use_graph=model.config.use_graph).to(model.device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(list(params.values()), cfg.grad_clip)
            opt.step()
            state["step"] += 1
            state["seen"] += len(chunk)
            state["batch_in_epoch"] = b + 1
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.4f}", best_val=f"{state['best_val']:.4f}")
            budget_hit = over_budget()
            if state["step"] % eval_every == 0 or budget_hit or b + 1 == steps_per_epoch:
                if state["batch_in_epoch"] == steps_per_epoch:  # epoch finished: resume starts the next one
                    state["epoch"] += 1
                    state["batch_in_epoch"] = 0
                stop = checkpoint(evaluate_loss(model, val_set, cfg.eval_batch_size)) or budget_hit
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
               "best_step": state["best_step"], "train_seconds": state["train_seconds"],
               "examples_per_s": state["seen"] / max(state["train_seconds"], 1e-9),
               "trainable_params": model.num_trainable()}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
