"""``toporag eval``: answer a split with a checkpoint (or the frozen LLM alone), score, write JSONL."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..evaluation.arms import ARMS, READBACK_TARGETS
from ..training.config import config_field as _opt
from .train import add_data_args, prep_config_from_args


SPLITS = ("train", "val", "test", "all")


@dataclass
class EvalOptions:
    """``toporag eval``'s own options (the data and retrieval ones are :class:`~.train.DataOptions`
    and the method registry's, defaulting to the checkpoint's setting)."""

    checkpoint: str | None = _opt(None, "checkpoint folder (config.json + model.safetensors)")
    zero_shot: bool = _opt(False, "no checkpoint: the frozen LLM reads the textualized subcomplex, no soft prompt")
    llm: str | None = _opt(None, "override the LLM (local HF folder or hub id)")
    device: str = _opt("auto", "auto | cpu | cuda | cuda:N")
    split: str = _opt("test", "'all': every example of the data (e.g. a user's own --data-file / --data-dir)",
                      choices=SPLITS)
    data_file: str | None = _opt(None, "a user's own data file, e.g. an ExplaGraphs-format TSV for --dataset "
                                       "expla_graphs (GQA scene graphs: --dataset scene_graphs --data-dir DIR)")
    qtype: str | None = _opt(None, "only questions of these types, comma-separated (scene graphs: 0-cell, 1-cell, "
                                   "2-cell; e.g. --qtype 2-cell for the closed-loop questions); applied before --limit")
    limit: int | None = _opt(None, "only the first N examples of the split")
    batch_size: int = _opt(8, "examples per batch")
    out: str | None = _opt(None, "predictions JSONL (written as results arrive)")
    resume: bool = _opt(False, "skip ids already in --out")
    shard: str | None = _opt(None, "evaluate shard I of N (examples I, I+N, ...) into OUT.shard-I-of-N.jsonl; join "
                                   "the shards with `toporag eval merge OUT.shard-* --out OUT`")
    choices: str | None = _opt(None, "closed answer set to score by likelihood, comma-separated (default: the "
                                     "checkpoint's answer set; 'none' forces open generation)")
    graph_tokens: str = _opt("normal", "graph-token ablation: normal | zero (zeroed) | permute (another question's, "
                                       "a fixed seeded derangement) | mean (the run's mean token) | only (graph "
                                       "tokens + question, no textualized context) | only_permute (another "
                                       "question's graph tokens + question, no textualized context); pair arms "
                                       "with toporag compare",
                             choices=ARMS)
    readback: bool = _opt(False, "instead of answering: can the LLM read each example's cells back from its graph "
                                 "tokens? Prints the per-token loss of the first context block (the node lines) "
                                 "given the example's own graph tokens and no text against another example's, "
                                 "paired (toporag_core/evaluation/arms.py)", advanced=True)
    readback_target: str = _opt("nodes", "what --readback reads back: nodes (the node lines) | attributes (one named "
                                         "node's attributes, the name in the question) | relations (the CSV "
                                         "relation block)", choices=READBACK_TARGETS, advanced=True)


def register(subparsers) -> None:
    from ._common import add_config_args, config_options

    p = subparsers.add_parser("eval", help="evaluate a checkpoint with the GraphQA metrics")
    add_data_args(p, defaults=False)
    add_config_args(p, config_options(EvalOptions))
    p.set_defaults(func=run)
    from .eval_merge import add_merge_dispatch

    add_merge_dispatch(p)  # `toporag eval merge SHARDS... --out FILE`


def checkpoint_meta(args) -> tuple[dict, dict]:
    """``(config.json, saved retrieval setting)`` of ``--checkpoint`` (both empty for ``--zero-shot``)."""
    if (args.checkpoint is None) == (not args.zero_shot):
        raise ValueError("give exactly one of --checkpoint DIR or --zero-shot")
    if not args.checkpoint:
        return {}, {}
    cfg_path = Path(args.checkpoint) / "config.json"
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path} not found (not a checkpoint folder)")
    meta = json.loads(cfg_path.read_text())
    base = dict(meta.get("retrieval", {}))
    if not meta["config"]["cwn"].get("use_cells2", True):
        base["use_cells2"] = False
    return meta, base


def data_source(args) -> str | None:
    """Where the examples come from: ``--data-file`` (a file) or ``--data-dir`` (a folder), not both."""
    if args.data_file is None:
        return args.data_dir
    if args.data_dir is not None:
        raise ValueError("give --data-file or --data-dir, not both")
    if not Path(args.data_file).is_file():
        raise FileNotFoundError(f"{args.data_file}: --data-file not found")
    return args.data_file


def load_model(args, meta: dict, method: str):
    """``(model, method label)``: the checkpoint's, or the frozen LLM alone for ``--zero-shot``."""
    from ..model.llm import checkpoint_llm_dtype, load_llm
    from ..model import TopoRAGConfig, TopoRAGModel

    if args.zero_shot:
        llm, tok = load_llm(args.llm, device=args.device, dtype=args.dtype)
        return TopoRAGModel(TopoRAGConfig(use_graph=False), llm, tok), f"{method} (frozen LLM, no soft prompt)"
    llm, tok = load_llm(args.llm or meta["config"]["llm"], device=args.device, dtype=args.dtype,
                        trained_dtype=checkpoint_llm_dtype(meta))
    return TopoRAGModel.load(args.checkpoint, llm=llm, tokenizer=tok, device=args.device), method


def choices_option(spec: str | None, model, dataset: str) -> tuple[str, ...] | None:
    """``--choices``: ``none`` (open generation), comma-separated answers, or by default the model's
    answer set (None), or for a model without one (an older checkpoint) the task's closed set."""
    if spec == "none":
        return ()  # empty: open generation for every row
    if spec:
        return tuple(c.strip() for c in spec.split(",") if c.strip())
    if model.config.answer_set:
        return None
    from ..tasks import TASKS

    task = TASKS.get(dataset)
    return task.answer_set if task is not None and task.answer_set else None


def score(args, model, examples: list, method: str, choices, calibration: dict | None = None) -> dict:
    """Answer and score ``examples``: one shard of them (``--shard I/N``) or all; ``calibration``: the
    checkpoint's ``"confidence"`` entry (the records then carry ``low_confidence``)."""
    from ..evaluation.evaluate import evaluate

    if not args.shard:
        return evaluate(model, examples, args.dataset, out=args.out, batch_size=args.batch_size, method=method,
                        resume=args.resume, choices=choices, graph_tokens=args.graph_tokens,
                        calibration=calibration)
    from ..training.distributed import evaluate_shard, parse_shard

    if not args.out:
        raise ValueError("--shard needs --out (each shard writes OUT.shard-I-of-N.jsonl)")
    i, n = parse_shard(args.shard)
    return evaluate_shard(model, examples, args.dataset, args.out, i, n, batch_size=args.batch_size,
                          method=method, resume=args.resume, choices=choices, graph_tokens=args.graph_tokens,
                          calibration=calibration)


def run(args) -> int:
    import torch

    from ..model.llm import dtype_name
    from ..tasks.prep import prepare_dataset

    if args.threads:
        torch.set_num_threads(args.threads)
    meta, base = checkpoint_meta(args)
    setting = prep_config_from_args(args, base)
    args.data_dir = data_source(args)
    data = prepare_dataset(args.dataset, setting, splits=(args.split,), data_dir=args.data_dir)
    examples = select_qtypes(data[args.split], args.qtype, args.dataset)
    examples = examples[: args.limit] if args.limit else examples
    model, method = load_model(args, meta, setting.retrieval.method)
    if args.readback:
        return print_readback(model, examples, args)
    res = score(args, model, examples, method, choices_option(args.choices, model, args.dataset),
                meta.get("confidence"))
    print(json.dumps({"dataset": args.dataset, "split": args.split, "method": method,
                      "dtype": dtype_name(model.dtype), **res}))
    print(f"accuracy: {res['accuracy']:.4f} ({res['correct']}/{res['n']}), unclean answers: {res['unclean']} "
          f"(LLM in {dtype_name(model.dtype)})")
    if res.get("by_coverage"):  # SceneGraphs: did retrieval keep the answer-bearing objects?
        print("; ".join(f"{k}: {v['n']} questions, accuracy {v['accuracy']:.4f}"
                        for k, v in res["by_coverage"].items()))
    return 0


def print_readback(model, examples: list, args) -> int:
    """``--readback``: :func:`toporag_core.evaluation.arms.readback` on ``examples``, as one JSON line
    and a sentence."""
    from ..evaluation.arms import readback

    if not model.config.use_graph:
        raise ValueError("--readback needs a checkpoint with graph tokens (this one has none)")
    res = readback(model, examples, batch_size=args.batch_size, target=args.readback_target)
    print(json.dumps({"dataset": args.dataset, "split": args.split, "readback": res}))
    print(f"readback of {res['n']} examples: loss {res['nll_own']:.4f} with their own graph tokens, "
          f"{res['nll_other']:.4f} with another example's; own lower on {res['own_lower']}, another's on "
          f"{res['other_lower']} (sign test p = {res['p_value']:.2g})")
    return 0


def select_qtypes(examples: list, qtype: str | None, dataset: str) -> list:
    """The examples whose ``qtype`` is one of the comma-separated ``qtype`` names (all when ``None``),
    in order; a name no example has is refused with the types the data does have."""
    if not qtype:
        return examples
    wanted = [t.strip() for t in qtype.split(",") if t.strip()]
    have = sorted({e.qtype for e in examples if e.qtype})
    unknown = [t for t in wanted if t not in have]
    if not wanted or unknown:
        raise ValueError(f"--qtype {qtype!r}: {dataset} has no questions of type {', '.join(unknown) or '(none given)'}"
                         f"; its types: {', '.join(have) or 'none (the data has no question types)'}")
    return [e for e in examples if e.qtype in wanted]
