"""Arguments and helpers shared by the graph commands (``lift``, ``retrieve``)."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="graph file or folder (csv pair, triples TSV/CSV/JSON, ExplaGraphs row, WebQSP JSON)")
    p.add_argument("--format", default="auto",
                   help="auto | csv-pair | triples | explagraphs | webqsp (default: auto-detect)")
    p.add_argument("--record", default=None, help="row / record to take from a multi-record file (index or id)")
    p.add_argument("--tree", default="bfs", choices=("bfs", "dfs", "random"), help="spanning tree method")
    p.add_argument("--seed", type=int, default=0, help="seed of the random spanning tree")
    p.add_argument("--max-cycle-len", type=int, default=None, help="no 2-cell on longer fundamental cycles")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def load_from_args(args: argparse.Namespace):
    from ..io import load_graph

    record: Any = args.record
    if isinstance(record, str) and record.isdigit():
        record = int(record)
    return load_graph(args.path, format=args.format, record=record)


def emit(obj: dict, as_json: bool, human: str) -> None:
    if as_json:
        json.dump(obj, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(human)
