"""``toporag data scenes --n N --seed S --out DIR``: write a generated SceneGraphs dataset."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("data", help="generate or prepare datasets")
    sub = p.add_subparsers(dest="data_command", required=True)
    s = sub.add_parser("scenes", help="GQA-format scene graphs + questions (train_sceneGraphs.json, questions.csv)")
    s.add_argument("--n", type=int, default=200, help="number of scenes (default 200)")
    s.add_argument("--seed", type=int, default=0, help="random seed (same seed, same files)")
    s.add_argument("--out", required=True, help="output folder")
    s.add_argument("--per-type", type=int, default=5, help="questions of each type per scene (default 5)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tasks.scenes import write_dataset

    if args.n < 1 or args.per_type < 1:
        raise ValueError("--n and --per-type must be >= 1")
    st = write_dataset(args.out, n=args.n, seed=args.seed, per_type=args.per_type)
    t = st["per_type"]
    print(f"wrote {st['scenes']} scenes to {args.out}: mean {st['mean_objects']:.1f} objects, "
          f"{st['mean_relations']:.1f} relations; {st['questions']} questions, per scene "
          f"0-cell {t['0-cell'] / st['scenes']:.2f}, 1-cell {t['1-cell'] / st['scenes']:.2f}, "
          f"2-cell {t['2-cell'] / st['scenes']:.2f}; yes {st['yes_share']:.0%} of {st['yes_no']} yes/no")
    return 0
