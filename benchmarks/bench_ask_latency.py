"""What one Ask costs in-process: the answer alone against the answer plus the graph-token arms.

    python benchmarks/bench_ask_latency.py [--repeat 5] [--threads N]

Per shipped checkpoint, on the built-in sample of its task (scene / argument / Curie knowledge graph) and that
sample's own question, loaded and embedded once (as the page's caches hold them): the median seconds of

* ``answer``: :func:`toporag_core.studio.ask.ask` (retrieve, fit, encode, generate): what pressing **Ask**
  runs now;
* ``arms``: :func:`toporag_core.studio.ask.graph_effect` (own / zeroed / permuted tokens, the gold answer
  beside it): run only when "Measure what the graph tokens did" is pressed;
* ``answer + arms``: what pressing Ask ran before the arms became lazy;
* ``explain`` (once): :func:`toporag_core.studio.ask.explain_cells`, every retrieved cell out of its tokens and
  its text lines.

Prints a markdown table. Times depend on the machine's load: compare the columns of one run.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = (("scene_graphs", "scene"), ("expla_graphs", "argument"), ("general", "kg"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, as the app runs)")
    ap.add_argument("--no-explain", action="store_true")
    ap.add_argument("--checkpoints", default=",".join(n for n, _ in CASES), help="comma-separated, of these")
    args = ap.parse_args(argv)

    import torch

    from toporag_core.io import samples
    from toporag_core.studio import ask
    from toporag_core.answering.route import CHECKPOINT_ROOT

    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch threads: {torch.get_num_threads()}; median of {args.repeat} after one warm-up\n")
    print("| checkpoint | sample | answer (Ask now) s | arms s | answer + arms (Ask before) s | explain s (cells) |")
    print("|---|---|---|---|---|---|")
    for name, key in [c for c in CASES if c[0] in args.checkpoints.split(",")]:
        pipe = ask.load_pipeline(str(CHECKPOINT_ROOT / name), "", device="cpu")
        graph = samples.load_sample(key)
        question = graph.meta.get("question") or ""
        ecx = pipe.prepare(graph)
        setting = [pipe.default_setting()]
        query = ask.retrieval_query(graph, question)
        gold = ask.gold_for(graph, question)
        a = next(iter(ask.ask(pipe, ecx, question, setting, query=query).values()))
        ask.graph_effect(pipe, ecx, question, a, gold=gold)  # warm-up
        t_ans, t_arms = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            a = next(iter(ask.ask(pipe, ecx, question, setting, query=query).values()))
            t_ans.append(time.perf_counter() - t)
            t = time.perf_counter()
            ask.graph_effect(pipe, ecx, question, a, gold=gold)
            t_arms.append(time.perf_counter() - t)
        explain = "-"
        if not args.no_explain:
            t = time.perf_counter()
            cells = ask.explain_cells(pipe, ecx, question, a)
            explain = f"{time.perf_counter() - t:.2f} ({len(cells)})"
        both = np.add(t_ans, t_arms)
        print(f"| {name} | {key} | {np.median(t_ans):.2f} | {np.median(t_arms):.2f} | {np.median(both):.2f} | "
              f"{explain} |", flush=True)
        del pipe
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
