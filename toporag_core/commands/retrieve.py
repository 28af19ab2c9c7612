"""``toporag retrieve PATH --question Q``: retrieve with any registered method (cells or nodes)."""
from __future__ import annotations

import argparse
import time

from ._common import (add_graph_args, add_method_args, check_question_args, emit, encoder_help, encoder_option,
                      load_from_args, setting_from_args, warn)


def register(sub) -> None:
    p = sub.add_parser("retrieve", help="retrieve the subcomplex (or topology-aware nodes) for a question")
    add_graph_args(p)
    p.add_argument("--question", "-q", default=None, help="the question (node methods: or --target NODE)")
    add_method_args(p)
    p.add_argument("--encoder", type=encoder_option, default=None,
                   help=encoder_help("$TOPORAG_ENCODER, else all-MiniLM-L6-v2"))
    p.add_argument("--context", action="store_true", help="also print the textualized context")
    from ..retrieval.textualize import DEFAULT_TEXT, TEXT_FORMATS

    p.add_argument("--text", default=DEFAULT_TEXT, choices=tuple(TEXT_FORMATS),
                   help="text format of the context: csv (G-Retriever's) or compact (names inline, boxes dropped)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_question_args(args, "question")
    from ..embed import get_encoder
    from ..retrieval import EmbeddedComplex, retrieve, textualize

    setting = setting_from_args(args)
    nodes = setting.spec.dimension == "nodes"
    if not args.question and not (nodes and setting.params.get("target")):
        raise ValueError("--question is required" + (" (or --target NODE)" if nodes else ""))
    graph = load_from_args(args)
    if graph.num_nodes == 0:  # loaders reject this already; a plug-in format might not
        from ..graph import GraphFormatError

        raise GraphFormatError("cannot retrieve from an empty graph (no nodes)", file=args.path)
    warn(graph.meta.get("warnings"))
    t0 = time.perf_counter()
    if nodes:  # node methods need no cell embeddings, and the encoder only to read a question
        from ..cells.lift import lift

        enc = get_encoder(args.encoder) if args.question or setting.method == "text" else None
        ecx = EmbeddedComplex.unembedded(lift(graph, tree=args.tree, seed=args.seed), enc)
        res = retrieve(ecx, args.question, setting=setting)
        out = {"method": setting.method, "params": dict(setting.params), "target": res.target_text,
               "target_index": res.target, "nodes": res.texts, "node_indices": res.nodes,
               "scores": [float(s) for s in res.scores], "seconds": time.perf_counter() - t0}
        emit(out, args.json, "\n".join(f"{s:.3f}  {t}" for t, s in zip(out["nodes"], out["scores"])))
        return 0
    enc = get_encoder(args.encoder)
    ecx = EmbeddedComplex.from_graph(graph, enc, tree=args.tree, seed=args.seed, max_cycle_len=args.max_cycle_len)
    sub = retrieve(ecx, args.question, setting=setting)
    out = sub.to_dict()
    out["seconds"] = time.perf_counter() - t0
    out["warnings"] = list(graph.meta.get("warnings", [])) + list(sub.warnings)
    warn(sub.warnings)
    if args.context:
        out["context"] = textualize(sub, fmt=args.text)
    n, m, f = sub.counts
    human = [f"{setting.method}: {n} nodes, {m} edges, {f} 2-cells ({out['seconds']:.2f} s)", "",
             textualize(sub, fmt=args.text)]
    emit(out, args.json, "\n".join(human))
    return 0
