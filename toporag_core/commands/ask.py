"""``toporag ask PATH --question Q``: retrieve, encode, generate; print answer, cells and timings."""
from __future__ import annotations

import argparse
import time

from ._common import add_graph_args, emit, load_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="answer a question about a graph with a trained TopoRAG model")
    add_graph_args(p)
    p.add_argument("--question", "-q", required=True)
    p.add_argument("--query", default=None, help="text used for retrieval (default: the question)")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint folder (default: assets/checkpoints/expla_graphs, else the frozen LLM)")
    p.add_argument("--llm", default=None, help="override the LLM: local HF folder or hub id")
    p.add_argument("--device", default="auto")
    p.add_argument("--method", default=None, help="toporag | g-retriever | shortest-path | topk-triples | whole")
    p.add_argument("--k0", type=int, default=None)
    p.add_argument("--k1", type=int, default=None)
    p.add_argument("--k2", type=int, default=None)
    p.add_argument("--c2", type=float, default=None)
    p.add_argument("--edge-cost", type=float, default=None)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..pipeline import TopoRAGPipeline

    graph = load_from_args(args)
    pipe = TopoRAGPipeline.load(args.checkpoint, llm=args.llm, device=args.device)
    params = {"method": "toporag", "k0": 3, "k1": 3, "k2": 3, "c2": 0.5, "edge_cost": 0.5}
    params.update(pipe.retrieval_defaults())  # the checkpoint's training setting, unless overridden
    for key in params:
        if getattr(args, key, None) is not None:
            params[key] = getattr(args, key)
    t0 = time.perf_counter()
    ecx = pipe.prepare(graph, tree=args.tree)  # lift + embed, reported as "prepare"
    prepare_s = time.perf_counter() - t0
    out = pipe.answer(ecx, args.question, query=args.query, max_new_tokens=args.max_new_tokens, **params)
    out["timings"]["prepare"] = prepare_s
    out["timings"]["total"] += prepare_s
    result = {"answer": out["answer"], "question": args.question, "method": out["method"], "params": params,
              "cells": out["cells"], "context": out["context"], "prompt": out["prompt"],
              "timings": out["timings"], "model": pipe.describe()}
    t = out["timings"]
    human = "\n".join([
        f"answer: {out['answer']}",
        f"retrieved ({out['method']}): {len(out['cells']['nodes'])} nodes, {len(out['cells']['edges'])} edges, "
        f"{len(out['cells']['cells2'])} 2-cells",
        "timings: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in t.items()),
        "", out["context"]])
    emit(result, args.json, human)
    return 0
