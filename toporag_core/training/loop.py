"""The training loop: AdamW on the trainable parts only, early stopping on validation, resumable.

:func:`train` checks its inputs (:func:`check_training_inputs`) and runs a :class:`TrainingRun`.

* Batches: :func:`~toporag_core.training.data.epoch_batches` (the data order) collated by
  :func:`~toporag_core.tasks.batching.make_batch`; ``grad_accum`` sums gradients over several batches per
  optimiser step; the learning rate is :meth:`~toporag_core.training.config.TrainConfig.lr_at` of the step.
* Cheap steps: with ``graph_position="before_question"`` the frozen part of every example has a key/value cache
  (:class:`~toporag_core.training.kv_shards.DiskKVShards`, built once before the first step) and a step runs
  only the few tail positions with grad.
* Optimiser: :func:`param_groups` gives the graph encoder (:data:`GRAPH_PARTS`) its own peak learning rate
  (``TrainConfig.encoder_lr``); the schedule scales both groups.
* Selection: ``select="loss"`` (validation answer loss) or ``"accuracy"`` (validation accuracy with label
  scoring over the model's ``answer_set``; ties go to the lower loss), from
  :func:`~toporag_core.training.validation.validation_loss`.
* Checkpoints under ``out``: ``best/`` (best validation loss / accuracy; what ``toporag eval`` loads) and
  ``last/`` (model + AdamW moments (:mod:`~toporag_core.training.optim_state`) + ``trainer.json`` with
  epoch/step/best/patience, all as safetensors/JSON, no pickle) written after every evaluation; ``log.jsonl``
  has one line per optimiser step (``loss``, ``lr``) and one per evaluation (``val_loss``, ``val_accuracy``,
  ``token_spread``); ``summary.json`` at the end.
* Readback term: with ``joint_align_weight > 0`` every step adds the alignment stage's contrastive readback
  loss on a batch of readback rows (:class:`~toporag_core.training.align.JointReadback`; one process only), its
  parts go into the step's log line (``readback_loss``, ``readback_own``, ``readback_other``) and every
  evaluation reads validation back (``readback_own_lower`` ...), so a run shows when the reading fades.
* Budgets: ``max_steps`` (optimiser steps; also the schedule's length), ``stop_after_steps`` (stop there,
  schedule unchanged), ``time_budget_s`` (wall seconds), ``eval_every`` (steps; default: once per epoch) so a
  short CPU run still selects on validation.
* Processes: this is the only training loop. ``env`` (:class:`~toporag_core.training.env.ProcessEnv`) is the
  one process by default and :class:`~toporag_core.training.distributed.DistEnv` under ``torchrun``: each rank
  takes its share ``batch[rank::world]`` of the same global batches, the loss of each share is weighted by its
  answer tokens so that DDP's gradient mean is exactly the one-process gradient (:meth:`TrainingRun.loss_weights`;
  the equations are in :mod:`toporag_core.training.distributed`), and rank 0 validates, writes and broadcasts
  the numbers every rank decides on.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ..tasks.prep import Example
from .align import JointReadback, check_word_targets
from ..evaluation.arms import readback_target
from ..tasks.batching import make_batch
from .config import TrainConfig
from .data import epoch_batches, with_graph_only_rows
from .env import ProcessEnv, seed_everything
from .kv_shards import DiskKVShards
from .optim_state import load_optimizer, save_optimizer
from .validation import token_spread, validation_loss
from ..model import TopoRAGModel


GRAPH_PARTS = ("encoder.",)  # parameters trained at ``TrainConfig.encoder_lr``


def param_groups(params: dict[str, torch.nn.Parameter], cfg: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups: the graph encoder's parameters (:data:`GRAPH_PARTS`) and the rest (projector,
    adapters, prompt); each carries ``lr_scale``, its peak lr over ``cfg.lr`` (the schedule scales both)."""
    graph = [p for n, p in params.items() if n.startswith(GRAPH_PARTS)]
    rest = [p for n, p in params.items() if not n.startswith(GRAPH_PARTS)]
    scale = (cfg.encoder_lr / cfg.lr) if cfg.encoder_lr is not None else 1.0
    return [g for g in ({"params": graph, "lr_scale": scale}, {"params": rest, "lr_scale": 1.0}) if g["params"]]



def train(model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
          out: str | os.PathLike, resume: bool = False, extra_meta: dict[str, Any] | None = None,
          kv: DiskKVShards | None = None, env: ProcessEnv | None = None) -> dict[str, Any]:
    """Train ``model`` in place; the best validation weights are saved to ``out/best``.

    ``kv``: a :class:`~toporag_core.training.kv_shards.DiskKVShards` holding the frozen parts of
    ``train_set`` and ``val_set`` (the cacheable layout ``"before_question"`` only; missing entries are
    computed first; one process only).
    ``env``: the job this process belongs to (default: the one process); under ``torchrun`` every
    rank calls ``train`` with the same data, an identically built model and
    :func:`toporag_core.training.distributed.init_distributed`'s env; ``cfg.batch_size`` is then the global
    batch. ``cfg.select="auto"`` selects on accuracy when the model has a closed answer set. Returns
    the summary dict (steps, best validation loss / accuracy, seconds, examples/s ...; every rank)
    plus ``"losses"``: the global-batch loss of every step of this run.
    """
    env = env or ProcessEnv()
    cfg = cfg.resolved(model.config.answer_set)
    if cfg.max_steps == 0:
        raise ValueError("TrainConfig.max_steps = 0 is the alignment stage alone (training.align.align_stage)")
    if cfg.graph_only and model.config.use_graph:
        train_set = with_graph_only_rows(train_set, cfg.graph_only, cfg.seed)
    check_training_inputs(model, train_set, val_set, cfg, env, kv)
    run = TrainingRun(model, train_set, val_set, cfg, Path(out), env, kv, extra_meta)
    if resume:
        run.restore()
    run.prepare()
    return run.loop()


def check_training_inputs(model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
                          env: ProcessEnv, kv: DiskKVShards | None) -> None:
    """Refuse, before anything is written, a run that cannot work: empty splits, accuracy selection
    without an answer set, a global batch the processes cannot share, a KV cache or an example-mean
    auxiliary loss under several processes."""
    if not train_set:
        raise ValueError("empty training set")
    if not val_set:
        raise ValueError("empty validation set (needed for model selection)")
    if cfg.select == "accuracy" and not model.config.answer_set:
        raise ValueError("TrainConfig.select='accuracy' needs a model with a closed answer_set")
    if cfg.joint_align_weight and not model.config.use_graph:
        raise ValueError("TrainConfig.joint_align_weight reads cells back from graph tokens: it needs a model with "
                         "graph tokens (drop --no-graph, or --joint-align-weight)")
    if env.world <= 1:
        return
    if cfg.batch_size % env.world:
        raise ValueError(f"TrainConfig.batch_size ({cfg.batch_size}, the global batch) must be divisible by the "
                         f"number of processes ({env.world})")
    if cfg.joint_align_weight:
        raise ValueError("TrainConfig.joint_align_weight is not supported with several processes: its readback "
                         "rows run outside DDP's gradient reduction; train in one process")
    if kv is not None:
        raise ValueError("the KV cache (DiskKVShards) is not supported with several processes: every rank would "
                         "build the same shard files in one folder; train without it (--no-kv-cache)")


class TrainingRun:
    """One call of :func:`train`: the optimiser, the resumable ``state`` (``last/trainer.json``) and
    the steps of the loop: :meth:`restore` (resume), :meth:`prepare` (KV cache), :meth:`loop` (epochs
    of :meth:`step`, with :meth:`checkpoint` at every evaluation and :meth:`over_budget` after every
    step), :meth:`finish` (summary)."""

    def __init__(self, model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
                 out: Path, env: ProcessEnv, kv: DiskKVShards | None, extra_meta: dict[str, Any] | None) -> None:
        self.model, self.train_set, self.val_set, self.cfg, self.out, self.env, self.kv = \
            model, train_set, val_set, cfg, out, env, kv
        self.joint = JointReadback(train_set, val_set, cfg, readback_target(model.config)) if cfg.joint_align_weight \
            else None
        if self.joint and cfg.align_words:
            check_word_targets(model)
        self.last = out / "last"
        if env.main:
            self.last.mkdir(parents=True, exist_ok=True)
        seed_everything(cfg.seed)
        self.params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        if not self.params:
            raise ValueError("this model has no trainable parameters")
        self.names = {id(p): n for n, p in self.params.items()}
        self.opt = torch.optim.AdamW(param_groups(self.params, cfg), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.meta = {"train": asdict(cfg), "world_size": env.world, **(extra_meta or {})}
        self.state: dict[str, Any] = {"epoch": 0, "batch_in_epoch": 0, "step": 0, "best_val": math.inf,
                                      "best_acc": -1.0, "best_step": -1, "bad_evals": 0, "seen": 0,
                                      "train_seconds": 0.0, "kv_seconds": 0.0, "done": False}
        self.losses: list[float] = []
        self.log = None
        self.t_start = 0.0

    def restore(self) -> None:
        """Resume from ``out/last`` when it holds a run (every rank reads the shared folder)."""
        if not (self.last / "trainer.json").is_file():
            return
        from safetensors.torch import load_file

        self.state.update(json.loads((self.last / "trainer.json").read_text()))
        self.model.load_trainable(load_file(str(self.last / "model.safetensors")), where=str(self.last))
        load_optimizer(self.opt, self.params, self.last / "optimizer.safetensors")
        self.state["done"] = False  # a finished run resumed with a larger budget simply goes on

    def prepare(self) -> None:
        """The KV cache is completed (its seconds are counted apart)."""
        model, state = self.model, self.state
        if self.kv is not None:
            t_kv = time.perf_counter()
            self.kv.build(model, self.train_set + self.val_set, batch_size=self.cfg.eval_batch_size,
                          show_progress=self.cfg.show_progress)
            state["kv_seconds"] += time.perf_counter() - t_kv

    def write_state(self) -> None:
        tmp = self.last / "trainer.json.tmp"
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.last / "trainer.json")

    def improved(self, v_loss: float, v_acc: float | None) -> bool:
        """Whether this validation beats the best so far (accuracy, then loss; or loss alone)."""
        if self.cfg.select == "accuracy":
            return (v_acc, -v_loss) > (self.state["best_acc"], -self.state["best_val"])
        return v_loss < self.state["best_val"]

    def checkpoint(self) -> bool:
        """Rank 0 validates and writes; every rank gets its numbers, so all take the same decision.
        Returns True when early stopping triggers."""
        cfg, env, state, model = self.cfg, self.env, self.state, self.model
        v_loss, v_acc = (validation_loss(model, self.val_set, cfg.eval_batch_size, self.kv,
                                         accuracy=cfg.select == "accuracy") if env.main else (0.0, None))
        v_loss, acc = env.broadcast([v_loss, math.nan if v_acc is None else v_acc])
        v_acc = None if math.isnan(acc) else acc
        spread = math.nan
        if model.config.use_graph:
            was = model.training
            model.eval()
            spread = env.broadcast([token_spread(model, self.val_set) if env.main else 0.0])[0]
            model.train(was)
        rb = self.joint.check(model) if self.joint is not None and env.main else {}
        improved = self.improved(v_loss, v_acc)
        if improved:
            state.update(best_val=v_loss, best_acc=v_acc if v_acc is not None else -1.0,
                         best_step=state["step"], bad_evals=0)
        else:
            state["bad_evals"] += 1
        state["train_seconds"] = time.perf_counter() - self.t_start
        if env.main:
            if improved:
                model.save(self.out / "best", extra={**self.meta, "best_step": state["step"], "val_loss": v_loss,
                                                     "val_accuracy": v_acc, "val_examples": len(self.val_set)})
            model.save(self.last, extra=self.meta)
            save_optimizer(self.opt, self.names, self.last / "optimizer.safetensors")
            self.write_state()
            self.log.write(json.dumps({"step": state["step"], "epoch": state["epoch"], "val_loss": v_loss,
                                       "val_accuracy": v_acc, "best": improved, "seen": state["seen"],
                                       "seconds": state["train_seconds"],
                                       **({} if math.isnan(spread) else {"token_spread": spread}), **rb}) + "\n")
            self.log.flush()
        if spread < cfg.min_token_spread:
            raise RuntimeError(f"graph tokens collapsed at step {state['step']}: their spread across validation "
                               f"examples is {spread:.2e} < min_token_spread {cfg.min_token_spread} (every question "
                               f"gets nearly the same tokens); lower the encoder's learning rate (--encoder-lr), "
                               f"add graph-only rows (--graph-only) or use graph_path='cells'")
        return state["bad_evals"] >= cfg.patience

    def over_budget(self) -> bool:
        cfg, step = self.cfg, self.state["step"]
        hit = ((cfg.max_steps is not None and step >= cfg.max_steps) or
               (cfg.stop_after_steps is not None and step >= cfg.stop_after_steps) or
               (cfg.time_budget_s is not None and time.perf_counter() - self.t_start >= cfg.time_budget_s))
        return bool(self.env.broadcast([float(hit)])[0])  # rank 0's clock decides for everyone

    def loss_weights(self, group: list[list[int]]) -> tuple[list[float], list[float]]:
        """``(examples per micro-batch in all ranks, this rank's token share)`` of one step.

        Micro-batch j of this step: E_j examples and T_j answer tokens in all ranks together, of which
        this rank holds t_j tokens; its loss L_j (mean over its tokens) is weighted by (t_j / T_j) * W *
        (E_j / E): DDP's mean over the W ranks then gives the one-process gradient of
        sum_j (E_j / E) * (global token mean of micro-batch j)."""
        env = self.env
        sizes = [len(idx) for idx in group]
        if env.world <= 1:
            return [float(x) for x in sizes], [1.0] * len(sizes)
        toks = [sum(len(self.model.answer_ids(self.train_set[i].answer)) for i in idx) for idx in group]
        tot = env.all_sum(sizes + toks)
        ex_tot, tok_tot = tot[:len(sizes)], tot[len(sizes):]
        return ex_tot, [t * env.world / max(tt, 1.0) for t, tt in zip(toks, tok_tot)]

    def step(self, net: torch.nn.Module, group: list[list[int]], lr: float) -> tuple[float, int, dict[str, float]]:
        """One optimiser step over the micro-batches ``group``: ``(global answer loss, examples, readback term's
        log)``."""
        env, opt = self.env, self.opt
        for g in opt.param_groups:
            g["lr"] = lr * g["lr_scale"]
        opt.zero_grad(set_to_none=True)
        ex_tot, share = self.loss_weights(group)
        n_ex = sum(ex_tot)
        part = 0.0  # this rank's part of the step's global loss
        for j, idx in enumerate(group):
            # an empty share (short last batch) still joins DDP's gradient reduction, with weight 0
            chunk = [self.train_set[i] for i in idx] or [self.train_set[0]]
            w = share[j] * ex_tot[j] / n_ex
            with env.no_sync(net) if j + 1 < len(group) else contextlib.nullcontext():
                loss = net(make_batch(chunk, use_graph=self.model.config.use_graph, kv=self.kv).to(self.model.device))
                (loss * w).backward()
            part += float(loss.detach()) * w / env.world
        step_loss = env.all_sum([part])[0]
        extra: dict[str, float] = {}
        if self.joint is not None:
            term, extra = self.joint.loss(self.model, self.state["step"])
            term.backward()
        if self.cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(list(self.params.values()), self.cfg.grad_clip)
        opt.step()
        return step_loss, int(n_ex), extra

    def epoch(self, net: torch.nn.Module, lengths: list[int], total_steps: int, eval_every: int, bar) -> bool:
        """The rest of the current epoch (from ``state["batch_in_epoch"]``); True when training stops."""
        cfg, state, env = self.cfg, self.state, self.env
        batches = epoch_batches(len(self.train_set), lengths, cfg, state["epoch"], env.rank, env.world)
        groups = [batches[i:i + cfg.grad_accum] for i in range(0, len(batches), cfg.grad_accum)]
        for b in range(state["batch_in_epoch"], len(groups)):
            lr = cfg.lr_at(state["step"], total_steps)
            step_loss, n_ex, extra = self.step(net, groups[b], lr)
            state["step"] += 1
            state["seen"] += n_ex
            state["batch_in_epoch"] = b + 1
            self.losses.append(step_loss)
            if self.log is not None:
                self.log.write(json.dumps({"step": state["step"], "loss": step_loss, "lr": lr, **extra}) + "\n")
            bar.update(1)
            bar.set_postfix(loss=f"{step_loss:.4f}", best_val=f"{state['best_val']:.4f}")
            budget_hit = self.over_budget()
            stop = False
            if state["step"] % eval_every == 0 or budget_hit or b + 1 == len(groups):
                if state["batch_in_epoch"] == len(groups):  # epoch finished: resume starts the next one
                    state["epoch"] += 1
                    state["batch_in_epoch"] = 0
                stop = self.checkpoint() or budget_hit
                self.model.train()
            if stop:
                return True
            if state["batch_in_epoch"] == 0:
                return False
        return False

    def loop(self) -> dict[str, Any]:
        """Epochs until done, early stopping or a budget; then :meth:`finish`."""
        from tqdm.auto import tqdm

        cfg, state, env = self.cfg, self.state, self.env
        net = env.wrap(self.model)  # DDP broadcasts rank 0's weights at construction
        lengths = [len(e.context) + len(e.question) for e in self.train_set]
        steps_per_epoch = math.ceil(math.ceil(len(self.train_set) / cfg.batch_size) / cfg.grad_accum)
        total_steps = min(cfg.epochs * steps_per_epoch, cfg.max_steps or 10 ** 12)
        eval_every = cfg.eval_every or steps_per_epoch
        self.t_start = time.perf_counter() - state["train_seconds"]
        self.log = open(self.out / "log.jsonl", "a") if env.main else None
        self.model.train()
        stop = self.over_budget()
        bar = tqdm(total=total_steps, initial=state["step"], disable=not (cfg.show_progress and env.main),
                   desc="train")
        while state["epoch"] < cfg.epochs and not stop:
            stop = self.epoch(net, lengths, total_steps, eval_every, bar)
        bar.close()
        return self.finish()

    def finish(self) -> dict[str, Any]:
        state = self.state
        state["done"] = True
        state["train_seconds"] = time.perf_counter() - self.t_start
        summary = {**self.meta, "steps": state["step"], "examples_seen": state["seen"],
                   "best_val_loss": state["best_val"],
                   "best_val_accuracy": state["best_acc"] if state["best_acc"] >= 0 else None,
                   "best_step": state["best_step"], "train_seconds": state["train_seconds"],
                   "kv_cache_seconds": state["kv_seconds"],
                   "examples_per_s": state["seen"] / max(state["train_seconds"], 1e-9),
                   "trainable_params": self.model.num_trainable()}
        if self.env.main:
            self.write_state()
            self.log.close()
            (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
        self.env.barrier()  # nobody reads the checkpoint before rank 0 has written it
        return {**summary, "losses": self.losses}
