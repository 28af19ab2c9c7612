"""``toporag eval merge SHARDS... --out FILE [--order-from FILE]``: join evaluation shards.

``toporag eval --shard i/n --out OUT`` writes ``OUT.shard-i-of-n.jsonl``; this joins such files into
one predictions JSONL (:func:`toporag_core.predictions.merge`: one line per id, the same id with
other content in two shards is an error naming both files; in the order of ``--order-from`` when
given, else shard by shard) and prints ``{"n", "correct", "accuracy", "missing"}`` as JSON.

``toporag eval`` hands its arguments here when the first is ``merge`` (:func:`add_merge_dispatch`),
so the evaluation's own options stay as they are.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Sequence

USAGE = "merge SHARDS... --out FILE"
DESCRIPTION = ("Join evaluation shards (toporag eval --shard i/n outputs) into one predictions JSONL: one line per "
               "id (the same id with other content in two shards is an error naming both files), in the order of "
               "--order-from when given, else shard by shard. Prints {n, correct, accuracy, missing} as JSON.")


def merge_parser() -> argparse.ArgumentParser:
    from ._common import OneLineParser

    p = OneLineParser(prog="toporag eval merge", description=DESCRIPTION)
    p.add_argument("shards", nargs="+", help="shard files (toporag eval --shard i/n outputs)")
    p.add_argument("--out", required=True, help="the merged predictions JSONL (written atomically)")
    p.add_argument("--order-from", default=None,
                   help="a predictions JSONL (or one id per line) giving the order of the ids")
    return p


def run_merge(args: argparse.Namespace) -> int:
    from ..predictions import merge, read_ids

    order = read_ids(args.order_from) if args.order_from else None
    print(json.dumps(merge(args.shards, args.out, order=order)))
    return 0


class _MergeAction(argparse.Action):
    """The ``eval`` parser's trailing ``merge ...`` words: parsed by :func:`merge_parser`, and the
    command's ``func`` becomes :func:`run_merge`."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        words: Sequence[str] = values or []
        if not words:
            return
        if words[0] != "merge":
            parser.error(f"unrecognized arguments: {' '.join(words)} (the one sub-command is `{USAGE}`)")
        merged = merge_parser().parse_args(list(words[1:]))
        for key, value in vars(merged).items():
            setattr(namespace, key, value)
        namespace.func = run_merge


def add_merge_dispatch(parser: argparse.ArgumentParser) -> None:
    """Let ``toporag eval merge ...`` reach :func:`run_merge` (the ``eval`` parser's other options
    are untouched: the words after ``merge`` are parsed by :func:`merge_parser` alone)."""
    parser.add_argument("merge", nargs=argparse.REMAINDER, action=_MergeAction, default=None, metavar=USAGE,
                        help="join shard files written with --shard into one predictions JSONL "
                             "(`toporag eval merge --help`)")
