"""Retrieval invariants for TopoRAG and the baselines."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toporag_core import TextualGraph, lift
from toporag_core.embed import HashingEncoder, embed_complex
from toporag_core.retrieval import (CLOSURE, METHODS, STEINER, TERMINAL, EmbeddedComplex, cell2_prizes,
                                    rank_prizes, retrieve, retrieve_subcomplex, textualize)

ENC = HashingEncoder(128)

SCENE = [("cup", "left of", "plate"), ("plate", "on", "table"), ("table", "under", "cup"),
         ("lamp", "on", "table"), ("lamp", "right of", "plate"), ("book", "next to", "lamp"),
         ("book", "on", "shelf"), ("shelf", "behind", "table"), ("cat", "near", "dog")]


def embedded(triples, **kw) -> EmbeddedComplex:
    return EmbeddedComplex.from_graph(TextualGraph.from_triples(triples), ENC, **kw)


def is_connected(sub) -> bool:
    if sub.nodes.size <= 1:
        return True
    g = nx.Graph()
    g.add_nodes_from(sub.nodes.tolist())
    g.add_edges_from(sub.complex.edges[sub.edges].tolist())
    return nx.is_connected(g)


def is_closed(sub) -> bool:
    cx = sub.complex
    bnd_edges = {int(e) for f in sub.cells2.tolist() for e in cx.cell2_edges(f)}
    bnd_nodes = set(cx.edges[sub.edges].reshape(-1).tolist())
    return bnd_edges <= set(sub.edges.tolist()) and bnd_nodes <= set(sub.nodes.tolist())


def test_rank_prizes():
    p = rank_prizes(np.array([0.1, 0.9, 0.5, 0.7]), 3)
    assert p.tolist() == [0.0, 3.0, 1.0, 2.0]
    assert rank_prizes(np.array([0.1, 0.2]), 10).tolist() == [1.0, 2.0]  # k larger than the set
    assert rank_prizes(np.array([0.1, 0.2]), 0).tolist() == [0.0, 0.0]


def test_cell2_prize_arithmetic():
    ecx = embedded(SCENE[:3])  # one triangle: cup, plate, table
    cx = ecx.complex
    p0 = np.array([3.0, 0.0, 1.0])
    p1 = np.array([2.0, 0.0, 1.0])
    assert cell2_prizes(cx, p0, p1, c2=0.5).tolist() == [3 + 1 + 2 + 1 - 0.5 * 3]


def test_toporag_result_is_connected_closed_and_has_roles():
    ecx = embedded(SCENE)
    sub = retrieve_subcomplex(ecx, "is the cup left of the plate on the table", k0=3, k1=3, k2=2, c2=0.1)
    assert sub.cells2.size >= 1
    assert is_connected(sub) and is_closed(sub)
    roles = sub.role_of(0)
    p0 = sub.prizes[0]
    for n, r in roles.items():
        assert r in (TERMINAL, STEINER, CLOSURE)
        if r == TERMINAL:
            assert p0[n] > 0
    assert set(sub.cell2_roles.tolist()) == {TERMINAL}
    assert sub.timings["total"] >= sub.timings["pcst"] >= 0


@settings(max_examples=60, deadline=None)
@given(st.integers(5, 25), st.integers(0, 40), st.integers(0, 100), st.integers(0, 6), st.floats(0, 5))
def test_retrieval_invariants_on_random_graphs(n, m, seed, k, c2):
    g = nx.gnm_random_graph(n, n - 1 + m, seed=seed)
    tg = TextualGraph([f"object {i} colour {i % 4}" for i in range(n)], np.array(list(g.edges)).T.reshape(2, -1),
                      [f"rel {(a + b) % 5}" for a, b in g.edges])
    ecx = EmbeddedComplex.from_graph(tg, ENC)
    q = f"colour {seed % 4} rel {seed % 5}"
    sub = retrieve(ecx, q, "toporag", k0=k, k1=k, k2=k, c2=c2)
    assert is_connected(sub) and is_closed(sub)
    assert sub.cells2.size <= k
    p2 = sub.prizes[2]
    assert (p2[sub.cells2] > 0).all()
    if k == 0:
        assert sub.is_empty()
    for method in ("g-retriever", "shortest-path"):
        other = retrieve(ecx, q, method, k0=k, k1=k)
        assert is_closed(other)
        if method == "g-retriever" or nx.is_connected(g):
            assert is_connected(other)


def test_huge_c2_gives_no_2cells_and_c2_monotone():
    ecx = embedded(SCENE)
    q = "cup plate table lamp"
    counts = [len(retrieve(ecx, q, k0=5, k1=5, k2=5, c2=c2).params["candidates2"]) for c2 in (0, 0.5, 1, 2, 4, 100)]
    assert counts == sorted(counts, reverse=True)
    assert counts[-1] == 0 and counts[0] > 0
    assert retrieve(ecx, q, k0=5, k1=5, k2=5, c2=1e6).cells2.size == 0


def test_k_larger_than_graph_and_k_zero():
    ecx = embedded(SCENE[:3])
    sub = retrieve(ecx, "cup", k0=100, k1=100, k2=100, c2=0.0)
    assert sub.counts == (3, 3, 1)
    assert retrieve(ecx, "cup", k0=0, k1=0, k2=0).is_empty()


def test_graph_without_cycles():
    ecx = embedded([("a", "r", "b"), ("b", "r", "c"), ("c", "s", "d")])
    assert ecx.complex.num_cells2 == 0
    sub = retrieve(ecx, "a b c d", k0=4, k1=3, k2=3)
    assert sub.cells2.size == 0 and is_connected(sub) and sub.nodes.size >= 2


def test_empty_graph_is_a_clear_error():
    ecx = EmbeddedComplex.from_graph(TextualGraph([], np.zeros((2, 0)), []), ENC)
    for method in METHODS:
        with pytest.raises(ValueError, match="empty graph"):
            retrieve(ecx, "anything", method)


def test_unknown_method():
    with pytest.raises(ValueError, match="unknown retrieval method"):
        retrieve(embedded(SCENE), "cup", "magic")


def test_two_cell_is_not_a_shortcut():
    """Two prized nodes far apart on a long cycle: the 2-cell may only join them by bringing its whole boundary."""
    ring = [(f"n{i}", "next", f"n{(i + 1) % 12}") for i in range(12)]
    ecx = embedded(ring + [("alpha", "x", "n0"), ("beta", "x", "n6")])
    sub = retrieve(ecx, "alpha beta", k0=2, k1=0, k2=1, c2=0.0, edge_cost=0.5)
    assert is_connected(sub)
    # either no 2-cell, or all 12 ring edges are present (closure), never a 2-cell with a partial boundary
    if sub.cells2.size:
        assert sub.edges.size >= 12 + 2


def test_two_cells_join_when_their_boundary_is_prized():
    ecx = embedded(SCENE)
    q = "cup left of plate, plate on table, table under cup"
    with_cells = retrieve(ecx, q, k0=3, k1=3, k2=1, c2=0.5)
    without = retrieve(ecx, q, k0=3, k1=3, k2=0, c2=0.5)
    assert with_cells.cells2.size == 1 and without.cells2.size == 0
    assert sorted(with_cells.cycles()[0]) == ["cup", "plate", "table"]


def test_g_retriever_and_topk_triples():
    ecx = embedded(SCENE)
    sub = retrieve(ecx, "book on shelf", "g-retriever", k0=3, k1=3)
    assert "book" in sub.node_texts() and "shelf" in sub.node_texts() and sub.cells2.size == 0
    tk = retrieve(ecx, "book on shelf", "topk-triples", k=2)
    assert ("book", "on", "shelf") in tk.triples() and len(tk.triples()) == 2
    sp = retrieve(ecx, "cat dog book", "shortest-path", k0=3, k1=0)
    assert {"cat", "dog", "book"} <= set(sp.node_texts())  # one shortest-path piece per component
    assert ("cat", "near", "dog") in sp.triples()


def test_textualize_layout():
    ecx = embedded(SCENE[:3] + [("mug, blue", "on", "table")])
    sub = retrieve(ecx, "cup plate table", k0=4, k1=4, k2=1, c2=0.0)
    text = textualize(sub)
    nodes_part, edges_part, cells_part = text.split("\n\n")
    assert nodes_part.splitlines()[0] == "node_id,node_attr"
    assert '"mug, blue"' in nodes_part  # CSV quoting keeps commas inside a field
    assert edges_part.splitlines()[0] == "src,edge_attr,dst"
    assert len(edges_part.splitlines()) == 1 + len(sub.triples())
    assert cells_part.startswith("2-cells")
    cyc = cells_part.splitlines()[1]
    assert cyc.count("-[") + cyc.count("<-[") >= 3 and "left of" in cyc and "under" in cyc


def test_retrieval_reuses_embeddings():
    from toporag_core.embed import CachedEncoder

    enc = CachedEncoder(HashingEncoder(64), cache_dir=None)
    g = TextualGraph.from_triples(SCENE)
    ecx = EmbeddedComplex.from_graph(g, enc)
    before = enc.encoded_count
    for k in range(6):
        retrieve(ecx, "cup on table", k0=k, k1=k, k2=k, c2=0.1 * k)
    assert enc.encoded_count - before <= 1  # only the question, once


def test_cache_survives_reopen(tmp_path):
    from toporag_core.embed import CachedEncoder

    class Counting(HashingEncoder):
        calls = 0

        def encode(self, texts, show_progress=False):
            Counting.calls += len(texts)
            return super().encode(texts)

    a = CachedEncoder(Counting(32), cache_dir=tmp_path)
    x = a.encode(["x", "y", "x"])
    b = CachedEncoder(Counting(32), cache_dir=tmp_path)
    y = b.encode(["y", "x"])
    assert Counting.calls == 2 and np.allclose(x[[1, 0]], y)
    assert b.encoded_count == 0


def test_embed_complex_shapes_and_2cell_mean():
    g = TextualGraph.from_triples(SCENE)
    cx = lift(g)
    emb = embed_complex(cx, ENC)
    assert emb.x0.shape == (cx.num_nodes, 128) and emb.x1.shape == (cx.num_edges, 128)
    assert emb.x2.shape == (cx.num_cells2, 128)
    f = 0
    want = np.concatenate([emb.x0[cx.cell2_nodes(f)], emb.x1[cx.cell2_edges(f)]]).mean(0)
    assert np.allclose(emb.x2[f], want, atol=1e-6)


def test_corrupt_cache_file_is_set_aside(tmp_path):
    from toporag_core.embed import CachedEncoder

    enc = CachedEncoder(HashingEncoder(16), cache_dir=tmp_path)
    enc.encode(["a"])
    enc.path.write_bytes(b"this is not a database" * 100)
    again = CachedEncoder(HashingEncoder(16), cache_dir=tmp_path)
    assert np.allclose(again.encode(["a"]), HashingEncoder(16).encode(["a"]))
    assert again.path.with_suffix(".corrupt").exists()


def test_tied_1cells_go_to_the_ones_near_the_question():
    # every relation is "left of": all 1-cells tie on cosine; the tie must go to the edges
    # whose endpoints the question names, not to the lowest edge ids
    triples = [(f"object{i}", "left of", f"object{i + 1}") for i in range(10)] + [("cup", "left of", "plate")]
    ecx = embedded(triples)
    sub = retrieve(ecx, "cup plate left of", k0=2, k1=1, k2=0)
    p1 = sub.prizes[1]
    top = int(np.argmax(p1))
    assert sorted(ecx.complex.graph.node_text[i] for i in ecx.complex.edges[top]) == ["cup", "plate"]


def test_chosen_2cells_are_the_ones_the_steiner_tree_reached():
    """Regression: 2-cell virtual nodes map back to the candidates in prize order.

    Here the best candidate (by prize) and the lowest-numbered candidate lie in different
    components; mixing them up returned a disconnected subcomplex.
    """
    g = nx.gnm_random_graph(13, 12, seed=23)
    tg = TextualGraph([f"object {i} colour {i % 4}" for i in range(13)], np.array(list(g.edges)).T,
                      [f"rel {(a + b) % 5}" for a, b in g.edges])
    ecx = EmbeddedComplex.from_graph(tg, ENC)
    sub = retrieve(ecx, "colour 3 rel 3", "toporag", k0=2, k1=2, k2=2, c2=0.0)
    assert sub.cells2.size >= 1 and is_connected(sub) and is_closed(sub)
    # every chosen 2-cell touches a node the Steiner tree itself chose (terminal or Steiner)
    picked = {n for n, r in sub.role_of(0).items() if r != CLOSURE}
    for f in sub.cells2.tolist():
        assert picked & set(ecx.complex.cell2_nodes(f).tolist())


def test_kaping_on_an_embedded_complex_encodes_no_triple():
    """The triples are the embedded 1-cells and their 0-cells: the first ``topk-triples`` call on an
    embedded complex sends only the question to the encoder (it once encoded every triple text)."""
    from toporag_core.embed import HashingEncoder
    from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve

    class Counting:
        def __init__(self):
            self.inner, self.calls = HashingEncoder(), []
            self.dim, self.name = self.inner.dim, "counting"

        def encode(self, texts, show_progress=False):
            self.calls.append(list(texts))
            return self.inner.encode(texts)

    g = TextualGraph.from_triples([("marie curie", "discovered", "polonium"), ("polonium", "named after", "poland"),
                                   ("marie curie", "born in", "warsaw"), ("warsaw", "capital of", "poland"),
                                   ("marie curie", "discovered", "radium"), ("radium", "is", "radium")])
    enc = Counting()
    ecx = EmbeddedComplex.from_graph(g, enc)
    enc.calls.clear()
    question = "Which element named after Poland did Marie Curie discover?"
    sub = retrieve(ecx, question, setting=RetrievalSetting.make("topk-triples", k=2))
    assert enc.calls == [[question]]
    assert sub.counts[1] == 2 and int(ecx.complex.edge_of_orig[1]) in sub.edges.tolist()  # polonium-named after-poland
    # the triple vectors are unit means of the triple's cell embeddings
    from toporag_core.retrieval.baselines import _triple_vectors

    tv = _triple_vectors(ecx)
    assert tv.shape == (g.num_edges, ecx.emb.dim) and np.allclose(np.linalg.norm(tv, axis=1), 1.0, atol=1e-5)
    e = 1  # polonium - named after - poland
    s, t = g.edge_index[:, e]
    want = ecx.emb.x0[s] + ecx.emb.x1[ecx.complex.edge_of_orig[e]] + ecx.emb.x0[t]
    assert np.allclose(tv[e], want / np.linalg.norm(want), atol=1e-5)
