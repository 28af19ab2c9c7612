"""LLM precision on this CPU: answer latency and answers of one checkpoint in fp32 against bf16.

Why: on a CPU that multiplies bf16 natively (``avx512_bf16`` / ``amx_bf16``, e.g. AMD EPYC Zen 4) the
frozen prefill of a scene question (~620 tokens) runs ~2.8x faster in bf16; on one without, bf16 runs in
software and is several times *slower* (~7x measured). ``dtype="auto"`` therefore probes the
CPU (:func:`toporag_core.model.llm.cpu_native_bf16`) and runs a checkpoint in the precision it trained in
(``llm_dtype`` in its ``config.json``). This benchmark measures what that choice costs and gains on the
same questions in the same run: the reference is fp32.

For each precision, the checkpoint answers the first ``--limit`` questions of ``--split`` one at a time
(batch 1, as a user asks; graph encoding + LLM, retrieval excluded as in ``toporag eval``). Printed:
accuracy, latency p50 / p95 and their ratio to fp32, and the paired exact McNemar test of each precision
against fp32 (only this precision right / only fp32 right).

    .venv/bin/python benchmarks/bench_precision.py --checkpoint assets/checkpoints/scene_graphs \\
        --dataset scene_graphs --limit 60 --threads 2
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from toporag_core.evaluation.evaluate import evaluate
    from toporag_core.model.llm import checkpoint_llm_dtype, cpu_native_bf16, load_llm
    from toporag_core.metrics import mcnemar_exact
    from toporag_core.model import TopoRAGModel
    from toporag_core.predictions import read_records
    from toporag_core.retrieval.report import format_table
    from _common import checkpoint_split

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="assets/checkpoints/scene_graphs")
    ap.add_argument("--dataset", default=None, help="default: the checkpoint's")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=60)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="folder for each precision's predictions JSONL")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = Path(args.checkpoint)
    meta, examples = checkpoint_split(folder, args.split, args.dataset)
    dataset = args.dataset or meta["dataset"]
    examples = examples[: args.limit]
    print(f"{folder}: trained in {checkpoint_llm_dtype(meta)}; this CPU multiplies bf16 natively: "
          f"{cpu_native_bf16()}; {len(examples)} {dataset} {args.split} questions, batch 1, "
          f"{torch.get_num_threads()} threads")
    runs = {}
    for name in [d.strip() for d in args.dtypes.split(",") if d.strip()]:
        llm, tok = load_llm(meta["config"]["llm"], device="cpu", dtype=name)
        model = TopoRAGModel.load(folder, llm=llm, tokenizer=tok, device="cpu")
        out = Path(args.out or "runs/bench_precision") / f"{dataset}_{name}.jsonl"
        evaluate(model, examples[:2], dataset, out=None, batch_size=1, show_progress=False)  # warm-up
        evaluate(model, examples, dataset, out=out, batch_size=1, show_progress=False)
        recs = read_records(out, ("id", "correct"))
        runs[name] = ([bool(r["correct"]) for r in recs], np.array([r["seconds"] for r in recs]))
    ref = next(iter(runs))
    ok0, s0 = runs[ref]
    rows = []
    for name, (ok, s) in runs.items():
        b, c, p = mcnemar_exact(ok, ok0)
        rows.append({"dtype": name, "accuracy": f"{np.mean(ok):.3f}", "p50 s": f"{np.median(s):.3f}",
                     "p95 s": f"{np.percentile(s, 95):.3f}", "p50 vs " + ref: f"{np.median(s) / np.median(s0):.2f}x",
                     "only this / only ref right": f"{b} / {c}" if name != ref else "(reference)",
                     "McNemar p": f"{p:.3g}" if name != ref else ""})
    print(format_table(rows))


if __name__ == "__main__":
    main()
