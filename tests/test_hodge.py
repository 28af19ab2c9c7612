"""Hodge Laplacians of lifted complexes (toporag_core/topo/hodge.py): dim ker Lk against the Betti
numbers, the dense and the sparse route against each other, the Hodge decomposition, gluing step by
step, and the CLI's ``hodge`` field. Random graphs (hypothesis), every ExplaGraphs graph and every
shared WebQSP graph, for the bfs and the ring lifting."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toporag_core import TextualGraph, lift
from toporag_core.io.explagraphs import explagraphs_row_to_graph, read_explagraphs
from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph
from toporag_core.topo.hodge import (glue_steps, harmonic_basis, hodge_decomposition, hodge_numbers, laplacians,
                                     sparse_rank)

from .conftest import SHARED
from .test_lift import random_graphs


def components(g: TextualGraph) -> int:
    simple = nx.Graph()
    simple.add_nodes_from(range(g.num_nodes))
    simple.add_edges_from((a, b) for a, b in g.edge_index.T.tolist() if a != b)
    return nx.number_connected_components(simple)


def check_hodge(cx, independent: bool = True) -> tuple[int, int, int]:
    """The invariants every lifted complex satisfies; ``independent``: also the dense route (eigenvalues
    of each Lk) against the sparse one (exact elimination), where both are affordable."""
    n, m, f = cx.shape
    h = hodge_numbers(cx)
    h0, h1, h2 = h.harmonic
    assert h0 == cx.betti0 == components(cx.graph)
    assert h0 - h1 + h2 == n - m + f
    assert min(h.harmonic) >= 0
    if cx.tree_method != "rings":
        assert h2 == 0 and h1 == cx.num_skipped_cycles
    if independent and max(cx.shape) <= 400:
        dense, sparse = hodge_numbers(cx, dense=True), hodge_numbers(cx, dense=False)
        assert dense.harmonic == sparse.harmonic == h.harmonic
        assert [len(dense.spectra[k]) for k in ("L0", "L1", "L2")] == [n, m, f]
    return h.harmonic


@settings(max_examples=80, deadline=None)
@given(random_graphs(), st.sampled_from(["bfs", "rings"]), st.sampled_from([None, 3, 4, 5]))
def test_hodge_numbers_on_random_graphs(g, tree, max_len):
    cx = lift(g, tree=tree, max_cycle_len=max_len)
    h0, h1, h2 = check_hodge(cx)
    basis = harmonic_basis(cx)
    assert basis.shape == (cx.num_edges, h1)
    if h1:
        assert np.allclose(basis.T @ basis, np.eye(h1), atol=1e-9)
        assert np.abs(laplacians(cx)[1] @ basis).max() < 1e-8
    steps = glue_steps(cx)
    assert len(steps) == cx.num_cells2 + 1 and steps[0]["h1"] == cx.betti1 and steps[0]["h2"] == 0
    assert (steps[-1]["h1"], steps[-1]["h2"]) == (h1, h2)
    for a, b in zip(steps, steps[1:]):  # a 2-cell fills one cycle, or closes one cavity
        assert (a["h1"] - b["h1"], b["h2"] - a["h2"]) == ((1, 0) if b["fills"] else (0, 1))


@settings(max_examples=60, deadline=None)
@given(random_graphs(), st.sampled_from(["bfs", "rings"]), st.integers(0, 10_000))
def test_hodge_decomposition_parts_are_orthogonal_and_sum_to_the_flow(g, tree, seed):
    cx = lift(g, tree=tree, max_cycle_len=4)
    flow = np.random.default_rng(seed).normal(size=cx.num_edges)
    d = hodge_decomposition(cx, flow)
    assert np.allclose(d.gradient + d.curl + d.harmonic, flow)
    scale = max(1.0, float(np.abs(flow).sum()))
    for a, b in ((d.gradient, d.curl), (d.gradient, d.harmonic), (d.curl, d.harmonic)):
        assert abs(float(a @ b)) < 1e-8 * scale
    b1, b2 = cx.incidence_matrix(1), cx.incidence_matrix(2)
    assert np.abs(b1 @ d.harmonic).max(initial=0) < 1e-8 * scale  # no divergence at any node
    assert np.abs(b2.T @ d.harmonic).max(initial=0) < 1e-8 * scale  # no circulation around any 2-cell
    assert np.allclose(b1.T @ d.potential, d.gradient) and np.allclose(b2 @ d.circulation, d.curl)
    nrm = d.norms()
    assert nrm["flow"] == pytest.approx(nrm["gradient"] + nrm["curl"] + nrm["harmonic"], rel=1e-9, abs=1e-9)
    with pytest.raises(ValueError, match="one value per 1-cell"):
        hodge_decomposition(cx, np.zeros(cx.num_edges + 1))


def test_known_complexes():
    # a cycle of 8 with a triangle beside it: bfs with max length 5 fills the triangle, skips the octagon
    g = TextualGraph.from_networkx(nx.compose(nx.cycle_graph(8), nx.relabel_nodes(nx.cycle_graph(3),
                                                                                  {0: 10, 1: 11, 2: 12})))
    cx = lift(g, max_cycle_len=5)
    assert hodge_numbers(cx).harmonic == (2, 1, 0)  # two components, one open cycle
    basis = harmonic_basis(cx)
    on = np.flatnonzero(np.abs(basis[:, 0]) > 1e-9)
    assert sorted(on.tolist()) == [e for e in range(cx.num_edges) if cx.edges[e].max() < 8]  # the octagon
    # K4 with rings: 4 triangles bound a sphere, and each square with its two triangles a pillow
    k4 = lift(TextualGraph.from_networkx(nx.complete_graph(4)), tree="rings")
    assert hodge_numbers(k4).harmonic == (1, 0, 4)
    assert hodge_numbers(lift(TextualGraph.from_networkx(nx.complete_graph(4)), tree="rings",
                              max_cycle_len=3)).harmonic == (1, 0, 1)
    # the octahedron's 8 triangles: one cavity, no hole
    octa = lift(TextualGraph.from_networkx(nx.octahedral_graph()), tree="rings", max_cycle_len=3)
    assert hodge_numbers(octa).harmonic == (1, 0, 1)
    empty = lift(TextualGraph([], np.zeros((2, 0)), []))
    assert hodge_numbers(empty).harmonic == (0, 0, 0) and hodge_numbers(empty, dense=False).harmonic == (0, 0, 0)
    assert hodge_numbers(lift(TextualGraph(["a", "b"], np.zeros((2, 0)), []))).harmonic == (2, 0, 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 10_000))
def test_sparse_rank_matches_numpy(r, c, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-1, 2, size=(r, c)) * (rng.random((r, c)) < 0.3)
    if r > 2 and c > 1:
        a[-1] = a[0] - a[1]  # a dependent row
    assert sparse_rank(a) == np.linalg.matrix_rank(a) if a.any() else sparse_rank(a) == 0


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "expla_graphs_train_dev.tsv").exists(), reason="../shared/data is absent")
def test_every_explagraphs_graph():
    rows = read_explagraphs(SHARED / "expla_graphs_train_dev.tsv")
    assert len(rows) == 2766
    seen = {"bfs": set(), "rings": set()}
    for i, row in enumerate(rows):
        g = explagraphs_row_to_graph(row)
        for tree in ("bfs", "rings"):
            seen[tree].add(check_hodge(lift(g, tree=tree), independent=i % 10 == 0))
    assert all(h[2] == 0 for h in seen["bfs"])


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "webqsp_sample.json").exists(), reason="../shared/data is absent")
def test_every_shared_webqsp_graph():
    recs = read_webqsp(SHARED / "webqsp_sample.json")
    assert len(recs) == 12
    for rec in recs:
        g = webqsp_record_to_graph(rec)
        for tree in ("bfs", "rings"):
            cx = lift(g, tree=tree)
            h = check_hodge(cx)
            assert hodge_numbers(cx).method == "sparse" and hodge_numbers(cx).spectra is None
            if cx.num_edges <= 800:  # independent: eigenvalues of the dense L1 below the tolerance
                w = np.linalg.eigvalsh(laplacians(cx)[1].toarray())
                assert int((w < 1e-8 * w[-1]).sum()) == h[1]
            if tree == "rings":
                assert h[2] > 0 and h[1] < cx.betti1  # rings fill most cycles and enclose cavities


def test_cli_lift_json_has_the_hodge_numbers(capsys, tmp_path):
    from toporag_core.cli import main

    p = tmp_path / "g.csv"
    p.write_text("head,relation,tail\n" + "".join(f"n{a},r,n{b}\n" for a, b in nx.complete_graph(4).edges()))
    for tree, want in (("bfs", [1, 0, 0]), ("rings", [1, 0, 4])):
        assert main(["lift", str(p), "--json", "--tree", tree]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["hodge"]["harmonic"] == want
        assert out["nodes"] == 4 and out["edges"] == 6 and "betti1" in out  # the old keys stay
        spectra = out["hodge"]["spectra"]
        assert spectra["L0"] == pytest.approx([0, 4, 4, 4], abs=1e-6)  # K4's graph Laplacian
        assert len(spectra["L1"]) == 6 and len(spectra["L2"]) == out["cells2"]
    assert main(["lift", str(p), "--max-cycle-len", "2"]) == 0
    assert "harmonic (dim ker L0, L1, L2) = (1, 3, 0)" in capsys.readouterr().out
