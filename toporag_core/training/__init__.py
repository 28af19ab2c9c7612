"""Training loop: AdamW on the trainable parts only, early stopping on validation, resumable.

* Batches: :func:`make_batch` collates preprocessed :class:`~toporag_core.tasks.prep.Example`\\ s;
  padding is dynamic (each batch pads to its own longest row) and, with ``bucket > 1``, batches
  are cut from length-sorted windows of ``bucket x batch_size`` shuffled examples (less padding),
  then shuffled.
* Order: epoch ``e`` derives its batches from ``randperm(seed + e)``, so a resumed run skips
  exactly the batches already done and sees the same data as an uninterrupted run.
* Cheap steps: with ``graph_position="before_question"`` the frozen part of every example (chat
  prefix and context) has a key/value cache that no trainable parameter changes; :class:`KVStore`
  computes it once (no grad, float16 safetensors shards on disk, memory-mapped) and every epoch
  reuses it, so a step runs only the few tail positions with grad. ``grad_accum`` sums gradients
  over several batches per optimiser step; ``lr_schedule="cosine"`` warms up linearly over
  ``warmup_steps`` then decays to 10% (a pure function of the step: resumes exactly).
* Selection: ``select="loss"`` (validation answer loss) or ``"accuracy"`` (validation accuracy
  with label scoring over the model's ``answer_set``; ties go to the lower loss).
* Checkpoints under ``out``: ``best/`` (best validation loss / accuracy; what ``toporag eval``
  loads) and ``last/`` (model + AdamW moments + ``trainer.json`` with epoch/step/best/patience,
  all as safetensors/JSON, no pickle) written after every evaluation; ``log.jsonl`` has one line
  per optimiser step (``loss``, ``lr``) and one per evaluation (``val_loss``, ``val_accuracy``);
  ``summary.json`` at the end.
* Readback term: with ``joint_align_weight > 0`` every step adds the alignment stage's contrastive readback
  loss on a batch of readback rows (:class:`~toporag_core.training.align.JointReadback`; one process only), its
  parts go into the step's log line (``readback_loss``, ``readback_own``, ``readback_other``) and every
  evaluation reads validation back (``readback_own_lower`` ...), so a run shows when the reading fades.
* Targets: an example's ``answer``; :func:`with_evidence_targets` turns yes/no answers into
  ``"<evidence>. Answer: <label>"`` for evidence-first training (the task's ``evidence`` hook).
* Budgets: ``max_steps`` (optimiser steps; also the schedule's length), ``stop_after_steps``
  (stop there, schedule unchanged), ``time_budget_s`` (wall seconds), ``eval_every`` (steps;
  default: once per epoch) so a short CPU run still selects on validation.
* Processes: this is the only training loop. ``env`` (:class:`ProcessEnv`: ``rank``, ``world``,
  ``all_sum``, ``broadcast``, ``wrap``, ...) is the one process by default and
  :class:`toporag_core.training.distributed.DistEnv` under ``torchrun``: each rank takes its share
  ``batch[rank::world]`` of the same global batches, the loss of each share is weighted by its
  answer tokens so that DDP's gradient mean is exactly the one-process gradient (the equations
  are in :mod:`toporag_core.training.distributed`), and rank 0 validates, writes and broadcasts the
  numbers every rank decides on.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..tasks.prep import Example
from .align import JointReadback, check_word_targets
from ..evaluation.arms import readback_target
from .batching import make_batch
from ..model import TopoRAGModel, evidence_target


LR_SCHEDULES = ("constant", "cosine")
SELECT_MODES = ("auto", "loss", "accuracy")  # auto: accuracy when the model has a closed answer set, else loss


def _opt(default: Any, help: str, **cli: Any) -> Any:
    """A config field whose ``metadata`` carries its command-line help (and, in ``cli``, the option's
    name, its ``choices`` or ``advanced=True`` for options left out of the main ``--help``)."""
    return field(default=default, metadata={"help": help, **cli})


@dataclass
class TrainConfig:
    """Optimisation settings, each with its help (field metadata: ``toporag train`` makes its options
    from them). Defaults: the paper's AdamW, lr 1e-5, batch 8, <= 10 epochs, patience 2; weight decay
    0.05 and gradient-norm clipping at 0.1 are G-Retriever's (its training code), not the paper's."""

    lr: float = _opt(1e-5, "peak learning rate (AdamW)")
    weight_decay: float = _opt(0.05, "AdamW weight decay", advanced=True)
    epochs: int = _opt(10, "at most this many epochs")
    batch_size: int = _opt(8, "examples per batch (the global batch under torchrun)")
    eval_batch_size: int = _opt(16, "examples per validation batch", advanced=True)
    patience: int = _opt(2, "stop after this many validations without improvement", advanced=True)
    grad_clip: float = _opt(0.1, "clip the gradient norm here (G-Retriever's 0.1; 0 = no clipping)", advanced=True)
    seed: int = _opt(0, "seed of initialisation and data order")
    max_steps: int | None = _opt(None, "at most this many optimiser steps (also the lr schedule's length; 0: "
                                       "stop after the alignment stage, --align-steps)",
                                 advanced=True)
    stop_after_steps: int | None = _opt(None, "stop at this optimiser step without shortening the lr schedule "
                                              "(equal budget to another run)", advanced=True)
    eval_every: int | None = _opt(None, "validate every N steps (default: each epoch)")
    time_budget_s: float | None = _opt(None, "stop training after this many seconds", flag="--time-budget",
                                       advanced=True)
    show_progress: bool = _opt(True, "progress bars", cli=False)
    grad_accum: int = _opt(1, "batches per optimiser step", advanced=True)
    bucket: int = _opt(8, "length-bucket window in batches: batches are cut from length-sorted windows of "
                          "bucket x batch_size examples (1 = plain shuffle)", advanced=True)
    lr_schedule: str = _opt("constant", "constant, or cosine (linear warm-up, cosine decay to 10%)",
                            choices=LR_SCHEDULES)
    warmup_steps: int = _opt(0, "warm-up steps of the cosine schedule", flag="--warmup")
    select: str = _opt("auto", "model selection on validation: loss, accuracy (label scoring over the answer "
                               "set; ties go to the lower loss) or auto (accuracy when there is a closed answer "
                               "set)", choices=SELECT_MODES, advanced=True)
    # Why a separate encoder lr: at the LoRA lr (5e-4) the CW encoder's ReLU states die within an epoch
    # and the pooled graph becomes a constant (ExplaGraphs: an encoder + label head alone stays at CE 0.69
    # at 1e-3, reaches 0.67 validation accuracy at 1e-4).
    encoder_lr: float | None = _opt(None, "peak lr of the graph encoder (default --lr); the CW encoder's ReLU "
                                          "states die at LoRA learning rates (5e-4): use ~1e-4")
    # Why graph-only rows: with the text in view a LoRA'd LLM learns the task from the text alone and the
    # graph tokens settle into a constant (ExplaGraphs: another question's tokens changed 0 of 192 answers).
    graph_only: float = _opt(0.0, "add this fraction of the training set again with the textualized context "
                                  "removed (graph tokens + question only), so the answer must be read from the "
                                  "graph tokens")
    # Why an alignment stage: trained with the text in view, the LLM never learns to read a cell from its graph
    # token (toporag eval --readback: a question's own tokens read back no better than another question's),
    # and readback rows with the plain loss only teach the format (toporag_core/training/align.py).
    align_steps: int = _opt(0, "before the joint stage, this many alignment steps: the encoder and projector learn "
                               "(LLM and LoRA frozen) to make each example's node lines likelier from its own graph "
                               "tokens than from another example's, no text (training/align.py)", advanced=True)
    align_lr: float = _opt(1e-3, "the alignment stage's projector lr (its encoder lr: --encoder-lr)", advanced=True)
    align_margin: float = _opt(0.5, "the alignment stage's margin, in nats per token, by which a row's own graph "
                                    "tokens should beat another row's", advanced=True)
    align_weight: float = _opt(1.0, "the alignment stage's weight of the hinge (own against another row's tokens) "
                                    "beside the plain readback loss", advanced=True)
    # Why word targets: through the frozen LLM alone the alignment loss taught names (2.3 nats per name token below
    # another question's tokens) and not attributes (0.07), though a probe reads the first attribute off the token.
    align_words: float = _opt(0.0, "in the alignment stage, add this weight times the cosine distance between each "
                                   "node slot's j-th token and the LLM's embedding of the j-th word of its node line "
                                   "(name, then attributes; tokens_per_cell tokens per node, nodes first) "
                                   "(toporag_core/training/align.py)", advanced=True)
    word_steps: int = _opt(0, "at the start of the alignment stage, this many steps of the word targets alone "
                              "(encoder and projector, no LLM forward; needs align_words)", advanced=True)
    # Why a readback term in the joint stage: trained on answers alone, the joint stage erases what the alignment
    # stage taught (own tokens read back better on 48 of 64 test rows before, 29 after), also when only the
    # encoder trains.
    joint_align_weight: float = _opt(0.0, "in the joint stage, add this weight times the alignment stage's "
                                          "contrastive readback loss on a batch of readback rows to every step's "
                                          "loss, and read back validation at every evaluation "
                                          "(toporag_core/training/align.py)", advanced=True)
    min_token_spread: float = _opt(0.0, "fail at a validation when the graph tokens' spread across validation "
                                        "examples (norm of their std over norm of their mean) falls below this: "
                                        "they collapsed into a constant (0 = only log it)", advanced=True)

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size", "grad_accum", "bucket"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name}: must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"TrainConfig.lr: must be > 0, got {self.lr}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"TrainConfig.lr_schedule: one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if self.select not in SELECT_MODES:
            raise ValueError(f"TrainConfig.select: one of {SELECT_MODES}, got {self.select!r}")
        if not 0.0 <= self.graph_only <= 1.0:
            raise ValueError(f"TrainConfig.graph_only: a fraction in [0, 1], got {self.graph_only}")
        if self.max_steps is not None and (self.max_steps < 0 or (self.max_steps == 0 and not self.align_steps)):
            raise ValueError(f"TrainConfig.max_steps: >= 1, or 0 with align_steps (alignment only), got "
                             f"{self.max_steps}")
        if self.align_steps < 0 or self.align_lr <= 0 or self.align_margin < 0 or self.align_weight < 0:
            raise ValueError(f"TrainConfig: align_steps >= 0, align_lr > 0, align_margin >= 0 and align_weight >= 0, "
                             f"got {self.align_steps}, {self.align_lr}, {self.align_margin}, {self.align_weight}")
        if self.word_steps < 0 or (self.word_steps and not (self.align_words and self.align_steps)):
            raise ValueError(f"TrainConfig.word_steps: >= 0, and it needs align_words > 0 and align_steps > 0, got "
                             f"{self.word_steps} (align_words {self.align_words}, align_steps {self.align_steps})")
        if self.align_words and not (self.align_steps or self.joint_align_weight):
            raise ValueError(f"TrainConfig.align_words={self.align_words} acts in the alignment stage or the joint "
                             f"readback term: it needs align_steps > 0 or joint_align_weight > 0")
        if self.joint_align_weight < 0 or self.align_words < 0:
            raise ValueError(f"TrainConfig: joint_align_weight and align_words must be >= 0, got "
                             f"{self.joint_align_weight} and {self.align_words}")
        if self.min_token_spread < 0:
            raise ValueError(f"TrainConfig.min_token_spread: must be >= 0, got {self.min_token_spread}")
        if self.encoder_lr is not None and self.encoder_lr <= 0:
            raise ValueError(f"TrainConfig.encoder_lr: must be > 0 (or None), got {self.encoder_lr}")

    def resolved(self, answer_set: Sequence[str]) -> TrainConfig:
        """This config with ``select="auto"`` made concrete: ``"accuracy"`` for a model with a closed
        ``answer_set``, else ``"loss"`` (what a checkpoint records)."""
        if self.select != "auto":
            return self
        return replace(self, select="accuracy" if answer_set else "loss")

    def lr_at(self, step: int, total: int) -> float:
        """Learning rate of optimiser step ``step`` (0-based) out of ``total``."""
        if self.lr_schedule == "constant":
            return self.lr
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        t = min(1.0, (step - self.warmup_steps) / max(1, total - self.warmup_steps))
        return self.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def with_evidence_targets(examples: Sequence[Example], evidence: dict[str, str]) -> tuple[list[Example], int]:
    """Evidence-first targets (``answer_style="evidence"``): every example whose ``id`` has an
    evidence sentence trains on :func:`~toporag_core.model.evidence_target` (``"The metal cup is
    orange. Answer: no"``) instead of its bare answer; the others keep theirs. Returns the new
    list (the inputs are not changed) and how many examples got evidence."""
    out, n = [], 0
    for e in examples:
        ev = evidence.get(str(e.id))
        if ev:
            out.append(replace(e, answer=evidence_target(ev, e.answer)))
            n += 1
        else:
            out.append(e)
    return out, n


GRAPH_ONLY_SUFFIX = "#graph-only"


def with_graph_only_rows(examples: Sequence[Example], fraction: float, seed: int = 0) -> list[Example]:
    """``examples`` plus a seeded ``fraction`` of them again with an empty context and the id suffix
    :data:`GRAPH_ONLY_SUFFIX` (their own frozen-part cache): graph tokens + question, as the ``only`` arm
    of :mod:`~toporag_core.evaluation.arms` reads them."""
    k = int(round(fraction * len(examples)))
    if k <= 0:
        return list(examples)
    pick = np.random.default_rng(seed).choice(len(examples), size=k, replace=False)
    return list(examples) + [replace(examples[i], context="", id=f"{examples[i].id}{GRAPH_ONLY_SUFFIX}")
                             for i in sorted(pick.tolist())]


@torch.no_grad()
def token_spread(model: TopoRAGModel, examples: Sequence[Example], batch_size: int = 16, limit: int = 64) -> float:
    """``||std_i G_i|| / ||mean_i G_i||`` of the graph tokens ``G_i`` (``(T, H)`` flattened) of up to ``limit``
    examples: 0 when every example gets the same tokens (an inert graph path)."""
    rows = []
    for i in range(0, min(limit, len(examples)), batch_size):
        chunk = list(examples[i:min(i + batch_size, limit)])
        cells = make_batch(chunk, with_answers=False).to(model.device).cells
        rows.append(model.graph_tokens(cells).float().flatten(1).cpu())
    g = torch.cat(rows)
    if g.shape[0] < 2:
        return math.nan
    return float(g.std(0).norm() / g.mean(0).norm().clamp(min=1e-12))


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
        from tqdm.auto import tqdm

        # longest-first by text length: rows of one forward pass have similar lengths (little padding)
        todo = sorted((e for e in examples if str(e.id) not in self._where),
                      key=lambda e: -(len(e.context) + len(e.question)))
        self.check_space(model, todo)
        was = model.training
        model.eval()
        for s0 in tqdm(range(0, len(todo), shard_size), disable=not show_progress, desc="kv cache"):
            shard = {}
            for b0 in range(s0, min(s0 + shard_size, len(todo)), batch_size):
                chunk = todo[b0:min(b0 + batch_size, s0 + shard_size, len(todo))]
                kvs = model.context_kv(make_batch(chunk, with_answers=False, use_graph=False))
                shard.update({str(e.id): t.to(torch.float16).cpu().contiguous() for e, t in zip(chunk, kvs)})
            self._write(shard)
        model.train(was)
        return self

    def check_space(self, model: TopoRAGModel, examples: list[Example], margin: float = 1.1) -> int:
        """Refuse, before the first forward pass, a build the disk cannot hold; returns the estimated bytes
        the not yet cached ``examples`` will take.

        A cached example holds ``layers x 2 x kv_heads x S x head_dim`` float16 values (SmolLM2-135M:
        30 x 2 x 3 x 64 x 2 B = 23 KB per context token, ~11 MB for a 480-token scene context), so a
        3,600-example scene run needs ~40 GB. ``S`` is estimated from the tokenized context and question
        (the chat prefix adds a few tokens, covered by ``margin``). Finished shards stay: after freeing
        space the same command resumes."""
        import shutil

        todo = [e for e in examples if str(e.id) not in self._where]
        if not todo:
            return 0
        cfg = model.llm.config
        heads = int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        per_token = int(cfg.num_hidden_layers) * 2 * heads * head_dim * 2
        texts = [f"{e.context}\n{e.question}" for e in todo]
        tokens = sum(len(ids) for ids in model.tokenizer(texts, add_special_tokens=False)["input_ids"])
        need = int(tokens * per_token * margin)
        free = shutil.disk_usage(self.folder).free
        if need > free:
            raise OSError(f"kv cache {self.folder}: about {need / 1e9:.1f} GB needed for {len(todo)} examples, "
                          f"{free / 1e9:.1f} GB free; free disk space or set TOPORAG_CACHE to a larger disk "
                          f"({len(self)} examples already cached stay, and the same command resumes)")
        return need

    def _write(self, shard: dict[str, torch.Tensor]) -> None:
        """One more shard file, written atomically (an interrupted build or cut resumes)."""
        from safetensors.torch import save_file

        path = self.folder / f"shard_{len(list(self.folder.glob('shard_*.safetensors'))):05d}.safetensors"
        tmp = path.with_name(path.name + ".tmp")
        save_file(shard, str(tmp))
        os.replace(tmp, path)
        self._scan()

    def get(self, ids: list[str]) -> list[torch.Tensor]:
        missing = [i for i in ids if str(i) not in self._where]
        if missing:
            raise KeyError(f"KVStore {self.folder}: no cache for examples {missing[:5]}")
        return [self._handles[self._where[str(i)]].get_tensor(str(i)) for i in ids]


def kv_data_key(dataset: str, setting_key: str, data_dir: str | os.PathLike | None) -> str:
    """The data part of a KV store's name: the dataset, the preprocessing key and where the data came
    from, as one folder name (``shared`` for the default data; else the folder's name and a hash of its
    resolved path, so ``--data-dir /a/b`` never nests folders and two folders of one name stay apart)."""
    import hashlib

    if data_dir is None:
        return f"{dataset}-{setting_key}-shared"
    where = Path(data_dir).expanduser().resolve()
    return f"{dataset}-{setting_key}-{where.name}-{hashlib.sha1(str(where).encode()).hexdigest()[:8]}"


def kv_store_key(model: TopoRAGModel, data_key: str, graph_position: str | None = None) -> str:
    """A folder name that changes with the LLM, the prompt layout, the input budget, the number of graph
    tokens (they take part of that budget, so the context is cut at another length: a text-only twin and its
    graph-token model never share a cache) and the data (``graph_position``: the key of another cacheable
    layout of the same model)."""
    import hashlib

    pos = graph_position or model.config.graph_position
    lay = model.prompt_layout_ids()
    key = [model.config.llm, lay, model.config.max_input_tokens, str(model.dtype), data_key,
           f"soft={model.num_soft_tokens()}", pos]
    if model.config.question_first:
        key.append("question_first")
    h = hashlib.sha1(json.dumps(key).encode()).hexdigest()[:12]
    return f"{data_key}-{h}"


def open_kv_store(model: TopoRAGModel, data_key: str, root: str | os.PathLike,
                  examples: Sequence[Example] = ()) -> KVStore:
    """``model``'s key/value store for ``data_key`` under ``root`` (``examples``: unused since the
    suffix layout, whose stores it cut from, was retired)."""
    return KVStore(Path(root) / kv_store_key(model, data_key))


def epoch_batches(n: int, lengths: list[int], cfg: TrainConfig, epoch: int, rank: int = 0,
                  world: int = 1) -> list[list[int]]:
    """This rank's share of every batch (example indices) of epoch ``epoch``: THE data order.

    The global batches are the same in every process: ``randperm(seed + epoch)`` cut into
    ``cfg.batch_size`` slices (with ``bucket > 1``: cut from length-sorted windows of
    ``bucket x batch_size``, then the batches shuffled by the same generator). Rank ``r`` of
    ``world`` takes positions ``r, r + world, ...`` of each global batch, so the ranks' shares are
    disjoint and together exactly the one-process batch (a short last batch can leave a rank an
    empty share)."""
    g = torch.Generator().manual_seed(cfg.seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    bs = cfg.batch_size
    if cfg.bucket <= 1:
        batches = [order[i:i + bs] for i in range(0, n, bs)]
    else:
        batches = []
        win = bs * cfg.bucket
        for w in range(0, n, win):
            window = sorted(order[w:w + win], key=lambda i: lengths[i])
            batches += [window[i:i + bs] for i in range(0, len(window), bs)]
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[i] for i in perm]
    return [b[rank::world] for b in batches] if world > 1 else batches


class ProcessEnv:
    """Where this process stands in a training job: here the one process (rank 0 of 1), whose
    collectives are the identity. :class:`toporag_core.training.distributed.DistEnv` is the ``torchrun``
    one (same methods over ``torch.distributed``); :func:`train` talks to the job only through these."""

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
def save_optimizer(opt: torch.optim.Optimizer, names: dict[int, str], path: Path) -> None:
    """AdamW moments as ``{param name}::{key}`` safetensors (atomic write; no pickle)."""
    from safetensors.torch import save_file

    flat = {f"{names[id(p)]}::{k}": (v if torch.is_tensor(v) else torch.tensor(float(v))).detach().cpu().contiguous()
            for p, st in opt.state.items() for k, v in st.items()}
    tmp = path.with_name(path.name + ".tmp")
    save_file(flat, str(tmp))
    os.replace(tmp, path)


def load_optimizer(opt: torch.optim.Optimizer, params: dict[str, torch.nn.Parameter], path: Path) -> None:
    """Read :func:`save_optimizer`'s file into ``opt`` (an unknown parameter name is an error naming it)."""
    from safetensors.torch import load_file

    for key, v in load_file(str(path)).items():
        name, k = key.split("::", 1)
        if name not in params:
            raise ValueError(f"{path}: optimiser state for unknown parameter {name}")
        opt.state[params[name]][k] = v.to(params[name].device) if k != "step" else v


# ----------------------------------------------------------------------------- the graph encoder
GRAPH_PARTS = ("encoder.",)  # parameters trained at ``TrainConfig.encoder_lr``


def param_groups(params: dict[str, torch.nn.Parameter], cfg: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups: the graph encoder's parameters (:data:`GRAPH_PARTS`) and the rest (projector,
    adapters, prompt); each carries ``lr_scale``, its peak lr over ``cfg.lr`` (the schedule scales both)."""
    graph = [p for n, p in params.items() if n.startswith(GRAPH_PARTS)]
    rest = [p for n, p in params.items() if not n.startswith(GRAPH_PARTS)]
    scale = (cfg.encoder_lr / cfg.lr) if cfg.encoder_lr is not None else 1.0
    return [g for g in ({"params": graph, "lr_scale": scale}, {"params": rest, "lr_scale": 1.0}) if g["params"]]


# ----------------------------------------------------------------------------- the loop
def train(model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
          out: str | os.PathLike, resume: bool = False, extra_meta: dict[str, Any] | None = None,
          kv: KVStore | None = None, env: ProcessEnv | None = None) -> dict[str, Any]:
    """Train ``model`` in place; the best validation weights are saved to ``out/best``.

    ``kv``: a :class:`KVStore` holding the frozen parts of ``train_set`` and ``val_set``
    (the cacheable layout ``"before_question"`` only; missing entries are computed first;
    one process only).
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
                          env: ProcessEnv, kv: KVStore | None) -> None:
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
        raise ValueError("the KV cache (KVStore) is not supported with several processes: every rank would "
                         "build the same shard files in one folder; train without it (--no-kv-cache)")


class TrainingRun:
    """One call of :func:`train`: the optimiser, the resumable ``state`` (``last/trainer.json``) and
    the steps of the loop: :meth:`restore` (resume), :meth:`prepare` (KV cache), :meth:`loop` (epochs
    of :meth:`step`, with :meth:`checkpoint` at every evaluation and :meth:`over_budget` after every
    step), :meth:`finish` (summary)."""

    def __init__(self, model: TopoRAGModel, train_set: list[Example], val_set: list[Example], cfg: TrainConfig,
                 out: Path, env: ProcessEnv, kv: KVStore | None, extra_meta: dict[str, Any] | None) -> None:
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
        v_loss, v_acc = (validate(model, self.val_set, cfg.eval_batch_size, self.kv,
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
