"""CW encoder, GCN ablation and subcomplex batching."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.nn import (CWEncoder, CWNConfig, GCNEncoder, SubcomplexTensors, build_encoder, collate,
                             subcomplex_tensors)
from toporag_core.retrieval import EmbeddedComplex, retrieve_subcomplex
from toporag_core.retrieval.result import make_subcomplex

DIM = 32
CFG = CWNConfig(in_dim=DIM, hidden=16, layers_stage1=2, layers_stage2=1)

# two small graphs with several fundamental cycles, one tree-shaped tail each
TRIPLES_A = [
    ("cats", "chase", "mice"), ("mice", "eat", "cheese"), ("cheese", "attracts", "cats"),
    ("cats", "are", "pets"), ("pets", "need", "care"), ("care", "costs", "money"), ("money", "buys", "cheese"),
    ("cats", "sleep on", "sofa"), ("sofa", "is in", "house"),
]
TRIPLES_B = [
    ("solar power", "is", "renewable"), ("renewable", "reduces", "pollution"),
    ("pollution", "harms", "health"), ("health", "needs", "solar power"),
    ("solar power", "costs", "money"), ("money", "funds", "research"), ("research", "improves", "solar power"),
    ("research", "reduces", "pollution"), ("wind", "is", "renewable"),
]


def embedded(triples, name="g") -> EmbeddedComplex:
    return EmbeddedComplex.from_graph(TextualGraph.from_triples(triples, name=name), HashingEncoder(DIM))


def whole(ecx: EmbeddedComplex):
    """The whole complex as a subcomplex (every cell selected)."""
    cx = ecx.complex
    n, m, f = cx.shape
    zeros = (np.zeros(n), np.zeros(m), np.zeros(f))
    return make_subcomplex(cx, np.arange(n), np.arange(m), np.arange(f), zeros, "all", {}, {})


@pytest.fixture(scope="module")
def items() -> list[SubcomplexTensors]:
    """Real retrieved subcomplexes (some with 2-cells), whole complexes, and an empty one."""
    a, b = embedded(TRIPLES_A, "a"), embedded(TRIPLES_B, "b")
    out = [subcomplex_tensors(retrieve_subcomplex(a, "do cats eat cheese", k2=3), a.emb),
           subcomplex_tensors(whole(a), a.emb),
           SubcomplexTensors.empty(DIM),
           subcomplex_tensors(retrieve_subcomplex(b, "is solar power renewable", k2=3), b.emb),
           subcomplex_tensors(whole(b), b.emb)]
    assert sum(it.shape[2] for it in out) > 0, "fixture should contain 2-cells"
    return out


def encoders():
    torch.manual_seed(0)
    return {"cwn": CWEncoder(CFG).eval(), "cwn-no-cells2": CWEncoder(CWNConfig(**{**CFG.to_dict(), "use_cells2": False})).eval(),
            "gcn": GCNEncoder(CFG).eval()}


# ---------------------------------------------------------------- tensors
def test_subcomplex_tensors_match_parent_complex():
    ecx = embedded(TRIPLES_A)
    cx = ecx.complex
    sub = retrieve_subcomplex(ecx, "do cats eat cheese", k2=3)
    assert sub.cells2.size > 0
    t = subcomplex_tensors(sub, ecx.emb)
    assert t.shape == sub.counts
    np.testing.assert_array_equal(t.x0.numpy(), ecx.emb.x0[sub.nodes])
    np.testing.assert_array_equal(t.x2.numpy(), ecx.emb.x2[sub.cells2])
    # local ids map back to the parent's cells
    np.testing.assert_array_equal(sub.nodes[t.edge_nodes.numpy()], cx.edges[sub.edges])
    for j, f in enumerate(sub.cells2.tolist()):
        got = sub.edges[t.cell_edges[t.cell_index == j].numpy()]
        np.testing.assert_array_equal(np.sort(got), np.sort(cx.cell2_edges(f)))
    no2 = subcomplex_tensors(sub, ecx.emb, use_cells2=False)
    assert no2.shape == (sub.nodes.size, sub.edges.size, 0) and no2.cell_edges.numel() == 0
    torch.testing.assert_close(no2.x1, t.x1)


def test_safetensors_round_trip(tmp_path, items):
    flat = {}
    for i, it in enumerate(items):
        flat.update(it.to_dict(prefix=f"{i}."))
    save_file(flat, tmp_path / "cache.safetensors")
    back = load_file(tmp_path / "cache.safetensors")
    for i, it in enumerate(items):
        got = SubcomplexTensors.from_dict(back, prefix=f"{i}.")
        for k, v in it.to_dict().items():
            assert torch.equal(getattr(got, k), v), k
    with pytest.raises(ValueError, match="missing"):
        SubcomplexTensors.from_dict({"x0": items[0].x0})


def test_bad_tensors_raise_clear_errors(items):
    it = items[1]
    bad = SubcomplexTensors(it.x0, it.x1, it.x2, it.edge_nodes + it.shape[0], it.cell_edges, it.cell_index)
    with pytest.raises(ValueError, match="edge_nodes"):
        collate([bad])
    with pytest.raises(ValueError, match="feature sizes"):
        collate([it, SubcomplexTensors.empty(DIM + 1)])
    with pytest.raises(ValueError, match="expects"):
        CWEncoder(CWNConfig(in_dim=DIM + 1, hidden=8))(collate([it]))
    with pytest.raises(ValueError, match="unknown encoder"):
        build_encoder("gat", CFG)


def test_unclosed_subcomplex_is_rejected():
    ecx = embedded(TRIPLES_A)
    sub = whole(ecx)
    sub.nodes = sub.nodes[1:]  # an edge now points at a node that is not selected
    with pytest.raises(ValueError, match="not closed"):
        subcomplex_tensors(sub, ecx.emb)


def test_relations_equal_the_complex_adjacency():
    ecx = embedded(TRIPLES_B)
    cx = ecx.complex
    # put an empty graph first so every index is shifted by a nonzero offset in the second one
    first = subcomplex_tensors(whole(embedded(TRIPLES_A)), embedded(TRIPLES_A).emb)
    b = collate([first, SubcomplexTensors.empty(DIM), subcomplex_tensors(whole(ecx), ecx.emb)])
    n0, m0, f0 = first.shape
    n, m, f = cx.shape
    assert b.batch0.tolist() == [0] * n0 + [2] * n and b.ptr1.tolist() == [0, m0, m0, m0 + m]

    def pairs(rel, lo, hi):
        sel = (rel[0] >= lo) & (rel[0] < hi)
        return {(int(r) - lo, int(s) - lo) for r, s in zip(rel[0][sel], rel[1][sel])}

    a0 = cx.adjacency_matrix(0).tocoo()
    assert pairs(b.node_up, n0, n0 + n) == set(zip(a0.row.tolist(), a0.col.tolist()))
    a1 = cx.adjacency_matrix(1).tocoo()
    assert len(a1.row) > 0
    assert pairs(b.edge_up, m0, m0 + m) == set(zip(a1.row.tolist(), a1.col.tolist()))
    # the shared coface really contains both cells
    recv, nb, shared = b.node_up
    assert torch.equal(torch.sort(b.edge_nodes[shared], 1).values, torch.sort(torch.stack([recv, nb], 1), 1).values)
    recv, nb, shared = b.edge_up
    inc = set(zip(b.edge_cell[0].tolist(), b.edge_cell[1].tolist()))
    assert all((e, c) in inc and (g, c) in inc for e, g, c in zip(recv.tolist(), nb.tolist(), shared.tolist()))
    # B2 incidence of the second graph, shifted
    b2 = cx.incidence_matrix(2, signed=False).tocoo()
    sel = b.edge_cell[1] >= f0
    assert {(int(e) - m0, int(c) - f0) for e, c in b.edge_cell[:, sel].T} == set(zip(b2.row.tolist(), b2.col.tolist()))


# ---------------------------------------------------------------- encoders
@pytest.mark.parametrize("kind", ["cwn", "cwn-no-cells2", "gcn"])
def test_output_shape_and_batching_equals_one_by_one(items, kind):
    enc = encoders()[kind]
    with torch.no_grad():
        out = enc(collate(items))
        assert out.shape == (len(items), enc.out_dim) and enc.out_dim == CFG.hidden
        alone = torch.cat([enc(collate([it])) for it in items])
        torch.testing.assert_close(out, alone, atol=1e-5, rtol=1e-5)
        perm = [3, 0, 4, 2, 1]
        torch.testing.assert_close(enc(collate([items[i] for i in perm])), out[perm], atol=1e-5, rtol=1e-5)
    assert torch.all(out[2] == 0), "empty subcomplex must pool to zeros"
    assert out[[0, 1, 3, 4]].abs().sum(1).min() > 0
    assert not torch.allclose(out[1], out[4])


def permuted(it: SubcomplexTensors, seed: int) -> SubcomplexTensors:
    """Same subcomplex with relabelled nodes, 1-cells, 2-cells, flipped edge orientations, shuffled boundary order."""
    g = torch.Generator().manual_seed(seed)
    n, m, f = it.shape
    pn, pm, pf = (torch.randperm(k, generator=g) for k in (n, m, f))
    new_n, new_m, new_f = (torch.argsort(p) for p in (pn, pm, pf))  # old id -> new id
    flip = torch.rand(m, generator=g) < 0.5
    en = new_n[it.edge_nodes[pm]]
    en[flip[pm]] = en[flip[pm]].flip(1)
    pl = torch.randperm(it.cell_edges.numel(), generator=g)
    return SubcomplexTensors(it.x0[pn], it.x1[pm], it.x2[pf], en, new_m[it.cell_edges[pl]], new_f[it.cell_index[pl]])


@pytest.mark.parametrize("kind", ["cwn", "cwn-no-cells2", "gcn"])
def test_invariant_to_relabelling_cells(items, kind):
    enc = encoders()[kind]
    with torch.no_grad():
        ref = enc(collate(items))
        got = enc(collate([permuted(it, seed=i) for i, it in enumerate(items)]))
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_cells2_features_matter_only_with_cells2(items):
    encs = encoders()
    changed = [SubcomplexTensors(it.x0, it.x1, it.x2 + torch.randn_like(it.x2), it.edge_nodes, it.cell_edges,
                                 it.cell_index) for it in items]
    has2 = torch.tensor([it.shape[2] > 0 for it in items])
    with torch.no_grad():
        for kind in encs:
            before, after = encs[kind](collate(items)), encs[kind](collate(changed))
            if kind == "cwn":
                diff = (before - after).abs().amax(1)
                assert torch.all(diff[has2] > 1e-4) and torch.all(diff[~has2] == 0)
            else:
                torch.testing.assert_close(before, after, atol=0, rtol=0)


def test_cells2_structure_matters(items):
    """Same features, 2-cells removed: the CW encoder's output changes (upper adjacency of edges goes)."""
    enc = encoders()["cwn"]
    it = items[4]
    no2 = SubcomplexTensors(it.x0, it.x1, it.x2[:0], it.edge_nodes, it.cell_edges[:0], it.cell_index[:0])
    with torch.no_grad():
        assert not torch.allclose(enc(collate([it])), enc(collate([no2])), atol=1e-4)


@pytest.mark.parametrize("stage1", [0, 2])
def test_node_states_hear_2cells_at_default_depth(items, stage1):
    """Eq. 19, top-down within a stage-2 layer: with one stage-2 layer, changing a 2-cell's feature
    changes the 0-cell states of its subcomplex (2-cell -> 1-cell -> 0-cell inside the layer)."""
    torch.manual_seed(0)
    enc = CWEncoder(CWNConfig(**{**CFG.to_dict(), "layers_stage1": stage1, "layers_stage2": 1})).eval()
    it = items[4]  # the whole complex b: has 2-cells
    assert it.shape[2] > 0
    x2 = it.x2.clone()
    x2[0] += 1.0  # one 2-cell only
    changed = SubcomplexTensors(it.x0, it.x1, x2, it.edge_nodes, it.cell_edges, it.cell_index)
    with torch.no_grad():
        h0_before, h1_before, _ = enc.cell_states(collate([it]))
        h0_after, h1_after, _ = enc.cell_states(collate([changed]))
    on_cell = torch.unique(it.edge_nodes[it.cell_edges[it.cell_index == 0]])  # nodes on 2-cell 0's boundary
    assert (h0_before - h0_after).abs().amax(1)[on_cell].min() > 1e-6
    assert (h1_before - h1_after).abs().amax() > 1e-6


@pytest.mark.parametrize("kind", ["cwn", "gcn"])
def test_batches_without_cells2_or_without_any_cells(items, kind):
    enc = encoders()[kind]
    flat = [SubcomplexTensors(it.x0, it.x1, it.x2[:0], it.edge_nodes, it.cell_edges[:0], it.cell_index[:0])
            for it in items]
    with torch.no_grad():
        out = enc(collate(flat))
        assert out.shape == (len(items), CFG.hidden) and torch.isfinite(out).all()
        empty = enc(collate([SubcomplexTensors.empty(DIM)] * 3))
    assert torch.equal(empty, torch.zeros(3, CFG.hidden))


@pytest.mark.parametrize("kind", ["cwn", "cwn-no-cells2", "gcn"])
def test_gradients_reach_every_parameter(items, kind):
    enc = encoders()[kind].train()
    out = enc(collate(items))
    (out * torch.randn_like(out)).sum().backward()
    missing = [name for name, p in enc.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing, missing


def test_build_encoder_and_config_round_trip():
    assert isinstance(build_encoder("cwn", CFG), CWEncoder)
    gcn = build_encoder("gcn", CFG)
    assert isinstance(gcn, GCNEncoder) and gcn.out_dim == CFG.hidden
    assert CWNConfig.from_dict(CFG.to_dict()) == CFG
    with pytest.raises(ValueError, match="unknown keys"):
        CWNConfig.from_dict({"hiden": 3})
    # "w/o CRL" has no 2-cell weights at all, and fixed eps are buffers, not parameters
    full = {n for n, _ in CWEncoder(CFG).named_parameters()}
    crl = {n for n, _ in CWEncoder(CWNConfig(**{**CFG.to_dict(), "use_cells2": False})).named_parameters()}
    assert crl < full and any(".ranks.2." in n for n in full - crl)
    fixed = CWEncoder(CWNConfig(**{**CFG.to_dict(), "eps_trainable": False}))
    assert not any("eps" in n for n, _ in fixed.named_parameters())
    assert any("eps" in n for n, _ in fixed.named_buffers())


def test_sum_and_mean_into_equal_pygs_scatter_bit_for_bit():
    from torch_geometric.utils import scatter

    from toporag_core.nn.cwn import mean_into, sum_into

    g = torch.Generator().manual_seed(0)
    values = torch.randn(40, 7, generator=g)
    index = torch.randint(0, 9, (40,), generator=g)
    index[index == 4] = 5  # slot 4 receives nothing: zeros, not NaN
    for ours, reduce in ((sum_into, "sum"), (mean_into, "mean")):
        got, want = ours(values, index, 11), scatter(values, index, dim=0, dim_size=11, reduce=reduce)
        assert got.shape == (11, 7) and torch.equal(got, want)
        assert not got[4].any() and not got[10].any()
    assert mean_into(values[:0], index[:0], 3).shape == (3, 7)


def test_the_cli_and_the_cw_network_load_without_pyg():
    import subprocess
    import sys

    code = ("import sys, toporag_core.cli, toporag_core.nn, toporag_core.answering.pipeline; "
            "print('torch_geometric' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"  # PyG takes seconds to import; only the GCN ablation builds with it
