"""``toporag retrieve PATH --question Q``: retrieve a subcomplex (or topology-aware nodes)."""
from __future__ import annotations

import argparse
import time

from ._common import add_graph_args, emit, load_from_args

CELL_METHODS = ("toporag", "g-retriever", "shortest-path", "topk-triples")
NODE_METHODS = ("proximity", "role")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("retrieve", help="retrieve the subcomplex for a question")
    add_graph_args(p)
    p.add_argument("--question", "-q", default=None, help="the question (required except for proximity/role with --target)")
    p.add_argument("--method", default="toporag", choices=CELL_METHODS + NODE_METHODS)
    p.add_argument("--k", type=int, default=3, help="one k for all dimensions (default 3)")
    p.add_argument("--k0", type=int, default=None)
    p.add_argument("--k1", type=int, default=None)
    p.add_argument("--k2", type=int, default=None)
    p.add_argument("--c2", type=float, default=0.5, help="2-cell boundary-length penalty")
    p.add_argument("--edge-cost", type=float, default=0.5)
    p.add_argument("--target", default=None, help="proximity/role: target node (index or text)")
    p.add_argument("--encoder", default=None, help="'default' (all-MiniLM-L6-v2), 'hashing', or a model folder")
    p.add_argument("--context", action="store_true", help="also print the textualized context")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..embed import get_encoder

    graph = load_from_args(args)
    t0 = time.perf_counter()
    if args.method in NODE_METHODS:
        from ..topo.retriever import retrieve_for_cli

        if args.target is None and not args.question:
            raise ValueError(f"--method {args.method} needs --target NODE or --question Q")
        enc = get_encoder(args.encoder) if args.question else None
        out = retrieve_for_cli(graph, args.method, args.target, args.k, question=args.question, encoder=enc)
        emit(out, args.json, "\n".join(f"{s:.3f}  {t}" for t, s in zip(out["nodes"], out["scores"])))
        return 0
    if not args.question:
        raise ValueError("--question is required")
    from ..retrieval import EmbeddedComplex, retrieve, textualize

    enc = get_encoder(args.encoder)
    ecx = EmbeddedComplex.from_graph(graph, enc, tree=args.tree, seed=args.seed, max_cycle_len=args.max_cycle_len)
    k0 = args.k if args.k0 is None else args.k0
    k1 = args.k if args.k1 is None else args.k1
    k2 = args.k if args.k2 is None else args.k2
    sub = retrieve(ecx, args.question, method=args.method, k0=k0, k1=k1, k2=k2, c2=args.c2, edge_cost=args.edge_cost)
    out = sub.to_dict()
    out["seconds"] = time.perf_counter() - t0
    if args.context:
        out["context"] = textualize(sub)
    n, m, f = sub.counts
    human = [f"{args.method}: {n} nodes, {m} edges, {f} 2-cells ({out['seconds']:.2f} s)", "", textualize(sub)]
    emit(out, args.json, "\n".join(human))
    return 0
