"""Lifting the 12 WebQSP graphs: ``toporag_core.cells.lift`` vs ``networkx.cycle_basis`` + B1/B2.

Reference: networkx's cycle basis (one cycle per non-tree edge, like ours) on the simple
undirected skeleton, then the same signed B1 (nodes x edges) and B2 (edges x cycles).
Goal: >= 10x faster than the reference, median < 10 ms per graph.
"""
from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

from _common import require_shared, timeit
from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph
from toporag_core.cells.lift import lift
from toporag_core.retrieval.report import format_table


def networkx_reference(g) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    G = nx.Graph()
    G.add_nodes_from(range(g.num_nodes))
    G.add_edges_from((a, b) for a, b in g.edge_index.T.tolist() if a != b)
    edges = sorted((min(a, b), max(a, b)) for a, b in G.edges)
    eid = {e: i for i, e in enumerate(edges)}
    cycles = nx.cycle_basis(G)
    rows, cols, vals = [], [], []
    for i, (a, b) in enumerate(edges):
        rows += [a, b]; cols += [i, i]; vals += [-1, 1]
    b1 = sp.csr_matrix((vals, (rows, cols)), shape=(g.num_nodes, len(edges)))
    rows, cols, vals = [], [], []
    for c, cyc in enumerate(cycles):
        for j, a in enumerate(cyc):
            b = cyc[(j + 1) % len(cyc)]
            rows.append(eid[(min(a, b), max(a, b))]); cols.append(c); vals.append(1 if a < b else -1)
    b2 = sp.csr_matrix((vals, (rows, cols)), shape=(len(edges), len(cycles)))
    return b1, b2


def main() -> None:
    recs = read_webqsp(require_shared("webqsp_sample.json"))
    rows = []
    for rec in recs:
        g = webqsp_record_to_graph(rec)

        def ours():
            cx = lift(g)
            cx.incidence_matrix(1), cx.incidence_matrix(2)

        t_ours = timeit(ours)
        t_ref = timeit(lambda: networkx_reference(g), repeat=3)
        b1, b2 = networkx_reference(g)
        cx = lift(g)
        assert b2.shape[1] == cx.num_cells2 and abs(b1 @ b2).sum() == 0 and cx.boundary_ok()
        rows.append({"graph": rec["id"], "nodes": g.num_nodes, "edges": cx.num_edges, "cells2": cx.num_cells2,
                     "ours_ms": t_ours * 1000, "networkx_ms": t_ref * 1000, "speedup": t_ref / t_ours})
    print(format_table(rows))
    med_o = float(np.median([r["ours_ms"] for r in rows]))
    med_r = float(np.median([r["networkx_ms"] for r in rows]))
    print()
    print(format_table([{"what": "lift + B1/B2, median per graph", "toporag_ms": med_o, "networkx_ms": med_r,
                         "speedup (x)": med_r / med_o, "goal": ">= 10x and < 10 ms"}]))


if __name__ == "__main__":
    main()
