"""``toporag lift PATH``: lift a graph and report the complex."""
from __future__ import annotations

import argparse
import time

from ._common import add_graph_args, emit, load_from_args, warn


def register(sub) -> None:
    p = sub.add_parser("lift", help="lift a textual graph into a cell complex and summarise it")
    add_graph_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..cells.lift import lift
    from ..topo.hodge import hodge_numbers

    graph = load_from_args(args)
    warn(graph.meta.get("warnings"))
    t0 = time.perf_counter()
    cx = lift(graph, tree=args.tree, seed=args.seed, max_cycle_len=args.max_cycle_len)
    seconds = time.perf_counter() - t0
    out = cx.summary()
    out.update(boundary_ok=cx.boundary_ok(), seconds=seconds, name=graph.name,
               warnings=list(graph.meta.get("warnings", [])))
    hodge = hodge_numbers(cx)  # dims of ker L0, L1, L2 (toporag_core/topo/hodge.py); spectra on small complexes
    out["hodge"] = hodge.as_json()
    human = (f"{graph.name or args.path}: {out['nodes']} nodes, {out['edges']} edges "
             f"({out['original_edges']} original), {out['components']} component(s), b1={out['betti1']}, "
             f"{out['cells2']} 2-cells ({out['skipped_cycles']} skipped), B1@B2=0: {out['boundary_ok']}, "
             f"harmonic (dim ker L0, L1, L2) = {tuple(hodge.harmonic)}, {seconds * 1000:.1f} ms")
    emit(out, args.json, human)
    return 0
