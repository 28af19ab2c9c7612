"""Shared helpers for the benchmark scripts (not part of the library)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPORAG_SHARED_DATA", ROOT.parent / "shared" / "data"))


def require_shared(name: str) -> Path:
    path = SHARED / name
    if not path.exists():
        print(f"skipped: {path} is absent (the benchmark reads ../shared/data)")
        sys.exit(0)
    return path


def timeit(fn, repeat: int = 5) -> float:
    """Median seconds of ``repeat`` calls after one warm-up."""
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def webqsp_items(enc):
    """The shared WebQSP sample as :class:`QAGraph` items (graph lifted and embedded with ``enc``)."""
    from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph
    from toporag_core.retrieval import EmbeddedComplex
    from toporag_core.retrieval.report import QAGraph

    return [QAGraph(EmbeddedComplex.from_graph(webqsp_record_to_graph(rec), enc), rec["question"],
                    list(rec["answers"]), enc.encode([rec["question"]])[0])
            for rec in read_webqsp(require_shared("webqsp_sample.json"))]


def checkpoint_split(folder: str | Path, split: str, dataset: str | None = None):
    """``(meta, examples)`` of a checkpoint folder: its ``config.json`` and the prepared ``split`` of its
    dataset (or ``dataset``) under its own retrieval setting, as ``toporag eval`` prepares them."""
    import json

    from toporag_core.tasks.prep import PrepConfig, prepare_dataset

    meta = json.loads((Path(folder) / "config.json").read_text())
    name = dataset or meta["dataset"]
    return meta, prepare_dataset(name, PrepConfig.from_dict(meta["retrieval"]), splits=(split,),
                                 show_progress=False)[split]


def load_checkpoint_model(folder: str | Path, meta: dict, dtype: str = "auto"):
    """The checkpoint's :class:`~toporag_core.model.TopoRAGModel` on the CPU in eval mode (LLM in ``dtype``)."""
    from toporag_core.model.llm import load_llm
    from toporag_core.model import TopoRAGModel

    llm, tok = load_llm(meta["config"]["llm"], device="cpu", dtype=dtype)
    return TopoRAGModel.load(Path(folder), llm=llm, tokenizer=tok, device="cpu").eval()


def add_eval_checkpoint_args(ap, limit: int, limit_help: str = "only the first N examples of the split") -> None:
    """``--checkpoint --dataset --split --data-dir --limit --threads``: the options of a benchmark that reads one
    split through a checkpoint as ``toporag eval`` does (:func:`eval_model_and_split`)."""
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--dataset", default="scene_graphs")
    ap.add_argument("--split", default="test")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--limit", type=int, default=limit, help=limit_help)
    ap.add_argument("--threads", type=int, default=2)


def eval_model_and_split(args):
    """``(model in eval mode, the first args.limit examples of args.split)``, loaded and prepared exactly as
    ``toporag eval --checkpoint ... --dataset ... --split ...`` loads them (the checkpoint's retrieval setting
    and LLM dtype; ``--data-dir`` when given). Sets ``args.threads`` torch threads."""
    import torch

    from toporag_core.cli import build_parser
    from toporag_core.commands import eval as ev
    from toporag_core.tasks.prep import prepare_dataset

    torch.set_num_threads(args.threads)
    eargs = build_parser("eval").parse_args(["eval", "--checkpoint", args.checkpoint, "--dataset", args.dataset,
                                             "--split", args.split,
                                             *(["--data-dir", args.data_dir] if args.data_dir else [])])
    meta, base = ev.checkpoint_meta(eargs)
    setting = ev.prep_config_from_args(eargs, base)
    data = prepare_dataset(args.dataset, setting, splits=(args.split,), data_dir=ev.data_source(eargs))
    model, _ = ev.load_model(eargs, meta, setting.retrieval.method)
    return model.eval(), data[args.split][: args.limit]
