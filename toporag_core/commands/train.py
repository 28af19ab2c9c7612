"""``toporag train``: preprocess (cached), build the model, train with early stopping.

Every option is made from a config dataclass field (type, default and help in one place):
:class:`DataOptions` (what data, shared with ``toporag eval``), the retrieval method registry,
:class:`~toporag_core.model.TopoRAGConfig` (:data:`MODEL_OPTIONS`: which of its fields are options,
with their help), :class:`~toporag_core.training.TrainConfig` and :class:`RunOptions` (this run's
budget and files). Defaults are the dataclasses' defaults; ``--recipe NAME`` (``recipes/NAME.toml``)
sets a shipped checkpoint's whole setting, options after it override it. Options a user rarely
needs are left out of ``--help`` and listed by ``--help-all``.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..retrieval.textualize import DEFAULT_TEXT
from ..training.config import config_field as _opt

# TopoRAGConfig fields set in a recipe only (recipes/*.toml), never options: the adapter mode and the
# prompt layout of a shipped checkpoint
RECIPE_ONLY_FIELDS = frozenset({"mode", "graph_position", "cell_order"})
# TopoRAGConfig fields set from the data and the task, not by options: cwn.in_dim (the embedding width),
# the closed answer set (--answer-set), the answer length limit and the question form
DERIVED_MODEL_FIELDS = frozenset({"cwn", "answer_set", "max_new_tokens", "question_form"})


def _task_names() -> list[str]:
    from ..tasks import TASKS

    return list(TASKS)


def _text_names() -> list[str]:
    from ..retrieval.textualize import TEXT_FORMATS

    return list(TEXT_FORMATS)


def _lifting_names() -> list[str]:
    from ..cells.lift import lifting_names

    return lifting_names()


def _encoder_names() -> tuple[str, ...]:
    from ..nn import ENCODERS

    return tuple(ENCODERS)


def _answer_styles() -> list[str]:
    from ..model import ANSWER_STYLES

    return list(ANSWER_STYLES)


@dataclass
class DataOptions:
    """What data and how it is retrieved and written (``train`` and ``eval``; the retrieval method's
    own parameters come from the method registry)."""

    dataset: str = _opt("expla_graphs", "registered dataset", choices=_task_names)
    data_dir: str | None = _opt(None, "folder with the dataset files (default ../shared/data)")
    no_cells2: bool = _opt(False, "'w/o CRL': retrieve with k2 = 0 and drop 2-cells from encoder and text")
    text: str = _opt(DEFAULT_TEXT, "how the subcomplex is written for the LLM: csv (G-Retriever's nodes/edges CSV, "
                                   "the paper's) or compact (beyond the paper: 'desk [0]: green, wooden', relations "
                                   "name both ends, letter-free fields such as boxes dropped)", choices=_text_names)
    tree: str = _opt("bfs", "the 2-cells: fundamental cycles of a bfs / dfs / random spanning tree (the paper) or "
                            "rings (beyond the paper: every cycle of 3 or 4 edges, so a question's closed loop is a "
                            "2-cell)", choices=_lifting_names)
    threads: int | None = _opt(None, "torch CPU threads")
    dtype: str = _opt("auto", "LLM precision: auto (bf16 on CUDA; on a CPU bf16 where it is native, else fp32; for "
                              "a checkpoint, its training precision) | float32 | bfloat16")


@dataclass
class RunOptions:
    """This training run: the closed answer set, how much data, the device and the files."""

    answer_set: str = _opt("auto", "closed answer set scored by likelihood: auto (the training answers when <= 8 "
                                   "distinct), none, or comma-separated answers")
    max_train: int | None = _opt(None, "use the first N training examples")
    max_eval: int | None = _opt(None, "use the first N validation examples")
    device: str = _opt("auto", "auto | cpu | cuda | cuda:N", advanced=True)
    no_kv_cache: bool = _opt(False, "suffix / before_question layouts: recompute the frozen part each step",
                             advanced=True)
    out: str | None = _opt(None, "output folder (default runs/<dataset>-<setting>-<encoder>-<mode>)")
    resume: bool = _opt(False, "continue from OUT/last")
    init_from: str | None = _opt(None, "start from this checkpoint folder's trainable tensors where names and shapes "
                                       "match (e.g. a LoRA trained before under another graph path)", advanced=True)


# The TopoRAGConfig fields that are options, with their help (the model module keeps none), in --help order
MODEL_OPTIONS: dict[str, dict[str, Any]] = {
    "encoder": {"help": "graph encoder (nn.ENCODERS; built in: cwn = TopoRAG, gcn = 'w/o MTR')",
                "choices": _encoder_names},
    "llm": {"help": "local HF folder, hub id or packaged name of the frozen LLM"},
    "num_graph_tokens": {"flag": "--graph-tokens", "help": "soft-prompt tokens (cells path: a whole-subcomplex slot "
                                                           "and up to N-1 cells)"},
    "graph_path": {"help": "how the encoder becomes graph tokens: cells (one token per retrieved cell in text order) "
                           "or pooled (one mean vector through an MLP, the older checkpoints)",
                   "choices": ("pooled", "cells"), "advanced": True},
    "projector_hidden": {"help": "projector width", "advanced": True},
    "lora_r": {"help": "LoRA rank"},
    "lora_alpha": {"help": "LoRA alpha"},
    "lora_dropout": {"help": "LoRA dropout", "advanced": True},
    "lora_targets": {"help": "comma-separated module names LoRA adapts"},
    "max_input_tokens": {"help": "LLM input budget (the context is cut, the question kept)"},
    "question_first": {"help": "also read the question before the context, so the context is read knowing it "
                               "(query-aware context, beyond the paper; in the cacheable layouts it costs no "
                               "training time: the frozen part simply starts with the question)"},
    "answer_style": {"help": "label: train on the bare answer; evidence (beyond the paper): yes/no questions train "
                             "on '<evidence>. Answer: <label>' from the dataset's full answers, and at answer time "
                             "the model writes its evidence before the label is scored; cited: that, and open "
                             "questions train on the context lines their answer rests on, copied with their node "
                             "ids, the answer read after the generated 'Answer:'", "choices": _answer_styles},
    "use_graph": {"flag": "--no-graph", "help": "text only: no graph encoder or graph tokens (the 'text only' "
                                                "ablation; LoRA still applies)"},
}
ENCODER_OPTIONS: dict[str, dict[str, Any]] = {"hidden": {"help": "graph encoder width", "advanced": True}}


def train_options() -> list:
    """Every option of ``toporag train`` made from a config field, in ``--help`` order after the data
    and retrieval options (:class:`~toporag_core.commands._common.ConfigOption`)."""
    from ..model import TopoRAGConfig
    from ..nn import CWNConfig
    from ..training import TrainConfig
    from ._common import config_options

    return [*config_options(TopoRAGConfig, tuple(MODEL_OPTIONS), RECIPE_ONLY_FIELDS | DERIVED_MODEL_FIELDS,
                            MODEL_OPTIONS),
            *config_options(CWNConfig, tuple(ENCODER_OPTIONS), extra=ENCODER_OPTIONS),
            *config_options(TrainConfig), *config_options(RunOptions)]


def data_options() -> list:
    from ._common import config_options

    return config_options(DataOptions)


def add_data_args(p: argparse.ArgumentParser, defaults: bool = True, show_all: bool = False) -> None:
    """Data, retrieval and preprocessing options shared by ``train`` and ``eval`` (:class:`DataOptions`
    and the method registry's). Unset retrieval options take the method's defaults (``defaults=False``:
    the checkpoint's saved setting first, for ``eval``: text, tree and ``--no-cells2`` default to it)."""
    from ._common import add_config_args, add_method_args

    opts = data_options()
    add_config_args(p, opts[:2], show_all)
    add_method_args(p, dimension="cells", default="toporag" if defaults else None, show_all=show_all)
    add_config_args(p, opts[2:], show_all, None if defaults else {"no_cells2": None, "text": None, "tree": None})


def prep_config_from_args(args, base: dict | None = None):
    """A :class:`~toporag_core.tasks.prep.PrepConfig`: explicit options win, then ``base`` (a
    checkpoint's saved setting), then the method's defaults."""
    from ..tasks.prep import PrepConfig
    from ._common import setting_from_args

    base = dict(base or {})
    use_cells2 = bool(base.pop("use_cells2", True))
    saved_tree = str(base.pop("tree", "bfs"))
    tree = getattr(args, "tree", None) or saved_tree
    saved_text = str(base.pop("text", DEFAULT_TEXT))  # the checkpoint's (CSV when saved before formats)
    text = getattr(args, "text", None) or saved_text
    if getattr(args, "no_cells2", None):
        use_cells2 = False
    return PrepConfig(setting_from_args(args, base), use_cells2=use_cells2, tree=tree, text=text)


def evidence_task(dataset: str, style: str = "evidence"):
    """The registered task, if it can make ``style`` targets (``"evidence"``: an ``evidence`` hook;
    ``"cited"``: that and a ``citation`` hook); else ``ValueError`` naming the tasks that can."""
    from ..tasks import TASKS, get_task

    from ..model import get_style

    cited = get_style(style).open_citations

    def able(t) -> bool:
        return t.evidence is not None and (not cited or t.citation is not None)

    task = get_task(dataset)
    if not able(task):
        have = ", ".join(n for n, t in TASKS.items() if able(t)) or "none"
        what = "full answers and context citations" if cited else "full answers"
        raise ValueError(f"--answer-style {style}: dataset {dataset!r} has no evidence ({what}); "
                         f"datasets with it: {have}")
    return task


def evidence_splits(dataset: str, data_dir, train_set: list, val_set: list,
                    style: str = "evidence") -> tuple[list, list]:
    """``train_set`` and ``val_set`` with evidence-first targets from the task's ``evidence`` hook
    (read from the raw data, matched by example id) and, for ``style="cited"``, cited targets for
    the open questions from its ``citation`` hook (which reads each prepared example's context);
    ``ValueError`` when the task has no hook or no training example gets evidence (nothing would
    change)."""
    from ..model import get_style
    from ..tasks import load_raw
    from ..training import with_evidence_targets

    task = evidence_task(dataset, style)
    cited = get_style(style).open_citations
    raw = {str(r.id): r for split in ("train", "val") for r in load_raw(dataset, data_dir)[split]}
    evidence = {i: ev for i, r in raw.items() if (ev := task.evidence(r))}
    n_cited = 0
    if cited:
        for e in (*train_set, *val_set):
            r = raw.get(str(e.id))
            if r is not None and str(e.id) not in evidence and (ev := task.citation(r, e)):
                evidence[str(e.id)] = ev
                n_cited += 1
    train_set, n_train = with_evidence_targets(train_set, evidence)
    val_set, n_val = with_evidence_targets(val_set, evidence)
    if not n_train:
        raise ValueError(f"--answer-style {style}: no training example of {dataset!r} has evidence "
                         "(yes/no answers with a full answer)")
    print(f"evidence-first targets: {n_train} of {len(train_set)} training and {n_val} of {len(val_set)} "
          f"validation examples" + (f" ({n_cited} of them cited)" if cited else ""))
    return train_set, val_set


def answer_token_limit(tokenizer, examples: list) -> int:
    """``max_new_tokens`` for a new model: the config default (32), or the longest training / validation
    target when one is longer (evidence-first targets can be), so no target loses its label to the
    answer cut (:meth:`TopoRAGModel.answer_ids`) and generation can write a whole one."""
    from ..model import TopoRAGConfig

    longest = max((len(tokenizer(e.answer, add_special_tokens=False)["input_ids"]) for e in examples), default=0)
    return max(TopoRAGConfig.max_new_tokens, longest)


def recipe_keys() -> dict[str, Any]:
    """What a recipe may set: every option of ``toporag train`` (by its dest) and the TopoRAGConfig
    fields that are not options (a checkpoint's layout), each with its Python type."""
    import typing

    from ..model import TopoRAGConfig
    from ..retrieval import METHODS
    from ._common import option_type

    hints = typing.get_type_hints(TopoRAGConfig)
    known = {f.name: option_type(hints[f.name]) for f in fields(TopoRAGConfig) if f.name not in DERIVED_MODEL_FIELDS}
    known.update({o.dest: o.type for o in (*data_options(), *train_options())})
    known.update({p.name: p.type for m in METHODS.values() for p in m.params})
    known.update(method=str, k=int)
    return known


def add_train_args(p: argparse.ArgumentParser, show_all: bool = False) -> None:
    """Every option of ``toporag train`` (``show_all``: the advanced ones in the help too)."""
    from ._common import HelpAllAction, RecipeAction, add_config_args

    p.add_argument("--help-all", action=HelpAllAction, build=lambda full: add_train_args(full, show_all=True))
    p.add_argument("--recipe", action=RecipeAction, known=recipe_keys(), default=None, metavar="NAME",
                   help="a shipped checkpoint's setting: recipes/NAME.toml (expla_graphs, scene_graphs, general) or a "
                        "path to a .toml file; options after it override it")
    add_data_args(p, show_all=show_all)
    add_config_args(p, train_options(), show_all)


def register(subparsers) -> None:
    p = subparsers.add_parser("train", help="train the graph encoder + projector (frozen LLM)")
    add_train_args(p)
    p.set_defaults(func=run)


@dataclass
class TrainPlan:
    """What ``toporag train`` will do, from its options alone (no data read): the preprocessing,
    the optimisation and the model fields not derived from the data."""

    prep: Any
    train: Any
    model: dict[str, Any]
    hidden: int


def plan_from_args(args) -> TrainPlan:
    """Every config of the run, validated before the data are prepared and the LLM loaded (minutes)."""
    from ..model import TopoRAGConfig, get_style
    from ..model.config import TOKEN_TEXT_CELLS
    from ..training import TrainConfig
    from ._common import config_values

    model = {k: v for k, v in config_values(args, TopoRAGConfig).items() if k not in DERIVED_MODEL_FIELDS}
    TopoRAGConfig(**model)  # its own checks, now
    if get_style(model.get("answer_style", "label")).rewrites_targets:
        evidence_task(args.dataset, model["answer_style"])
    prep = prep_config_from_args(args)
    token_text = model.get("token_text", "full")
    if token_text in TOKEN_TEXT_CELLS and prep.text != TOKEN_TEXT_CELLS[token_text][2]:
        fmt = TOKEN_TEXT_CELLS[token_text][2]
        raise ValueError(f"token_text={token_text!r} takes {TOKEN_TEXT_CELLS[token_text][1]} out of {fmt} text; "
                         f"the retrieval text is {prep.text!r} (set text = {fmt!r}, or token_text = 'full')")
    return TrainPlan(prep, TrainConfig(**config_values(args, TrainConfig)), model, args.hidden)


def closed_answer_set(spec: str, answers: list[str]) -> tuple[str, ...]:
    """``--answer-set``: ``auto`` (``answers`` when <= 8 distinct), ``none`` or comma-separated answers."""
    if spec == "auto":
        return tuple(answers) if len(answers) <= 8 else ()
    if spec == "none":
        return ()
    return tuple(a.strip() for a in spec.split(",") if a.strip())


def model_config(plan: TrainPlan, dataset: str, dim: int, answer_set: tuple[str, ...], max_new_tokens: int):
    """The :class:`~toporag_core.model.TopoRAGConfig` of the run once the data are known: the
    embedding width ``dim``, the closed answer set, the answer length limit and the task's question form."""
    from ..model import TopoRAGConfig
    from ..nn import CWNConfig
    from ..tasks import get_task

    return TopoRAGConfig(**plan.model, cwn=CWNConfig(in_dim=dim, hidden=plan.hidden, use_cells2=plan.prep.use_cells2),
                         answer_set=answer_set, question_form=get_task(dataset).prompt, max_new_tokens=max_new_tokens)


def _splits(args, data: dict) -> tuple[list, list]:
    train_set = data["train"][: args.max_train] if args.max_train else data["train"]
    val_set = data["val"][: args.max_eval] if args.max_eval else data["val"]
    if not train_set or not val_set:
        raise ValueError(f"dataset {args.dataset!r} has an empty train or val split")
    return train_set, val_set


def _prepare(args, plan: TrainPlan, env) -> tuple[list, list]:
    """The prepared train / validation examples (rank 0 prepares and caches first under torchrun)."""
    import torch

    from ..tasks.prep import prepare_dataset

    if env.world > 1 and not env.main:
        torch.distributed.barrier()
    data = prepare_dataset(args.dataset, plan.prep, data_dir=args.data_dir, show_progress=env.main)
    if env.world > 1 and env.main:
        torch.distributed.barrier()
    return _splits(args, data)


def _kv_store(args, model, plan: TrainPlan, examples: list):
    """The frozen parts' key/value store of a cacheable layout (None otherwise or with --no-kv-cache)."""
    if not model.cacheable or args.no_kv_cache:
        return None
    from ..embed import default_cache_dir
    from ..training import kv_data_key, open_kv_store

    return open_kv_store(model, kv_data_key(args.dataset, plan.prep.key(), args.data_dir),
                         default_cache_dir() / "kv", examples)


def run(args) -> int:
    import torch

    from ..training import distributed
    from ..model.llm import dtype_name, load_llm
    from ..model import TopoRAGModel, get_style
    from ..training import seed_everything, train

    plan = plan_from_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = distributed.init_distributed()  # under torchrun: DDP (gloo on CPU, NCCL on GPUs); else one process
    device = distributed.device_for(env) if env.world > 1 else args.device
    mode = plan.model.get("mode")
    out = Path(args.out or f"runs/{args.dataset}-{plan.prep.key()}-{plan.model['encoder']}"
               + (f"-{mode}" if mode else ""))
    train_set, val_set = _prepare(args, plan, env)
    answers = sorted({e.answer.strip() for e in train_set})
    style = plan.model.get("answer_style", "label")
    if get_style(style).rewrites_targets:
        train_set, val_set = evidence_splits(args.dataset, args.data_dir, train_set, val_set, style)
    seed_everything(plan.train.seed)
    llm, tok = load_llm(args.llm, device=device, dtype=args.dtype)
    cfg = model_config(plan, args.dataset, train_set[0].tensors.dim, closed_answer_set(args.answer_set, answers),
                       answer_token_limit(tok, train_set + val_set))
    model = TopoRAGModel(cfg, llm, tok)
    if args.init_from and not args.resume:
        from ..model import warm_start

        counts = warm_start(model, args.init_from)
        print(f"init from {args.init_from}: {counts['loaded']} tensors loaded, {counts['skipped']} skipped, "
              f"{counts['new']} new", flush=True)
    kv = None if plan.train.max_steps == 0 else _kv_store(args, model, plan, train_set + val_set)
    meta = {"dataset": args.dataset, "retrieval": plan.prep.to_dict(), "train_examples": len(train_set),
            "val_examples": len(val_set), "llm_dtype": dtype_name(model.dtype)}
    try:
        if plan.train.align_steps and not args.resume:
            if env.world > 1:
                raise ValueError("the alignment stage (--align-steps) runs in one process; align first, then train "
                                 "under torchrun with --init-from OUT/aligned")
            from ..training.align import align_stage

            meta.update(align_stage(model, train_set, val_set, plan.train, out, meta))
        summary = {**meta, "steps": 0} if plan.train.max_steps == 0 else train(
            model, train_set, val_set, plan.train, out, resume=args.resume, extra_meta=meta, kv=kv, env=env)
    finally:
        distributed.shutdown()
    if not env.main:
        return 0
    print(json.dumps({k: summary[k] for k in ("steps", "examples_seen", "best_val_loss", "best_val_accuracy",
                                              "best_step", "train_seconds", "kv_cache_seconds", "examples_per_s",
                                              "align_best_step", "align_readback")
                      if k in summary}))
    if "align_best_step" in summary:
        print(f"aligned checkpoint: {out / 'aligned'}")
    if summary["steps"]:
        print(f"best checkpoint: {out / 'best'}")
    return 0
