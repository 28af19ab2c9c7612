"""Does the Ask page's cell attribution point at the answer? Top-attributed cell against a random retrieved cell.

    OMP_NUM_THREADS=1 python benchmarks/bench_attribution.py --threads 1 \
        --n expla_graphs=100,scene_graphs=30,general=30 --out docs/results/attribution.md

For each shipped checkpoint, the first ``--n`` questions of its test split (SceneGraphs: the same number of each
question type; the general checkpoint: its generated test split, and with ``--webqsp`` the 12 WebQSP questions of
``../shared/data/webqsp_sample.json`` as a row of their own) are answered as the Ask page answers them
(:func:`toporag_core.studio.ask.ask`, the checkpoint's retrieval setting), then every retrieved cell (the 40
highest prizes) is left out, as the page's "Explain" does (:func:`toporag_core.studio.ask.explain_cells`):

* ``text+tokens``: the cell leaves its graph tokens and its context lines (what the page shows);
* ``tokens`` (``--methods text+tokens,tokens``): the cell leaves its graph tokens only, the text unchanged (the
  attribution the page showed before).

Cost: one LLM pass over the whole context per attributed cell; on one CPU thread about 9 s per ExplaGraphs
question and 30-80 s per SceneGraphs or general question (contexts of up to 768 tokens, up to 40 cells).

A question whose attributed cells all hit, or none does, needs no attribution (top = random) and is counted so.
The hit rule, the answer nodes, the exact random baseline and the two tests are
:mod:`toporag_core.studio.attribution`'s. ``top prize`` is the retrieval's own ranking (the highest-prize cell),
for scale. The last lines printed are the ``VERDICTS`` entries for :mod:`toporag_core.studio.attribution`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHECKPOINTS = ("expla_graphs", "general", "scene_graphs")
METHODS = {"text+tokens": True, "tokens": False}


def items_for(name: str, n: int, general_dir: Path, webqsp: bool) -> list[tuple[str, list[dict]]]:
    """``[(row name, questions)]``: each question ``{graph, question, query, gold (names), support (ids),
    cue}``."""
    from toporag_core.tasks import load_raw
    from toporag_core.tasks.scenes.dataset import stratified_subset

    if name == "expla_graphs":
        test = load_raw("expla_graphs")["test"][:n]
        return [("ExplaGraphs test", [{"graph": r.graph, "question": r.question, "query": r.query, "gold": [],
                                       "support": [], "cue": True} for r in test])]
    if name == "scene_graphs":
        test = stratified_subset(load_raw("scene_graphs")["test"], -(-n // 3))[:n]
        return [("SceneGraphs test", [{"graph": r.graph, "question": r.question, "query": r.query, "gold": [],
                                       "support": list(r.support), "cue": False} for r in test])]
    test = load_raw("general", general_dir)["test"][:n]
    rows = [("General test", [{"graph": r.graph, "question": r.question, "query": r.query,
                               "gold": list(r.label), "support": [], "cue": False} for r in test])]
    shared = ROOT.parent / "shared" / "data" / "webqsp_sample.json"
    if webqsp and shared.is_file():
        from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph

        rows.append(("WebQSP sample", [{"graph": webqsp_record_to_graph(rec), "question": rec["question"],
                                        "query": None, "gold": list(rec["answers"]), "support": [], "cue": False}
                                       for rec in read_webqsp(shared)]))
    return rows


def measure(pipe, item: dict, cap: int, methods: list[str]) -> dict:
    """One question: the answer, and per method the top-attributed cell's hit, the random rate, the top-prize hit."""
    from toporag_core.studio import ask
    from toporag_core.studio import attribution as at
    from toporag_core.studio.graph_effect import cell_rows

    t = time.perf_counter()
    ecx = pipe.prepare(item["graph"])
    a = ask.ask(pipe, ecx, item["question"], [pipe.default_setting()], query=item["query"])
    a = next(iter(a.values()))
    t_answer = time.perf_counter() - t
    targets = at.answer_nodes(ecx.complex, None if a.closed else a.answer, support=item["support"],
                              support_names=item["gold"], negation_cue=item["cue"] and a.answer == "counter")
    rec = {"question": item["question"], "answer": a.answer, "targets": len(targets), "answer_s": round(t_answer, 2)}
    rows = cell_rows(a.subcomplex, pipe.use_cells2, cap)
    every = at.cell_hits(a.subcomplex, [(d, c) for d, _, c, *_ in rows], targets)
    for method in methods:
        if every.size and (every.all() or not every.any()):  # every cell hits or none does: top = random, no LLM
            h = float(every.any())
            rec[method] = {"cells": len(rows), "top": h, "random": h, "prize": h, "top_cell": None, "s": 0.0}
            continue
        t = time.perf_counter()
        cells = ask.explain_cells(pipe, ecx, item["question"], a, cap=cap, text=METHODS[method])
        hits = at.cell_hits(a.subcomplex, [(c.dim, c.cell) for c in cells], targets)
        drops = np.array([c.drop for c in cells])
        rec[method] = {"cells": len(cells), "top": at.top_hit(drops, hits), "random": float(hits.mean()) if len(cells)
                       else float("nan"), "prize": at.top_hit(np.array([c.prize for c in cells]), hits),
                       "top_cell": cells[int(np.argmax(drops))].text if cells else None,
                       "s": round(time.perf_counter() - t, 2)}
    return rec


def table(rows: list[tuple[str, str, list[dict]]], methods: list[str]) -> list[str]:
    from toporag_core.studio.attribution import compare_to_random

    out = ["| checkpoint | questions | attribution | counted | top-attributed hits | random cell (exact) | "
           "top prize | exact p (top > random) | above / below random, sign p | beats random |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for ckpt, row, recs in rows:
        for method in methods:
            ok = [r for r in recs if r["targets"] and r[method]["cells"]]
            c = compare_to_random([r[method]["top"] for r in ok], [r[method]["random"] for r in ok])
            prize = float(np.mean([r[method]["prize"] for r in ok])) if ok else float("nan")
            out.append(f"| {ckpt} | {row} ({len(recs)}) | {method} | {c.n} | {c.top_rate:.3f} | {c.random_rate:.3f} | "
                       f"{prize:.3f} | {c.p_exact:.2g} | {c.above} / {c.below}, {c.p_sign:.2g} | "
                       f"{'yes' if c.beats_random else 'no'} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="expla_graphs=100,general=24,scene_graphs=24", help="questions per test split: N, or NAME=N,... per checkpoint")
    ap.add_argument("--methods", default="text+tokens", help=f"comma-separated, of {', '.join(METHODS)}")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--checkpoints", default=",".join(CHECKPOINTS))
    ap.add_argument("--general-dir", default=str(ROOT / "data" / "general-n360-s3"),
                    help="the general recipe's generated set (toporag data general --n 360 --seed 3 --out DIR)")
    ap.add_argument("--webqsp", action="store_true", help="also the 12 shared WebQSP questions (general)")
    ap.add_argument("--cap", type=int, default=40, help="cells attributed per answer (the page's cap)")
    ap.add_argument("--out", default=None, help="write the markdown report here")
    ap.add_argument("--json", default=None, help="write the per-question records here")
    ap.add_argument("--records", default=None,
                    help="append each question's record to this JSONL as it is measured (a long run keeps what it did)")
    ap.add_argument("--report-from", nargs="*", default=None,
                    help="no measuring: the report of these --records files (runs split over processes)")
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    if args.report_from is not None:
        return report(args, methods, [json.loads(x) for f in args.report_from for x in Path(f).read_text().splitlines()
                                      if x.strip()], argv)

    import torch

    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.answering.route import CHECKPOINT_ROOT

    torch.set_num_threads(args.threads)
    if not methods or any(m not in METHODS for m in methods):
        ap.error(f"--methods: comma-separated names of {', '.join(METHODS)}")
    per = dict(kv.split("=", 1) for kv in args.n.split(",")) if "=" in args.n else {}
    flat = []
    for name in args.checkpoints.split(","):
        folder = CHECKPOINT_ROOT / name
        pipe = TopoRAGPipeline.load(folder, device="cpu")
        n = int(per.get(name, 0) if per else args.n)
        for row, items in items_for(name, n, Path(args.general_dir), args.webqsp):
            recs = []
            for i, item in enumerate(items):
                rec = measure(pipe, item, args.cap, methods)
                rec.update(checkpoint=name, row=row)
                recs.append(rec)
                if args.records:
                    with open(args.records, "a") as f:
                        f.write(json.dumps(rec, default=str) + "\n")
                print(f"{name} {row} {i + 1}/{len(items)} answer {rec['answer']!r} targets {rec['targets']} "
                      + " ".join(f"{m}: top {rec[m]['top']:.2f} random {rec[m]['random']:.2f} ({rec[m]['s']} s)"
                                 for m in methods), flush=True)
            flat += recs
        del pipe
    return report(args, methods, flat, argv)


def report(args, methods: list[str], flat: list[dict], argv) -> int:
    """Print (and with ``--out`` / ``--json`` write) the table and the verdict lines of the records ``flat``."""
    from toporag_core.studio.attribution import compare_to_random, weights_sha
    from toporag_core.answering.route import CHECKPOINT_ROOT

    rows: list[tuple[str, str, list[dict]]] = []
    for rec in flat:
        if not rows or rows[-1][:2] != (rec["checkpoint"], rec["row"]):
            rows.append((rec["checkpoint"], rec["row"], []))
        rows[-1][2].append(rec)
    verdicts = []
    for name in dict.fromkeys(r["checkpoint"] for r in flat):
        m = methods[0]
        ok = [r for r in flat if r["checkpoint"] == name and r["targets"] and r[m]["cells"]]
        c = compare_to_random([r[m]["top"] for r in ok], [r[m]["random"] for r in ok])
        verdicts.append(f'    "{name}": Verdict(sha="{weights_sha(CHECKPOINT_ROOT / name)}", '
                        f"beats_random={c.beats_random}, top_rate={c.top_rate:.3f}, random_rate={c.random_rate:.3f}, "
                        f"p_exact={c.p_exact:.2g}, n={c.n}),")
    lines = table(rows, methods)
    print("\n".join(lines))
    print(f"VERDICTS ({methods[0]}, all of a checkpoint's rows pooled):")
    print("\n".join(verdicts))
    if args.json:
        Path(args.json).write_text(json.dumps([{"checkpoint": c, "row": r, "records": recs} for c, r, recs in rows],
                                              indent=1, default=str))
    if args.out:
        cmd = "OMP_NUM_THREADS=1 python benchmarks/bench_attribution.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:]))
        Path(args.out).write_text("\n".join(["# Cell attribution against a random retrieved cell", "",
                                             "    " + cmd, "", *lines, "", f"Verdicts ({methods[0]}, pooled per "
                                             "checkpoint):", "", "```", *verdicts, "```", ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
