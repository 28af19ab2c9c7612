"""``toporag docgraph build|retrieve|eval|generate``: document-graph retrieval with FGW constraints.

* ``generate --n 200 --seed 0 --out DIR``: HotpotQA-distractor-format questions + fact table;
* ``build SRC --out GRAPH``: a graph from a folder of text files, one text file, or one record
  of the generator's output (``--record``);
* ``retrieve SRC -q QUESTION``: the traversal (path, fusions, grafts, every FGW value against
  epsilon, timings with ``--json``); SRC as for ``build`` or a built graph folder;
* ``cluster DATA --n 40 --k 2 --json``: questions clustered by FGW between the regions of the graph
  their traversals deformed (labels, distances, adjusted Rand index against the question type);
* ``eval DATA``: recall of both gold articles, answer in context (and EM/F1 with ``--llm``)
  against dense top-k sentences at the same token budget.

A whole corpus (:mod:`toporag_core.docgraph.index`, :mod:`toporag_core.docgraph.corpus_search`):

* ``index CORPUS --out DIR``: a JSONL / folder / BEIR / HotpotQA corpus (``--format``, default
  auto) -> a stored index; resumable (progress on stderr), incremental into an existing DIR, atomic;
* ``retrieve --index DIR -q QUESTION``: the ranking (documents the graph's context shows first);
* ``eval HOTPOTQA.json --index DIR``: the questions against the indexed corpus with BM25, dense and
  the title rule at the same number of articles; rows streamed to ``--out``, progress on stderr;
* ``convert HOTPOTQA.json --out corpus.jsonl``: a HotpotQA / 2Wiki file's paragraphs as a JSONL corpus;
* ``generate-corpus --articles N --questions Q --out DIR``: a generated corpus with HotpotQA-format
  multi-hop questions asked against it (``corpus.jsonl``, ``questions.json``).

The options that set a config are made from its fields (type, default, help and choices in the
field's metadata; :func:`~toporag_core.commands._common.config_options`): the traversal's from
:class:`~toporag_core.docgraph.TraversalConfig` and :class:`~toporag_core.docgraph.FGWConfig`,
``--theta`` from :class:`~toporag_core.docgraph.BuildConfig`, the ``--index`` search's from
:class:`~toporag_core.docgraph.corpus_search.SearchConfig`, ``index``'s from
:class:`~toporag_core.docgraph.index.IndexConfig`; the rest (files, ``--json``, ``--encoder``, sizes
of a run) are the command's own.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._common import emit, encoder_help


# ----------------------------------------------------------------------------- options from the configs
TRAVERSAL_FIELDS = ("epsilon", "max_depth", "keep_ratio")
TRAVERSAL_MORE_FIELDS = ("graft_semantic", "mention_bonus", "graft_mentions", "query_update", "search",
                         "fuse_embedding")
FGW_FIELDS = ("feature_weight", "structure", "node_mass")
SEARCH_FIELDS = ("max_articles", "bm25_candidates", "dense_candidates", "seed", "k")
INDEX_FIELDS = ("embed", "sentence_nodes", "neighbours", "chunk_size")


def traversal_options() -> list:
    """The traversal's options (:class:`~toporag_core.docgraph.TraversalConfig`, its
    :class:`~toporag_core.docgraph.FGWConfig`) in ``--help`` order; ``--fuse-embedding``'s parsed
    default is ``None`` (re-encode, or the mean with ``--index``)."""
    from dataclasses import replace

    from ..docgraph import FGWConfig, TraversalConfig
    from ._common import config_options

    more = config_options(TraversalConfig, TRAVERSAL_MORE_FIELDS)
    more = [replace(o, help=o.help + "; mean with --index") if o.dest == "fuse_embedding" else o for o in more]
    return [*config_options(TraversalConfig, TRAVERSAL_FIELDS), *config_options(FGWConfig, FGW_FIELDS), *more]


def theta_options() -> list:
    """``--theta``: :attr:`~toporag_core.docgraph.BuildConfig.sim_threshold` (the corpus search's
    neighbourhood takes the same value)."""
    from ..docgraph import BuildConfig
    from ._common import config_options

    return config_options(BuildConfig, ("sim_threshold",))


def search_options() -> list:
    """The corpus search's options (:class:`~toporag_core.docgraph.corpus_search.SearchConfig`), read
    with ``--index``."""
    from dataclasses import replace

    from ..docgraph.corpus_search import SearchConfig
    from ._common import config_options

    return [replace(o, help="index: " + o.help) for o in config_options(SearchConfig, SEARCH_FIELDS)]


def index_options() -> list:
    """``docgraph index``'s layout options (:class:`~toporag_core.docgraph.index.IndexConfig`)."""
    from ..docgraph.index import IndexConfig
    from ._common import config_options

    return config_options(IndexConfig, INDEX_FIELDS)


def _values(args: argparse.Namespace, options: list) -> dict:
    return {o.dest: getattr(args, o.dest) for o in options}


def _traversal_args(p: argparse.ArgumentParser) -> None:
    from ._common import add_config_args

    add_config_args(p, traversal_options(), show_all=True, defaults={"fuse_embedding": None})
    p.add_argument("--encoder", default=None, help=encoder_help())
    add_config_args(p, theta_options(), show_all=True)


def _search_args(p: argparse.ArgumentParser) -> None:
    from ._common import add_config_args

    add_config_args(p, search_options(), show_all=True)


def _source_args(p: argparse.ArgumentParser, optional: bool = False) -> None:
    p.add_argument("source", nargs="?" if optional else None,
                   help="folder of text files, a text file, generator output (folder or JSON), or a built graph folder")
    p.add_argument("--record", type=int, default=0, help="record of a generator / HotpotQA file (default 0)")


def register(subparsers) -> None:
    from ._common import add_config_args

    p = subparsers.add_parser("docgraph", help="document-graph retrieval with fused Gromov-Wasserstein constraints")
    sub = p.add_subparsers(dest="docgraph_command", required=True)
    g = sub.add_parser("generate", help="HotpotQA-distractor-format questions with a fact table")
    g.add_argument("--n", type=int, default=200, help="questions (default 200)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True, help="output folder")
    g.set_defaults(func=run_generate)
    b = sub.add_parser("build", help="build a document graph")
    _source_args(b)
    b.add_argument("--out", required=True, help="folder for graph.json + tensors.safetensors")
    b.add_argument("--encoder", default=None, help=encoder_help())
    add_config_args(b, theta_options(), show_all=True)
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=run_build)
    r = sub.add_parser("retrieve", help="traverse the graph for a question (or rank a corpus index's documents)")
    _source_args(r, optional=True)
    r.add_argument("--index", default=None, help="a corpus index folder (`docgraph index`): rank its documents")
    _search_args(r)
    r.add_argument("--question", "-q", default=None, help="the question (default: the record's question)")
    _traversal_args(r)
    r.add_argument("--evolve", action="store_true", help="update edge weights after the question (built graph: saved)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=run_retrieve)
    e = sub.add_parser("eval", help="evaluate against dense top-k sentences at equal token budget")
    e.add_argument("data", help="generator output folder or HotpotQA-distractor JSON")
    e.add_argument("--index", default=None, help="answer the questions against this corpus index instead of "
                                                 "each record's own paragraphs")
    _search_args(e)
    e.add_argument("--n", type=int, default=None, help="first N records only")
    _traversal_args(e)
    e.add_argument("--llm", action="store_true", help="also EM/F1 with the packaged LLM (slow on CPU)")
    e.add_argument("--out", default=None, help="write per-question rows as JSON lines")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=run_eval)
    _register_corpus(sub)
    c = sub.add_parser("cluster", help="cluster questions by FGW between the graphs their traversals deform")
    c.add_argument("data", help="generator output folder or HotpotQA-distractor JSON")
    c.add_argument("--n", type=int, default=40, help="first N records (default 40; Q^2 / 2 FGW calls)")
    c.add_argument("--k", type=int, default=2, help="clusters (default 2)")
    _traversal_args(c)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_cluster)


def _register_corpus(sub) -> None:
    """``index``, ``convert`` and ``generate-corpus``: the whole-corpus sub-commands."""
    from ._common import add_config_args

    ix = sub.add_parser("index", help="index a corpus (JSONL / folder / BEIR / HotpotQA file) into DIR")
    ix.add_argument("corpus", help="a JSONL of {id|title, text}, a folder of .txt/.md, a BEIR folder, or a "
                                   "HotpotQA/2Wiki JSON file")
    ix.add_argument("--out", required=True, help="index folder (an existing index is extended)")
    ix.add_argument("--format", default="auto", help="corpus format (auto, jsonl, folder, beir, hotpotqa)")
    ix.add_argument("--encoder", default=None, help=encoder_help())
    add_config_args(ix, index_options(), show_all=True)
    ix.add_argument("--prune", action="store_true", help="drop indexed documents that are not in CORPUS")
    ix.add_argument("--rebuild", action="store_true", help="ignore an existing index in --out")
    ix.add_argument("--json", action="store_true")
    ix.set_defaults(func=run_index)
    cv = sub.add_parser("convert", help="a HotpotQA / 2Wiki file's paragraphs -> a JSONL corpus")
    cv.add_argument("data", help="HotpotQA / 2WikiMultihopQA JSON (original or Hugging Face layout)")
    cv.add_argument("--out", required=True, help="corpus .jsonl to write")
    cv.set_defaults(func=run_convert)
    gc = sub.add_parser("generate-corpus", help="a generated corpus with multi-hop questions asked against it")
    gc.add_argument("--articles", type=int, default=1000, help="articles (two paragraphs each; default 1000)")
    gc.add_argument("--questions", type=int, default=100, help="questions (default 100)")
    gc.add_argument("--seed", type=int, default=0)
    gc.add_argument("--out", required=True, help="folder for corpus.jsonl and questions.json")
    gc.set_defaults(func=run_generate_corpus)


def _search_config(args):
    from ..docgraph.corpus_search import SearchConfig

    cfg = _config(args)
    cfg.mention_scope = "content"
    cfg.fuse_embedding = args.fuse_embedding or "mean"
    return SearchConfig(**_values(args, search_options()), theta=args.sim_threshold, traversal=cfg)


def _open_index(args):
    """``(index, searcher)``: the index and its encoder (the one it was built with unless ``--encoder``)."""
    from ..docgraph.corpus_search import CorpusSearcher
    from ..docgraph.index import DocGraphIndex
    from ..embed import get_encoder

    index = DocGraphIndex.load(args.index)
    spec = args.encoder or index.stats.get("encoder_spec") or index.encoder_name
    return index, CorpusSearcher(index, get_encoder(spec), _search_config(args))


def _config(args):
    from ..docgraph import FGWConfig, TraversalConfig

    values = _values(args, traversal_options())
    fgw = FGWConfig(**{name: values.pop(name) for name in FGW_FIELDS})
    values["fuse_embedding"] = values["fuse_embedding"] or "reencode"
    return TraversalConfig(**values, fgw=fgw)


def load_source(source: str, record: int, encoder, theta: float = 0.6):
    """``(DocGraph, record or None, skipped-file messages)`` from any accepted source."""
    from ..docgraph.build import BuildConfig, DocGraph, build_docgraph, build_from_folder, read_document
    from ..docgraph.records import DATA_FILE, load_records, record_articles

    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if path.is_dir() and (path / "graph.json").is_file():
        return DocGraph.load(path), None, []
    cfg = BuildConfig(sim_threshold=theta)
    if (path.is_dir() and (path / DATA_FILE).is_file()) or path.suffix.lower() == ".json":
        recs = load_records(path)
        if not 0 <= record < len(recs):
            raise ValueError(f"--record {record} is outside 0..{len(recs) - 1} of {path}")
        rec = recs[record]
        return build_docgraph(record_articles(rec, where=f"{path}, record {record}"), encoder, cfg,
                              name=str(rec.get("_id", record))), rec, []
    if path.is_dir():
        g, skipped = build_from_folder(path, encoder, cfg)
        return g, None, skipped
    return build_docgraph([read_document(path, cfg.max_paragraph_chars)], encoder, cfg, name=path.stem), None, []


def run_generate(args: argparse.Namespace) -> int:
    from ..datagen.docgraph import write_dataset

    if args.n < 1:
        raise ValueError("--n must be >= 1")
    st = write_dataset(args.out, n=args.n, seed=args.seed)
    print(f"wrote {st['questions']} questions ({st['bridge']} bridge, {st['comparison']} comparison) over "
          f"{st['entities']} entities to {args.out}; mean graph size {st['mean_nodes']:.1f} nodes")
    return 0


def run_build(args: argparse.Namespace) -> int:
    from ..embed import get_encoder

    g, _, skipped = load_source(args.source, args.record, get_encoder(args.encoder), args.sim_threshold)
    for msg in skipped:
        print(f"toporag: skipped {msg}", file=sys.stderr)
    g.save(args.out)
    counts = {lv: int((g.level == i).sum()) for i, lv in enumerate(("root", "document", "section", "paragraph",
                                                                     "sentence"))}
    out = {"out": args.out, "nodes": g.num_nodes, "edges": g.num_edges, "semantic_edges": int((g.edge_kind == 1).sum()),
           "levels": counts, "skipped": skipped}
    emit(out, args.json, f"{g.num_nodes} nodes ({counts}), {g.num_edges} edges "
                         f"({out['semantic_edges']} semantic) -> {args.out}")
    return 0


def run_index(args: argparse.Namespace) -> int:
    from ..corpus import read_corpus
    from ..docgraph.index import IndexConfig, build_index
    from ..embed import encoder_spec, get_encoder, stderr_progress

    cfg = IndexConfig(**_values(args, index_options()))
    corpus = read_corpus(args.corpus, args.format)
    for msg in corpus.skipped:
        print(f"toporag: skipped {msg}", file=sys.stderr)
    print(f"toporag: read {len(corpus):,} documents ({corpus.format}) from {args.corpus}", file=sys.stderr)
    spec = encoder_spec(args.encoder)
    _, report = build_index(corpus, get_encoder(spec, cached=False), args.out, cfg, on_progress=stderr_progress,
                            prune=args.prune, rebuild=args.rebuild, encoder_spec=spec,
                            log=lambda m: print(f"toporag: {m}", file=sys.stderr))
    sec = report["seconds"]
    emit(report, args.json, f"{report['documents']:,} documents ({report['added']:,} added, {report['replaced']:,} "
                            f"replaced, {report['kept']:,} kept, {report['removed']:,} removed), "
                            f"{report['nodes']:,} nodes, {report['texts_encoded']:,} texts encoded in "
                            f"{sec['embed']:.1f} s; total {sec['total']:.1f} s -> {args.out}")
    return 0


def run_convert(args: argparse.Namespace) -> int:
    import os

    from ..corpus import load_multihop, multihop_corpus

    corpus = multihop_corpus(load_multihop(args.data))
    out = Path(args.out)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "w") as f:
        f.writelines(json.dumps({"id": d.id, "title": d.title, "text": d.text}, ensure_ascii=False) + "\n"
                     for d in corpus.documents)
    os.replace(tmp, out)
    print(f"wrote {len(corpus):,} documents (paragraphs of {len(corpus.queries):,} questions) to {out}")
    return 0


def run_generate_corpus(args: argparse.Namespace) -> int:
    import os

    from ..datagen.docgraph_corpus import generate_corpus

    recs, docs = generate_corpus(args.articles, args.questions, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("corpus.jsonl", "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)),
                       ("questions.json", json.dumps(recs, ensure_ascii=False))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, out / name)
    print(f"wrote {len(docs):,} articles ({2 * len(docs):,} paragraphs) to {out / 'corpus.jsonl'} and "
          f"{len(recs)} questions to {out / 'questions.json'}")
    return 0


def run_retrieve_index(args: argparse.Namespace) -> int:
    if not args.question or not args.question.strip():
        raise ValueError("--question is required with --index (a non-empty question)")
    index, searcher = _open_index(args)
    res = searcher.search(args.question)
    out = res.to_dict(index)
    lines = [f"{r['rank']:>3}. {r['title']}{'  [context]' if r['in_context'] else ''}" for r in out["ranking"]]
    lines += [f"({res.articles} articles in the context; neighbourhood {len(res.neighbourhood)}; "
              f"{1000 * res.timings['total']:.0f} ms)", "", res.context]
    emit(out, args.json, "\n".join(lines))
    return 0


def run_eval_index(args: argparse.Namespace) -> int:
    import time

    from ..corpus import load_multihop
    from ..docgraph.corpus_eval import iter_rows, summarize

    recs = load_multihop(args.data)[: args.n]
    t0 = time.perf_counter()
    index, searcher = _open_index(args)
    print(f"toporag: index {args.index}: {index.num_docs:,} documents, {index.num_nodes:,} nodes "
          f"(loaded in {time.perf_counter() - t0:.1f} s); {len(recs)} questions", file=sys.stderr)
    rows, stopped = [], False
    sink = open(args.out, "w") if args.out else None
    try:
        for row in iter_rows(recs, searcher):
            rows.append(row)
            if sink:
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
            n = len(rows)
            if n == len(recs) or n % 10 == 0 or n < 4:
                both = sum(r["recall_both"] for r in rows) / n
                bm = sum(r["bm25_recall_both"] for r in rows) / n
                print(f"toporag: eval {n}/{len(recs)}: recall_both {both:.3f} (BM25 {bm:.3f}), "
                      f"last {row['ms']:.0f} ms", file=sys.stderr)
    except KeyboardInterrupt:
        stopped = True
        print(f"toporag: stopped after {len(rows)} questions; summary of those", file=sys.stderr)
    finally:
        if sink:
            sink.close()
    summary = summarize(rows, {"index_documents": index.num_docs, "encoder": index.encoder_name,
                               "stopped_early": stopped})
    emit(summary, args.json, "\n".join(f"{k}: {v}" for k, v in summary.items()))
    return 130 if stopped else 0


def run_retrieve(args: argparse.Namespace) -> int:
    from ..docgraph import Traverser
    from ..docgraph.evolve import evolve
    from ..embed import get_encoder

    if args.index:
        return run_retrieve_index(args)
    if not args.source:
        raise ValueError("give a SOURCE (documents, generator output or a built graph) or --index DIR")
    cfg = _config(args)
    enc = get_encoder(args.encoder)
    g, rec, skipped = load_source(args.source, args.record, enc, args.sim_threshold)
    for msg in skipped:
        print(f"toporag: skipped {msg}", file=sys.stderr)
    question = args.question or (rec or {}).get("question")
    if not question:
        raise ValueError("--question is required (the source has no record question)")
    tr = Traverser(g, enc, cfg)
    res = tr.run(question)
    out = res.to_dict(g)
    if rec is not None:
        out["gold_answer"] = rec.get("answer")
    if args.evolve:
        ev = evolve(g, res, tr.question_vector(question))
        out["evolution"] = {"edges": ev["edges"].tolist(), "actions": ev["actions"].tolist(),
                            "before": ev["before"].tolist(), "after": ev["after"].tolist()}
        if (Path(args.source) / "graph.json").is_file():
            g.save(args.source)
    human = [f"path: {' -> '.join('+'.join(g.text[i][:30] for i in p) for p in res.path[1:])}",
             (f"fusions: {len(res.fusions())}, grafts: {len(res.grafts())}, FGW calls: {res.fgw_calls} "
              f"(values {[round(e.value, 4) for e in res.evaluations]} vs epsilon {cfg.epsilon})"),
             f"time: {1000 * res.timings['total']:.1f} ms", "", res.context]
    emit(out, args.json, "\n".join(human))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from ..docgraph.evaluate import LLMAnswerer, evaluate_records, llm_scores, summarize
    from ..docgraph.records import load_records
    from ..embed import get_encoder

    if args.index:
        return run_eval_index(args)
    cfg = _config(args)
    recs = load_records(args.data)[: args.n]
    answerer = LLMAnswerer() if args.llm else None
    rows = evaluate_records(recs, get_encoder(args.encoder), cfg,
                            tokenizer=answerer.tokenizer if answerer else None)
    summary = summarize(rows)
    if answerer is not None:
        summary.update({k: v for k, v in llm_scores(rows, recs, answerer).items() if not k.endswith("examples")})
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(row.__dict__, ensure_ascii=False) + "\n" for row in rows)
    emit(summary, args.json, "\n".join(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}"
                                       for k, v in summary.items()))
    return 0


def run_cluster(args: argparse.Namespace) -> int:
    from ..docgraph.build import BuildConfig
    from ..docgraph.cluster import cluster_records
    from ..docgraph.records import load_records
    from ..embed import get_encoder

    if args.n < 2:
        raise ValueError("--n must be >= 2 (clustering needs two questions)")
    if args.k < 1:
        raise ValueError("--k must be >= 1")
    cfg = _config(args)
    recs = load_records(args.data)[: args.n]
    out = cluster_records(recs, get_encoder(args.encoder), cfg, BuildConfig(sim_threshold=args.sim_threshold), args.k)
    sizes = {int(lab): out["labels"].count(lab) for lab in sorted(set(out["labels"]))}
    ari = "n/a (no question types)" if out["ari_vs_type"] is None else f"{out['ari_vs_type']:.3f}"
    emit(out, args.json, f"{len(recs)} questions, {args.k} clusters, sizes {sizes}; adjusted Rand index against "
                         f"question type: {ari} ({out['seconds']:.1f} s)")
    return 0
