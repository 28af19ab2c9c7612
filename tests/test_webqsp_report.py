"""Retrieval on real WebQSP questions: invariants asserted, recall reported (not asserted).

Uses the real default encoder (all-MiniLM-L6-v2) on the ``SMALLEST`` subgraphs of the shared sample (by
node count; embedding all 12, about 20k node texts, takes two minutes on two cores); the report is printed
and written to ``runs/webqsp_retrieval_report.md``. ``benchmarks/bench_webqsp_retrieval.py`` reports all
12 questions, as TopoRAG's Table 6 does.
"""
from __future__ import annotations

import networkx as nx
import pytest

from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph
from toporag_core.embed import get_encoder
from toporag_core.retrieval import EmbeddedComplex, retrieve
from toporag_core.retrieval.report import QAGraph, format_table, retrieval_report

from .conftest import ROOT


SMALLEST = 4


@pytest.fixture(scope="module")
def webqsp_items(shared_data):
    enc = get_encoder("default")
    items = []
    recs = sorted(read_webqsp(shared_data / "webqsp_sample.json"), key=lambda r: len(r["nodes"]))
    for rec in recs[:SMALLEST]:
        ecx = EmbeddedComplex.from_graph(webqsp_record_to_graph(rec), enc)
        items.append(QAGraph(ecx, rec["question"], list(rec["answers"]), enc.encode([rec["question"]])[0]))
    return items


@pytest.mark.slow
def test_webqsp_retrieval_report(webqsp_items, capsys):
    for it in webqsp_items:  # invariants on real graphs
        sub = retrieve(it.ecx, it.q_vec, "toporag", k0=3, k1=3, k2=3, c2=0.5)
        g = nx.Graph()
        g.add_nodes_from(sub.nodes.tolist())
        g.add_edges_from(sub.complex.edges[sub.edges].tolist())
        assert sub.nodes.size > 0 and nx.is_connected(g)
        assert 0 < sub.cells2.size <= 3
    # top-k triples would embed ~55K extra triple texts: it is in benchmarks/bench_webqsp_retrieval.py
    rows = retrieval_report(webqsp_items, methods=("toporag", "g-retriever", "shortest-path"), ks=(1, 2, 3))
    assert len(rows) == 9 and all(0.0 <= r["answer_recall"] <= 1.0 for r in rows)
    table = format_table(rows)
    out = ROOT / "runs"
    out.mkdir(exist_ok=True)
    (out / "webqsp_retrieval_report.md").write_text(table + "\n")
    with capsys.disabled():
        print(f"\nWebQSP sample ({len(webqsp_items)} smallest graphs), retrieval report:\n" + table)
