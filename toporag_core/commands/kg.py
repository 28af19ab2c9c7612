"""``toporag kg import|generate|subgraph|retrieve``: knowledge graphs too big to lift whole (DuckDB store).

    toporag kg generate kg.parquet --entities 300000 --triples 1000000
    toporag kg import kg.duckdb kg.parquet [more.csv ...] [--overwrite]
    toporag kg subgraph kg.duckdb -q "Where is red river 0?" --kg-hops 2 [--entity NAME] [--link auto|exact|fuzzy]
    toporag kg retrieve kg.duckdb -q "..." --kg-hops 2 [--method toporag ...] [--encoder hashing] --json
    toporag kg ask kg.duckdb -q "Who directed the films of Tom Hanks?" [--entity NAME] [--checkpoint DIR] [--json]
    toporag kg eval kg.duckdb questions.jsonl --out preds.jsonl [--methods toporag,g-retriever] [--json]

``kg ask`` / ``kg eval`` answer with the general checkpoint by default, retrieving with ``toporag-seeded``
(relation paths from the linked entities; :mod:`toporag_core.kg.answer`).
"""
from __future__ import annotations

import argparse
import csv
import sys
import time

from ._common import add_method_args, emit, encoder_help, setting_from_args, warn


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


KG_METHOD = "toporag-seeded"  # the default retrieval of kg ask / kg eval: it follows relations from the seeds


def _add_answer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint folder, or 'none' for the zero-shot LLM (default: the general checkpoint)")
    p.add_argument("--llm", default=None, help="override the LLM: local HF folder or hub id")
    p.add_argument("--device", default="auto")
    p.add_argument("--reader", default=None, choices=("names", "generate"),
                   help="open answers scored from the subcomplex's entity names, or generated (default: the "
                        "checkpoint's)")
    p.add_argument("--max-new-tokens", type=int, default=None)


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
    add_method_args(r, dimension="cells", default=KG_METHOD)
    r.add_argument("--encoder", default=None, help=encoder_help())
    r.set_defaults(func=run_retrieve)
    a = kg.add_parser("ask", help="answer a question from the store: link, k-hop subgraph, retrieve, answer")
    _add_extract_args(a)
    add_method_args(a, dimension="cells", default=None)
    _add_answer_args(a)
    a.set_defaults(func=run_ask)
    e = kg.add_parser("eval", help="answer a question file (JSONL: id, question, answers, topic) and score it")
    e.add_argument("db", help="the DuckDB store (made by `toporag kg import`)")
    e.add_argument("questions", help='JSONL, one {"id", "question", "answers": [...], "topic": optional} per line')
    e.add_argument("--out", default=None, help="write one predictions record per question here (JSONL; readable by "
                                               "`toporag compare` and the Error analysis page)")
    e.add_argument("--methods", default=None,
                   help="comma-separated retrieval methods whose answer coverage is also measured "
                        "(default: toporag,g-retriever besides the answering method)")
    e.add_argument("--limit", type=int, default=None, help="only the first N questions")
    e.add_argument("--kg-hops", type=int, default=2, help="k of the k-hop neighbourhood (default 2)")
    e.add_argument("--link", default="auto", choices=("auto", "exact", "fuzzy"), help="entity linking (as kg subgraph)")
    e.add_argument("--max-nodes", type=int, default=50_000, help="stop before a hop that would exceed this many nodes")
    e.add_argument("--json", action="store_true", help="print one JSON summary object")
    add_method_args(e, dimension="cells", default=None)
    _add_answer_args(e)
    e.set_defaults(func=run_eval)


def run_generate(args: argparse.Namespace) -> int:
    from ..kg import generate_kg

    t0 = time.perf_counter()
    path = generate_kg(args.out, args.entities, args.triples, args.relations, args.seed)
    print(f"{path}: {args.triples} triples over {args.entities} entities ({time.perf_counter() - t0:.1f} s)")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..kg import KGStore

    if Path(args.db).exists() and not args.overwrite:
        raise ValueError(f"{args.db}: already exists (add --overwrite to replace it)")
    t0 = time.perf_counter()
    with KGStore.create(args.db, args.files, overwrite=args.overwrite) as store:
        out = {**store.counts(), "db": args.db, "seconds": time.perf_counter() - t0}
    emit(out, args.json, f"{args.db}: {out['triples']} triples, {out['entities']} entities, "
                         f"{out['relations']} relations ({out['seconds']:.1f} s)")
    return 0


def _links_json(links) -> list[dict]:
    from ..kg.answer import links_json

    return links_json(links)


def _hint(links, given: bool) -> None:
    from ..kg.link import link_quality

    hint = None if given else link_quality(links)
    if hint:
        warn([hint])


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
    from ..kg.answer import links_line

    _hint(links, bool(args.entity))
    emit(out, args.json, f"{links_line(links)}; {nb.hops_done}-hop subgraph: "
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
    _hint(res["links"], bool(args.entity))
    warn(sub.warnings)  # e.g. G-Retriever's prize ties, as `toporag retrieve` prints them
    out = sub.to_dict()
    out.update(links=_links_json(res["links"]), subgraph={"nodes": nb.graph.num_nodes, "triples": nb.graph.num_edges,
                                                          "hops_done": nb.hops_done, "truncated": nb.truncated},
               kg_timings=res["timings"])
    if args.json:
        emit(out, True, "")
    else:
        sys.stdout.write(textualize(sub) + "\n")
    return 0


def _pipeline(args: argparse.Namespace):
    from ..answering.pipeline import REPO_ROOT, TopoRAGPipeline

    ckpt = args.checkpoint
    if ckpt is not None and ckpt.strip().lower() == "none":
        pipe = TopoRAGPipeline.text_only(args.llm, device=args.device)
    else:
        folder = ckpt or str(REPO_ROOT / "assets" / "checkpoints" / "general")
        pipe = TopoRAGPipeline.load(folder, llm=args.llm, device=args.device)
    pipe.reader_override = args.reader
    return pipe


def _kg_setting(args: argparse.Namespace, pipe):
    """The options' setting; without --method the kg default (:data:`KG_METHOD`), with the checkpoint's
    parameters only when the checkpoint retrieves with that method too."""
    base = pipe.meta.get("retrieval")
    if args.method is None:
        args.method = KG_METHOD
    if not base or base.get("method") != args.method:
        base = None
    return setting_from_args(args, base)


def _open_store(path: str):
    from ..kg import KGStore

    return KGStore(path)


def _answer_lines(a) -> list[str]:
    """The human lines of one store answer: the answer, its confidence as ``toporag ask`` words it (the
    number the calibrated threshold judges, and the runner-ups when it is low), the candidates."""
    from ..answering.confidence import confidence_note

    note = confidence_note(a.answer, a.confidence, a.low_confidence, a.candidates, a.confidence_threshold,
                           a.answer_kind, unsupported=a.unsupported_claims)
    lines = [f"answer: {a.answer}", *note.lines()]
    cands = a.candidates or []
    if len(cands) > 1:
        lines.append("candidates (probability among them): "
                     + ", ".join(f"{c['name']} ({c['probability']:.2f})" for c in cands[:5]))
    return lines


def run_ask(args: argparse.Namespace) -> int:
    from ..kg.answer import ask_store, links_line

    with _open_store(args.db) as store:
        pipe = _pipeline(args)
        setting = _kg_setting(args, pipe)
        out = ask_store(store, pipe, args.question, setting, entities=args.entity, link=args.link, hops=args.kg_hops,
                        max_nodes=args.max_nodes, max_new_tokens=args.max_new_tokens)
    nb, a = out.neighbourhood, out.reply
    if out.hint:
        warn([out.hint])
    warn(a.subcomplex.warnings)
    result = {"answer": a.answer, "probability": a.probability, "margin": a.margin,
              "confidence": a.confidence, "low_confidence": a.low_confidence,
              "candidates": a.candidates, "topic": a.topic, "question": args.question,
              "links": _links_json(out.links), "hint": out.hint,
              "subgraph": {"nodes": nb.graph.num_nodes, "triples": nb.graph.num_edges, "hops_done": nb.hops_done,
                           "truncated": nb.truncated},
              "method": a.method, "params": dict(a.setting.params), "cells": a.cells,
              "context": a.context, "timings": {**a.timings, **out.kg_timings}, "model": pipe.describe()}
    human = "\n".join([links_line(out.links) + f"; {nb.hops_done}-hop subgraph: {nb.graph.num_nodes} nodes, "
                       f"{nb.graph.num_edges} triples", *_answer_lines(a),
                       f"retrieved ({a.method}): {len(a.cells['nodes'])} nodes, "
                       f"{len(a.cells['edges'])} edges, {len(a.cells['cells2'])} 2-cells", "",
                       a.context])
    emit(result, args.json, human)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from ..evaluation.kg_questions import evaluate_store, read_questions

    questions = read_questions(args.questions)  # every line checked before the model loads
    if args.limit is not None:
        questions = questions[:max(0, args.limit)]
    with _open_store(args.db) as store:
        pipe = _pipeline(args)
        setting = _kg_setting(args, pipe)
        extra = [m.strip() for m in (args.methods or "toporag,g-retriever").split(",") if m.strip()]
        summary = evaluate_store(store, pipe, questions, setting, extra, out=args.out, hops=args.kg_hops,
                                 link=args.link, max_nodes=args.max_nodes, max_new_tokens=args.max_new_tokens,
                                 on_warning=lambda line: warn([line]))
    cov = ", ".join(f"{m} {v:.3f}" for m, v in summary["coverage"].items())
    emit(summary, args.json, f"{summary['questions']} questions: Hit {summary['hit']:.3f}, "
                             f"Hit@1 {summary['hit1']:.3f}; answer coverage: {cov}; "
                             f"in the subgraph {summary['subgraph_coverage']:.3f}; "
                             f"p50 {summary['p50_s']:.2f} s" + (f"; wrote {args.out}" if args.out else ""))
    return 0
