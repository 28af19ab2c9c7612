"""Retrieval with cached embeddings on the 12 WebQSP graphs vs PyG's G-Retriever retrieval.

Reference: ``torch_geometric.llm.utils.backend_utils.retrieval_via_pcst`` (G-Retriever's
PCST retrieval, which also writes its textual description), on the same graphs, the same
node/edge embeddings and the same question embeddings. Ours: ``retrieve(method="toporag")``
(which also scores and places 2-cells) and ``method="g-retriever"``, each with and without
``textualize``. Goal: TopoRAG no slower than PyG's G-Retriever retrieval, median < 30 ms.

Embeddings: the default encoder (all-MiniLM-L6-v2), cached on disk after the first run;
``--encoder hashing`` skips the model (timings are nearly the same, prizes differ).
"""
from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import torch

from _common import require_shared, timeit
from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph
from toporag_core.embed import get_encoder
from toporag_core.retrieval import EmbeddedComplex, retrieve, textualize
from toporag_core.retrieval.report import format_table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", default="default")
    ap.add_argument("--k", type=int, default=3)
    args = ap.parse_args()
    from torch_geometric.data import Data
    from torch_geometric.llm.utils.backend_utils import retrieval_via_pcst

    enc = get_encoder(args.encoder)
    rows = []
    for rec in read_webqsp(require_shared("webqsp_sample.json")):
        g = webqsp_record_to_graph(rec)
        ecx = EmbeddedComplex.from_graph(g, enc)
        q = enc.encode([rec["question"]])[0]
        rel = enc.encode(list(g.edge_text))
        data = Data(x=torch.from_numpy(ecx.emb.x0), edge_index=torch.from_numpy(g.edge_index),
                    edge_attr=torch.from_numpy(rel), num_nodes=g.num_nodes,
                    node_idx=np.arange(g.num_nodes), edge_idx=np.arange(g.num_edges))
        nodes_df = pd.DataFrame({"node_id": range(g.num_nodes), "node_attr": g.node_text})
        edges_df = pd.DataFrame({"src": g.edge_index[0], "edge_attr": g.edge_text, "dst": g.edge_index[1]})
        qt = torch.from_numpy(q)
        k = args.k

        def pyg():
            return retrieval_via_pcst(data, qt, nodes_df, edges_df, topk=k, topk_e=k, cost_e=0.5)

        retrieve(ecx, q, "g-retriever")  # warm the relation-vector cache (one-off per graph)
        t_pyg = timeit(pyg)
        t_topo = timeit(lambda: retrieve(ecx, q, "toporag", k0=k, k1=k, k2=k, c2=0.5))
        t_topo_txt = timeit(lambda: textualize(retrieve(ecx, q, "toporag", k0=k, k1=k, k2=k, c2=0.5)))
        t_gr = timeit(lambda: retrieve(ecx, q, "g-retriever", k0=k, k1=k))
        sub = retrieve(ecx, q, "toporag", k0=k, k1=k, k2=k, c2=0.5)
        rows.append({"graph": rec["id"], "nodes": g.num_nodes, "edges": g.num_edges,
                     "cells": "/".join(map(str, sub.counts)), "pyg_ms": t_pyg * 1000, "toporag_ms": t_topo * 1000,
                     "toporag+text_ms": t_topo_txt * 1000, "ours_g-retriever_ms": t_gr * 1000})
    print(format_table(rows))
    med = {c: float(np.median([r[c] for r in rows])) for c in ("pyg_ms", "toporag_ms", "toporag+text_ms",
                                                               "ours_g-retriever_ms")}
    print()
    print(format_table([
        {"what": "TopoRAG retrieval (0/1/2-cells)", "median_ms": med["toporag_ms"], "PyG_ms": med["pyg_ms"],
         "speedup vs PyG (x)": med["pyg_ms"] / med["toporag_ms"]},
        {"what": "TopoRAG retrieval + textualize", "median_ms": med["toporag+text_ms"], "PyG_ms": med["pyg_ms"],
         "speedup vs PyG (x)": med["pyg_ms"] / med["toporag+text_ms"]},
        {"what": "our G-Retriever baseline", "median_ms": med["ours_g-retriever_ms"], "PyG_ms": med["pyg_ms"],
         "speedup vs PyG (x)": med["pyg_ms"] / med["ours_g-retriever_ms"]},
    ]))
    print("goal: TopoRAG no slower than PyG's retrieval_via_pcst, median < 30 ms")


if __name__ == "__main__":
    main()
