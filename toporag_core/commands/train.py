"""``toporag train``: preprocess (cached), build the model, train with early stopping."""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_data_args(p: argparse.ArgumentParser, defaults: bool = True) -> None:
    """Retrieval / preprocessing options shared by ``train`` and ``eval``. Retrieval options come
    from the method registry; unset ones take the method's defaults (``defaults=False``: the
    checkpoint's saved setting first, for ``eval``)."""
    from ..tasks import TASKS
    from ._common import add_method_args

    p.add_argument("--dataset", default="expla_graphs", help=f"registered dataset: {', '.join(TASKS)}")
    p.add_argument("--data-dir", default=None, help="folder with the dataset files (default ../shared/data)")
    add_method_args(p, dimension="cells", default="toporag" if defaults else None)
    p.add_argument("--no-cells2", action="store_true", default=None if not defaults else False,
                   help="'w/o CRL': retrieve with k2 = 0 and drop 2-cells from encoder and text")
    from ..retrieval.textualize import DEFAULT_TEXT, TEXT_FORMATS

    p.add_argument("--text", default=DEFAULT_TEXT if defaults else None, choices=tuple(TEXT_FORMATS),
                   help="how the subcomplex is written for the LLM: csv (G-Retriever's nodes/edges CSV, the paper's) "
                        "or compact (beyond the paper: 'desk [0]: green, wooden', relations name both ends, "
                        "letter-free fields such as boxes dropped) or keyed (compact with relation lines key first: "
                        "'behind oven [7]: picture [9]') or short-loops (compact with each 2-cell as its nodes: "
                        "'c15: cabinet [5] - plant [2] - man [8] - cabinet [5]')"
                        + ("" if defaults else "; default: the checkpoint's"))
    from ._common import CLI_LIFTINGS

    p.add_argument("--tree", default="bfs" if defaults else None, choices=CLI_LIFTINGS,
                   help="the 2-cells: fundamental cycles of a bfs / dfs / random spanning tree (the paper) or rings "
                        "(beyond the paper: every cycle of 3 or 4 edges, so a question's closed loop is a 2-cell)"
                        + ("" if defaults else "; default: the checkpoint's"))
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--dtype", default="auto",
                   help="LLM precision: auto (bf16 on CUDA; on a CPU bf16 where it is native, else fp32; for a "
                        "checkpoint, its training precision) | float32 | bfloat16")


def prep_config_from_args(args, base: dict | None = None):
    """A :class:`~toporag_core.tasks.prep.PrepConfig`: explicit options win, then ``base`` (a
    checkpoint's saved setting), then the method's defaults."""
    from ..retrieval.textualize import DEFAULT_TEXT
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
    """The registered task, if it can make ``style`` targets (an answer style with ``polar_evidence``:
    an ``evidence`` hook; with ``open_citations``: a ``citation`` hook too); else ``ValueError`` naming
    the tasks that can."""
    from ..model import get_style
    from ..tasks import TASKS, get_task

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
    (read from the raw data, matched by example id) and, for a style with ``open_citations``
    (``"cited"``), cited targets for the open questions from its ``citation`` hook (which reads each
    prepared example's context); ``ValueError`` when the task has no hook or no training example gets
    evidence (nothing would change)."""
    from ..model import get_style
    from ..tasks import load_raw
    from ..train import with_evidence_targets

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


def register(subparsers) -> None:
    p = subparsers.add_parser("train", help="train the graph encoder + projector (frozen LLM)")
    add_data_args(p)
    p.add_argument("--encoder", default="cwn", choices=("cwn", "gcn"), help="gcn = 'w/o MTR'")
    p.add_argument("--mode", default="soft_prompt", choices=("soft_prompt", "lora"))
    p.add_argument("--graph-position", default="prefix", choices=("prefix", "before_question"),
                   help="prefix: the paper's layout; before_question: the context is frozen and its key/value "
                        "cache computed once and reused every epoch, the graph tokens come next and LoRA "
                        "re-reads the question after them")
    p.add_argument("--question-first", action="store_true",
                   help="also read the question before the context, so the context is read knowing it "
                        "(query-aware context, beyond the paper; in the cacheable layouts it costs no training "
                        "time: the frozen part simply starts with the question)")
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--lora-alpha", type=int, default=16)
    p.add_argument("--lora-targets", default="q_proj,v_proj", help="comma-separated module names")
    p.add_argument("--answer-set", default="auto",
                   help="closed answer set scored by likelihood: auto (the training answers when <= 8 distinct), "
                        "none, or comma-separated answers")
    from ..model import ANSWER_STYLES

    p.add_argument("--answer-style", default="label", choices=tuple(ANSWER_STYLES),  # model
                   help="; ".join(f"{s.name}: {s.help}" for s in ANSWER_STYLES.values()))
    p.add_argument("--max-input-tokens", type=int, default=512)
    p.add_argument("--grad-accum", type=int, default=1, help="batches per optimiser step")
    p.add_argument("--bucket", type=int, default=8, help="length-bucket window in batches (1 = plain shuffle)")
    p.add_argument("--lr-schedule", default="constant", choices=("constant", "cosine"))
    p.add_argument("--warmup", type=int, default=0, help="warm-up steps (cosine schedule)")
    p.add_argument("--select", default="auto", choices=("auto", "loss", "accuracy"),
                   help="model selection on validation (auto: accuracy when there is a closed answer set)")
    p.add_argument("--no-kv-cache", action="store_true",
                   help="before_question layout: recompute the frozen part each step")
    p.add_argument("--llm", default=None, help="local HF folder or hub id (default: packaged SmolLM2-135M)")
    p.add_argument("--device", default="auto")
    p.add_argument("--hidden", type=int, default=256, help="encoder width")
    p.add_argument("--graph-tokens", type=int, default=1)
    p.add_argument("--projector-hidden", type=int, default=1024)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--grad-clip", type=float, default=0.1)
    p.add_argument("--max-train", type=int, default=None, help="use the first N training examples")
    p.add_argument("--max-eval", type=int, default=None, help="use the first N validation examples")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--stop-after-steps", type=int, default=None,
                   help="stop at this optimiser step without shortening the lr schedule (equal budget to another run)")
    p.add_argument("--encoder-lr", type=float, default=None,
                   help="peak lr of the graph encoder (+ graph norm, label head); default --lr. The CW encoder's "
                        "ReLU states die at LoRA learning rates (5e-4): use ~1e-4")
    p.add_argument("--graph-pretrain-epochs", type=int, default=0,
                   help="beyond the paper: first fit encoder + label head alone to the answer set for N epochs "
                        "(needs --graph-label-weight > 0), keeping the best validation epoch")
    p.add_argument("--freeze-graph", action="store_true",
                   help="beyond the paper: after pretraining, the graph encoder takes no step in joint training "
                        "(only projector and adapters learn), so its tokens cannot leak training labels")
    p.add_argument("--no-graph", action="store_true",
                   help="text only: no graph encoder or graph tokens (the 'text only' ablation; LoRA still applies)")
    p.add_argument("--eval-every", type=int, default=None, help="validate every N steps (default: each epoch)")
    p.add_argument("--time-budget", type=float, default=None, help="stop training after this many seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output folder (default runs/<dataset>-<method>-<encoder>)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/last")
    p.set_defaults(func=run)


def run(args) -> int:
    import dataclasses

    import torch

    from ..llm import DEFAULT_LLM, dtype_name, load_llm
    from ..model import TopoRAGConfig, TopoRAGModel, get_style
    from ..nn import CWNConfig
    from ..tasks import get_task
    from ..tasks.prep import prepare_dataset
    from ..train import TrainConfig, kv_data_key, open_kv_store, seed_everything, train

    from .. import distributed

    # training options are checked before the data are prepared and the LLM loaded (minutes)
    if args.graph_pretrain_epochs > 0:
        raise ValueError("--graph-pretrain-epochs needs the graph label head, retired with --graph-label-weight")
    rewrites_targets = get_style(args.answer_style).rewrites_targets
    if rewrites_targets:
        evidence_task(args.dataset, args.answer_style)
    tcfg = TrainConfig(lr=args.lr, weight_decay=args.weight_decay, epochs=args.epochs, batch_size=args.batch_size,
                       patience=args.patience, grad_clip=args.grad_clip, seed=args.seed, max_steps=args.max_steps,
                       stop_after_steps=args.stop_after_steps,
                       eval_every=args.eval_every, time_budget_s=args.time_budget, grad_accum=args.grad_accum,
                       bucket=args.bucket, lr_schedule=args.lr_schedule, warmup_steps=args.warmup,
                       encoder_lr=args.encoder_lr, graph_pretrain_epochs=args.graph_pretrain_epochs,
                       freeze_graph=args.freeze_graph)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = distributed.init_distributed()  # under torchrun: DDP (gloo on CPU, NCCL on GPUs); else one process
    device = distributed.device_for(env) if env.world > 1 else args.device
    setting = prep_config_from_args(args)
    out = Path(args.out or f"runs/{args.dataset}-{setting.key()}-{args.encoder}-{args.mode}")
    if env.world > 1 and not env.main:
        torch.distributed.barrier()  # rank 0 prepares (and caches) the data first
    data = prepare_dataset(args.dataset, setting, data_dir=args.data_dir, show_progress=env.main)
    if env.world > 1 and env.main:
        torch.distributed.barrier()
    train_set = data["train"][: args.max_train] if args.max_train else data["train"]
    val_set = data["val"][: args.max_eval] if args.max_eval else data["val"]
    if not train_set or not val_set:
        raise ValueError(f"dataset {args.dataset!r} has an empty train or val split")
    answers = sorted({e.answer.strip() for e in train_set})
    if rewrites_targets:
        train_set, val_set = evidence_splits(args.dataset, args.data_dir, train_set, val_set, args.answer_style)
    seed_everything(args.seed)
    llm, tok = load_llm(args.llm, device=device, dtype=args.dtype)
    dim = train_set[0].tensors.dim
    if args.answer_set == "auto":
        answer_set = tuple(answers) if len(answers) <= 8 else ()
    elif args.answer_set == "none":
        answer_set = ()
    else:
        answer_set = tuple(a.strip() for a in args.answer_set.split(",") if a.strip())
    cfg = TopoRAGConfig(encoder=args.encoder, cwn=CWNConfig(in_dim=dim, hidden=args.hidden,
                                                            use_cells2=setting.use_cells2),
                        num_graph_tokens=args.graph_tokens, projector_hidden=args.projector_hidden,
                        llm=args.llm or DEFAULT_LLM, mode=args.mode, graph_position=args.graph_position,
                        question_first=args.question_first,
                        lora_r=args.lora_r, lora_alpha=args.lora_alpha,
                        lora_targets=tuple(t.strip() for t in args.lora_targets.split(",") if t.strip()),
                        max_input_tokens=args.max_input_tokens, answer_set=answer_set,
                        use_graph=not args.no_graph, answer_style=args.answer_style,
                        question_form=get_task(args.dataset).prompt,
                        max_new_tokens=answer_token_limit(tok, train_set + val_set))
    model = TopoRAGModel(cfg, llm, tok)
    select = args.select if args.select != "auto" else ("accuracy" if answer_set else "loss")
    tcfg = dataclasses.replace(tcfg, select=select)  # the answer set is known only now
    kv = None
    if model.cacheable and not args.no_kv_cache:
        from ..embed import default_cache_dir

        kv = open_kv_store(model, kv_data_key(args.dataset, setting.key(), args.data_dir),
                           default_cache_dir() / "kv", train_set + val_set)
    meta = {"dataset": args.dataset, "retrieval": setting.to_dict(), "train_examples": len(train_set),
            "val_examples": len(val_set), "llm_dtype": dtype_name(model.dtype)}
    try:
        summary = train(model, train_set, val_set, tcfg, out, resume=args.resume, extra_meta=meta, kv=kv, env=env)
    finally:
        distributed.shutdown()
    if not env.main:
        return 0
    print(json.dumps({k: summary[k] for k in ("steps", "examples_seen", "best_val_loss", "best_val_accuracy",
                                              "best_step", "train_seconds", "kv_cache_seconds", "examples_per_s",
                                              "graph_pretrain_val_accuracy", "graph_pretrain_best_epoch")
                      if k in summary}))
    print(f"best checkpoint: {out / 'best'}")
    return 0
