"""``toporag compare``: paired comparison of evaluation runs on the same examples (exact McNemar).

    toporag compare topo=preds_topo.jsonl text=preds_text.jsonl --reference topo [--json]
    toporag compare topo=a.jsonl no2cells=b.jsonl --by qtype      # also per question type
    toporag compare topo=a.jsonl no2cells=b.jsonl --by template   # per SceneGraphs generator template
    toporag compare topo=a.jsonl no2cells=b.jsonl --by coverage   # answer objects retrieved / missed
    toporag compare topo=s14.jsonl,s15.jsonl no2cells=n14.jsonl,n15.jsonl  # two samples pooled

Each argument is ``NAME=FILE`` (a ``toporag eval --out`` JSONL); rows are computed on the ids every
file holds; a majority-answer row is added when the files carry ``gold``. ``NAME=FILE1,FILE2,...``
pools independent samples (say two fresh generated sets, whose ids repeat): sample k of every run
is paired with sample k of the others, and one McNemar test reads the discordant pairs of all samples.
"""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("compare", help="paired accuracy table of several `toporag eval --out` files (McNemar)")
    p.add_argument("runs", nargs="+", help="NAME=FILE pairs; NAME=FILE1,FILE2 pools several samples")
    p.add_argument("--reference", default=None, help="the run the others are tested against (default: the first)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--by", default=None, choices=("qtype", "template", "coverage"),
                   help="also test within each question type (qtype), SceneGraphs generator template, or "
                        "retrieval coverage of the reference (coverage: answer objects retrieved or missed)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..evaluation.evaluate import paired_markdown, paired_table, prediction_group

    runs = {}
    for item in args.runs:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"compare: expected NAME=FILE, got {item!r}")
        if name in runs:
            raise ValueError(f"compare: run name {name!r} given twice")
        paths = path.split(",")
        if not all(paths):
            raise ValueError(f"compare: an empty file name in {item!r}")
        runs[name] = paths if len(paths) > 1 else path
    rows = paired_table(runs, args.reference or next(iter(runs)),
                        group=prediction_group(args.by) if args.by else None)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("\n".join(paired_markdown(rows)))
    return 0
