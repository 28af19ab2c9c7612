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
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._common import emit


def _traversal_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epsilon", type=float, default=0.05, help="FGW budget (default 0.05; 0 = plain greedy path)")
    p.add_argument("--max-depth", type=int, default=3, help="moves from the root (default 3)")
    p.add_argument("--keep-ratio", type=float, default=0.8, help="tau of the keep rule (default 0.8)")
    p.add_argument("--feature-weight", type=float, default=0.5, help="alpha: weight of the feature term (default 0.5)")
    p.add_argument("--structure", default="paths", choices=("paths", "embedding"), help="structure matrix")
    p.add_argument("--node-mass", default="fused", choices=("fused", "uniform"), help="node masses of FGW")
    p.add_argument("--no-semantic-graft", action="store_true", help="graft tree grandchildren only (literal)")
    p.add_argument("--mention-bonus", type=float, default=0.5,
                   help="score bonus of a child whose document title the question names (default 0.5; 0 = literal)")
    p.add_argument("--no-mention-graft", action="store_true",
                   help="do not graft sections of documents named on the path (literal reading)")
    p.add_argument("--query-update", type=float, default=0.0,
                   help="after each move q <- normalise(q + w * x_next) (default 0: the question alone)")
    p.add_argument("--search", default="binary", choices=("binary", "linear"))
    p.add_argument("--encoder", default=None, help="'default' (all-MiniLM-L6-v2), 'hashing', or a model folder")
    p.add_argument("--theta", type=float, default=0.6, help="semantic edge threshold (default 0.6)")


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="folder of text files, a text file, generator output (folder or JSON), "
                                  "or a built graph folder")
    p.add_argument("--record", type=int, default=0, help="record of a generator / HotpotQA file (default 0)")


def register(subparsers) -> None:
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
    b.add_argument("--encoder", default=None)
    b.add_argument("--theta", type=float, default=0.6)
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=run_build)
    r = sub.add_parser("retrieve", help="traverse the graph for a question")
    _source_args(r)
    r.add_argument("--question", "-q", default=None, help="the question (default: the record's question)")
    _traversal_args(r)
    r.add_argument("--evolve", action="store_true", help="update edge weights after the question (built graph: saved)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=run_retrieve)
    e = sub.add_parser("eval", help="evaluate against dense top-k sentences at equal token budget")
    e.add_argument("data", help="generator output folder or HotpotQA-distractor JSON")
    e.add_argument("--n", type=int, default=None, help="first N records only")
    _traversal_args(e)
    e.add_argument("--llm", action="store_true", help="also EM/F1 with the packaged LLM (slow on CPU)")
    e.add_argument("--out", default=None, help="write per-question rows as JSON lines")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=run_eval)
    c = sub.add_parser("cluster", help="cluster questions by FGW between the graphs their traversals deform")
    c.add_argument("data", help="generator output folder or HotpotQA-distractor JSON")
    c.add_argument("--n", type=int, default=40, help="first N records (default 40; Q^2 / 2 FGW calls)")
    c.add_argument("--k", type=int, default=2, help="clusters (default 2)")
    _traversal_args(c)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run_cluster)


def _config(args):
    from ..docgraph import FGWConfig, TraversalConfig

    return TraversalConfig(max_depth=args.max_depth, keep_ratio=args.keep_ratio, epsilon=args.epsilon,
                           graft_semantic=not args.no_semantic_graft, search=args.search,
                           mention_bonus=args.mention_bonus, graft_mentions=not args.no_mention_graft,
                           query_update=args.query_update,
                           fgw=FGWConfig(feature_weight=args.feature_weight, structure=args.structure,
                                         node_mass=args.node_mass))


def load_source(source: str, record: int, encoder, theta: float = 0.6):
    """``(DocGraph, record or None, skipped-file messages)`` from any accepted source."""
    from ..docgraph.build import BuildConfig, DocGraph, build_docgraph, build_from_folder, read_document
    from ..docgraph.generate import DATA_FILE, load_records, record_articles

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
    from ..docgraph.generate import write_dataset

    if args.n < 1:
        raise ValueError("--n must be >= 1")
    st = write_dataset(args.out, n=args.n, seed=args.seed)
    print(f"wrote {st['questions']} questions ({st['bridge']} bridge, {st['comparison']} comparison) over "
          f"{st['entities']} entities to {args.out}; mean graph size {st['mean_nodes']:.1f} nodes")
    return 0


def run_build(args: argparse.Namespace) -> int:
    from ..embed import get_encoder

    g, _, skipped = load_source(args.source, args.record, get_encoder(args.encoder), args.theta)
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


def run_retrieve(args: argparse.Namespace) -> int:
    from ..docgraph import Traverser
    from ..docgraph.evolve import evolve
    from ..embed import get_encoder

    cfg = _config(args)
    enc = get_encoder(args.encoder)
    g, rec, skipped = load_source(args.source, args.record, enc, args.theta)
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
    from ..docgraph.generate import load_records
    from ..embed import get_encoder

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
    from ..docgraph.generate import load_records
    from ..embed import get_encoder

    if args.n < 2:
        raise ValueError("--n must be >= 2 (clustering needs two questions)")
    if args.k < 1:
        raise ValueError("--k must be >= 1")
    cfg = _config(args)
    recs = load_records(args.data)[: args.n]
    out = cluster_records(recs, get_encoder(args.encoder), cfg, BuildConfig(sim_threshold=args.theta), args.k)
    sizes = {int(lab): out["labels"].count(lab) for lab in sorted(set(out["labels"]))}
    ari = "n/a (no question types)" if out["ari_vs_type"] is None else f"{out['ari_vs_type']:.3f}"
    emit(out, args.json, f"{len(recs)} questions, {args.k} clusters, sizes {sizes}; adjusted Rand index against "
                         f"question type: {ari} ({out['seconds']:.1f} s)")
    return 0
