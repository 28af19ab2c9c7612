"""Document-graph retrieval (KURISU-G2): graph building, FGW properties, traversal, evolution,
generator, CLI and bad input. Hashing encoder: fast and model-free."""
from __future__ import annotations

import json
import math

import numpy as np
import ot
import pytest

from toporag_core.cli import main
from toporag_core.docgraph import BuildConfig, FGWConfig, GraphState, TraversalConfig, Traverser, build_docgraph
from toporag_core.docgraph.build import (
    DOCUMENT,
    PARAGRAPH,
    SEMANTIC,
    SENTENCE,
    TREE,
    Article,
    DocGraph,
    docgraph_to_textual_graph,
    parse_text,
    read_document,
)
from toporag_core.docgraph.evaluate import (
    answer_in,
    count_tokens,
    dense_context,
    evaluate_records,
    exact_match,
    f1_score,
    summarize,
)
from toporag_core.docgraph.evolve import EvolutionConfig, edge_actions, evolve
from toporag_core.docgraph.fgw import feature_cost, fgw, fgw_between, fgw_cost, natural_coupling, structure_matrix
from toporag_core.datagen.docgraph import generate
from toporag_core.docgraph.records import gold_titles, load_records, record_articles
from toporag_core.docgraph.deform import children, fuse
from toporag_core.docgraph.prefix import largest_feasible_prefix
from toporag_core.docgraph.traverse import fgw_call_bound, prefix_curve
from toporag_core.embed import get_encoder
from toporag_core.graph import GraphFormatError


@pytest.fixture(scope="module")
def enc():
    return get_encoder("hashing-384", cached=False)  # the width the traversal cases were written for


@pytest.fixture(scope="module")
def data():
    return generate(12, seed=3)


@pytest.fixture(scope="module")
def graph(data, enc):
    recs, _ = data
    return build_docgraph(record_articles(recs[1]), enc, name="q1")


# ----------------------------------------------------------------------------- building
def test_graph_is_a_preorder_hierarchy_with_semantic_edges(graph):
    g = graph
    assert g.level[0] == 0 and g.parent[0] == -1
    assert np.all(g.parent[1:] < np.arange(1, g.num_nodes))  # parents come first
    assert np.all(g.level[1:] == g.level[g.parent[1:]] + 1)
    assert (g.level == DOCUMENT).sum() == 10
    tree = g.edge_kind == TREE
    assert np.array_equal(np.sort(g.edges[1, tree]), np.arange(1, g.num_nodes))
    assert np.all(g.p[tree] == 1.0)
    sem = g.edge_kind == SEMANTIC
    a, b = g.edges[:, sem]
    cos = np.einsum("ij,ij->i", g.x[a], g.x[b])
    assert np.all(cos > g.config.sim_threshold - 1e-6) and np.all(g.level[a] == g.level[b]) and np.all(a < b)
    # content of a paragraph is its sentences; a document's content starts with its title
    para = int(np.flatnonzero(g.level == PARAGRAPH)[0])
    assert g.content[para] == " ".join(g.text[c] for c in g.children(para))
    doc = int(np.flatnonzero(g.level == DOCUMENT)[0])
    assert g.content[doc].startswith(g.text[doc])


def test_save_load_roundtrip(graph, tmp_path):
    graph.save(tmp_path / "g")
    back = DocGraph.load(tmp_path / "g")
    assert back.text == graph.text and np.array_equal(back.edges, graph.edges)
    assert np.allclose(back.x, graph.x) and np.allclose(back.p, graph.p)


def test_textual_graph_view_opens_in_toporag(graph):
    from toporag_core.cells.lift import lift

    tg = docgraph_to_textual_graph(graph)
    assert tg.num_nodes == graph.num_nodes and tg.num_edges == graph.num_edges
    assert set(tg.edge_text) >= {"has section", "has sentence"}
    cx = lift(tg)
    assert cx.boundary_ok()


# ----------------------------------------------------------------------------- FGW properties
def _fused_pair(graph, enc, node_mass="fused"):
    cfg = FGWConfig(node_mass=node_mass)
    base = GraphState.from_graph(graph)
    d1, scale = structure_matrix(base, cfg)
    kids = graph.children(0)[:3].tolist()
    fused, _ = fuse(base, kids, enc)
    d2, _ = structure_matrix(fused, cfg, scale)
    return cfg, base, d1, fused, d2


@pytest.mark.parametrize("node_mass", ["fused", "uniform"])
def test_fgw_coupling_is_a_transport_plan(graph, enc, node_mass):
    cfg, base, d1, fused, d2 = _fused_pair(graph, enc, node_mass)
    res = fgw_between(base, d1, fused, d2, cfg)
    t = res.coupling
    assert t.shape == (base.num_nodes, fused.num_nodes)
    assert np.all(t >= 0)
    assert np.abs(t.sum(1) - res.mu).max() <= 1e-8 and np.abs(t.sum(0) - res.nu).max() <= 1e-8
    assert res.value > 0
    # our objective evaluation agrees with POT's own value for the same plan
    pot_val = ot.gromov.fused_gromov_wasserstein2(feature_cost(base.x, fused.x), d1, d2, res.mu, res.nu,
                                                  alpha=1 - cfg.feature_weight, G0=t, max_iter=1)
    assert fgw_cost(t, feature_cost(base.x, fused.x), d1, d2, cfg.feature_weight) == pytest.approx(
        float(pot_val), rel=1e-6, abs=1e-9)


def test_fgw_of_a_graph_with_itself_is_zero(graph):
    cfg = FGWConfig()
    base = GraphState.from_graph(graph)
    d1, _ = structure_matrix(base, cfg)
    assert fgw_between(base, d1, base, d1, cfg).value <= 1e-9


def test_feature_only_limit_is_emd2(graph, enc):
    _, base, d1, fused, d2 = _fused_pair(graph, enc)
    mu, nu = base.masses(), fused.masses()
    c = feature_cost(base.x, fused.x)
    val, _ = fgw(c, d1, d2, mu, nu, feature_weight=1.0)
    assert val == pytest.approx(float(ot.emd2(mu, nu, c)), abs=1e-10)
    # and the POT solver with alpha_POT -> 0 converges to the same value (alpha mapping)
    val_pot = ot.gromov.fused_gromov_wasserstein2(c, d1, d2, mu, nu, alpha=1e-12)
    assert float(val_pot) == pytest.approx(float(ot.emd2(mu, nu, c)), abs=1e-8)


def test_structure_only_term_uses_alpha_pot_one_minus_alpha(graph, enc):
    _, base, d1, fused, d2 = _fused_pair(graph, enc)
    mu, nu = base.masses(), fused.masses()
    c = feature_cost(base.x, fused.x)
    t0 = natural_coupling(fused.assign, mu, fused.num_nodes)
    val, _ = fgw(c, d1, d2, mu, nu, feature_weight=0.0, t0=t0)
    # with feature_weight 0 the feature matrix must not matter
    val2, _ = fgw(c * 100.0, d1, d2, mu, nu, feature_weight=0.0, t0=t0)
    assert val == pytest.approx(val2, rel=1e-6, abs=1e-12)


def test_solver_is_no_worse_than_the_natural_coupling(graph, enc):
    cfg, base, d1, fused, d2 = _fused_pair(graph, enc)
    mu, nu = base.masses(), fused.masses()
    c = feature_cost(base.x, fused.x)
    t_nat = natural_coupling(fused.assign, mu, fused.num_nodes)
    assert np.allclose(t_nat.sum(0), nu)
    nat = fgw_cost(t_nat, c, d1, d2, cfg.feature_weight)
    val, _ = fgw(c, d1, d2, mu, nu, cfg.feature_weight, t0=t_nat)
    assert val <= nat + 1e-12


def test_embedding_structure_ignores_grafts(graph, enc):
    from toporag_core.docgraph.deform import graft

    for structure, changes in (("embedding", False), ("paths", True)):
        cfg = FGWConfig(structure=structure)
        base = GraphState.from_graph(graph)
        d1, scale = structure_matrix(base, cfg)
        sent = int(np.flatnonzero(graph.level == SENTENCE)[-1])
        g2 = graft(base, 1, [sent], [0.9])
        d2, _ = structure_matrix(g2, cfg, scale)
        assert (not np.allclose(d1, d2)) is changes
        assert (fgw_between(base, d1, g2, d2, cfg).value > 1e-9) is changes


# ----------------------------------------------------------------------------- traversal
def test_epsilon_zero_is_the_plain_greedy_path(data, enc):
    recs, _ = data
    for r in recs[:4]:
        g = build_docgraph(record_articles(r), enc)
        res = Traverser(g, enc, TraversalConfig(epsilon=0.0)).run(r["question"])
        assert res.fgw_calls == 0 and not res.fusions() and not res.grafts()
        q = enc.encode([r["question"]])[0].astype(np.float64)
        q /= np.linalg.norm(q)
        u, path = 0, [[0]]
        for _ in range(3):
            kids = g.children(u)
            if kids.size == 0:
                break
            s = g.x[kids] @ q
            u = int(kids[np.lexsort((kids, -s))[0]])
            path.append([u])
        assert res.path == path


def test_binary_search_equals_linear_and_respects_the_call_bound(data, enc):
    recs, _ = data
    for r in recs[:7]:
        g = build_docgraph(record_articles(r), enc)
        out = {}
        for search in ("binary", "linear"):
            out[search] = Traverser(g, enc, TraversalConfig(epsilon=0.02, search=search)).run(r["question"])
        b, lin = out["binary"], out["linear"]
        assert b.path == lin.path and b.fusions() == lin.fusions() and b.grafts() == lin.grafts()
        kmax = max([s.candidates for s in b.steps] or [1])
        assert b.fgw_calls <= fgw_call_bound(3, kmax)
        for s in b.steps:
            calls = sum(e.depth == s.depth for e in b.evaluations)
            assert calls <= 2 * math.ceil(math.log2(s.candidates + 1))
        assert all(e.ok == (e.value <= 0.02) for e in b.evaluations)


def test_prefix_search_on_a_monotone_oracle():
    class Oracle:
        def __init__(self, cut):
            self.cut, self.calls = cut, 0

        def __call__(self, m):
            self.calls += 1
            return m <= self.cut

    for k in range(1, 12):
        for cut in range(1, k + 1):
            ok = Oracle(cut)
            assert largest_feasible_prefix(k, ok, lo=1) == cut == largest_feasible_prefix(k, Oracle(cut), lo=1,
                                                                                          method="linear")
            assert ok.calls <= math.ceil(math.log2(k))


def test_fusion_merges_members_and_edges(graph, enc):
    base = GraphState.from_graph(graph)
    kids = graph.children(0)[:2].tolist()
    fused, remap = fuse(base, kids, enc)
    s = int(remap[kids[0]])
    assert fused.num_nodes == base.num_nodes - 1 and sorted(fused.members[s].tolist()) == sorted(kids)
    assert fused.size[s] == 2 and fused.masses()[s] == pytest.approx(2 / graph.num_nodes)
    grand = np.concatenate([graph.children(k) for k in kids])
    assert set(children(fused, s)[0].tolist()) == set(remap[grand].tolist())  # neighbours united
    assert np.linalg.norm(fused.x[s]) == pytest.approx(1.0, abs=1e-5)  # re-embedded
    assert fused.text[s] == "\n".join(graph.text[k] for k in kids)


def test_result_json_and_prefix_curve(data, enc):
    recs, _ = data
    g = build_docgraph(record_articles(recs[1]), enc)
    cfg = TraversalConfig(epsilon=0.05)
    res = Traverser(g, enc, cfg).run(recs[1]["question"])
    d = json.loads(json.dumps(res.to_dict(g)))
    assert {"path", "fusions", "grafts", "fgw", "epsilon", "timings_ms", "context"} <= set(d)
    assert all({"value", "ok", "size", "op"} <= set(e) for e in d["fgw"])
    curve = prefix_curve(res, 1, enc, cfg)
    assert [m for m, _ in curve] == list(range(1, len(res.steps[0].kept) + 1))
    for ev in res.evaluations:  # the traversal's own evaluations lie on the curve
        if ev.depth == 1 and ev.op == "fuse":
            assert dict(curve)[ev.size] == pytest.approx(ev.value, rel=1e-6, abs=1e-9)


# ----------------------------------------------------------------------------- evolution
def test_evolution_actions_sum_to_the_reward_shares():
    rng = np.random.default_rng(0)
    cfg = EvolutionConfig(reward=1.0, neg_share=0.2)
    for _ in range(200):
        sims = rng.normal(size=int(rng.integers(3, 40)))
        a = edge_actions(sims, cfg)
        pos, neg = a[a > 0], a[a < 0]
        assert pos.sum() == pytest.approx(0.8, abs=1e-9)
        z = (sims - sims.mean()) / sims.std()
        if (z < -cfg.z_cut).any():
            assert neg.sum() == pytest.approx(-0.2, abs=1e-9)
        else:
            assert neg.size == 0
    assert not edge_actions(np.ones(5), cfg).any() or edge_actions(np.ones(5), cfg).sum() == pytest.approx(0.8)


def test_evolution_keeps_weights_in_unit_interval(data, enc):
    recs, _ = data
    g = build_docgraph(record_articles(recs[2]), enc)
    tr = Traverser(g, enc, TraversalConfig(epsilon=0.05))
    cfg = EvolutionConfig(lr=5.0)  # large steps hit both clips
    for r in recs[:6]:
        res = tr.run(r["question"])
        info = evolve(g, res, tr.question_vector(r["question"]), cfg)
        assert np.all((g.p >= 0) & (g.p <= 1))
        assert info["edges"].size > 0 and np.allclose(info["after"], np.clip(info["before"] + 5.0 * info["actions"],
                                                                              0, 1))
    assert (g.p < 1).any()


# ----------------------------------------------------------------------------- generator + evaluation
def test_generator_answers_come_from_the_fact_table(data):
    recs, world = data
    by = {e["name"]: e for v in world.values() for e in v}
    for r in recs:
        assert {"_id", "question", "answer", "type", "supporting_facts", "context"} <= set(r)
        assert len(r["context"]) == 10 and len(gold_titles(r)) == 2
        ctx = {t: s for t, s in r["context"]}
        for title, idx in r["supporting_facts"]:
            assert title in ctx and 0 <= idx < len(ctx[title])
        a, b = (by[t] for t in gold_titles(r))
        if r["type"] == "comparison":
            key = {"person": "birth_year", "org": "founded", "city": "population"}[a["type"]]
            pick = max if key == "population" else min
            assert r["answer"] == pick(a, b, key=lambda e: e[key])["name"]
        else:
            vals = {str(v) for e in (a, b) for v in e.values()}
            assert r["answer"] in vals
        # the answer is stated in a supporting sentence (numbers may carry thousands separators)
        sup = " ".join(ctx[t][i] for t, i in r["supporting_facts"])
        assert r["answer"] in sup or r["type"] == "comparison"
    assert generate(12, seed=3)[0] == recs  # deterministic


def test_evaluation_rows_and_dense_budget(data, enc):
    recs, _ = data
    rows = evaluate_records(recs[:4], enc, TraversalConfig(epsilon=0.05), repeat_timing=False)
    for row in rows:
        assert row.dense_tokens <= row.tokens
        assert row.fgw_calls <= row.fgw_bound
    s = summarize(rows)
    assert 0 <= s["recall_both"] <= 1 and s["questions"] == 4
    g = build_docgraph(record_articles(recs[0]), enc)
    q = enc.encode([recs[0]["question"]])[0]
    ctx, sel = dense_context(g, q, 25)
    assert count_tokens(ctx) <= 25 and np.all(g.level[sel] == SENTENCE)
    assert exact_match("The Foo.", "foo") == 1.0 and f1_score("foo bar", "foo") == pytest.approx(2 / 3)
    assert answer_in("born in 1,805 or 1805.", "1805") and not answer_in("18050", "1805")


# ----------------------------------------------------------------------------- bad input
def test_bad_documents_get_clear_messages(tmp_path, enc):
    with pytest.raises(GraphFormatError, match="empty document"):
        parse_text("  \n\n", source="empty.txt")
    with pytest.raises(GraphFormatError, match=r"huge.txt, line 3: paragraph of 29,999 characters exceeds"):
        parse_text("# T\n\n" + "word " * 6000 + "\n", source="huge.txt", max_paragraph_chars=20_000)
    binf = tmp_path / "x.bin"
    binf.write_bytes(b"\x00\x01\x02abc")
    with pytest.raises(GraphFormatError, match="binary file"):
        read_document(binf)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 ok.".encode("latin-1"))
    with pytest.raises(GraphFormatError, match="not UTF-8"):
        read_document(latin)
    with pytest.raises(GraphFormatError, match="empty document"):
        build_docgraph([Article("T", [])], enc)
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        TraversalConfig(epsilon=-0.1)
    with pytest.raises(ValueError, match="max_depth must be >= 1"):
        TraversalConfig(max_depth=0)
    with pytest.raises(ValueError, match="sim_threshold"):
        BuildConfig(sim_threshold=2)
    art = parse_text("# Title\n\n## A\n\nOne. Two three.\n\nFour.\n\n## B\nFive!", source="t.md")
    assert art.title == "Title" and [h for h, _ in art.sections] == ["A", "B"]
    assert art.sections[0][1] == [["One.", "Two three."], ["Four."]]


def test_cli_end_to_end_and_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    out = tmp_path / "data"
    assert main(["docgraph", "generate", "--n", "4", "--out", str(out)]) == 0
    assert len(load_records(out)) == 4
    assert main(["docgraph", "build", str(out), "--record", "1", "--out", str(tmp_path / "g")]) == 0
    capsys.readouterr()
    assert main(["docgraph", "retrieve", str(tmp_path / "g"), "-q", "Who was born first?", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["epsilon"] == 0.05 and all(e["ok"] == (e["value"] <= 0.05) for e in d["fgw"])
    assert main(["docgraph", "eval", str(out), "--n", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["questions"] == 2
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nAlpha is a town. It has a river.\n")
    (docs / "empty.txt").write_text("")
    (docs / "blob.bin").write_bytes(b"\x00" * 50)
    assert main(["docgraph", "build", str(docs), "--out", str(tmp_path / "g2")]) == 0
    err = capsys.readouterr().err
    assert "empty.txt: empty document" in err and "blob.bin: binary file" in err
    for argv, msg in ((["--epsilon", "-1"], "epsilon must be >= 0"), (["--max-depth", "0"], "max_depth must be >= 1")):
        assert main(["docgraph", "retrieve", str(docs), "-q", "town?"] + argv) == 2
        assert msg in capsys.readouterr().err
    (docs / "a.md").write_text("")
    assert main(["docgraph", "build", str(docs), "--out", str(tmp_path / "g3")]) == 2
    assert "no usable document" in capsys.readouterr().err


def test_question_clustering_by_pairwise_fgw(data, enc):
    from toporag_core.docgraph.cluster import cluster_questions

    recs, _ = data
    g = build_docgraph(record_articles(recs[1]), enc)
    tr = Traverser(g, enc, TraversalConfig(epsilon=0.05, mention_bonus=0.0, graft_mentions=False))
    t5 = g.titles[5]
    qs = [recs[1]["question"], recs[1]["question"] + " Please.", f"Tell me about {t5} history.",
          f"{t5} history founded"]
    results = [tr.run(q) for q in qs]
    labels, d = cluster_questions(results, 2, region="graph")
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0) and np.all(d >= -1e-12)
    same = results[0].fusions() == results[1].fusions() and [x["node"] for x in results[0].grafts()] == [
        x["node"] for x in results[1].grafts()]
    assert same and d[0, 1] <= 1e-12 and labels[0] == labels[1]  # one deformation, distance 0
    assert results[3].fusions() and d[3, :3].min() > 10 * d[:3, :3].max()  # the only fusion stands apart
    assert labels[3] != labels[0]


def test_literal_grafts_come_from_tree_grandchildren_and_far_grafts_from_other_articles(data, enc):
    recs, _ = data
    far = 0
    for r in recs[:6]:
        g = build_docgraph(record_articles(r), enc)
        for semantic in (False, True):
            cfg = TraversalConfig(epsilon=0.05, graft_semantic=semantic, graft_mentions=False, mention_bonus=0.0)
            res = Traverser(g, enc, cfg).run(r["question"])
            for s in res.steps:
                kids = {i for c in s.children for i in c}
                for node in s.grafted:
                    parent_is_child = int(g.parent[node[0]]) in kids
                    if not semantic:
                        assert parent_is_child
                    far += semantic and not parent_is_child
    assert far > 0


def test_fuse_by_mean_embedding(graph):
    base = GraphState.from_graph(graph)
    kids = graph.children(0)[:3].tolist()
    fused, remap = fuse(base, kids, None, how="mean")
    v = graph.x[kids].astype(np.float64).sum(0)
    assert np.allclose(fused.x[int(remap[kids[0]])], v / np.linalg.norm(v), atol=1e-6)


def test_context_expands_leaf_sections_and_names_orphans(graph):
    from toporag_core.docgraph.build import SECTION
    from toporag_core.docgraph.context import context_nodes, render_context

    sec = int(np.flatnonzero(graph.level == SECTION)[3])
    para = int(graph.children(sec)[0])
    sents = graph.children(para)
    title = graph.titles[int(graph.doc[sec])]
    # a section alone (grafted, nothing below selected) brings its paragraphs, titled
    shown = context_nodes(graph, np.array([sec]))
    assert set(shown.tolist()) == {sec, *graph.children(sec).tolist()}
    ctx = render_context(graph, np.array([sec]))
    assert ctx.splitlines()[0] == f"## {title}: {graph.text[sec]}" and graph.text[para] in ctx
    # with its document selected too, the heading is plain; a sentence under a shown paragraph is not repeated
    doc = int(graph.parent[sec])
    ctx2 = render_context(graph, np.array([doc, sec, para, int(sents[0])]))
    assert ctx2.splitlines()[:2] == [f"# {title}", f"## {graph.text[sec]}"]
    assert ctx2.count(graph.text[int(sents[0])]) == 1
    # an orphan sentence is prefixed with its article's title
    assert render_context(graph, sents[:1]) == f"{title}: {graph.text[int(sents[0])]}"


# ----------------------------------------------------------------------------- title mentions
def test_named_documents_match_whole_titles_case_insensitively(graph):
    from toporag_core.docgraph.mentions import named_documents

    t0, t1 = graph.titles[0], graph.titles[1]
    assert named_documents(graph, f"Was {t0.lower()} older than {t1}?").tolist() == [0, 1]
    assert named_documents(graph, f"x{t0}x and nothing else").size == 0  # not inside a longer word
    assert named_documents(graph, "").size == 0


def test_mention_grafts_bring_the_bridge_article_named_on_the_path(data, enc):
    from toporag_core.docgraph.evaluate import articles_of
    from toporag_core.docgraph.context import context_nodes
    from toporag_core.docgraph.mentions import named_documents

    recs, _ = data
    bridge = [r for r in recs if r["type"] == "bridge"]
    assert bridge
    got = {True: 0, False: 0}
    mention_grafts = 0
    for r in bridge:
        g = build_docgraph(record_articles(r), enc)
        for on in (True, False):
            res = Traverser(g, enc, TraversalConfig(graft_mentions=on)).run(r["question"])
            got[on] += set(gold_titles(r)) <= articles_of(g, context_nodes(g, res.selected))
            path_text = " ".join([r["question"]] + [g.text[i] for p in res.path for i in p])
            named = set(named_documents(g, path_text).tolist())
            for s in res.steps:
                assert on or s.mention_candidates == 0
                for node in s.grafted[: s.mention_candidates]:  # a section of a document named on the path
                    assert g.level[node[0]] == 2 and int(g.doc[node[0]]) in named
                    mention_grafts += 1
            assert res.fgw_calls <= fgw_call_bound(3, max([s.candidates for s in res.steps] or [1]))
    assert mention_grafts > 0 and got[True] > got[False]


def test_mention_bonus_keeps_both_named_documents_of_a_comparison(data, enc):
    recs, _ = data
    comp = [r for r in recs if r["type"] == "comparison"]
    for r in comp:
        g = build_docgraph(record_articles(r), enc)
        gold = set(gold_titles(r))
        step = Traverser(g, enc, TraversalConfig()).run(r["question"]).steps[0]
        kept = {g.titles[int(g.doc[step.children[i][0]])] for i in step.kept}
        top2 = {g.titles[int(g.doc[step.children[i][0]])] for i in np.argsort(step.scores)[-2:]}
        assert top2 == gold and kept <= gold  # the named articles rank first; no other article is kept
        bonus = np.asarray(step.scores) - g.x[[c[0] for c in step.children]].astype(np.float64) @ Traverser(
            g, enc).question_vector(r["question"])
        assert np.allclose(np.sort(bonus)[-2:], 0.5, atol=1e-5) and np.allclose(np.sort(bonus)[:-2], 0, atol=1e-5)


def test_query_update_and_mention_options_are_validated():
    with pytest.raises(ValueError, match="mention_bonus"):
        TraversalConfig(mention_bonus=-1)
    with pytest.raises(ValueError, match="query_update"):
        TraversalConfig(query_update=-0.5)


def test_llm_answerer_is_the_answering_layers_text_only_pipeline():
    from toporag_core.docgraph.evaluate import LLMAnswerer
    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.model.tiny import tiny_llm, tiny_tokenizer

    tok = tiny_tokenizer(chat=True)
    ans = LLMAnswerer(tiny_llm(len(tok)), tok, max_new_tokens=3)
    assert isinstance(ans.pipeline, TopoRAGPipeline) and not ans.pipeline.model.config.use_graph
    assert ans.pipeline.model.config.max_new_tokens == 3 and ans.tokenizer is tok
    ctx, qs = ["alpha beta", "gamma"] * 3, [f"question {i}?" for i in range(6)]
    out = ans.answer(ctx, qs, batch_size=4)
    assert len(out) == 6 and all(isinstance(a, str) for a in out)
    assert out == [ans.answer([c], [q])[0] for c, q in zip(ctx, qs)]  # a row's answer does not depend on its batch
    with pytest.raises(ValueError, match="differ in number"):
        ans.pipeline.answer_texts(qs, ctx[:2])


def test_cluster_cli_on_visited_regions(tmp_path, data, enc, capsys, monkeypatch):
    from toporag_core.docgraph.cluster import question_distances, visited_region

    monkeypatch.setenv("TOPORAG_ENCODER", "hashing-384")
    recs, _ = data
    r = recs[0]
    g = build_docgraph(record_articles(r), enc)
    res = [Traverser(g, enc).run(q) for q in (r["question"], r["question"], recs[1]["question"])]
    reg = visited_region(res[0])
    assert reg.num_nodes == np.unique(res[0].state.assign[res[0].selected]).size
    assert sorted(np.concatenate(reg.members).tolist()) == sorted(res[0].selected.tolist())
    d = question_distances(res)
    assert np.allclose(d, d.T) and np.all(np.diag(d) == 0) and d[0, 1] <= 1e-12 and d[0, 2] > 1e-6
    with pytest.raises(ValueError, match="region"):
        question_distances(res, region="everything")
    out = tmp_path / "hops"
    assert main(["docgraph", "generate", "--n", "8", "--seed", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["docgraph", "cluster", str(out), "--n", "8", "--k", "2", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert len(j["labels"]) == 8 and set(j["labels"]) <= {0, 1} and len(set(j["labels"])) == 2
    assert j["types"] == [x["type"] for x in load_records(out)[:8]] and -1.0 <= j["ari_vs_type"] <= 1.0
    dm = np.asarray(j["distances"])
    assert dm.shape == (8, 8) and np.allclose(dm, dm.T)
    assert main(["docgraph", "cluster", str(out), "--n", "1"]) == 2
    assert "--n must be >= 2" in capsys.readouterr().err
