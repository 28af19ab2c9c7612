"""Topology-aware node retrieval in the app (retrieval lab, "Topology vs text" page) against the library.

Pages run with the model-free HashingEncoder (``TOPORAG_ENCODER=hashing``); every expected value is
computed here with :mod:`toporag_core.topo` directly, never read back from the app's own helpers.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from ._apptest import iframes  # noqa: E402

from toporag_core.embed import HashingEncoder  # noqa: E402
from toporag_core.graph import TextualGraph  # noqa: E402
from toporag_core.cells.lift import lift  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex, retrieve, textualize  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.studio import graph_view, state, topo_view  # noqa: E402
from toporag_core.topo import (TopoNodeIndex, build_topo_prompt, retrieve_nodes,  # noqa: E402
                               text_similarity_by_distance, topology_text_correlation)

ROOT = Path(__file__).resolve().parents[1]
LAB, TOPO_PAGE = "pages/2_Retrieval_lab.py", "pages/6_Topology_vs_text.py"


@pytest.fixture(autouse=True)
def _fast_encoder(monkeypatch, tmp_path):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))


def app(page: str, graph: TextualGraph | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=180)
    if graph is not None:
        state.set_graph(at.session_state, graph)
    return at


def drawn_nodes(page: str) -> dict[int, dict]:
    """The vis-network node records of a rendered view, by node id."""
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((.*?)\);", page).group(1))
    return {n["id"]: n for n in nodes}


def score_tables(at: AppTest) -> list:
    """The per-method node score tables (columns rank, node, score, text), in page order."""
    return [d.value for d in at.dataframe if list(d.value.columns) == ["rank", "node", "score", "text"]]


def pick_node(at: AppTest, query: str, node: int | None = None) -> AppTest:
    """Switch the lab's target to "a node I pick", search ``query``, select ``node`` (default: first match)."""
    at.sidebar.radio(key="lab_target_mode").set_value(topo_view.TARGET_PICKED).run()
    key = at.session_state[state.GRAPH_KEY]
    at.sidebar.text_input(key=f"lab_target_find_{key}").set_value(query).run()
    if node is not None:
        at.sidebar.selectbox(key=topo_view.picker_key(key, query)).set_value(node).run()
    return at


def two_topics_graph() -> TextualGraph:
    """Two 12-node rings joined by one bridge; each ring's texts share that ring's words, so
    text similarity follows topology (the premise the page measures)."""
    topics = [["red", "apple", "fruit", "orchard"], ["steel", "engine", "piston", "motor"]]
    texts, triples = [], []
    for t, words in enumerate(topics):
        base = len(texts)
        texts += [f"{words[i % 4]} {words[(i + 1) % 4]} item{t}{i}" for i in range(12)]
        triples += [(texts[base + i], "next", texts[base + (i + 1) % 12]) for i in range(12)]
        triples += [(texts[base + i], "near", texts[base + (i + 3) % 12]) for i in range(0, 12, 3)]
    triples.append((texts[0], "bridge", texts[12]))
    return TextualGraph.from_triples(triples, name="two topics")


# ====================================================================== retrieval lab: node methods
@pytest.mark.parametrize("method, query, k", [("proximity", "plate", 4), ("role", "bowl", 6)])
def test_lab_picked_target_shows_the_library_top_k(method, query, k):
    g = samples.load_sample("scene")
    target = g.node_text.index(query)
    at = app(LAB).run()
    at.sidebar.selectbox(key="lab_method").set_value(method).run()
    pick_node(at, query, target)
    at.sidebar.slider(key="lab_node_k").set_value(k)
    at.sidebar.text_input(key="lab_partial").set_value("a round white").run()
    assert not at.exception and not at.warning

    expected = retrieve_nodes(TopoNodeIndex.build(g, method=method, K=k), target=target, k=k)
    assert len(expected.nodes) == k and target not in expected.nodes
    table = score_tables(at)[0]
    assert table["node"].tolist() == expected.nodes
    assert np.allclose(table["score"].to_numpy(), expected.scores, rtol=1e-9, atol=0)
    assert table["text"].tolist() == [g.node_text[i] for i in expected.nodes]
    assert build_topo_prompt(g, expected, "a round white") in [c.value for c in at.code]

    # the view: target in its own colour, exactly the retrieved nodes in theirs, scores in the tooltips
    drawn = drawn_nodes(iframes(at)[0])
    assert drawn[target]["color"] == topo_view.TARGET_COLOUR
    assert sorted(i for i, n in drawn.items() if n["color"] == topo_view.RETRIEVED_COLOUR) == sorted(expected.nodes)
    best = expected.nodes[0]
    assert "retrieved #1" in drawn[best]["title"] and f"{expected.scores[0]:.4g}" in drawn[best]["title"]


def test_lab_question_target_is_the_library_node_and_baselines_match():
    g = samples.load_sample("kg")
    question = "Where was Pierre Curie born?"
    at = app(LAB, g).run()
    at.sidebar.selectbox(key="lab_method").set_value("role").run()
    at.text_area(key=f"lab_question_{at.session_state[state.GRAPH_KEY]}").set_value(question).run()
    assert not at.exception and not at.warning

    enc = HashingEncoder()
    index = TopoNodeIndex.build(g, method="role")
    node, cos = index.target_for_question(question, enc)
    assert node != 0  # not the first node by accident: the question names Pierre Curie
    expected = retrieve_nodes(index, question=question, encoder=enc, k=5)
    assert expected.target == node
    assert any(f"target node {node} (most similar to the question, cosine {cos:.3f})" in m.value for m in at.markdown)
    assert drawn_nodes(iframes(at)[0])[node]["color"] == topo_view.TARGET_COLOUR
    assert score_tables(at)[0]["node"].tolist() == expected.nodes
    assert build_topo_prompt(g, expected) in [c.value for c in at.code]  # includes the question line

    # the baselines for the same target, in the comparison table
    both = [d.value for d in at.dataframe if "method" in d.value.columns and "rank" in d.value.columns][0]
    for name, label in (("text", "Baseline: text similarity"), ("random", "Baseline: random")):
        base = retrieve_nodes(TopoNodeIndex.build(g, method=name, encoder=enc), target=node, k=5)
        rows = both[both["method"] == label]
        assert rows["node"].tolist() == base.nodes and np.allclose(rows["score"], base.scores)
        assert rows.iloc[:, -1].tolist() == [i in expected.nodes for i in base.nodes]  # "also in" column


def test_lab_compares_a_node_method_with_a_cell_method():
    g = samples.load_sample("scene")
    at = app(LAB).run()
    at.sidebar.selectbox(key="lab_method").set_value("proximity").run()
    at.sidebar.toggle(key="lab_compare").set_value(True).run()
    at.sidebar.selectbox(key="lab_method_b").set_value("toporag").run()
    assert not at.exception and not at.warning
    sub = retrieve(EmbeddedComplex.from_graph(g, HashingEncoder()), g.meta["question"], k0=3, k1=3, k2=3)
    counts = at.dataframe[0].value.to_dict("records")
    assert [r["method"] for r in counts] == ["TopoRAG (cell complex)"]
    assert (counts[0]["0-cells"], counts[0]["1-cells"], counts[0]["2-cells"]) == sub.counts
    assert len(iframes(at)) == 2
    codes = [c.value for c in at.code]
    assert textualize(sub) in codes
    target, _ = TopoNodeIndex.build(g, "proximity").target_for_question(g.meta["question"], HashingEncoder())
    assert any(c.startswith("Context: nodes related to the target") and f"Target node: {g.node_text[target]}" in c
               for c in codes)
    assert any("Sweep" in t.label for t in at.tabs)  # cell method second: sweeps explain they need it first
    assert any("pick one as the first method" in i.value for i in at.info)


def test_lab_bad_or_missing_target_warns_instead_of_crashing():
    at = app(LAB).run()
    at.sidebar.selectbox(key="lab_method").set_value("proximity").run()
    key = at.session_state[state.GRAPH_KEY]
    at.text_area(key=f"lab_question_{key}").set_value("  ").run()  # question mode, no question
    assert not at.exception
    assert "type a question" in at.warning[0].value and not iframes(at)

    pick_node(at, "plaet")  # no node text contains it; the library suggests the close one
    assert not at.exception
    msg = at.warning[0].value
    assert "Target not found" in msg and "'plaet'" in msg and "'plate'" in msg
    assert not iframes(at) and not score_tables(at)

    pick_node(at, "plate")  # a new search starts at its first match: the page recovers
    assert not at.warning and score_tables(at)[0]["node"].tolist()


def test_lab_node_methods_on_a_one_node_graph():
    g = TextualGraph(["lonely"], np.zeros((2, 0), np.int64), [], name="one node")
    at = app(LAB, g).run()
    at.sidebar.selectbox(key="lab_method").set_value("role").run()
    pick_node(at, "lonely", 0)
    assert not at.exception and not at.warning
    assert score_tables(at)[0].empty  # nothing else to retrieve
    assert any("(none)" in c.value for c in at.code)


# ====================================================================== Topology vs text page
def test_topology_vs_text_shows_the_library_numbers():
    g = two_topics_graph()
    text = HashingEncoder().encode(g.node_text)
    at = app(TOPO_PAGE, g).run()
    assert not at.exception and not at.warning
    shown = at.dataframe[0].value.set_index("similarity")
    for method in ("proximity", "role"):
        lib = topology_text_correlation(g, text, method=method, max_pairs=20000, seed=0)
        assert shown.loc[method, "pearson_r"] == pytest.approx(lib["pearson_r"], abs=1e-9)
        assert shown.loc[method, "spearman_r"] == pytest.approx(lib["spearman_r"], abs=1e-9)
        assert shown.loc[method, "pairs"] == lib["pairs"] == g.num_nodes * (g.num_nodes - 1) // 2
        assert {m.label: m.value for m in at.metric}[f"Pearson r, text vs {method}"] == f"{lib['pearson_r']:+.3f}"
    assert shown.loc["proximity", "pearson_r"] > 0.2  # rings with their own words: topology predicts text
    curve = at.dataframe[1].value
    lib_curve = text_similarity_by_distance(g, text, max_pairs=20000, max_hops=6, seed=0)
    assert curve["hops"].tolist() == [h for h, _, _ in lib_curve]
    assert np.allclose(curve["mean text similarity"], [m for _, m, _ in lib_curve])
    assert curve["pairs"].sum() == shown.loc["proximity", "pairs"]
    assert curve["mean text similarity"].iloc[0] > curve["mean text similarity"].iloc[-1]  # near pairs read alike
    assert "all 276 node pairs" in at.markdown[0].value
    assert len(at.get("plotly_chart")) == 3  # hop curve + one density view per similarity


def test_topology_vs_text_states_and_uses_its_sample():
    g = two_topics_graph()  # 24 nodes = 276 pairs
    text = HashingEncoder().encode(g.node_text)
    at = app(TOPO_PAGE, g).run()
    at.sidebar.select_slider(key="tt_max_pairs").set_value(1000)
    at.sidebar.number_input(key="tt_seed").set_value(3)
    at.sidebar.slider(key="tt_max_hops").set_value(3).run()
    assert not at.exception
    lib = topology_text_correlation(g, text, method="proximity", max_pairs=1000, seed=3)
    shown = at.dataframe[0].value.set_index("similarity")
    assert shown.loc["proximity", "pearson_r"] == pytest.approx(lib["pearson_r"], abs=1e-9)
    assert at.dataframe[1].value["label"].tolist()[-1] == ">3"

    # a 60-node path (1,770 pairs) whose texts share a word every 7 nodes
    big = TextualGraph.from_triples([(f"w{i % 7} x{i}", "r", f"w{(i + 1) % 7} x{i + 1}") for i in range(59)])
    at = app(TOPO_PAGE, big).run()
    at.sidebar.select_slider(key="tt_max_pairs").set_value(1000)
    at.sidebar.number_input(key="tt_seed").set_value(5).run()
    lib = topology_text_correlation(big, HashingEncoder().encode(big.node_text), method="role", max_pairs=1000, seed=5)
    assert lib["sampled"] and lib["pairs"] == 1000
    shown = at.dataframe[0].value.set_index("similarity")
    assert shown.loc["role", "pearson_r"] == pytest.approx(lib["pearson_r"], abs=1e-9)
    assert "1,000 of the 1,770 node pairs" in at.markdown[0].value and "seed 5" in at.markdown[0].value


def test_topology_vs_text_degenerate_graphs():
    one = TextualGraph(["alone"], np.zeros((2, 0), np.int64), [], name="one")
    at = app(TOPO_PAGE, one).run()
    assert not at.exception and "fewer than two nodes" in at.info[0].value
    no_edges = TextualGraph(["a b", "b c", "c d"], np.zeros((2, 0), np.int64), [], name="no edges")
    at = app(TOPO_PAGE, no_edges).run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Pearson r, text vs proximity"] == "n/a"  # proximity is constant


# ====================================================================== support library
def test_render_view_node_marks_colour_and_seed_the_view():
    cx = lift(TextualGraph.from_triples([(f"n{i}", "next", f"n{i + 1}") for i in range(50)]))
    marks = {25: ("#111111", "target <b>x</b>"), 0: ("#222222", "far away")}
    view = graph_view.render_view(cx, node_marks=marks, cap=8)
    assert 0 in view.nodes and 25 in view.nodes and view.nodes.size == 8  # marked nodes always in view
    drawn = drawn_nodes(view.html)
    assert drawn[25]["color"] == "#111111" and drawn[0]["color"] == "#222222"
    assert {n["color"] for i, n in drawn.items() if i not in marks} == {graph_view.NODE_MUTED}
    assert "target &lt;b&gt;x&lt;/b&gt;" in drawn[25]["title"]  # notes are escaped like all tooltip text
    plain = graph_view.render_view(cx, cap=8)  # default: unchanged behaviour
    assert graph_view.NODE_MUTED not in {n["color"] for n in drawn_nodes(plain.html).values()}


def test_node_options_search():
    g = samples.load_sample("scene")
    assert topo_view.node_options(g, "") == list(range(g.num_nodes))
    assert [g.node_text[i] for i in topo_view.node_options(g, "PLATE")] == ["plate"]
    assert topo_view.node_options(g, "3")[0] == 3  # an index first
    assert topo_view.node_options(g, "zzz") == []
    assert topo_view.node_options(g, "", limit=4) == [0, 1, 2, 3]


@pytest.mark.slow
def test_topology_vs_text_with_the_real_sentence_encoder(monkeypatch):
    from toporag_core.embed import SentenceTransformerEncoder

    monkeypatch.delenv("TOPORAG_ENCODER")
    g = samples.load_sample("scene")
    at = app(TOPO_PAGE).run()
    assert not at.exception
    assert "all-MiniLM-L6-v2" in at.caption[0].value
    text = SentenceTransformerEncoder().encode(g.node_text)
    shown = at.dataframe[0].value.set_index("similarity")
    for method in ("proximity", "role"):
        lib = topology_text_correlation(g, text, method=method, max_pairs=20000, seed=0)
        assert np.isfinite(lib["pearson_r"])  # real sentence embeddings vary over the pairs
        assert shown.loc[method, "pearson_r"] == pytest.approx(lib["pearson_r"], abs=1e-5)
