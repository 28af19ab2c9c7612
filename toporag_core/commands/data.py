"""``toporag data scenes|general --n N --seed S --out DIR``: write a generated dataset (SceneGraphs, or the
general open-answer task's graphs and questions)."""
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
    g = sub.add_parser("general", help="open questions over generated knowledge graphs, store cuts and scenes "
                                       "(graphs.jsonl, questions.jsonl, scenes/)")
    g.add_argument("--n", type=int, default=300, help="number of graphs (default 300)")
    g.add_argument("--seed", type=int, default=0, help="random seed (same seed, same files)")
    g.add_argument("--out", required=True, help="output folder (new or empty)")
    g.set_defaults(func=run_general)


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


def run_general(args: argparse.Namespace) -> int:
    from ..tasks.general import write_dataset

    if args.n < 3:
        raise ValueError("--n must be >= 3")
    st = write_dataset(args.out, n=args.n, seed=args.seed)
    q = st["questions"]
    families = ", ".join(f"{v} {k}" for k, v in st["graphs"].items())
    print(f"wrote {sum(st['graphs'].values())} graphs to {args.out} ({families}); "
          f"{sum(q.values())} fact-store questions ({', '.join(f'{k} {v}' for k, v in q.items())}) "
          f"and {st['scene_questions']} scene questions (open ones used)")
    return 0
