"""Confidence calibration per checkpoint and answer kind: fit the low-confidence threshold on validation,
measure it on validation and test.

Per answer kind (``label``: a closed label set, ``names``: the name reader, ``generated``: greedy
generation, whose probability is the per-token geometric mean of the phrase; a names answer is judged
by :func:`toporag_core.metrics.name_confidence`, the ``confidence`` the pipeline reports), the threshold is
the largest ``t`` with at most 25% of the right validation answers below it, less one standard error of that
share (``--margin``; :func:`toporag_core.predictions.calibrate.fit_rate`, :func:`~toporag_core.predictions.
calibrate.fit_threshold`); an answer is flagged when its probability is below it. A label answer after evidence the model wrote (the scene checkpoint's yes / no) is also
flagged when a claim of its evidence is not a fact of its context
(:func:`toporag_core.retrieval.claims.unsupported_claims`); its threshold is fitted beside that check, and
``--no-evidence-check`` measures the threshold alone. Reported per split: n, accuracy, majority-answer accuracy, the share of wrong answers
flagged (target >= 60%), of right answers flagged (target <= 25%), and the accuracy of what is not
flagged. ``--write`` stores the thresholds in the checkpoint's ``config.json`` (``"confidence"``), which
``toporag ask``, ``toporag kg ask`` and the Ask page read.

Inputs: predictions files of ``toporag eval`` (``--val`` / ``--test``, records with ``probability``,
``correct``, ``answer_kind``), or the answer records of ``bench_kg_answers.py --records`` (``--records``
/ ``--test-records``, with ``arm``, ``hit``, ``probability``, ``candidates``; only ``--arm``'s answers).
A test question that is also among the validation answers (the 12 shared WebQSP questions are in both
of the knowledge-graph runs) is left out of the test rows, so test measures held-out questions only.

    OMP_NUM_THREADS=1 toporag eval --dataset expla_graphs --checkpoint assets/checkpoints/expla_graphs \\
        --split val --limit 150 --threads 1 --out val.jsonl        # and --split test --out test.jsonl
    python benchmarks/bench_confidence.py --checkpoint assets/checkpoints/expla_graphs \\
        --val val.jsonl --test test.jsonl --write
    python benchmarks/bench_confidence.py --checkpoint assets/checkpoints/general \\
        --records val_records.jsonl --test-records test_records.jsonl --arm seeded+names --write
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from toporag_core.predictions.calibrate import (KINDS, MARGIN_SE, MAX_RIGHT_FLAGGED, calibrate, measure,
                                               names_separation, write_confidence)


def read_jsonl(paths: list[str], arm: str | None = None) -> list[dict]:
    """Every record of ``paths``; with ``arm``, only the records of that arm (``ALIAS/ARM`` or ``ARM``)."""
    recs = []
    for p in paths:
        recs += [json.loads(x) for x in Path(p).read_text().splitlines() if x.strip()]
    if arm is not None:
        exact = [r for r in recs if r.get("arm") == arm]
        loose = [r for r in recs if str(r.get("arm", "")).split("/")[-1] == arm]
        if not exact and len({r["arm"] for r in loose}) > 1:
            raise SystemExit(f"--arm {arm} names several arms of {paths}: "
                             f"{sorted({r['arm'] for r in loose})}; give ALIAS/{arm}")
        recs = exact or loose
    return recs


def fmt(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(name: str, rows: dict[str, dict[str, dict]]) -> list[str]:
    """Markdown rows: per kind and split, n, accuracy, majority accuracy, threshold, flag shares."""
    out = []
    for kind in KINDS:
        for split, res in rows.items():
            r = res.get(kind)
            if r is None:
                continue
            out.append(f"| {name} | {kind} | {split} | {r['n']} | {fmt(r['accuracy'])} | {fmt(r['majority_accuracy'])} "
                       f"| {'-' if r['threshold'] is None else format(r['threshold'], '.4g')} | "
                       f"{fmt(r['wrong_flagged'])} ({r['n_wrong']}) | {fmt(r['right_flagged'])} ({r['n_right']}) | "
                       f"{fmt(r['kept_accuracy'])} | {r.get('unsupported', 0)} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="checkpoint folder (its name heads the rows; --write writes "
                                                        "its config.json)")
    ap.add_argument("--val", action="append", default=[], help="toporag eval predictions of the validation split")
    ap.add_argument("--test", action="append", default=[], help="toporag eval predictions of the test split")
    ap.add_argument("--records", action="append", default=[], help="bench_kg_answers.py records, validation split")
    ap.add_argument("--test-records", action="append", default=[], help="bench_kg_answers.py records, test split")
    ap.add_argument("--arm", default="seeded+names", help="the records' arm that ships (default seeded+names)")
    ap.add_argument("--test-arm", default=None, help="the arm of --test-records (default --arm)")
    ap.add_argument("--rate", type=float, default=MAX_RIGHT_FLAGGED,
                    help="the target: at most this share of right answers is flagged (default 0.25)")
    ap.add_argument("--margin", type=float, default=MARGIN_SE,
                    help="fit this many standard errors of the validation share below --rate (default 1; 0: fit at "
                         "--rate itself, as the ExplaGraphs and SceneGraphs thresholds were)")
    ap.add_argument("--fitted-on", default=None, help="how config.json describes the validation answers")
    ap.add_argument("--no-evidence-check", action="store_true",
                    help="flag by the threshold alone (no check of the evidence against the context)")
    ap.add_argument("--free-weights", default=None, metavar="W,W,...",
                    help="only print the AUROC of the names confidence at these question-free weights "
                         "(metrics.name_confidence; records with name_free), per split, and stop")
    ap.add_argument("--write", action="store_true", help="store the thresholds in the checkpoint's config.json")
    ap.add_argument("--json", default=None, help="also write the measurements here")
    args = ap.parse_args()
    val = read_jsonl(args.val) + read_jsonl(args.records, args.arm)
    test = read_jsonl(args.test) + read_jsonl(args.test_records, args.test_arm or args.arm)
    if not val:
        ap.error("no validation answers: give --val or --records (with answers of --arm)")
    asked = {(r.get("kind") or r.get("dataset"), r.get("question")) for r in val}
    shared = [r for r in test if (r.get("kind") or r.get("dataset"), r.get("question")) in asked]
    test = [r for r in test if (r.get("kind") or r.get("dataset"), r.get("question")) not in asked]
    if args.free_weights:
        try:
            weights = [float(w) for w in args.free_weights.split(",")]
        except ValueError:
            ap.error(f"--free-weights takes numbers separated by commas (0,0.5,1), not {args.free_weights!r}")
        print("| split | names answers (wrong) | " + " | ".join(f"AUROC, w = {w:g}" for w in weights) + " |")
        print("|---|---|" + "---|" * len(weights))
        for split, recs in (("val", val), ("test", test)):
            s = names_separation(recs, weights)
            print(f"| {split} | {s['n']} ({s['n_wrong']}) | "
                  + " | ".join("n/a" if s["auroc"][w] is None else f"{s['auroc'][w]:.3f}" for w in weights) + " |")
        return
    fit = calibrate(val, args.rate, check_evidence=not args.no_evidence_check, margin=args.margin)
    thresholds = {k: r["threshold"] for k, r in fit.items()}
    checked = [k for k, r in fit.items() if r["evidence_checked"]]
    res = {"val": fit, **({"test": measure(test, thresholds, checked)} if test else {})}
    name = Path(args.checkpoint).name
    print(f"checkpoint {name}: thresholds fitted on {sum(r['n'] for r in fit.values())} validation answers "
          f"(at most {args.rate:.0%} of right answers flagged, fitted at "
          + ", ".join(f"{k} {r['fit_rate']:.1%}" for k, r in fit.items()) + "); no probability: "
          f"{sum(r.get('probability') is None for r in val)} val, {sum(r.get('probability') is None for r in test)} test; "
          f"{len(shared)} test answers left out (their questions are in the validation answers too)")
    print("| checkpoint | kind | split | n | accuracy | majority | threshold | wrong flagged (n wrong) | "
          "right flagged (n right) | accuracy not flagged | flagged by their evidence |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table(name, res)))
    if args.json:
        Path(args.json).write_text(json.dumps({"checkpoint": name, "rate": args.rate, "margin": args.margin, **res},
                                              indent=2))
    if args.write:
        datasets = sorted({str(r.get("dataset") or r.get("kind") or "?") for r in val})
        fitted_on = args.fitted_on or (f"validation split ({', '.join(datasets)}), {len(val)} answers: at most "
                                       f"{args.rate:.0%} of right answers below the threshold, less {args.margin:g} "
                                       "standard error(s)")
        path = write_confidence(args.checkpoint, thresholds, fitted_on, {k: r["n"] for k, r in fit.items()}, checked)
        print(f"wrote confidence thresholds into {path}")


if __name__ == "__main__":
    main()
