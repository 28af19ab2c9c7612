"""``toporag kg import|generate|subgraph|retrieve``: knowledge graphs too big to lift whole (DuckDB store).

    toporag kg generate kg.parquet --entities 300000 --triples 1000000
    toporag kg import kg.duckdb kg.parquet [more.csv ...] [--overwrite]
    toporag kg subgraph kg.duckdb -q "Where is red river 0?" --kg-hops 2 [--entity NAME] [--link auto|exact|fuzzy]
    toporag kg retrieve kg.duckdb -q "..." --kg-hops 2 [--method toporag ...] [--encoder hashing] --json
"""
from __future__ import annotations

import argparse
import csv
import sys
import time

from ._common import add_method_args, emit, setting_from_args


def _add_extract_args(p: argparse.ArgumentParser) -> None:
    from ..kg import LINK_MODES

    p.add_argument("db", help="the DuckDB store (made by `toporag kg import`)")
    p.add_argument("--question", "-q", required=True, help="the question")
    p.add_argument("--kg-hops", type=int, default=2, help="k of the k-hop neighbourhood (default 2)")
    p.add_argument("--link", default="auto", choices=LINK_MODES,
                   help="entity linking: exact name n-grams, fuzzy (Jaro-Winkler >= 0.92), auto = exact then fuzzy")
    p.add_argument("--entity", action="append", default=None, help="seed entity by name (repeatable; skips linking)")
    p.add_argument("--max-nodes", type=int, default=50_000, help="stop before a hop that would exceed this many nodes")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register(sub) -> None:
    p = sub.add_parser("kg", help="knowledge graphs in a DuckDB triple store: import, k-hop subgraphs, retrieval")
    kg = p.add_subparsers(dest="kg_command", required=True)
    g = kg.add_parser("generate", help="write a generated KG (CSV/TSV/Parquet by extension)")
    g.add_argument("out")
    g.add_argument("--entities", type=int, default=100_000)
    g.add_argument("--triples", type=int, default=300_000)
    g.add_argument("--relations", type=int, default=50)
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=run_generate)
    i = kg.add_parser("import", help="import triple files (CSV/TSV: head,relation,tail; Parquet) into a store")
    i.add_argument("db")
    i.add_argument("files", nargs="+")
    i.add_argument("--overwrite", action="store_true")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=run_import)
    s = kg.add_parser("subgraph", help="the question's k-hop subgraph (linked entities)")
    _add_extract_args(s)
    s.add_argument("--out", default=None, help="write the subgraph's triples to this CSV (head,relation,tail)")
    s.set_defaults(func=run_subgraph)
    r = kg.add_parser("retrieve", help="extract the k-hop subgraph, lift it and retrieve")
    _add_extract_args(r)
    add_method_args(r, dimension="cells")
    r.add_argument("--encoder", default=None, help="'default' (all-MiniLM-L6-v2), 'hashing', or a model folder")
    r.set_defaults(func=run_retrieve)


def run_generate(args: argparse.Namespace) -> int:
    from ..kg import generate_kg

    t0 = time.perf_counter()
    path = generate_kg(args.out, args.entities, args.triples, args.relations, args.seed)
    print(f"{path}: {args.triples} triples over {args.entities} entities ({time.perf_counter() - t0:.1f} s)")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from ..kg import KGStore

    t0 = time.perf_counter()
    with KGStore.create(args.db, args.files, overwrite=args.overwrite) as store:
        out = {**store.counts(), "db": args.db, "seconds": time.perf_counter() - t0}
    emit(out, args.json, f"{args.db}: {out['triples']} triples, {out['entities']} entities, "
                         f"{out['relations']} relations ({out['seconds']:.1f} s)")
    return 0


def _links_json(links) -> list[dict]:
    return [{"id": lk.id, "name": lk.name, "mention": lk.mention, "how": lk.how, "score": lk.score} for lk in links]


def run_subgraph(args: argparse.Namespace) -> int:
    from ..kg import KGStore, question_subgraph

    t0 = time.perf_counter()
    with KGStore(args.db) as store:
        links, nb = question_subgraph(store, args.question, args.kg_hops, args.link, args.entity, args.max_nodes)
    g = nb.graph
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["head", "relation", "tail"])
            s, t = g.edge_index
            w.writerows((g.node_text[a], r, g.node_text[b]) for a, r, b in zip(s.tolist(), g.edge_text, t.tolist()))
    out = {"links": _links_json(links), "nodes": g.num_nodes, "triples": g.num_edges, "hops": nb.hops,
           "hops_done": nb.hops_done, "truncated": nb.truncated, "seconds": time.perf_counter() - t0}
    emit(out, args.json, f"linked {', '.join(f'{lk.name} ({lk.how})' for lk in links)}; {nb.hops_done}-hop subgraph: "
                         f"{g.num_nodes} nodes, {g.num_edges} triples"
                         + (" (stopped early: --max-nodes)" if nb.truncated else "") + f" ({out['seconds']:.2f} s)")
    return 0


def run_retrieve(args: argparse.Namespace) -> int:
    from ..embed import get_encoder
    from ..kg import KGStore, retrieve_from_kg
    from ..retrieval import textualize

    setting = setting_from_args(args)
    with KGStore(args.db) as store:
        res = retrieve_from_kg(store, args.question, get_encoder(args.encoder), hops=args.kg_hops, link=args.link,
                               entities=args.entity, setting=setting, max_nodes=args.max_nodes)
    sub, nb = res["subcomplex"], res["neighbourhood"]
    out = sub.to_dict()
    out.update(links=_links_json(res["links"]), subgraph={"nodes": nb.graph.num_nodes, "triples": nb.graph.num_edges,
                                                          "hops_done": nb.hops_done, "truncated": nb.truncated},
               kg_timings=res["timings"])
    if args.json:
        emit(out, True, "")
    else:
        sys.stdout.write(textualize(sub) + "\n")
    return 0
