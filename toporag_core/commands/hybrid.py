"""``toporag hybrid route|index|search|eval|generate``: hybrid text-and-table retrieval.

* ``route FILE [--tau 0.4] [--json]``: blocks with SDS and kind (per-line SDS/votes in ``--json``);
* ``index CORPUS --out DIR [--reduce] [--row-tag]``: CORPUS is a TAT-QA JSON file (each table and
  paragraph a unit), a folder or file of documents (Markdown, HTML, CSV, TSV, text: routed into prose
  and tables), or a JSONL / BEIR corpus; embeds (resumable: vectors are cached chunk by chunk, with a
  progress line) and saves the index atomically;
* ``fit TATQA.json --index DIR [--seed 0]``: fit the question router and the fusion weights on a seeded
  half of the file's contexts, stored next to the index (``fusion.json``);
* ``search INDEX_OR_FOLDER -q "..." [--route narrative|table|both] [--k 10] [--score rowaware|maxsim]
  [--reranker PATH] [--answer] [--json]``: per-route scores, per-cell best matches, fused ranks;
* ``eval DATA_DIR [--k 10] [--split test]``: nDCG/Recall per question type against the baselines;
* ``eval TATQA.json --index DIR [--split auto|report|fit|all] --json``: hybrid vs BM25 vs dense nDCG@10 /
  Recall@10 overall and per answer source, ablations, paired tests, p50 and first-query latency;
* ``generate --out DIR [--n-docs 400] [--n-questions 150] [--seed 0]``: the fact-store corpus
  (the generator lives here rather than under ``toporag data`` to keep the hybrid commands together).

The options that set a config are made from its fields (type, default, help and choices in the
field's metadata; :func:`~toporag_core.commands._common.config_options`): ``route``'s from
:class:`~toporag_core.hybrid.RouterConfig`, ``search``'s and ``eval --k`` from
:class:`~toporag_core.hybrid.SearchConfig`, ``generate``'s from :class:`~toporag_core.datagen.hybrid.GeneratorConfig`.
"""
from __future__ import annotations

import argparse
import sys

from ._common import emit, encoder_help


ROUTER_FIELDS = ("tau", "window")
SEARCH_FIELDS = ("route", "k", "table_score", "fusion")
GENERATOR_FIELDS = ("n_docs", "n_questions", "seed")


def router_options() -> list:
    """``hybrid route``'s options (:class:`~toporag_core.hybrid.RouterConfig`)."""
    from ..hybrid import RouterConfig
    from ._common import config_options

    return config_options(RouterConfig, ROUTER_FIELDS)


def search_options(names: tuple[str, ...] = SEARCH_FIELDS) -> list:
    """``hybrid search``'s query options (:class:`~toporag_core.hybrid.SearchConfig`); ``eval`` takes ``k``."""
    from ..hybrid import SearchConfig
    from ._common import config_options

    return config_options(SearchConfig, names)


def generator_options() -> list:
    """``hybrid generate``'s options (:class:`~toporag_core.datagen.hybrid.GeneratorConfig`)."""
    from ..datagen.hybrid import GeneratorConfig
    from ._common import config_options

    return config_options(GeneratorConfig, GENERATOR_FIELDS)


def _values(args: argparse.Namespace, options: list) -> dict:
    return {o.dest: getattr(args, o.dest) for o in options}


def register(subparsers) -> None:
    from ._common import add_config_args

    p = subparsers.add_parser("hybrid", help="hybrid text-and-table retrieval (router, CALI, fusion)")
    sub = p.add_subparsers(dest="hybrid_command", required=True)

    r = sub.add_parser("route", help="split a document into narrative and table blocks (SDS router)")
    r.add_argument("path", help="text document (Markdown, HTML, TSV, CSV, plain text)")
    add_config_args(r, router_options(), show_all=True)
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=run_route)

    i = sub.add_parser("index", help="index a corpus: TAT-QA JSON, a folder/file of documents, JSONL or BEIR")
    i.add_argument("path", help="TAT-QA JSON file, folder or file of documents, JSONL or BEIR folder")
    i.add_argument("--format", default="auto", help="auto (default), tatqa, documents, jsonl, beir, folder")
    i.add_argument("--out", required=True, help="index folder to write (index.json + index.safetensors)")
    i.add_argument("--reduce", action="store_true",
                   help="drop stop-word cells, merge near duplicates (cos>=0.98), PQ 48x16")
    i.add_argument("--row-tag", action="store_true", help="embed cells as [ROW: id] [COL: h] [VAL: v] (ablation)")
    i.add_argument("--encoder", default=None, help=encoder_help())
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(func=run_index)

    s = sub.add_parser("search", help="search an index folder (or build one in memory from documents)")
    s.add_argument("path", help="index folder from `toporag hybrid index`, or a folder/file of documents")
    s.add_argument("-q", "--question", required=True)
    add_config_args(s, search_options(), show_all=True)
    s.add_argument("--reranker", default=None, help="local CrossEncoder folder (optional)")
    s.add_argument("--answer", action="store_true", help="also answer with the frozen LLM")
    s.add_argument("--llm", default=None, help="LLM folder (default: packaged SmolLM2)")
    s.add_argument("--encoder", default=None, help=encoder_help("the index's; must match it"))
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=run_search)

    f = sub.add_parser("fit", help="fit the fusion weights and question router on a seeded half of a TAT-QA file")
    f.add_argument("data", help="TAT-QA JSON file (the one the index was built from)")
    f.add_argument("--index", required=True, help="index folder from `toporag hybrid index`")
    f.add_argument("--seed", type=int, default=0, help="seed of the split by context (default 0)")
    f.add_argument("--fit-fraction", type=float, default=0.5, help="share of contexts fitted on (default 0.5)")
    f.add_argument("--encoder", default=None, help=encoder_help("the index's MiniLM, in numpy"))
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=run_fit)

    e = sub.add_parser("eval", help="nDCG/Recall vs baselines: a generated folder, or TAT-QA against an index")
    e.add_argument("data", help="folder written by `toporag hybrid generate`, or a TAT-QA JSON file (with --index)")
    e.add_argument("--index", default=None, help="index folder (required for a TAT-QA file)")
    e.add_argument("--no-ablations", action="store_true", help="TAT-QA: skip the ablation rows")
    e.add_argument("--latency-questions", type=int, default=150,
                   help="TAT-QA: questions timed one by one with query encoding for p50/p95 (default 150)")
    add_config_args(e, search_options(("k",)), show_all=True)
    e.add_argument("--split", default="auto", choices=("auto", "all", "val", "test", "fit", "report"),
                   help="generated data: all/val/test; TAT-QA: report (the half not fitted on; auto when the "
                        "index was fitted), fit, or all")
    e.add_argument("--encoder", default=None, help=encoder_help())
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(func=run_eval)

    g = sub.add_parser("generate", help="write the fact-store corpus (documents, questions, router labels)")
    g.add_argument("--out", required=True, help="output folder")
    add_config_args(g, generator_options(), show_all=True)
    g.set_defaults(func=run_generate)


def _router(args):
    from ..hybrid import RouterConfig

    return RouterConfig(**_values(args, router_options()))


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
    from ..hybrid import HybridIndex, ReductionConfig
    from ..hybrid.corpus import read_hybrid_corpus

    corpus = read_hybrid_corpus(args.path, args.format)
    for e in corpus.skipped:
        print(f"skipped: {e}", file=sys.stderr)
    if not corpus.units:
        raise ValueError(f"{args.path}: no units to index")
    red = ReductionConfig.full() if args.reduce else None
    idx = HybridIndex.build_units(corpus.units, get_encoder(args.encoder), row_tag=args.row_tag, reduction=red,
                                  show_progress=True)
    idx.meta["warnings"] = corpus.warnings
    idx.meta["source"] = {"path": str(args.path), "format": corpus.format, "questions": len(corpus.questions)}
    idx.save(args.out)
    d = idx.describe()
    emit({**d, "out": args.out, "format": corpus.format, "skipped": corpus.skipped, "warnings": corpus.warnings},
         args.json,
         f"indexed {corpus.format} {args.path} into {args.out}: {d['narrative']} narrative units, {d['tables']} "
         f"tables, {d['cali']['cells_kept']} cells, {d['lexical_terms']} BM25 terms "
         f"({idx.meta['build_s']:.0f} s)")
    return 0


def _open_index(path: str, encoder_spec: str | None):
    from pathlib import Path

    from ..embed import get_encoder
    from ..hybrid import HybridIndex, load_folder

    if (Path(path) / "index.json").is_file():
        from ..embed.minilm_numpy import NumpyMiniLM

        idx = HybridIndex.load(path)
        if encoder_spec is None and idx.meta.get("encoder") == NumpyMiniLM.name:
            return idx  # the index's MiniLM in numpy, attached on the first question (no torch import)
        enc = get_encoder(encoder_spec)
        idx.encoder = enc
        if idx.meta.get("encoder") != enc.name:
            raise ValueError(f"{path}: index was built with encoder {idx.meta.get('encoder')!r}, "
                             f"not {enc.name!r} (pass --encoder)")
        return idx
    enc = get_encoder(encoder_spec)
    docs, errors = load_folder(path)
    for e in errors:
        print(f"skipped: {e}", file=sys.stderr)
    if not docs:
        raise ValueError(f"{path}: no readable documents")
    return HybridIndex.build(docs, enc)


def run_search(args: argparse.Namespace) -> int:
    from ..hybrid import SearchConfig

    idx = _open_index(args.path, args.encoder)
    cfg = SearchConfig(**_values(args, search_options()))
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
    from pathlib import Path

    if Path(args.data).is_file():
        return run_eval_tatqa(args)
    if args.split in ("auto", "fit", "report"):
        args.split = "all" if args.split == "auto" else args.split
    if args.split not in ("all", "val", "test"):
        raise ValueError(f"--split {args.split}: a generated corpus has the splits all, val and test")
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


def _select(questions: list[dict], idx, split: str, path: str) -> tuple[list[dict], str]:
    fit = (idx.fusion.get("fit") or {}) if idx.fusion else {}
    fitted = set(fit.get("contexts") or [])
    if split == "auto":
        split = "report" if fitted else "all"
    if split in ("fit", "report") and not fitted:
        raise ValueError(f"--split {split}: the index has no fitted split (run `toporag hybrid fit {path} --index "
                         "DIR` first, or use --split all)")
    sel = [q for q in questions if split == "all" or (q["context"] in fitted) == (split == "fit")]
    if not sel:
        raise ValueError(f"{path}: no questions in split {split!r}")
    return sel, split


def run_eval_tatqa(args: argparse.Namespace) -> int:
    import os
    import time

    from ..hybrid.corpus import tatqa_questions
    import numpy as np

    from ..hybrid.labelled import evaluation_report, latency, run_questions, warm_encoder_for
    from ..hybrid.search import HybridIndex, SearchConfig

    if args.index is None:
        raise ValueError(f"{args.data}: a TAT-QA file is evaluated against an index: add --index DIR (build it with "
                         f"`toporag hybrid index {args.data} --out DIR`)")
    questions = tatqa_questions(args.data)
    t0, c0 = time.perf_counter(), time.process_time()
    idx = _open_index(args.index, args.encoder)
    if not isinstance(idx, HybridIndex) or idx.lexical is None:
        raise ValueError(f"{args.index}: an index written by `toporag hybrid index` (version 2) is needed")
    sel, split = _select(questions, idx, args.split, args.data)
    idx.search(sel[0]["question"], SearchConfig(k=args.k))
    first_ms, first_cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    lat = latency(idx, sel[1:1 + args.latency_questions], SearchConfig(k=args.k))

    def progress(done, total):
        print(f"searched {done:,}/{total:,} questions", file=sys.stderr, flush=True)

    runs = run_questions(idx, sel, SearchConfig(k=args.k), progress=progress, warm_encoder=warm_encoder_for(idx))
    rep = evaluation_report(idx, sel, runs, idx.fusion_weights(SearchConfig()), not args.no_ablations)
    rep["p50_ms"], rep["p95_ms"] = float(np.median(lat["wall"])), float(np.quantile(lat["wall"], 0.95))
    rep["p50_cpu_ms"], rep["first_query_cpu_ms"] = float(np.median(lat["cpu"])), first_cpu_ms
    rep["latency_questions"] = int(lat["wall"].size)
    rep["load_average"] = os.getloadavg()[0]
    rep["p50_ms_without_encoding"] = float(np.median(runs["ms"]))
    fit = (idx.fusion or {}).get("fit") or {}
    out = {"questions": rep.pop("questions"), "split": split, "ndcg10": rep.pop("ndcg10"),
           "recall10": rep.pop("recall10"), "bm25_ndcg10": rep.pop("bm25_ndcg10"),
           "dense_ndcg10": rep.pop("dense_ndcg10"), "by_source": rep.pop("by_source"), "p50_ms": rep.pop("p50_ms"),
           "first_query_ms": first_ms, **rep, "units": len(idx.units),
           "fitted_on": {k: v for k, v in fit.items() if k != "contexts"} or None}
    lines = [f"{out['questions']} questions ({split}), {out['units']} units; p50 {out['p50_ms']:.0f} ms, first query "
             f"{first_ms:.0f} ms", "", "| method | nDCG@10 | R@10 | " + " | ".join(out["by_source"]) + " |",
             "|---|---|---|" + "---|" * len(out["by_source"])]
    for name, m in out["methods"].items():
        lines.append(f"| {name} | {m['ndcg10']:.3f} | {m['recall10']:.3f} | "
                     + " | ".join(f"{m['by_source'][s]['ndcg10']:.3f}" for s in out["by_source"]) + " |")
    emit(out, args.json, "\n".join(lines))
    return 0


def run_fit(args: argparse.Namespace) -> int:
    from ..hybrid.corpus import tatqa_questions
    from ..hybrid.labelled import fit_fusion, run_questions, warm_encoder_for
    from ..hybrid.search import SearchConfig
    from ..hybrid.tatqa import split_by_context

    if not 0.0 < args.fit_fraction < 1.0:
        raise ValueError(f"--fit-fraction must be in (0, 1), got {args.fit_fraction}")
    questions = tatqa_questions(args.data)
    idx = _open_index(args.index, args.encoder)
    contexts = list(dict.fromkeys(q["context"] for q in questions))
    fit_ctx, _ = split_by_context(contexts, args.seed, args.fit_fraction)
    sel = [q for q in questions if q["context"] in fit_ctx]

    def progress(done, total):
        print(f"searched {done:,}/{total:,} questions", file=sys.stderr, flush=True)

    runs = run_questions(idx, sel, SearchConfig(), progress=progress, warm_encoder=warm_encoder_for(idx))
    weights, router, grid = fit_fusion(idx, sel, runs, args.seed)
    fit = {"file": _file_name(args.data), "seed": args.seed, "fit_fraction": args.fit_fraction,
           "fit_contexts": len(fit_ctx), "fit_questions": len(sel), "objective": "worst per-source nDCG@10 margin "
           "over max(BM25, dense)", "best": {k: v for k, v in grid[0].items() if k != "weights"},
           "contexts": sorted(fit_ctx)}
    idx.save_fusion(args.index, weights, router, fit)
    emit({"weights": weights.to_dict(), **{k: v for k, v in fit.items() if k != "contexts"},
          "grid_top": grid[:5]}, args.json,
         f"fitted on {len(sel)} questions of {len(fit_ctx)} contexts (seed {args.seed}): {weights.to_dict()}; "
         f"fit-half nDCG@10 {grid[0]['ndcg10']:.3f}, worst per-source margin {grid[0]['worst_margin']:+.3f}")
    return 0


def _file_name(p: str) -> str:
    from pathlib import Path

    return Path(p).name


def run_generate(args: argparse.Namespace) -> int:
    from ..datagen.hybrid import GeneratorConfig, generate
    from ..hybrid import write_dataset

    st = write_dataset(generate(GeneratorConfig(**_values(args, generator_options()))), args.out)
    print(f"wrote {st['documents']} documents to {args.out} ({', '.join(f'{v} {k}' for k, v in st['kinds'].items())}); "
          f"{st['questions']} questions ({', '.join(f'{v} {k}' for k, v in sorted(st['types'].items()))}); "
          f"{st['table_lines']} table lines labelled")
    return 0
