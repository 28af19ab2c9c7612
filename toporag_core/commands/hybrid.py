"""``toporag hybrid route|index|search|eval|generate``: hybrid text-and-table retrieval.

* ``route FILE [--tau 0.4] [--json]``: blocks with SDS and kind (per-line SDS/votes in ``--json``);
* ``index FOLDER --out DIR [--reduce] [--row-tag]``: parse every document, embed, save the index;
* ``search INDEX_OR_FOLDER -q "..." [--route narrative|table|both] [--k 10] [--score rowaware|maxsim]
  [--reranker PATH] [--answer] [--json]``: per-route scores, per-cell best matches, fused ranks;
* ``eval DATA_DIR [--k 10] [--split test]``: nDCG/Recall per question type against the baselines;
* ``generate --out DIR [--n-docs 400] [--n-questions 150] [--seed 0]``: the fact-store corpus
  (the generator lives here rather than under ``toporag data`` to keep the hybrid commands together).
"""
from __future__ import annotations

import argparse
import sys

from ._common import emit


def register(subparsers) -> None:
    p = subparsers.add_parser("hybrid", help="hybrid text-and-table retrieval (router, CALI, fusion)")
    sub = p.add_subparsers(dest="hybrid_command", required=True)

    r = sub.add_parser("route", help="split a document into narrative and table blocks (SDS router)")
    r.add_argument("path", help="text document (Markdown, HTML, TSV, CSV, plain text)")
    r.add_argument("--tau", type=float, default=0.4, help="SDS threshold (default 0.4)")
    r.add_argument("--window", type=int, default=5, help="window length in lines (default 5)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=run_route)

    i = sub.add_parser("index", help="index a folder (or one file) of documents")
    i.add_argument("path", help="folder or file")
    i.add_argument("--out", required=True, help="index folder to write (index.json + index.safetensors)")
    i.add_argument("--reduce", action="store_true",
                   help="drop stop-word cells, merge near duplicates (cos>=0.98), PQ 48x16")
    i.add_argument("--row-tag", action="store_true", help="embed cells as [ROW: id] [COL: h] [VAL: v] (ablation)")
    i.add_argument("--encoder", default=None, help="encoder spec (default: packaged MiniLM or $TOPORAG_ENCODER)")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(func=run_index)

    s = sub.add_parser("search", help="search an index folder (or build one in memory from documents)")
    s.add_argument("path", help="index folder from `toporag hybrid index`, or a folder/file of documents")
    s.add_argument("-q", "--question", required=True)
    s.add_argument("--route", default="both", choices=("narrative", "table", "both"))
    s.add_argument("--k", type=int, default=10, help="top-k per route and after fusion (default 10)")
    s.add_argument("--score", default="rowaware", choices=("rowaware", "maxsim"), help="table score")
    s.add_argument("--fusion", default="weighted", choices=("weighted", "minmax"))
    s.add_argument("--reranker", default=None, help="local CrossEncoder folder (optional)")
    s.add_argument("--answer", action="store_true", help="also answer with the frozen LLM")
    s.add_argument("--llm", default=None, help="LLM folder (default: packaged SmolLM2)")
    s.add_argument("--encoder", default=None, help="encoder spec (must match the index's)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=run_search)

    e = sub.add_parser("eval", help="nDCG/Recall per question type vs naive, parent-child, BM25")
    e.add_argument("data", help="folder written by `toporag hybrid generate`")
    e.add_argument("--k", type=int, default=10)
    e.add_argument("--split", default="all", choices=("all", "val", "test"))
    e.add_argument("--encoder", default=None)
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(func=run_eval)

    g = sub.add_parser("generate", help="write the fact-store corpus (documents, questions, router labels)")
    g.add_argument("--out", required=True, help="output folder")
    g.add_argument("--n-docs", type=int, default=400)
    g.add_argument("--n-questions", type=int, default=150)
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=run_generate)


def _router(args):
    from ..hybrid import RouterConfig

    return RouterConfig(tau=args.tau, window=args.window)


def run_route(args: argparse.Namespace) -> int:
    from ..hybrid import parse_document, read_document

    doc = parse_document(read_document(args.path), args.path, _router(args))
    blocks = [{"kind": u.kind, "lines": [u.start + 1, u.end], "sds": u.sds,
               **({"table": {"rows": u.table.shape[0], "columns": u.table.shape[1], "format": u.table.fmt,
                             "header": u.table.header}} if u.table else {})} for u in doc.units]
    human = "\n".join(f"lines {b['lines'][0]}-{b['lines'][1]}  {b['kind']:<9}  SDS {b['sds']:.2f}"
                      + (f"  {b['table']['format']} {b['table']['rows']}x{b['table']['columns']}"
                         if "table" in b else "")
                      for b in blocks)
    for w in doc.warnings:
        print(f"warning: {w}", file=sys.stderr)
    emit({"file": args.path, "tau": args.tau, "blocks": blocks, "warnings": doc.warnings,
          **doc.routing.to_dict()} if args.json else {}, args.json, human or "no blocks")
    return 0


def run_index(args: argparse.Namespace) -> int:
    from ..embed import get_encoder
    from ..hybrid import HybridIndex, ReductionConfig, load_folder

    docs, errors = load_folder(args.path)
    for e in errors:
        print(f"skipped: {e}", file=sys.stderr)
    if not docs:
        raise ValueError(f"{args.path}: no readable documents")
    red = ReductionConfig.full() if args.reduce else None
    idx = HybridIndex.build(docs, get_encoder(args.encoder), row_tag=args.row_tag, reduction=red)
    idx.save(args.out)
    d = idx.describe()
    emit({**d, "out": args.out, "skipped": errors, "warnings": idx.meta["warnings"]}, args.json,
         f"indexed {len(docs)} documents into {args.out}: {d['narrative']} narrative blocks, {d['tables']} tables, "
         f"{d['cali']['cells_kept']} cells ({d['cali']['bytes'] / 1e6:.2f} MB vs "
         f"{d['cali']['bytes_plain'] / 1e6:.2f} MB plain)")
    return 0


def _open_index(path: str, encoder_spec: str | None):
    from pathlib import Path

    from ..embed import get_encoder
    from ..hybrid import HybridIndex, load_folder

    enc = get_encoder(encoder_spec)
    if (Path(path) / "index.json").is_file():
        idx = HybridIndex.load(path, enc)
        if idx.meta.get("encoder") != enc.name:
            raise ValueError(f"{path}: index was built with encoder {idx.meta.get('encoder')!r}, "
                             f"not {enc.name!r} (pass --encoder)")
        return idx
    docs, errors = load_folder(path)
    for e in errors:
        print(f"skipped: {e}", file=sys.stderr)
    if not docs:
        raise ValueError(f"{path}: no readable documents")
    return HybridIndex.build(docs, enc)


def run_search(args: argparse.Namespace) -> int:
    from ..hybrid import SearchConfig

    idx = _open_index(args.path, args.encoder)
    cfg = SearchConfig(k=args.k, route=args.route, table_score=args.score, fusion=args.fusion)
    res = idx.search(args.question, cfg, reranker=args.reranker)
    for hit in res["table"]:
        ex = idx.explain_table(res, hit["unit"])
        hit["cells"] = [{k: v for k, v in b.items()} for b in ex["best"]]
    out = {k: v for k, v in res.items() if not k.startswith("_")}
    if args.answer:
        from ..hybrid.answer import answer_from_context, frozen_reader

        ctx = idx.context(res, rows_per_table=cfg.rows_per_table)
        out["answer"] = answer_from_context(args.question, ctx, frozen_reader(args.llm))["answer"]
        out["context"] = ctx
    lines = [f"terms: {', '.join(res['terms'])}"]
    for r in res["reranked"] or res["fused"]:
        lines.append(f"{r['rank']:>3}  {r['route']:<9}  {r['score']:.3f}  {r['uid']}")
    if "answer" in out:
        lines.append(f"answer: {out['answer']}")
    emit(out, args.json, "\n".join(lines))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from ..embed import get_encoder
    from ..hybrid import HybridIndex, SearchConfig, load_dataset
    from ..hybrid.evaluate import Baselines, evaluate, parse_corpus, router_f1, standard_rankers, summarize

    ds = load_dataset(args.data)
    enc = get_encoder(args.encoder)
    docs = parse_corpus(ds)
    units = [u for d in docs for u in d.units]
    idx = HybridIndex.build(docs, enc)
    base = Baselines.build(units, enc)
    qs = [q for q in ds.questions if args.split == "all" or q.get("split") == args.split]
    if not qs:
        raise ValueError(f"{args.data}: no questions in split {args.split!r}")
    rankers = standard_rankers(idx, base, args.k, {"hybrid": (idx, SearchConfig(k=args.k))})
    table = summarize(evaluate(qs, rankers, units, args.k), list(rankers))
    f1 = router_f1(ds) if ds.labels else None
    head = ["method"] + [f"{m}_{t}" for m in ("ndcg", "recall") for t in ("A", "B", "C", "all")] + ["median_ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) if h == "method" else f"{r[h]:.3f}" for h in head) + " |" for r in table]
    if f1:
        lines.append(f"router per-line F1 on mixed documents: {f1['f1']:.3f}")
    emit({"k": args.k, "split": args.split, "questions": len(qs), "table": table, "router": f1}, args.json,
         "\n".join(lines))
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from ..hybrid import GeneratorConfig, generate, write_dataset

    st = write_dataset(generate(GeneratorConfig(n_docs=args.n_docs, n_questions=args.n_questions,
                                                seed=args.seed)), args.out)
    print(f"wrote {st['documents']} documents to {args.out} ({', '.join(f'{v} {k}' for k, v in st['kinds'].items())}); "
          f"{st['questions']} questions ({', '.join(f'{v} {k}' for k, v in sorted(st['types'].items()))}); "
          f"{st['table_lines']} table lines labelled")
    return 0
