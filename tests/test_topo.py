"""Topology-aware node retrieval: proximity, GraphWave roles, the top-K retriever, correlation."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.topo import (UNREACHABLE, TopoNodeIndex, build_topo_prompt, graph_adjacency, proximity_embedding,
                               resolve_target, retrieve_for_cli, retrieve_nodes, role_embedding, sample_pairs,
                               text_similarity_by_distance, topology_text_correlation)
from toporag_core.topo.proximity import cosine_rows, default_alpha, row_normalized
from toporag_core.topo.role import ROLE_EPS


def path_cycle_star() -> nx.Graph:
    """A path p0-p1-p2 glued to a 5-cycle at c0, a 3-leaf star glued at c2: only the star
    leaves are automorphic (c0 and c2 carry different attachments, so no reflection)."""
    g = nx.Graph()
    nx.add_path(g, ["p0", "p1", "p2", "c0"])
    nx.add_cycle(g, ["c0", "c1", "c2", "c3", "c4"])
    g.add_edges_from([("c2", "s0"), ("s0", "s1"), ("s0", "s2"), ("s0", "s3")])
    return g


def two_copies() -> tuple[TextualGraph, int]:
    base = path_cycle_star()
    n = base.number_of_nodes()
    g = nx.disjoint_union(base, base)  # node a of copy 1 is node a + n of copy 2
    return TextualGraph.from_networkx(g, name="twins"), n


def hop_matrix(g: nx.Graph) -> np.ndarray:
    return nx.floyd_warshall_numpy(g, nodelist=sorted(g.nodes))


# ------------------------------------------------------------------ role
@pytest.mark.parametrize("method", ["exact", "chebyshev"])
def test_role_twin_in_other_copy_is_most_similar(method):
    graph, n = two_copies()
    index = TopoNodeIndex.build(graph, "role", K=2 * n - 1, role_kw={"method": method})
    leaves = {n - 3, n - 2, n - 1}  # s1, s2, s3 (insertion order): automorphic within a copy
    for a in range(2 * n):
        twin = (a + n) % (2 * n)
        scores = dict(index.topk[a])
        best = max(scores.values())
        assert scores[twin] == pytest.approx(best), (a, twin)
        assert scores[twin] == pytest.approx(1 / ROLE_EPS)  # identical embeddings: capped score
        if a % n not in leaves:  # no automorphic partner: the twin alone is the best, by a margin
            others = [s for j, s in scores.items() if j != twin]
            assert max(others) < 0.01 * best
            assert retrieve_nodes(index, target=a, k=1).nodes == [twin]


def test_role_embedding_shape_and_exact_chebyshev_agree():
    tol = 1e-8  # Chebyshev truncation bound; the characteristic function moves by at most t_max * tol
    for g in [nx.barbell_graph(5, 3), nx.connected_watts_strogatz_graph(60, 4, 0.3, seed=1), path_cycle_star()]:
        adj = graph_adjacency(TextualGraph.from_networkx(g))
        exact = role_embedding(adj, method="exact", d=20)
        cheb = role_embedding(adj, method="chebyshev", d=20, cheb_tol=tol, block_size=7)  # several blocks
        assert exact.shape == (g.number_of_nodes(), 2 * 20 * 2)
        np.testing.assert_allclose(cheb, exact, atol=100 * tol * 2, rtol=0)
        crude = role_embedding(adj, method="chebyshev", d=20, cheb_order=1)
        assert np.abs(crude - exact).max() > 1e-3  # the tolerance above is not vacuous


def test_role_embedding_bad_input():
    adj = graph_adjacency(TextualGraph.from_networkx(nx.path_graph(4)))
    with pytest.raises(ValueError, match="method"):
        role_embedding(adj, method="fast")
    with pytest.raises(ValueError, match="scales"):
        role_embedding(adj, scales=[0.0])
    with pytest.raises(ValueError, match="scales"):
        role_embedding(adj, scales="big")


# ------------------------------------------------------------------ proximity
def test_proximity_ranks_neighbours_above_far_nodes_on_a_path():
    g = nx.path_graph(30)
    index = TopoNodeIndex.build(TextualGraph.from_networkx(g), "proximity", K=29)
    hops = hop_matrix(g)
    for a in range(30):
        scores = dict(index.topk[a])
        near = [scores[j] for j in range(30) if hops[a, j] == 1]
        far = [scores[j] for j in range(30) if hops[a, j] >= 3]
        assert min(near) > max(far), a


def test_proximity_ring_of_cliques_prefers_own_neighbourhood():
    g = nx.ring_of_cliques(8, 5)
    index = TopoNodeIndex.build(TextualGraph.from_networkx(g), "proximity", K=39)
    hops = hop_matrix(g)
    for a in range(40):
        scores = dict(index.topk[a])
        near = np.mean([scores[j] for j in range(40) if hops[a, j] == 1])
        far = np.mean([scores[j] for j in range(40) if hops[a, j] >= 4])
        assert near > far + 0.3, a


def test_proximity_projection_approximates_exact_walk_cosine():
    g = nx.connected_watts_strogatz_graph(40, 4, 0.2, seed=3)
    adj = graph_adjacency(TextualGraph.from_networkx(g))
    ahat = row_normalized(adj).toarray()
    exact = sum(w * np.linalg.matrix_power(ahat, k + 1) for k, w in enumerate(default_alpha(3)))
    ce, cp = cosine_rows(exact), cosine_rows(proximity_embedding(adj, d=4096, seed=1))
    iu = np.triu_indices(40, 1)
    assert np.corrcoef((ce @ ce.T)[iu], (cp @ cp.T)[iu])[0, 1] > 0.97


def test_proximity_seeded_and_isolated_nodes():
    adj = graph_adjacency(TextualGraph.from_networkx(nx.karate_club_graph()))
    p0, p0b, p1 = proximity_embedding(adj, seed=0), proximity_embedding(adj, seed=0), proximity_embedding(adj, seed=1)
    assert p0.shape == (34, 64)
    assert np.array_equal(p0, p0b) and not np.allclose(p0, p1)
    iso = proximity_embedding(sp.csr_matrix((3, 3)), d=8)  # no edges: zero rows, no NaN
    assert np.array_equal(iso, np.zeros((3, 8)))
    with pytest.raises(ValueError, match="alpha"):
        proximity_embedding(adj, K=3, alpha=[1.0, 0.5])


def test_graph_adjacency_is_simple_undirected():
    g = TextualGraph(["a", "b", "c"], np.array([[0, 1, 0, 2], [1, 0, 0, 1]]), ["r", "s", "loop", "t"])
    adj = graph_adjacency(g).toarray()
    assert np.array_equal(adj, [[0, 1, 0], [1, 0, 1], [0, 1, 0]])


# ------------------------------------------------------------------ retriever
def test_topk_dictionary_excludes_target_and_matches_brute_force():
    graph = TextualGraph.from_networkx(nx.karate_club_graph())
    index = TopoNodeIndex.build(graph, "proximity", K=5)
    full = index.emb @ index.emb.T
    for a in range(graph.num_nodes):
        hits = index.topk[a]
        assert len(hits) == 5 and a not in [j for j, _ in hits]
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        np.testing.assert_allclose(scores, np.sort(np.delete(full[a], a))[::-1][:5])
    res = retrieve_nodes(index, target=0, k=8)  # k > K: scored on the fly, same order
    assert len(res.nodes) == 8 and 0 not in res.nodes and res.nodes[:5] == [j for j, _ in index.topk[0]]
    d = res.to_dict()
    assert d["method"] == "proximity" and d["target"] == 0 and len(d["texts"]) == 8 and "lookup" in d["timings"]


def test_random_baseline_is_seeded():
    graph = TextualGraph.from_networkx(nx.karate_club_graph())
    a, b = TopoNodeIndex.build(graph, "random", K=5, seed=7), TopoNodeIndex.build(graph, "random", K=5, seed=7)
    c = TopoNodeIndex.build(graph, "random", K=5, seed=8)
    assert a.topk == b.topk and a.topk != c.topk
    assert all(len(v) == 5 and i not in [j for j, _ in v] for i, v in a.topk.items())


def test_question_picks_most_text_similar_target_and_text_baseline():
    texts = ["Paris capital of France", "Seine river flows through Paris", "Berlin capital of Germany",
             "Spree river Berlin", "Rhine river Germany", "Eiffel tower Paris"]
    graph = TextualGraph.from_triples([(texts[0], "r", texts[1]), (texts[1], "r", texts[5]),
                                       (texts[2], "r", texts[3]), (texts[3], "r", texts[4]), (texts[0], "r", texts[2])])
    enc = HashingEncoder(dim=512)
    question = "which river flows through Paris"
    expect = int(np.argmax(enc.encode(graph.node_text) @ enc.encode([question])[0]))
    assert graph.node_text[expect] == "Seine river flows through Paris"
    for method in ["proximity", "role", "text"]:
        index = TopoNodeIndex.build(graph, method, K=3, encoder=enc)
        res = retrieve_nodes(index, question=question, encoder=enc, k=3)
        assert res.target == expect and res.target not in res.nodes and len(res.nodes) == 3
    text_index = TopoNodeIndex.build(graph, "text", K=2, encoder=enc)
    emb = enc.encode(graph.node_text)
    for a in range(graph.num_nodes):  # text baseline = brute-force cosine ranking
        sims = emb @ emb[a]
        sims[a] = -np.inf
        assert text_index.topk[a][0][1] == pytest.approx(sims.max())
    assert graph.node_text[text_index.topk[0][0][0]] == "Berlin capital of Germany"  # shares "capital of"
    prompt = build_topo_prompt(graph, res, partial_text="The Seine is")
    assert "Partial text of the target: The Seine is" in prompt
    assert all(t in prompt for t in res.texts) and "Target node: Seine river flows through Paris" in prompt


def test_bad_targets_give_clear_errors():
    graph = TextualGraph.from_triples([("alpha", "r", "beta"), ("beta", "r", "gamma")], name="toy")
    index = TopoNodeIndex.build(graph, "proximity", K=2)
    with pytest.raises(ValueError, match=r"no node with index or text 'alpah'.*did you mean 'alpha'"):
        resolve_target(graph, "alpah")
    with pytest.raises(ValueError, match="outside 0..2"):
        resolve_target(graph, "7")
    with pytest.raises(ValueError, match="outside 0..2"):
        retrieve_nodes(index, target=3)
    with pytest.raises(ValueError, match="target node or a question"):
        retrieve_nodes(index)
    with pytest.raises(ValueError, match="unknown topology retrieval method"):
        TopoNodeIndex.build(graph, "pagerank")
    with pytest.raises(ValueError, match="needs an encoder"):
        TopoNodeIndex.build(graph, "text")
    assert resolve_target(graph, "GAMMA") == 2 and resolve_target(graph, 1) == 1 and resolve_target(graph, "0") == 0


def test_retrieve_for_cli_json_ready():
    graph, n = two_copies()
    out = retrieve_for_cli(graph, "role", target="3", k=2)
    assert out["method"] == "role" and out["target"] == graph.node_text[3]
    assert out["nodes"][0] == graph.node_text[3 + n] and len(out["scores"]) == 2 and out["seconds"] >= 0
    with pytest.raises(ValueError, match="no node"):
        retrieve_for_cli(graph, "proximity", target="nowhere", k=2)


# ------------------------------------------------------------------ correlation
def clique_ring_with_topical_text(cliques: int = 6, size: int = 5) -> TextualGraph:
    """Each clique's nodes share a topic word, so text follows topology."""
    g = nx.ring_of_cliques(cliques, size)
    words = ["apple", "river", "castle", "violin", "glacier", "comet", "falcon", "tulip"]
    for v in g.nodes:
        g.nodes[v]["text"] = f"{words[v // size]} item {v}"
    return TextualGraph.from_networkx(g)


def test_correlation_and_distance_curve():
    graph = clique_ring_with_topical_text()
    text = HashingEncoder(dim=512).encode(graph.node_text)
    n = graph.num_nodes
    for method in ["proximity", "role"]:
        res = topology_text_correlation(graph, text, method=method)
        assert -1 <= res["pearson_r"] <= 1 and -1 <= res["spearman_r"] <= 1
        assert res["pairs"] == n * (n - 1) // 2 and not res["sampled"]
    assert topology_text_correlation(graph, text, "proximity")["pearson_r"] > 0.5  # text follows proximity here
    sampled = topology_text_correlation(graph, text, "proximity", max_pairs=100, seed=1, return_pairs=True)
    assert sampled["pairs"] == 100 and sampled["sampled"] and sampled["text_sim"].shape == (100,)
    curve = text_similarity_by_distance(graph, text, max_hops=3)
    assert sum(c for _, _, c in curve) == n * (n - 1) // 2
    assert [h for h, _, _ in curve] == [1, 2, 3, 4]
    assert curve[0][1] > curve[-1][1]  # near pairs share topics
    small = text_similarity_by_distance(graph, text, max_pairs=50, seed=2)
    assert sum(c for _, _, c in small) == 50


def test_distance_curve_counts_unreachable_pairs():
    graph, n = two_copies()
    text = HashingEncoder().encode(graph.node_text)
    curve = dict((h, c) for h, _, c in text_similarity_by_distance(graph, text, max_hops=20))
    assert curve[UNREACHABLE] == n * n  # every cross-copy pair
    assert sum(curve.values()) == (2 * n) * (2 * n - 1) // 2
    nxg = nx.disjoint_union(path_cycle_star(), path_cycle_star())
    lengths = dict(nx.all_pairs_shortest_path_length(nxg))
    assert curve[1] == nxg.number_of_edges()
    assert curve[2] == sum(1 for a in lengths for b, d in lengths[a].items() if a < b and d == 2)
    with pytest.raises(ValueError, match="text_emb must have shape"):
        topology_text_correlation(graph, text[:3])


def test_sample_pairs_distinct_upper_triangle():
    i, j = sample_pairs(50, 300, seed=4)
    assert i.size == 300 and np.all(i < j) and np.all(j < 50)
    assert len(set(zip(i.tolist(), j.tolist()))) == 300
    ai, aj = sample_pairs(5, 100)
    assert ai.size == 10


def test_topk_ties_keep_lowest_ids_in_every_block():
    from toporag_core.topo.retriever import _scores_block, _top_k

    emb = np.round(np.random.default_rng(0).random((120, 3)), 1)  # coarse values: many exact ties
    for method in ["role", "proximity", "random"]:
        idx, val = _top_k(method, emb, 7, seed=0, block=120)
        full = _scores_block(method, emb, np.arange(120), 0)
        for a in range(120):
            s = full[a].copy()
            s[a] = -np.inf
            expect = np.lexsort((np.arange(120), -s))[:7]  # by score, then by id
            assert idx[a].tolist() == expect.tolist(), (method, a)
            np.testing.assert_array_equal(val[a], s[expect])
