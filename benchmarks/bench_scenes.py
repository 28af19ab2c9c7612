"""SceneGraphs retrieval coverage: are the answer-bearing objects inside the retrieved subcomplex?

For each retrieval method with the GraphQA SceneGraphs settings (k0 = 3, k1 = 5; TopoRAG's k2
swept over {0, 1, 2, 3}), the share of questions whose support objects (for a closed-loop
question: every object of the loop) are all retrieved, overall and per question type, and the
mean number of retrieved cells per dimension. "whole graph" (every cell) is the reference: its
coverage is 1 by construction. No model is trained; the default encoder is all-MiniLM-L6-v2.

    .venv/bin/python benchmarks/bench_scenes.py                 # generated default set, val + test
    .venv/bin/python benchmarks/bench_scenes.py --data-dir DIR  # real GQA/GraphQA or another set
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

COLUMNS = ["method", "questions", "all", "0-cell", "1-cell", "2-cell", "cells0", "cells1", "cells2"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="scenes folder (default: the generated default set)")
    ap.add_argument("--encoder", default="default", help="default | hashing | a SentenceTransformer folder")
    ap.add_argument("--splits", default="val,test")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    enc = get_encoder(args.encoder)
    raw = load_raw("scene_graphs", args.data_dir)
    settings = paper_settings() + [CoverageSetting("whole graph", RetrievalSetting("whole"))]
    out = {}
    for split in args.splits.split(","):
        t0 = time.perf_counter()
        rows = scene_retrieval_coverage(raw[split], enc, settings)
        print(f"\n## {split} split: {rows[0]['questions']} questions, encoder {enc.name} "
              f"({time.perf_counter() - t0:.1f} s)\n")
        print(format_table(rows, COLUMNS))
        out[split] = rows
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
