"""ExplaGraphs' negation cue: how much of a model's accuracy a one-line rule already explains.

The rule reads only the relation labels of the explanation graph::

    cue(graph) = "counter" if some relation says "not ..." or "antonym of", else "support"

It is scored on the test split twice: on the whole gold graph, and on the relations of the
subcomplex TopoRAG retrieves (what the LLM reads in its context). Then, for each predictions
file given (``toporag eval --out`` JSONL on the test split), it prints the model's accuracy,
how often its answer equals the cue, its accuracy on the examples where the cue is wrong (a
model that only learned the cue is right on none of them; one that reasons gets most), and the
exact McNemar test against the cue on the retrieved context, the reference of this run. The
majority label of the training split is the floor.

    .venv/bin/python benchmarks/bench_expla_cue.py --preds preds_a.jsonl preds_b.jsonl

Seconds (the test split's retrieval is cached after the first prepare).
"""
from __future__ import annotations

import argparse
import re
from collections import Counter

from _common import require_shared
from toporag_core.metrics import mcnemar_exact
from toporag_core.predictions import read_records

NEGATION = re.compile(r"\bnot\b|\bantonym", re.IGNORECASE)


def cue(relations: list[str]) -> str:
    """``"counter"`` when a relation label negates (``not desires``, ``antonym of``), else ``"support"``."""
    return "counter" if any(NEGATION.search(r) for r in relations) else "support"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preds", nargs="*", default=[], help="toporag eval JSONL files on the ExplaGraphs test split")
    args = ap.parse_args()
    require_shared("expla_graphs_train_dev.tsv")
    from toporag_core.tasks import load_raw
    from toporag_core.tasks.prep import prepare_dataset

    raw = load_raw("expla_graphs")
    test = prepare_dataset("expla_graphs", splits=("test",), show_progress=False)["test"]
    gold = {e.id: e.label for e in test}
    whole = {r.id: cue(r.graph.edge_text) for r in raw["test"]}
    retrieved = {e.id: cue([str(edge[1]) for edge in e.cells.get("edges", [])]) for e in test}
    majority = Counter(r.label for r in raw["train"]).most_common(1)[0][0]
    ids = [e.id for e in test]
    ref = [retrieved[i] == gold[i] for i in ids]
    ref_acc = sum(ref) / len(ids)

    print(f"\nExplaGraphs test ({len(ids)} examples); reference: the cue on the retrieved subcomplex ({ref_acc:.3f})")
    print("\n| rule | test accuracy | vs cue on retrieved |")
    print("|---|---|---|")
    for name, pred in ((f"always {majority!r} (training majority)", {i: majority for i in ids}),
                       ("cue on the whole gold graph", whole), ("cue on the retrieved subcomplex (TopoRAG)", retrieved)):
        acc = sum(pred[i] == gold[i] for i in ids) / len(ids)
        print(f"| {name} | {acc:.3f} | {acc / ref_acc:.3f}x |")
    lost = sum(whole[i] == "counter" and retrieved[i] == "support" for i in ids)
    print(f"\nretrieval drops every negating relation of the gold graph on {lost} examples")
    if not args.preds:
        return
    cue_wrong = [i for i, ok in zip(ids, ref) if not ok]
    print("\n| predictions | accuracy | vs cue | answer = cue | accuracy where the cue is wrong "
          f"({len(cue_wrong)}) | only model / only cue right | McNemar p |")
    print("|---|---|---|---|---|---|---|")
    for path in args.preds:
        try:
            recs = {str(r["id"]): r for r in read_records(path, ("id", "correct"))}
        except ValueError as e:  # names the file, the line and the field
            print(f"| {path} | skipped: {e} | | | | | |")
            continue
        missing = [i for i in ids if i not in recs]
        if missing:
            print(f"| {path} | skipped: {len(missing)} test ids missing (e.g. {missing[0]}) | | | | | |")
            continue
        right = [bool(recs[i]["correct"]) for i in ids]
        acc = sum(right) / len(ids)
        agree = sum(recs[i]["answer"] == retrieved[i] for i in ids) / len(ids)
        on_wrong = sum(bool(recs[i]["correct"]) for i in cue_wrong) / max(len(cue_wrong), 1)
        b, c, p = mcnemar_exact(right, ref)
        print(f"| {path} | {acc:.3f} | {acc / ref_acc:.3f}x | {agree:.3f} | {on_wrong:.3f} | {b} / {c} | {p:.2g} |")


if __name__ == "__main__":
    main()
