"""The Streamlit app, page by page (streamlit.testing AppTest), and its support library.

Pages run with the model-free HashingEncoder (``TOPORAG_ENCODER=hashing``) for speed; one
test drives the retrieval lab with the real default sentence encoder.
"""
from __future__ import annotations

import csv
import html
import json
import os
import re
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from ._apptest import iframes  # noqa: E402

from toporag_core.graph import TextualGraph  # noqa: E402
from toporag_core.cells.lift import lift  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, cycle_text, retrieve, textualize  # noqa: E402
from toporag_core.embed import HashingEncoder  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.studio import graph_view, learn, state, sweep  # noqa: E402
from toporag_core.io.samples import shared_data_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "assets" / "samples"
SHARED = shared_data_dir() or Path(__file__).resolve().parents[1].parent / "shared" / "data"  # $TOPORAG_SHARED_DATA first
EVIL = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def _fast_encoder(monkeypatch, tmp_path):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))


def app(page: str = "app.py") -> AppTest:
    return AppTest.from_file(str(ROOT / page), default_timeout=120)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def betti1_from_csv(path: Path) -> int:
    """b1 of a head,relation,tail CSV computed independently with networkx (simple undirected skeleton)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    g = nx.Graph()
    g.add_edges_from((r["head"], r["tail"]) for r in rows if r["head"] != r["tail"])
    return g.number_of_edges() - g.number_of_nodes() + nx.number_connected_components(g)


def evil_graph() -> TextualGraph:
    return TextualGraph.from_triples([(EVIL, "likes <b>bold</b>", "b"), ("b", "x", "c"), ("c", "y", EVIL),
                                      ("c", "href", "d")], name="evil")


# ====================================================================== Home
def test_home_scene_sample_shows_its_betti_number():
    at = app().run()
    assert not at.exception
    m = metrics(at)
    expected = betti1_from_csv(SAMPLES / "scene_breakfast.csv")
    assert expected >= 3  # the scene has several closed loops
    assert m["b1"] == str(expected)
    assert m["2-cells"] == str(expected)  # one 2-cell per independent cycle
    assert m["|V| nodes"] == "16"


def test_home_loads_each_sample_and_counts_match_the_library():
    at = app().run()
    for key in samples.SAMPLE_KEYS:
        at.selectbox(key="sample_pick").set_value(key)
        at.button(key="load_sample").click()
        at.run()
        assert not at.exception and not at.error
        cx = lift(samples.load_sample(key))
        m = metrics(at)
        assert (m["|V| nodes"], m["b1"], m["2-cells"]) == (str(cx.num_nodes), str(cx.betti1), str(cx.num_cells2))
        assert at.session_state[state.GRAPH].meta["source"] == f"sample:{key}"
    assert metrics(at)["b1"] == "1"  # the argument graph has exactly one loop of reasons


def test_home_malformed_paste_shows_error_and_keeps_previous_graph():
    at = app().run()
    at.selectbox(key="sample_pick").set_value("kg")
    at.button(key="load_sample").click()
    at.run()
    before = metrics(at)
    at.text_area(key="paste_text").set_value("head,relation,tail\na,r,b\nc,,d\n")
    at.button(key="load_paste").click()
    at.run()
    assert not at.exception
    assert len(at.error) == 1
    msg = at.error[0].value
    assert "line 3" in msg and "relation" in msg  # the library's message says where
    assert metrics(at) == before  # the Curie graph is still the current graph
    assert at.session_state[state.GRAPH].meta["source"] == "sample:kg"
    assert any("previously loaded graph" in i.value for i in at.info)


def test_home_good_paste_replaces_graph_and_clears_error():
    at = app().run()
    at.text_area(key="paste_text").set_value("not json [")
    at.selectbox(key="paste_format").set_value("webqsp")
    at.button(key="load_paste").click()
    at.run()
    assert at.error
    at.selectbox(key="paste_format").set_value("auto")
    at.text_area(key="paste_text").set_value("head,relation,tail\na,r,b\nb,s,c\nc,t,a\nc,u,d\n")
    at.button(key="load_paste").click()
    at.run()
    assert not at.error
    m = metrics(at)
    assert (m["|V| nodes"], m["b1"], m["2-cells"]) == ("4", "1", "1")


def test_home_tree_method_changes_cycles_not_counts():
    at = app().run()
    at.sidebar.selectbox[0].set_value("dfs").run()
    assert at.session_state[state.TREE] == "dfs"
    assert metrics(at)["b1"] == str(betti1_from_csv(SAMPLES / "scene_breakfast.csv"))
    assert "Spanning tree: dfs" in " ".join(c.value for c in at.caption)


@pytest.mark.skipif(not (SHARED / "webqsp_sample.json").is_file(), reason="../shared/data/webqsp_sample.json absent")
def test_home_loads_a_webqsp_question_from_shared_data():
    recs = json.loads((SHARED / "webqsp_sample.json").read_text())
    at = app().run()
    at.selectbox(key="webqsp_pick").set_value(3)
    at.button(key="load_webqsp").click()
    at.run()
    assert not at.exception and not at.error
    g = at.session_state[state.GRAPH]
    assert g.meta["question"] == recs[3]["question"]
    assert int(metrics(at)["|V| nodes"]) >= len(recs[3]["nodes"])


@pytest.mark.skipif(not (SHARED / "expla_graphs_train_dev.tsv").is_file(), reason="../shared/data ExplaGraphs absent")
def test_home_loads_an_explagraphs_row():
    at = app().run()
    at.number_input(key="expla_row").set_value(2).run()
    at.button(key="load_expla").click()
    at.run()
    g = at.session_state[state.GRAPH]
    assert g.meta["id"] == 2 and "Argument 1:" in g.meta["question"]
    assert "people" in g.node_text  # row 2: (marijuana; receives action; popular)(popular; used for; people)...


def test_home_without_shared_data_still_works(monkeypatch, tmp_path):
    monkeypatch.setenv("TOPORAG_SHARED_DATA", str(tmp_path / "nowhere"))
    at = app().run()
    assert not at.exception
    assert any("No benchmark data on this machine" in i.value for i in at.info)
    assert metrics(at)["b1"] == str(betti1_from_csv(SAMPLES / "scene_breakfast.csv"))


# ====================================================================== Explore
def test_explore_picking_a_cell_highlights_its_cycle():
    at = app("pages/1_Explore.py").run()
    assert not at.exception
    cx = lift(samples.load_sample("scene"))
    f = int(np.argmax(cx.boundary_lengths()))
    at.sidebar.multiselect(key="explore_cells").set_value([f]).run()
    texts = " ".join(t.value for t in at.markdown)
    assert f"<code>c{f}</code>: {html.escape(cycle_text(cx, f))}" in texts
    page = iframes(at)[0]
    cells = json.loads(re.search(r"var TOPORAG_CELLS = (.*);\n", page).group(1))
    filled = [c for c in cells if c["stroke"]]
    assert [c["nodes"] for c in filled] == [cx.cell2_nodes(f).tolist()]
    # issue 12 item 15: several picked 2-cells get one colour each, and the list shows the same colour
    g = int(np.argmin(cx.boundary_lengths()))
    at.sidebar.multiselect(key="explore_cells").set_value([f, g]).run()
    cells = json.loads(re.search(r"var TOPORAG_CELLS = (.*);\n", iframes(at)[0]).group(1))
    strokes = [c["stroke"] for c in cells if c["stroke"]]
    assert len(strokes) == 2 and len(set(strokes)) == 2
    texts = " ".join(t.value for t in at.markdown)
    assert all(f"background:{s}" in texts for s in strokes)


def test_explore_escapes_user_text():
    at = app("pages/1_Explore.py")
    state.set_graph(at.session_state, evil_graph())
    at.run()
    assert not at.exception
    page = iframes(at)[0]
    assert EVIL not in page and "<b>bold</b>" not in page
    assert "\\u0026lt;script\\u0026gt;alert(1)" in page  # tooltip: escaped HTML, inside script-safe JSON
    assert "\\u003cscript\\u003ealert(1)" in page  # label: canvas text, inside script-safe JSON
    assert not re.search(r"(?:src|href)\s*=\s*[\"']https?://", page)  # nothing from a CDN


def test_explore_caps_big_graphs_and_says_so():
    rng = np.random.default_rng(0)
    n = 600
    src, dst = rng.integers(0, n, 2400), rng.integers(0, n, 2400)
    g = TextualGraph([f"node {i}" for i in range(n)], np.stack([src, dst]), [f"r{i % 7}" for i in range(2400)])
    at = app("pages/1_Explore.py")
    state.set_graph(at.session_state, g)
    at.run()
    assert any("Showing 150 of 600 nodes (cap 150)" in c.value for c in at.caption)
    at.sidebar.slider[0].set_value(60).run()
    assert any("Showing 60 of 600 nodes (cap 60)" in c.value for c in at.caption)
    assert iframes(at)[0].count('"label":') <= 60 + 2 * 60 * 60  # nodes + edges among them, not the whole graph


# ====================================================================== Retrieval lab
def counts(at: AppTest) -> list[dict]:
    return at.dataframe[0].value.to_dict("records")


def test_lab_counts_match_the_library_and_context_is_textualize():
    at = app("pages/2_Retrieval_lab.py").run()
    assert not at.exception
    g = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    sub = retrieve(ecx, g.meta["question"], k0=3, k1=3, k2=3, c2=0.5, edge_cost=0.5)
    row = counts(at)[0]
    assert (row["0-cells"], row["1-cells"], row["2-cells"]) == sub.counts
    assert sub.counts[0] > 0
    assert textualize(sub) in [c.value for c in at.code]
    assert len(iframes(at)) == 1
    at.radio(key="lab_text").set_value("compact").run()  # the other registered text format, same cells
    assert not at.exception
    codes = [c.value for c in at.code]
    assert textualize(sub, fmt="compact") in codes and textualize(sub) not in codes


def test_lab_raising_c2_never_adds_candidate_2_cells():
    at = app("pages/2_Retrieval_lab.py").run()
    seen = []
    for c2 in (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0):
        at.sidebar.slider(key="lab_c2").set_value(c2).run()
        assert not at.exception
        seen.append(counts(at)[0]["candidate 2-cells"])
    assert all(a >= b for a, b in zip(seen, seen[1:])), seen
    assert seen[0] > 0 and seen[-1] == 0, seen  # the sweep really moves


def test_lab_k_zero_and_advanced_ks():
    at = app("pages/2_Retrieval_lab.py").run()
    at.sidebar.slider(key="lab_k").set_value(0).run()
    assert not at.exception
    assert [counts(at)[0][c] for c in ("0-cells", "1-cells", "2-cells")] == [0, 0, 0]  # no prizes, nothing picked
    at.sidebar.slider(key="lab_k").set_value(3)
    at.sidebar.toggle(key="lab_advanced").set_value(True).run()
    at.sidebar.slider(key="lab_k2").set_value(0).run()
    row = counts(at)[0]
    assert row["2-cells"] == 0 and row["candidate 2-cells"] == 0 and row["0-cells"] > 0


def test_lab_compare_mode_shows_two_methods():
    at = app("pages/2_Retrieval_lab.py").run()
    at.sidebar.toggle(key="lab_compare").set_value(True).run()
    at.sidebar.selectbox(key="lab_method_b").set_value("topk-triples").run()
    assert not at.exception
    rows = counts(at)
    assert [r["method"] for r in rows] == ["TopoRAG (cell complex)", "Top-k triples (KAPING)"]
    assert rows[1]["2-cells"] == 0
    assert len(iframes(at)) == 3  # the two methods in one view (cells marked A only / B only / both), then each


def test_lab_sweep_tables_match_the_library():
    at = app("pages/2_Retrieval_lab.py").run()
    g = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    dk = sweep.sweep_k(ecx, g.meta["question"], RetrievalSetting.make(c2=0.5, edge_cost=0.5))
    shown = [d.value for d in at.dataframe if "k" in d.value.columns]
    assert shown and shown[0].equals(dk)
    assert dk["0-cells"].iloc[0] == 0 and dk["0-cells"].iloc[-1] > 0


def test_lab_empty_question_warns_instead_of_crashing():
    at = app("pages/2_Retrieval_lab.py").run()
    at.text_area[0].set_value("   ").run()
    assert not at.exception
    assert "question" in at.warning[0].value


@pytest.mark.slow
def test_lab_with_the_real_sentence_encoder(monkeypatch):
    monkeypatch.delenv("TOPORAG_ENCODER")
    at = app("pages/2_Retrieval_lab.py").run()
    assert not at.exception
    assert "all-MiniLM-L6-v2" in at.caption[0].value
    row = counts(at)[0]
    assert row["0-cells"] >= 3 and row["1-cells"] >= 1
    texts = "\n".join(c.value for c in at.code)
    assert "cup" in texts  # the question is about the red cup


# ====================================================================== Learn
def test_learn_steps_through_lifting_and_boundary_maps():
    at = app("pages/3_Learn.py").run()
    assert not at.exception
    cx = lift(samples.load_sample("scene"))
    at.slider(key=[s.key for s in at.slider if s.key and s.key.startswith("learn_step_")][0]).set_value(3).run()
    msg = at.success[0].value
    assert "Step 3" in msg and learn.edge_label(cx, int(cx.cell_chord[2])) in msg and cycle_text(cx, 2) in msg
    joined = " ".join(m.value for m in at.markdown)
    assert "B1 @ B2 = 0**: every entry is 0" in joined
    assert f"**#2-cells = {cx.num_cells2}**" in joined


def test_learn_walkthrough_prizes_follow_the_formula():
    at = app("pages/3_Learn.py").run()
    frames = [d.value for d in at.dataframe if "C2 x length" in d.value.columns]
    assert frames
    cells = frames[0]
    c2 = 0.5
    assert np.allclose(cells["prize"], cells["boundary sum"] - c2 * cells["length"])
    assert (cells.loc[cells["candidate"], "prize"] > 0).all()


# ====================================================================== support library
def test_try_load_keeps_previous_graph_on_any_failure():
    ss: dict = {}
    good = samples.load_sample("argument")
    assert state.try_load(ss, lambda: good) is None
    key = ss[state.GRAPH_KEY]

    def boom():
        raise RuntimeError("disk on fire")

    for loader in (lambda: TextualGraph([], np.zeros((2, 0)), []), boom,
                   lambda: TextualGraph.from_triples([("a", "r", "b")]).__class__(["a"], [[0], [3]], ["r"])):
        msg = state.try_load(ss, loader, "x.csv")
        assert msg and ss[state.ERROR] == msg
        assert ss[state.GRAPH] is good and ss[state.GRAPH_KEY] == key
    assert "disk on fire" in state.try_load(ss, boom)


def test_fingerprint_sees_text_and_structure():
    a = TextualGraph.from_triples([("ab", "r", "c")])
    b = TextualGraph.from_triples([("a", "r", "bc")])
    assert state.graph_fingerprint(a) != state.graph_fingerprint(b)
    assert state.graph_fingerprint(a) == state.graph_fingerprint(TextualGraph.from_triples([("ab", "r", "c")]))


def test_neighbourhood_respects_cap_and_keeps_seeds():
    g = TextualGraph.from_triples([(f"n{i}", "next", f"n{i + 1}") for i in range(50)])
    cx = lift(g)
    shown = graph_view.neighbourhood(cx, [25], cap=7)
    assert shown.tolist() == [22, 23, 24, 25, 26, 27, 28]  # rings around the seed, in order
    assert graph_view.neighbourhood(cx, [0, 49], cap=2).tolist() == [0, 49]


def test_sweep_k_zero_retrieves_nothing_and_grows():
    g = samples.load_sample("kg")
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    df = sweep.sweep_k(ecx, g.meta["question"])
    assert df["k"].tolist() == list(range(6))
    assert df.loc[0, ["0-cells", "1-cells", "2-cells"]].tolist() == [0, 0, 0]
    assert df["0-cells"].iloc[-1] >= df["0-cells"].iloc[1] > 0


def test_boundary_tables_product_is_zero_and_refuses_big_graphs():
    cx = lift(samples.load_sample("kg"))
    t = learn.boundary_tables(cx)
    assert t.b1.shape == (cx.num_nodes, cx.num_edges) and t.b2.shape == (cx.num_edges, cx.num_cells2)
    assert t.product_is_zero and (np.abs(t.b2.values).sum(0) == cx.boundary_lengths()).all()
    big = lift(TextualGraph.from_triples([(f"n{i}", "r", f"n{i + 1}") for i in range(60)]))
    with pytest.raises(ValueError, match="small graphs"):
        learn.boundary_tables(big)


def test_samples_are_project_files_with_loops():
    for key in samples.SAMPLE_KEYS:
        s = samples.sample(key)
        assert (SAMPLES / s.file).is_file()
        cx = lift(samples.load_sample(key))
        assert cx.betti1 >= 1 and cx.boundary_ok()
    with pytest.raises(ValueError, match="unknown sample"):
        samples.load_sample("nope")
    assert os.environ["TOPORAG_ENCODER"] == "hashing"


def test_spring_layout_is_deterministic_and_pulls_neighbours_together():
    cx = lift(samples.load_sample("kg"))
    a = graph_view.spring_layout(cx.num_nodes, cx.edges)
    assert a.shape == (cx.num_nodes, 2) and np.isfinite(a).all()
    assert np.array_equal(a, graph_view.spring_layout(cx.num_nodes, cx.edges))  # same picture on every rerun
    d = np.linalg.norm(a[:, None] - a[None], axis=-1)
    joined = np.zeros_like(d, dtype=bool)
    joined[cx.edges[:, 0], cx.edges[:, 1]] = joined[cx.edges[:, 1], cx.edges[:, 0]] = True
    off = ~joined & ~np.eye(cx.num_nodes, dtype=bool)
    assert d[joined].mean() < d[off].mean()


# ====================================================================== Learn = retrieval (issue 12, items 1, 2, 4)
def _embedded(key: str) -> tuple[EmbeddedComplex, str]:
    g = samples.load_sample(key)
    cx = lift(g)
    enc = HashingEncoder()
    from toporag_core.embed import embed_complex

    question = g.meta.get("question") or " ".join(g.node_text[:3])
    return EmbeddedComplex(cx, embed_complex(cx, enc, show_progress=False), enc), question


@pytest.mark.parametrize("key", samples.SAMPLE_KEYS)
def test_learn_numbers_equal_retrieve_for_k_0_to_4_and_several_c2(key):
    ecx, question = _embedded(key)
    for k in range(5):
        for c2 in (0.0, 0.5, 1.0, 2.5):
            walk = learn.retrieval_walkthrough(ecx, question, k, k, k, c2, 0.5)
            sub = retrieve(ecx, question, setting=RetrievalSetting.make("toporag", k=k, c2=c2, edge_cost=0.5))
            p0, p1, p2 = sub.prizes
            # the tables the page shows, indexed back by cell id
            assert np.array_equal(walk.nodes.set_index("0-cell")["prize"].sort_index().to_numpy(), p0)
            assert np.array_equal(walk.edges.set_index("1-cell")["prize"].sort_index().to_numpy(), p1)
            assert np.allclose(walk.cells2.set_index("2-cell")["prize"].sort_index().to_numpy(), p2)
            cand = walk.cells2.loc[walk.cells2["candidate"], "2-cell"].sort_values().tolist()
            assert cand == sub.params["candidates2"]
            assert sorted(walk.cells2.loc[walk.cells2["retrieved"], "2-cell"]) == sorted(sub.cells2.tolist())
            # the ranks the tables show are the order the prizes were given in
            top = walk.edges.head(min(k, ecx.complex.num_edges))
            assert top["prize"].tolist() == list(range(k, k - len(top), -1))


def test_learn_tie_break_is_the_retrievals_and_is_explained():
    # four 1-cells with the same relation text tie on cosine; the endpoint cosines break the tie
    g = TextualGraph.from_triples([("red cup", "near", "plate"), ("fork", "near", "knife"), ("red cup", "near", "red"),
                                   ("knife", "near", "plate")], name="ties")
    cx = lift(g)
    enc = HashingEncoder()
    from toporag_core.embed import embed_complex

    ecx = EmbeddedComplex(cx, embed_complex(cx, enc, show_progress=False), enc)
    walk = learn.retrieval_walkthrough(ecx, "red cup", 2, 2, 2, 0.5, 0.5)
    sub = retrieve(ecx, "red cup", setting=RetrievalSetting.make("toporag", k=2, c2=0.5))
    s0, s1, _ = ecx.similarities("red cup")
    assert np.unique(s1).size == 1  # a real tie
    tb = s0[cx.edges].sum(1)
    best = np.lexsort((-tb, -s1))[:2]
    assert set(np.flatnonzero(sub.prizes[1]).tolist()) == set(best.tolist())
    assert np.array_equal(walk.prizes.p1, sub.prizes[1])
    assert walk.ties and "endpoints' cosines" in walk.ties[-1] and f"1-cell {best[0]} (prize 2)" in walk.ties[-1]


def test_learn_formula_text_for_small_k():
    assert learn.prize_sequence(0) == "" and learn.prize_sequence(1) == "1" and learn.prize_sequence(2) == "2, 1"
    assert learn.prize_sequence(3) == "3, 2, 1" and learn.prize_sequence(6) == "6, 5, ..., 1"
    at = app("pages/3_Learn.py").run()
    for k, want, bad in ((0, "no 0-cell or 1-cell gets a prize", "prizes 0, -1"), (1, "get prize 1;", "prizes 1, 0"),
                         (2, "get prizes 2, 1 (best first)", "prizes 2, 1, ...")):
        at.slider(key="learn_k").set_value(k).run()
        assert not at.exception
        text = " ".join(m.value for m in at.markdown)
        assert want in text and bad not in text


def test_learn_page_prizes_are_the_retrievals_and_b1_graph_vs_complex():
    at = app("pages/3_Learn.py").run()
    at.slider(key="learn_k").set_value(3).run()
    g = samples.load_sample("scene")
    ecx, _ = _embedded("scene")
    sub = retrieve(ecx, g.meta["question"], setting=RetrievalSetting.make("toporag", k=3, c2=0.5, edge_cost=0.5))
    edges = next(d.value for d in at.dataframe if "endpoint cosine sum" in d.value.columns)
    shown = dict(zip(edges["1-cell"], edges["prize"]))
    assert {e: p for e, p in shown.items() if p} == {int(e): p for e, p in enumerate(sub.prizes[1]) if p}
    cells = next(d.value for d in at.dataframe if "C2 x length" in d.value.columns)
    assert np.allclose(cells.set_index("2-cell")["prize"].sort_index().to_numpy(), sub.prizes[2])
    assert any("match the prizes stored in its result: yes" in c.value for c in at.caption)
    cx = lift(g)
    m = metrics(at)
    assert m["b1 of the graph"] == str(cx.betti1) and m["b1 of the complex"] == str(cx.betti1_complex)
    assert cx.betti1 > 0 and cx.betti1_complex == 0


# ====================================================================== issue 12: loading (items 9-12)
GQA_SCENES = {
    "img1": {"width": 10, "height": 10, "objects": {
        "1": {"name": "cup", "attributes": ["red"], "x": 0, "y": 0, "w": 1, "h": 1,
              "relations": [{"name": "on", "object": "2"}]},
        "2": {"name": "table", "attributes": [], "x": 0, "y": 0, "w": 1, "h": 1,
              "relations": [{"name": "under", "object": "1"}]}}},
    "img2": {"width": 10, "height": 10, "objects": {
        "5": {"name": "dog", "attributes": ["brown"], "x": 0, "y": 0, "w": 1, "h": 1,
              "relations": [{"name": "near", "object": "6"}]},
        "6": {"name": "ball", "attributes": ["blue"], "x": 0, "y": 0, "w": 1, "h": 1, "relations": []}}},
}
GQA_QUESTIONS = ("q_id,image_id,question,answer,full_answer\n"
                 "q1,img1,What is on the table?,cup,The cup is on the table.\n"
                 "q2,img2,What color is the ball?,blue,The ball is blue.\n"
                 "q3,img2,What is near the ball?,dog,A dog is near the ball.\n")


def test_gqa_upload_with_image_and_question_pickers():
    from toporag_core.studio import uploads

    data = json.dumps(GQA_SCENES).encode()
    qs = (GQA_QUESTIONS.encode(), "questions.csv")
    labels = uploads.upload_records(data, "val_sceneGraphs.json")
    assert len(labels) == 2
    assert uploads.upload_questions(data, "val_sceneGraphs.json", "auto", 1, qs) == ["What color is the ball?",
                                                                                       "What is near the ball?"]
    g = uploads.load_upload(data, "val_sceneGraphs.json", "auto", 1, qs, question=1)
    assert g.meta["image_id"] == "img2" and g.meta["question"] == "What is near the ball?" and g.meta["answer"] == "dog"
    assert "dog" in " ".join(g.node_text)
    with pytest.raises(ValueError, match="no question 5"):
        uploads.load_upload(data, "val_sceneGraphs.json", "auto", 1, qs, question=5)
    assert uploads.upload_questions(data, "val_sceneGraphs.json", "auto", 0, None) == []
    # through the page's loader: a bad questions.csv is one clear error and keeps the graph
    ss: dict = {}
    state.try_load(ss, lambda: samples.load_sample("kg"))
    msg = state.try_load(ss, lambda: uploads.load_upload(data, "s.json", "auto", 0, (b"q_id,question\n", "q.csv")))
    assert "missing column" in msg and ss[state.GRAPH].name == samples.sample("kg").title


def test_multi_record_webqsp_upload_offers_every_record():
    from toporag_core.studio import uploads

    recs = [{"id": f"WebQTest-{i}", "question": f"question {i}?", "answers": [f"a{i}"],
             "nodes": [f"m.{i}", f"a{i}"], "edges": [[f"m.{i}", "rel", f"a{i}"]]} for i in range(12)]
    data = json.dumps(recs).encode()
    labels = uploads.upload_records(data, "webqsp.json")
    assert len(labels) == 12
    for j in (0, 7, 11):
        g = uploads.load_upload(data, "webqsp.json", "auto", j)
        assert f"a{j}" in g.node_text and g.meta.get("question") == f"question {j}?"


def test_reload_restores_builtin_and_benchmark_graphs_from_the_address(shared_data):
    # Home loads a sample: the address names it
    at = app().run()
    at.selectbox(key="sample_pick").set_value("kg").run()
    at.button(key="load_sample").click().run()
    assert at.query_params.get("graph") in ("sample:kg", ["sample:kg"])
    # a reload = a new session with that address
    again = app()
    again.query_params["graph"] = "sample:kg"
    again.run()
    assert not again.exception
    assert again.session_state[state.GRAPH].name == samples.sample("kg").title
    assert any("Restored" in i.value for i in again.info)
    g = samples.graph_from_source("webqsp:" + str(samples.webqsp_records()[3].get("id", 3)))
    assert g.meta["source"].startswith("webqsp:") and g.num_nodes > 0
    # unknown or upload: a clear reset message
    bad = app()
    bad.query_params["graph"] = "webqsp:nope"
    bad.run()
    assert any("Could not restore" in i.value for i in bad.info)
    fresh = app().run()
    assert any("New visit: started on the scene sample" in i.value for i in fresh.info)


def test_first_embedding_reports_progress_in_batches(tmp_path):
    from toporag_core.embed import CachedEncoder, embed_complex
    from toporag_core.studio.resources import embed_with_progress

    cx = lift(samples.load_sample("kg"))
    calls = []
    enc = CachedEncoder(HashingEncoder(), cache_dir=tmp_path)  # the app's encoder kind, with an empty cache
    emb = embed_with_progress(cx, enc, lambda d, t, eta: calls.append((d, t, eta)), batch=7)
    total = len(set(cx.graph.node_text) | set(cx.graph.edge_text))  # each distinct text is encoded once
    assert calls[-1][:2] == (total, total) and all(c[1] == total for c in calls)
    assert len(calls) == -(-total // 7) and all(a[0] < b[0] for a, b in zip(calls, calls[1:]))
    assert calls[-1][2] == 0 and all(c[2] >= 0 for c in calls)  # seconds left, down to 0
    assert enc.encoded_count == total
    ref = embed_complex(cx, HashingEncoder())
    assert np.allclose(emb.x0, ref.x0) and np.allclose(emb.x1, ref.x1) and np.allclose(emb.x2, ref.x2)
    again = []  # a graph whose texts are cached: nothing encoded, no progress to show
    embed_with_progress(cx, enc, lambda d, t, eta: again.append(d), batch=7)
    assert again == [] and enc.encoded_count == total
    with pytest.raises(ValueError, match="chunk_size"):
        enc.prefetch(["x"], chunk_size=0)


# ====================================================================== issue 12: pictures (items 13-15)
def test_topology_bars_never_hide_the_mean_line_and_no_negative_zero():
    import pandas as pd

    from toporag_core.studio import topo_view

    curve = pd.DataFrame({"hops": [1, 2], "label": ["1", "2"], "mean text similarity": [0.4, 0.2], "pairs": [50, 9]})
    fig = topo_view.hop_curve_figure(curve)
    bar, line = fig.data
    assert bar.type == "bar" and line.type == "scatter"
    assert fig.layout.yaxis2.overlaying == "y" and line.yaxis == "y2" and bar.yaxis == "y"  # line on the top axis
    assert topo_view.format_r(-0.0001) == "0.000" and topo_view.format_r(-0.0004) == "0.000"
    assert topo_view.format_r(-0.2) == "-0.200" and topo_view.format_r(float("nan")) == "n/a"


def test_node_search_prefers_the_exact_match():
    from toporag_core.studio import topo_view

    g = TextualGraph.from_triples([("John F. Kennedy School, Harvard", "part of", "Harvard"),
                                   ("John F. Kennedy", "studied at", "Harvard"),
                                   ("Brother of John F. Kennedy", "x", "y")], name="jfk")
    opts = topo_view.node_options(g, "john f. kennedy")
    assert g.node_text[opts[0]] == "John F. Kennedy"
    assert g.node_text[opts[1]] == "John F. Kennedy School, Harvard"


def test_prize_table_dimension_column_and_context_labels():
    from toporag_core.studio.figures import prize_table

    ecx, q = _embedded("scene")
    sub = retrieve(ecx, q, setting=RetrievalSetting.make("toporag", k=6, c2=0.1))
    assert sub.cells2.size >= 2
    t = prize_table(sub)
    assert "dim" in t.columns and "rank" not in t.columns
    ctx = textualize(sub)
    for f in sub.cells2.tolist():  # the context and the table name a 2-cell by its id in the complex
        row = t[(t["dim"] == 2) & (t["cell"] == f)]
        assert len(row) and row["in context"].iloc[0] == f"c{f}" and f"c{f}: {cycle_text(ecx.complex, f)}" in ctx


def test_views_fit_their_frames_and_label_what_matters_on_big_graphs():
    from toporag_core.studio.graph_view import wrap_label

    rng = np.random.default_rng(0)
    big = TextualGraph.from_triples([(f"entity number {i}", "rel", f"entity number {j}")
                                     for i, j in rng.integers(0, 400, size=(900, 2)) if i != j], name="big")
    cx = lift(big)
    enc = HashingEncoder()
    from toporag_core.embed import embed_complex

    ecx = EmbeddedComplex(cx, embed_complex(cx, enc), enc)
    sub = retrieve(ecx, "entity number 7", setting=RetrievalSetting.make("toporag", k=4))
    view = graph_view.render_view(cx, sub=sub, cap=300, height_px=580)
    assert view.frame_height >= view.height_px and "html, body {margin: 0" in view.html
    labels = json.loads(re.search(r"var TOPORAG_LABELS = (.*);\n", view.html).group(1))
    always = {lab["id"] for lab in labels if lab["always"]}
    shown = set(view.nodes.tolist())
    assert set(sub.nodes.tolist()) & shown <= always and always  # every retrieved node in view is labelled
    assert wrap_label("a scene label that is long but not huge") == ["a scene label that is long", "but not huge"]
    assert all("\u2026" not in "".join(lab["lines"]) for lab in labels)


def test_learn_and_the_retrieval_lab_start_from_the_same_library_defaults():
    """One default for k, C2 and the edge cost: TopoRAG's RetrievalSetting, read by both pages."""
    p = RetrievalSetting("toporag").params
    assert learn.walk_defaults() == {"k": p["k0"], "c2": p["c2"], "edge_cost": p["edge_cost"]}
    learn_page = app("pages/3_Learn.py").run()
    lab = app("pages/2_Retrieval_lab.py").run()
    assert not learn_page.exception and not lab.exception
    assert learn_page.slider(key="learn_k").value == lab.sidebar.slider(key="lab_k").value == p["k0"]
    assert learn_page.slider(key="learn_c2").value == p["c2"]
    assert learn_page.slider(key="learn_edge_cost").value == p["edge_cost"]


def test_home_links_every_page():
    """Home's "Next" list names every page of the app (a new page is never left unlinked)."""
    import re

    linked = set(re.findall(r'st\.page_link\("(pages/[^"]+\.py)"', (ROOT / "app.py").read_text()))
    assert linked == {f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py")}
