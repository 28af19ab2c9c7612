"""Training settings: :class:`TrainConfig`, one dataclass whose fields carry their command-line help.

Every field is declared with :func:`config_field` (the default and a ``help`` string, plus the option's
``flag``, ``choices`` or ``advanced=True`` in its metadata), so ``toporag train`` builds its options from the
fields (:func:`~toporag_core.commands._common.config_options`) and a checkpoint records the whole config as
JSON (``asdict``). ``__post_init__`` refuses an inconsistent setting before anything runs;
:meth:`TrainConfig.resolved` makes ``select="auto"`` concrete; :meth:`TrainConfig.lr_at` is the learning-rate
schedule, a pure function of the step (so a resumed run continues it exactly)::

    constant:  lr_t = lr
    cosine:    lr_t = lr * (t + 1) / warmup                                  for t < warmup
               lr_t = lr * (0.1 + 0.9 * (1 + cos(pi * min(1, (t - warmup) / (total - warmup)))) / 2)

The measurements behind the graph-path options (``encoder_lr``, ``graph_only``, the alignment stage, the
word targets, the joint readback term) are in ``docs/results/graph_tokens.md``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

LR_SCHEDULES = ("constant", "cosine")
SELECT_MODES = ("auto", "loss", "accuracy")  # auto: accuracy when the model has a closed answer set, else loss


def config_field(default: Any, help: str, **cli: Any) -> Any:
    """A config field whose ``metadata`` carries its command-line help (and, in ``cli``, the option's
    ``flag``, its ``choices``, ``cli=False`` for no option or ``advanced=True`` for options left out of the
    main ``--help``: see :func:`~toporag_core.commands._common.config_options`)."""
    return field(default=default, metadata={"help": help, **cli})


_opt = config_field  # the short name the field declarations below use


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
    # The graph encoder's own AdamW group (loop.param_groups): at LoRA learning rates its ReLU states die and
    # the pooled graph becomes a constant.
    encoder_lr: float | None = _opt(None, "peak lr of the graph encoder (default --lr); the CW encoder's ReLU "
                                          "states die at LoRA learning rates (5e-4): use ~1e-4")
    # Graph-only rows: with the text in view a LoRA'd LLM can learn the task from the text alone, and the graph
    # tokens settle into a constant.
    graph_only: float = _opt(0.0, "add this fraction of the training set again with the textualized context "
                                  "removed (graph tokens + question only), so the answer must be read from the "
                                  "graph tokens")
    # The alignment stage (training/align.py) teaches the LLM to read a cell from its graph token, which training
    # with the text in view does not (toporag eval --readback measures it).
    align_steps: int = _opt(0, "before the joint stage, this many alignment steps: the encoder and projector learn "
                               "(LLM and LoRA frozen) to make each example's node lines likelier from its own graph "
                               "tokens than from another example's, no text (training/align.py)", advanced=True)
    align_lr: float = _opt(1e-3, "the alignment stage's projector lr (its encoder lr: --encoder-lr)", advanced=True)
    align_margin: float = _opt(0.5, "the alignment stage's margin, in nats per token, by which a row's own graph "
                                    "tokens should beat another row's", advanced=True)
    align_weight: float = _opt(1.0, "the alignment stage's weight of the hinge (own against another row's tokens) "
                                    "beside the plain readback loss", advanced=True)
    # Word targets: give each node slot's tokens a direct target, the LLM's embeddings of the words of its node
    # line (training/align.py, word_loss).
    align_words: float = _opt(0.0, "in the alignment stage, add this weight times the cosine distance between each "
                                   "node slot's j-th token and the LLM's embedding of the j-th word of its node line "
                                   "(name, then attributes; tokens_per_cell tokens per node, nodes first) "
                                   "(toporag_core/training/align.py)", advanced=True)
    word_steps: int = _opt(0, "at the start of the alignment stage, this many steps of the word targets alone "
                              "(encoder and projector, no LLM forward; needs align_words)", advanced=True)
    # The readback term keeps, in the joint stage, the reading the alignment stage taught (training on answers
    # alone erases it, also when only the encoder trains).
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

