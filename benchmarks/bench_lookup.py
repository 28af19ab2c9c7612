"""Prompt-lookup decoding against plain greedy decoding: latency and answers of one checkpoint.

Why: a cited checkpoint (``answer_style="cited"``) writes open answers by copying lines of its
context (``cabinet [5]: yellow, wooden; cabinet [5] in front of clock [9]. Answer: clock``). Prompt-
lookup decoding (:meth:`toporag_core.model.TopoRAGModel.generate`) drafts those tokens from the
context and checks up to ``LOOKUP_TOKENS`` of them in one forward pass, keeping what greedy decoding
would have produced. The reference is plain greedy decoding (``lookup = 0``), measured in the same run.

Each of the first ``--limit`` questions of ``--split`` is answered one at a time (batch 1, as a user
asks) by both decoders, in alternating order per question so machine noise hits both alike; timed:
``model.answer`` (graph encoding, prompt pass, decoding; retrieval excluded, as in ``toporag eval``).
Printed: p50 / p95 latency and their ratio to greedy, accuracy, and how many raw outputs are equal
(float rounding between one-token and many-token passes may change a near tie).

    .venv/bin/python benchmarks/bench_lookup.py --checkpoint assets/checkpoints/scene_graphs --limit 30 --threads 2
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from _common import checkpoint_split, load_checkpoint_model
    from toporag_core.metrics import is_correct, mcnemar_exact
    from toporag_core.model import LOOKUP_TOKENS
    from toporag_core.retrieval.report import format_table
    from toporag_core.tasks import metric_of
    from toporag_core.tasks.batching import make_batch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="assets/checkpoints/scene_graphs")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--draft", type=int, default=LOOKUP_TOKENS, help="draft tokens per step")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = Path(args.checkpoint)
    meta, examples = checkpoint_split(folder, args.split)
    examples = examples[: args.limit]
    dataset = meta["dataset"]
    model = load_checkpoint_model(folder, meta)
    metric = metric_of(dataset)
    modes = {"greedy": 0, f"prompt lookup ({args.draft})": args.draft}
    secs = {m: [] for m in modes}
    raws = {m: [] for m in modes}
    right = {m: [] for m in modes}
    model.lookup_tokens = args.draft
    model.answer(make_batch(examples[:1], with_answers=False))  # warm-up
    for i, e in enumerate(examples):
        batch = make_batch([e], with_answers=False)
        for m in (list(modes) if i % 2 == 0 else list(modes)[::-1]):
            model.lookup_tokens = modes[m]
            t0 = time.perf_counter()
            out = model.answer(batch)[0]
            secs[m].append(time.perf_counter() - t0)
            raws[m].append(out["raw"])
            right[m].append(bool(is_correct(metric, out["answer"], e.label)))
    ref = "greedy"
    s0 = np.array(secs[ref])
    rows = []
    for m in modes:
        s = np.array(secs[m])
        b, c, p = mcnemar_exact(right[m], right[ref])
        rows.append({"decoding": m, "p50 s": f"{np.median(s):.3f}", "p95 s": f"{np.percentile(s, 95):.3f}",
                     "p50 / greedy": f"{np.median(s) / np.median(s0):.2f}x",
                     "p95 / greedy": f"{np.percentile(s, 95) / np.percentile(s0, 95):.2f}x",
                     "accuracy": f"{np.mean(right[m]):.3f}",
                     "raw equal to greedy": f"{sum(a == r for a, r in zip(raws[m], raws[ref]))} / {len(examples)}",
                     "only this / only greedy right": "(reference)" if m == ref else f"{b} / {c} (p = {p:.3g})"})
    print(f"{folder} ({meta['config'].get('answer_style', 'label')} answers), {len(examples)} {dataset} "
          f"{args.split} questions, batch 1, {torch.get_num_threads()} threads, LLM {model.dtype}")
    print(format_table(rows))


if __name__ == "__main__":
    main()
