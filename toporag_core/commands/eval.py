"""``toporag eval``: answer a split with a checkpoint (or the frozen LLM alone), score, write JSONL."""
from __future__ import annotations

import json
from pathlib import Path

from .train import add_data_args, prep_config_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser("eval", help="evaluate a checkpoint with the GraphQA metrics")
    add_data_args(p, defaults=False)
    p.add_argument("--checkpoint", default=None, help="checkpoint folder (config.json + model.safetensors)")
    p.add_argument("--zero-shot", action="store_true",
                   help="no checkpoint: the frozen LLM reads the textualized subcomplex, no soft prompt")
    p.add_argument("--llm", default=None, help="override the LLM (local HF folder or hub id)")
    p.add_argument("--device", default="auto")
    p.add_argument("--split", default="test", choices=("train", "val", "test", "all"),
                   help="'all': every example of the data (e.g. a user's own --data-file / --data-dir)")
    p.add_argument("--data-file", default=None,
                   help="a user's own data file, e.g. an ExplaGraphs-format TSV for --dataset expla_graphs "
                        "(GQA scene graphs: --dataset scene_graphs --data-dir DIR)")
    p.add_argument("--qtype", default=None, metavar="TYPES",
                   help="only questions of these types, comma-separated (scene graphs: 0-cell, 1-cell, 2-cell; "
                        "e.g. --qtype 2-cell for the closed-loop questions); applied before --limit")
    p.add_argument("--limit", type=int, default=None, help="only the first N examples of the split")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--out", default=None, help="predictions JSONL (written as results arrive)")
    p.add_argument("--resume", action="store_true", help="skip ids already in --out")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="evaluate shard I of N (examples I, I+N, ...) into OUT.shard-I-of-N.jsonl; join the shards "
                        "with `python -m toporag_core.distributed merge OUT OUT.shard-*`")
    p.add_argument("--choices", default=None,
                   help="closed answer set to score by likelihood, comma-separated (default: the checkpoint's "
                        "answer set; 'none' forces open generation)")
    p.set_defaults(func=run)
    from .eval_merge import add_merge_dispatch

    add_merge_dispatch(p)  # `toporag eval merge SHARDS... --out FILE`


def run(args) -> int:
    import torch

    from ..evaluate import evaluate
    from ..llm import checkpoint_llm_dtype, dtype_name, load_llm
    from ..model import TopoRAGConfig, TopoRAGModel
    from ..tasks.prep import prepare_dataset

    if args.threads:
        torch.set_num_threads(args.threads)
    if (args.checkpoint is None) == (not args.zero_shot):
        raise ValueError("give exactly one of --checkpoint DIR or --zero-shot")
    base = {}
    if args.checkpoint:
        cfg_path = Path(args.checkpoint) / "config.json"
        if not cfg_path.is_file():
            raise FileNotFoundError(f"{cfg_path} not found (not a checkpoint folder)")
        meta = json.loads(cfg_path.read_text())
        base = dict(meta.get("retrieval", {}))
        if not meta["config"]["cwn"].get("use_cells2", True):
            base["use_cells2"] = False
    setting = prep_config_from_args(args, base)
    if args.data_file is not None:
        if args.data_dir is not None:
            raise ValueError("give --data-file or --data-dir, not both")
        if not Path(args.data_file).is_file():
            raise FileNotFoundError(f"{args.data_file}: --data-file not found")
        args.data_dir = args.data_file
    data = prepare_dataset(args.dataset, setting, splits=(args.split,), data_dir=args.data_dir)
    examples = select_qtypes(data[args.split], args.qtype, args.dataset)
    examples = examples[: args.limit] if args.limit else examples
    if args.zero_shot:
        llm, tok = load_llm(args.llm, device=args.device, dtype=args.dtype)
        model = TopoRAGModel(TopoRAGConfig(use_graph=False), llm, tok)
        method = f"{setting.retrieval.method} (frozen LLM, no soft prompt)"
    else:
        ck_meta = json.loads(cfg_path.read_text())
        llm, tok = load_llm(args.llm or ck_meta["config"]["llm"], device=args.device, dtype=args.dtype,
                            trained_dtype=checkpoint_llm_dtype(ck_meta))
        model = TopoRAGModel.load(args.checkpoint, llm=llm, tokenizer=tok, device=args.device)
        method = setting.retrieval.method
    choices = None
    if args.choices == "none":
        choices = ()  # empty: open generation for every row
    elif args.choices:
        choices = tuple(c.strip() for c in args.choices.split(",") if c.strip())
    if choices is None and not model.config.answer_set:  # e.g. an older checkpoint: the task's closed set
        from ..tasks import TASKS

        task = TASKS.get(args.dataset)
        choices = task.answer_set if task is not None and task.answer_set else None
    if args.shard:
        from ..distributed import evaluate_shard, parse_shard

        if not args.out:
            raise ValueError("--shard needs --out (each shard writes OUT.shard-I-of-N.jsonl)")
        i, n = parse_shard(args.shard)
        res = evaluate_shard(model, examples, args.dataset, args.out, i, n, batch_size=args.batch_size,
                             method=method, resume=args.resume, choices=choices)
    else:
        res = evaluate(model, examples, args.dataset, out=args.out, batch_size=args.batch_size, method=method,
                       resume=args.resume, choices=choices)
    print(json.dumps({"dataset": args.dataset, "split": args.split, "method": method,
                      "dtype": dtype_name(model.dtype), **res}))
    print(f"accuracy: {res['accuracy']:.4f} ({res['correct']}/{res['n']}), unclean answers: {res['unclean']} "
          f"(LLM in {dtype_name(model.dtype)})")
    if res.get("by_coverage"):  # SceneGraphs: did retrieval keep the answer-bearing objects?
        print("; ".join(f"{k}: {v['n']} questions, accuracy {v['accuracy']:.4f}"
                        for k, v in res["by_coverage"].items()))
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
