"""Answer recall and cells per dimension on the 12 real WebQSP questions, per method and k.

Compare the cells-per-dimension columns with TopoRAG's Table 6 (about 15-17 0-cells,
17-20 1-cells, 2-4 2-cells for k in {1, 2, 3}). Reference method: G-Retriever's PCST
(``g-retriever``), measured in the same run on the same embeddings.
"""
from __future__ import annotations

import argparse

from _common import webqsp_items
from toporag_core.embed import get_encoder
from toporag_core.retrieval.report import format_table, retrieval_report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", default="default")
    ap.add_argument("--c2", type=float, default=0.5)
    args = ap.parse_args()
    enc = get_encoder(args.encoder)
    items = webqsp_items(enc)
    rows = retrieval_report(items, ks=(1, 2, 3), c2=args.c2)
    ref = {r["k"]: r["answer_recall"] for r in rows if r["method"] == "g-retriever"}
    for r in rows:
        r["recall_vs_g-retriever"] = (r["answer_recall"] / ref[r["k"]]) if ref.get(r["k"]) else float("nan")
    print(format_table(rows))


if __name__ == "__main__":
    main()
