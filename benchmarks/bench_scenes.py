"""SceneGraphs retrieval coverage: are the answer-bearing objects inside the retrieved subcomplex?

For each retrieval method with the GraphQA SceneGraphs settings (k0 = 3, k1 = 5; TopoRAG's k2
swept over {0, 1, 2, 3}), the share of questions whose support objects (for a closed-loop
question: every object of the loop) are all retrieved, overall and per question type, and the
mean number of retrieved cells per dimension. "whole graph" (every cell) is the reference: its
coverage is 1 by construction. No model is trained; the default encoder is all-MiniLM-L6-v2.

    .venv/bin/python benchmarks/bench_scenes.py                 # generated default set, val + test
    .venv/bin/python benchmarks/bench_scenes.py --data-dir DIR  # real GQA/GraphQA or another set
    .venv/bin/python benchmarks/bench_scenes.py --sweep --splits test

``--sweep`` trades coverage against context length for choosing a training recipe: the committed scene
checkpoint's setting (k0 = k1 = k2 = 3, C2 = 0.5, edge cost 0.5, BFS tree) against larger k1 / k2 and
a DFS spanning tree (whose fundamental cycles are longer) and the ring lifting (``rings``: every 3-/4-cycle
a 2-cell, beyond the paper), each with ``tokens``: the mean length of the compact text in the default
LLM's tokens. Context length is what the KV-cache pass, training and answer latency pay for (all three
grow about linearly with it). ``loop 2-cell``: the share of closed-loop questions whose loop is itself a
retrieved 2-cell (with a spanning tree only some question loops are 2-cells at all).
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from toporag_core.retrieval import RetrievalSetting
from toporag_core.tasks import load_raw
from toporag_core.embed import get_encoder
from toporag_core.retrieval.report import format_table
from toporag_core.tasks.scenes.dataset import CoverageSetting, paper_settings, scene_retrieval_coverage

COLUMNS = ["method", "questions", "all", "0-cell", "1-cell", "2-cell", "loop 2-cell", "cells0", "cells1", "cells2"]


def sweep_settings() -> list[CoverageSetting]:
    """The committed scene checkpoint's setting first (the reference of ``tokens_ratio``), then larger
    k1 / k2, the DFS tree and rings; k2 = 0 rows are "w/o CRL" at the same k1 (bfs only: without
    2-cells every lifting retrieves the same)."""
    make = RetrievalSetting.make
    out = []
    for tree in ("bfs", "dfs", "rings"):
        for k0, k1, k2 in ((3, 3, 3), (3, 3, 0), (3, 6, 3), (3, 6, 0), (3, 8, 3), (5, 6, 3), (3, 6, 5)):
            if tree != "bfs" and k2 == 0:
                continue  # without 2-cells the lifting does not matter: the bfs row is the same
            label = f"{tree} k0={k0} k1={k1} k2={k2}" + (" (committed)" if (tree, k0, k1, k2) == ("bfs", 3, 3, 3) else "")
            out.append(CoverageSetting(label, make("toporag", k0=k0, k1=k1, k2=k2, c2=0.5, edge_cost=0.5), tree))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="scenes folder (default: the generated default set)")
    ap.add_argument("--encoder", default="default", help="default | hashing | a SentenceTransformer folder")
    ap.add_argument("--splits", default="val,test")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--sweep", action="store_true",
                    help="coverage vs context tokens over k1, k2 and the spanning tree (TopoRAG, C2 0.5, edge cost 0.5)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    enc = get_encoder(args.encoder)
    raw = load_raw("scene_graphs", args.data_dir)
    count, columns = None, COLUMNS
    if args.sweep:
        from transformers import AutoTokenizer

        from toporag_core.model.llm import ensure_default_llm

        tok = AutoTokenizer.from_pretrained(ensure_default_llm())
        count, columns = (lambda text: len(tok(text)["input_ids"])), COLUMNS + ["tokens"]
        settings = sweep_settings()
    else:
        settings = paper_settings() + [CoverageSetting("whole graph", RetrievalSetting("whole"))]
    out = {}
    for split in args.splits.split(","):
        t0 = time.perf_counter()
        rows = scene_retrieval_coverage(raw[split], enc, settings, count_tokens=count)
        if args.sweep:
            base = rows[0]
            for r in rows:
                r["tokens_ratio"] = r["tokens"] / base["tokens"]
            columns = columns + ["tokens_ratio"]
        print(f"\n## {split} split: {rows[0]['questions']} questions, encoder {enc.name} "
              f"({time.perf_counter() - t0:.1f} s)\n")
        print(format_table(rows, columns))
        out[split] = rows
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
