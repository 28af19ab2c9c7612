"""Do the graph tokens carry the subcomplex? Ablation arms of a checkpoint on a full test split, paired.

For each checkpoint: ``toporag eval --graph-tokens ARM`` for every arm (normal, permute, zero, only;
``arms.py`` says what each feeds the LLM), then the paired table (exact McNemar against ``normal``,
:func:`toporag_core.evaluate.paired_table`) with the majority answer beside it, and the goals of the
graph-token work checked on it:

* ``permute`` (another question's graph tokens) at least ``--min-drop`` points below ``normal``, p < 0.01;
* ``only`` (graph tokens + question, no text) at least ``--min-only``;
* ``normal`` at least ``--min-normal``.

Predictions go to ``--out`` (one JSONL per checkpoint and arm; a rerun resumes them), so the table can be
rebuilt without answering again. One thread on a shared 2-core CPU takes about 7-15 minutes per arm on
ExplaGraphs' 554 test questions.

    python benchmarks/bench_graph_tokens.py --checkpoint assets/checkpoints/expla_graphs --out runs/arms
    python benchmarks/bench_graph_tokens.py --checkpoint runs/x/best --limit 64        # a quick look
    python benchmarks/bench_graph_tokens.py --split val --arms normal,permute \
        --graph-view-weight 1 --sweep 0,0.25,0.5,1,2                                   # choose the two-view weight
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import require_shared  # noqa: E402

ARMS = ("normal", "permute", "zero", "only")


def run_arm(checkpoint: Path, dataset: str, arm: str, out: Path, split: str, limit: int | None, threads: int,
            data_dir: str | None, weight: float | None = None) -> Path:
    cmd = [sys.executable, "-m", "toporag_core.cli", "eval", "--checkpoint", str(checkpoint), "--dataset", dataset,
           "--split", split, "--threads", str(threads), "--graph-tokens", arm, "--out", str(out), "--resume"]
    if weight is not None:
        cmd += ["--graph-view-weight", str(weight)]
    if limit:
        cmd += ["--limit", str(limit)]
    if data_dir:
        cmd += ["--data-dir", data_dir]
    print(f"[{checkpoint.name or checkpoint}] {arm}: {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return out


def table(files: dict[str, Path]) -> list[dict]:
    from toporag_core.evaluate import paired_table

    return paired_table({k: str(v) for k, v in files.items()}, "normal")


def sweep(files: dict[str, Path], weights: list[float], dataset: str) -> list[dict]:
    """Each arm's accuracy re-scored at every two-view weight ``w`` from the views its JSONL stored
    (``log_softmax(text) + w log_softmax(graph)``, arg max; :func:`~toporag_core.model.answering.two_view_scores`),
    paired against ``normal`` at the same ``w``: a weight chosen on a validation split without answering again."""
    import torch

    from toporag_core.evaluate import score
    from toporag_core.metrics import mcnemar_exact
    from toporag_core.model.answering import two_view_scores
    from toporag_core.predictions import read_records

    recs = {arm: {str(r["id"]): r for r in read_records(path, ("id", "gold"))} for arm, path in files.items()}
    ids = sorted(set.intersection(*(set(r) for r in recs.values())))
    rows = []
    for w in weights:
        right = {}
        for arm, by_id in recs.items():
            ok = []
            for i in ids:
                r = by_id[i]
                views = r.get("views")
                if views is None:  # no context in this arm (only): one view
                    ok.append(bool(r["correct"]))
                    continue
                labels = list(views["text"])
                fused = two_view_scores(torch.tensor([[views["text"][c] for c in labels]]),
                                        torch.tensor([[views["graph"][c] for c in labels]]), w)
                ok.append(score(dataset, labels[int(fused[0].argmax())], r["gold"]))
            right[arm] = ok
        for arm, ok in right.items():
            b, c, p = mcnemar_exact(ok, right["normal"]) if arm != "normal" else (0, 0, 1.0)
            rows.append({"weight": w, "arm": arm, "n": len(ok), "accuracy": sum(ok) / max(len(ok), 1),
                         "only_this_right": b, "only_normal_right": c, "p_value": p})
    return rows


def goals(rows: list[dict], min_drop: float, min_only: float, min_normal: float) -> list[tuple[str, bool, str]]:
    acc = {r["run"]: r for r in rows if r["group"] == "all"}
    normal = acc["normal"]["accuracy"]
    out = [(f"normal >= {min_normal}", normal >= min_normal, f"{normal:.3f}")]
    if "permute" in acc:
        drop, p = normal - acc["permute"]["accuracy"], acc["permute"]["p_value"]
        out.append((f"permute >= {100 * min_drop:.0f} points below normal, p < 0.01",
                    drop >= min_drop and p < 0.01, f"{100 * drop:+.1f} points, p = {p:.2g}"))
    if "only" in acc:
        out.append((f"only >= {min_only}", acc["only"]["accuracy"] >= min_only, f"{acc['only']['accuracy']:.3f}"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", action="append", default=None,
                    help="checkpoint folder (repeatable; default: the shipped ExplaGraphs one)")
    ap.add_argument("--dataset", default=None, help="default: the checkpoint's own")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=None, help="first N questions only (a quick look)")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="runs/bench_graph_tokens")
    ap.add_argument("--min-drop", type=float, default=0.03)
    ap.add_argument("--min-only", type=float, default=0.70)
    ap.add_argument("--min-normal", type=float, default=0.85)
    ap.add_argument("--graph-view-weight", type=float, default=None,
                    help="two-view label scoring weight for every arm (default: the checkpoint's); the arms' JSONL "
                         "then keep both views")
    ap.add_argument("--sweep", default=None,
                    help="comma-separated weights: re-score the arms' stored views at each (choose w on validation)")
    args = ap.parse_args()
    import json

    from toporag_core.model.checkpoint import read_config

    for ckpt in map(Path, args.checkpoint or [ROOT / "assets/checkpoints/expla_graphs"]):
        _, meta = read_config(ckpt)
        dataset = args.dataset or meta.get("dataset", "expla_graphs")
        if dataset == "expla_graphs" and not args.data_dir:
            require_shared("expla_graphs_train_dev.tsv")
        name = ckpt.parent.name if ckpt.name == "best" else ckpt.name
        if args.graph_view_weight is not None:
            name += f"-w{args.graph_view_weight:g}"
        out = Path(args.out) / f"{name}-{args.split}"
        out.mkdir(parents=True, exist_ok=True)
        files = {arm: run_arm(ckpt, dataset, arm, out / f"{arm}.jsonl", args.split, args.limit, args.threads,
                              args.data_dir, args.graph_view_weight) for arm in args.arms.split(",")}
        if "normal" not in files:
            print(f"{out}: arms {sorted(files)} answered; the table needs the normal arm too", file=sys.stderr)
            continue
        if args.sweep:
            srows = sweep(files, [float(w) for w in args.sweep.split(",")], dataset)
            print(f"\n## two-view weight sweep: {ckpt} ({dataset}, {args.split})\n")
            print("| w | arm | n | accuracy | only this arm right | only normal right | McNemar p vs normal (same w) |")
            print("|---|---|---|---|---|---|---|")
            for r in srows:
                p = "reference" if r["arm"] == "normal" else f"{r['p_value']:.2g}"
                print(f"| {r['weight']:g} | {r['arm']} | {r['n']} | {r['accuracy']:.3f} | {r['only_this_right']} | "
                      f"{r['only_normal_right']} | {p} |")
            (out / "sweep.json").write_text(json.dumps(srows, indent=2))
        rows = table(files)
        cfg = meta.get("config", {})
        print(f"\n## {ckpt} ({dataset}, {args.split}, graph_path={cfg.get('graph_path', 'pooled')}, "
              f"{cfg.get('num_graph_tokens')} graph tokens)\n")
        print("| arm | n | accuracy | only this arm right | only normal right | McNemar p vs normal |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            p = "reference" if r["reference"] else f"{r['p_value']:.2g}"
            print(f"| {r['run']} | {r['n']} | {r['accuracy']:.3f} | {r['only_this_right']} | "
                  f"{r['only_reference_right']} | {p} |")
        print("\n| goal | met | measured |\n|---|---|---|")
        for name, ok, val in goals(rows, args.min_drop, args.min_only, args.min_normal):
            print(f"| {name} | {'yes' if ok else 'NO'} | {val} |")
        (out / "table.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
