"""Lifting invariants: counts, B1 @ B2 = 0, closed boundaries, tree-method independence."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toporag_core import TextualGraph, lift
from toporag_core.io.explagraphs import explagraphs_row_to_graph, read_explagraphs
from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph

from .conftest import SHARED


def check_complex(cx) -> None:
    """Every invariant a lifted complex must satisfy."""
    g = cx.graph
    n, m, f = cx.shape
    simple = nx.Graph()
    simple.add_nodes_from(range(g.num_nodes))
    simple.add_edges_from((a, b) for a, b in g.edge_index.T.tolist() if a != b)
    b0 = nx.number_connected_components(simple)
    assert m == simple.number_of_edges()
    assert cx.betti0 == b0
    assert cx.betti1 == m - n + b0
    assert f + cx.num_skipped_cycles == m - n + b0  # one 2-cell per non-tree edge
    assert int(cx.tree_mask.sum()) == n - b0  # a spanning forest
    assert (cx.edges[:, 0] < cx.edges[:, 1]).all()
    assert cx.boundary_ok()
    b1, b2 = cx.incidence_matrix(1), cx.incidence_matrix(2)
    assert b1.shape == (n, m) and b2.shape == (m, f)
    assert abs(b1 @ b2).sum() == 0
    # every 2-cell boundary is a closed simple cycle whose edges join consecutive nodes
    for c in range(f):
        nodes, edges, signs = cx.cell2_nodes(c), cx.cell2_edges(c), cx.cell2_signs(c)
        assert len(nodes) == len(edges) >= 3
        assert len(set(nodes.tolist())) == len(nodes)
        assert not cx.tree_mask[cx.cell_chord[c]]
        assert cx.cell_chord[c] in edges and cx.tree_mask[edges[edges != cx.cell_chord[c]]].all()
        for j, e in enumerate(edges.tolist()):
            a, b = int(nodes[j]), int(nodes[(j + 1) % len(nodes)])
            assert sorted((a, b)) == cx.edges[e].tolist()
            assert signs[j] == (1 if a < b else -1)
    # 1-cells keep every original non-loop edge
    assert (np.diff(cx.edge_member_ptr) >= 1).all()
    assert sorted(cx.edge_member_idx.tolist()) == np.flatnonzero(g.edge_index[0] != g.edge_index[1]).tolist()


def graph_from_pairs(n: int, pairs: list[tuple[int, int]]) -> TextualGraph:
    ei = np.array(pairs, dtype=np.int64).T.reshape(2, -1)
    return TextualGraph([f"n{i}" for i in range(n)], ei, [f"r{i}" for i in range(len(pairs))])


@st.composite
def random_graphs(draw):
    n = draw(st.integers(1, 30))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=70))
    return graph_from_pairs(n, pairs)


@settings(max_examples=120, deadline=None)
@given(random_graphs(), st.sampled_from(["bfs", "dfs", "random"]), st.integers(0, 5))
def test_lift_invariants_random_graphs(g, tree, seed):
    cx = lift(g, tree=tree, seed=seed)
    check_complex(cx)


@settings(max_examples=40, deadline=None)
@given(random_graphs())
def test_betti_numbers_independent_of_tree(g):
    shapes = {(lift(g, tree=t, seed=3).betti0, lift(g, tree=t, seed=3).betti1, lift(g, tree=t, seed=3).num_cells2)
              for t in ("bfs", "dfs", "random")}
    assert len(shapes) == 1


def test_tree_methods_give_different_cycles_but_same_counts():
    g = TextualGraph.from_networkx(nx.grid_2d_graph(4, 4))
    cycles = {}
    for t in ("bfs", "dfs", "random"):
        cx = lift(g, tree=t, seed=1)
        check_complex(cx)
        assert cx.num_cells2 == 9
        cycles[t] = sorted(tuple(sorted(cx.cell2_nodes(f).tolist())) for f in range(cx.num_cells2))
    assert cycles["bfs"] != cycles["dfs"]  # DFS trees give long fundamental cycles on a grid


def test_random_tree_is_seeded():
    g = TextualGraph.from_networkx(nx.petersen_graph())
    a, b, c = (lift(g, tree="random", seed=s) for s in (7, 7, 8))
    assert (a.tree_mask == b.tree_mask).all()
    assert any((lift(g, tree="random", seed=s).tree_mask != a.tree_mask).any() for s in range(8, 14))
    del c


def test_parallel_edges_and_self_loops():
    g = TextualGraph.from_triples([("a", "likes", "b"), ("b", "liked by", "a"), ("a", "knows", "b"),
                                   ("b", "r", "c"), ("c", "r", "a"), ("c", "is", "c")])
    cx = lift(g)
    check_complex(cx)
    assert cx.shape == (3, 3, 1)
    ab = int(np.flatnonzero((cx.edges == [0, 1]).all(1))[0])
    assert [r for _, r, _ in cx.edge_relations(ab)] == ["likes", "liked by", "knows"]
    assert cx.self_loops.tolist() == [5]  # the self-loop stays attached to its node


def test_disconnected_graph_and_isolated_nodes():
    g = graph_from_pairs(9, [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 6), (6, 3), (3, 5)])
    cx = lift(g)
    check_complex(cx)
    assert cx.betti0 == 4 and cx.num_cells2 == 3  # two isolated nodes are components too


def test_max_cycle_len_skips_long_cycles():
    g = TextualGraph.from_networkx(nx.cycle_graph(8))
    g2 = TextualGraph.from_networkx(nx.compose(nx.cycle_graph(8), nx.relabel_nodes(nx.cycle_graph(3), {0: 10, 1: 11, 2: 12})))
    assert lift(g, max_cycle_len=7).num_cells2 == 0 and lift(g, max_cycle_len=7).num_skipped_cycles == 1
    cx = lift(g2, max_cycle_len=5)
    check_complex(cx)
    assert (cx.num_cells2, cx.num_skipped_cycles, cx.betti1_complex) == (1, 1, 1)


def test_empty_and_edgeless_graphs():
    cx = lift(TextualGraph([], np.zeros((2, 0)), []))
    assert cx.shape == (0, 0, 0)
    cx = lift(TextualGraph(["a", "b"], np.zeros((2, 0)), []))
    assert cx.shape == (2, 0, 0) and cx.betti0 == 2 and cx.boundary_ok()


def test_adjacency_matrices_match_definitions():
    g = TextualGraph.from_networkx(nx.complete_graph(4))
    cx = lift(g)
    a0 = cx.adjacency_matrix(0).toarray()
    assert (a0 == 1 - np.eye(4)).all()
    a1 = cx.adjacency_matrix(1).toarray()
    b2 = abs(cx.incidence_matrix(2)).toarray()
    assert ((a1 > 0) == (((b2 @ b2.T) > 0) & ~np.eye(cx.num_edges, dtype=bool))).all()
    assert cx.coadjacency_matrix(1).shape == (6, 6) and cx.coadjacency_matrix(1).toarray().trace() == 0


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "expla_graphs_train_dev.tsv").exists(), reason="../shared/data is absent")
def test_all_explagraphs_graphs_lift():
    rows = read_explagraphs(SHARED / "expla_graphs_train_dev.tsv")
    assert len(rows) == 2766
    for row in rows:
        g = explagraphs_row_to_graph(row)
        for tree in ("bfs", "dfs"):
            cx = lift(g, tree=tree)
            assert cx.boundary_ok()
            assert cx.num_cells2 == cx.num_edges - cx.num_nodes + cx.betti0
    check_complex(lift(explagraphs_row_to_graph(rows[0])))


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "webqsp_sample.json").exists(), reason="../shared/data is absent")
def test_all_webqsp_graphs_lift():
    recs = read_webqsp(SHARED / "webqsp_sample.json")
    assert len(recs) == 12
    for rec in recs:
        g = webqsp_record_to_graph(rec)
        b1 = set()
        for tree in ("bfs", "dfs", "random"):
            cx = lift(g, tree=tree, seed=1)
            assert cx.boundary_ok()
            assert cx.num_cells2 == cx.num_edges - cx.num_nodes + cx.betti0
            lens = cx.boundary_lengths()
            assert (lens >= 3).all()
            b1.add(cx.betti1)
        assert len(b1) == 1
    check_complex(lift(webqsp_record_to_graph(recs[0])))


# ----------------------------------------------------------------------------- the ring lifting
def brute_rings(g: TextualGraph, max_len: int) -> set:
    """Every simple cycle of 3..max_len edges of the simple skeleton, as a set of node pairs (networkx)."""
    simple = nx.Graph()
    simple.add_nodes_from(range(g.num_nodes))
    simple.add_edges_from((a, b) for a, b in g.edge_index.T.tolist() if a != b)
    return {frozenset(frozenset(e) for e in zip(c, c[1:] + c[:1]))
            for c in nx.simple_cycles(simple, length_bound=max_len) if len(c) >= 3}


def check_rings(cx, max_len: int) -> None:
    n, m, f = cx.shape
    assert cx.tree_method == "rings" and cx.boundary_ok() and cx.incidence_matrix(2).shape == (m, f)
    got = []
    for c in range(f):
        nodes, edges, signs = cx.cell2_nodes(c), cx.cell2_edges(c), cx.cell2_signs(c)
        assert 3 <= len(nodes) == len(edges) <= max_len and len(set(nodes.tolist())) == len(nodes)
        assert cx.cell_chord[c] == edges[-1]  # the closing 1-cell
        for j, e in enumerate(edges.tolist()):
            a, b = int(nodes[j]), int(nodes[(j + 1) % len(nodes)])
            assert sorted((a, b)) == cx.edges[e].tolist() and signs[j] == (1 if a < b else -1)
        got.append(frozenset(frozenset(cx.edges[e].tolist()) for e in edges.tolist()))
    assert len(got) == len(set(got))  # each cycle once
    assert set(got) == brute_rings(cx.graph, max_len)
    assert int(cx.tree_mask.sum()) == n - cx.betti0  # the BFS forest, for the pictures


@settings(max_examples=80, deadline=None)
@given(random_graphs(), st.sampled_from([3, 4]))
def test_rings_are_exactly_the_short_simple_cycles(g, max_len):
    """``tree="rings"``: one 2-cell on every simple cycle of 3 (or 4) edges, each once, boundaries
    closed, against networkx's cycle enumeration; parallel edges and self-loops are ignored as in
    the tree liftings."""
    check_rings(lift(g, tree="rings", max_cycle_len=None if max_len == 4 else 3), max_len)


def test_rings_on_known_graphs_and_refusals(monkeypatch):
    k4 = TextualGraph.from_networkx(nx.complete_graph(4))
    assert lift(k4, tree="rings").num_cells2 == 4 + 3  # 4 triangles, 3 four-cycles
    assert lift(k4, tree="rings", max_cycle_len=3).num_cells2 == 4
    assert lift(k4).num_cells2 == 3  # the fundamental cycles: M - N + b0
    c5 = TextualGraph.from_networkx(nx.cycle_graph(5))
    assert lift(c5, tree="rings").num_cells2 == 0  # a 5-cycle is no ring
    assert lift(TextualGraph([], np.zeros((2, 0)), []), tree="rings").shape == (0, 0, 0)
    none = lift(k4, tree="rings", max_cycle_len=2)  # below 3: no 2-cells, as for the tree liftings
    assert none.num_cells2 == 0 and none.boundary_ok() and int(none.tree_mask.sum()) == 3
    with pytest.raises(ValueError, match="unknown lifting 'ring'"):
        lift(k4, tree="ring")
    import importlib

    monkeypatch.setattr(importlib.import_module("toporag_core.cells.lift"), "MAX_RING_WEDGES", 5)  # K4 has 12 wedges
    with pytest.raises(ValueError, match="too dense for rings; lift it with a spanning tree"):
        lift(k4, tree="rings")
    # K12: 660 wedges pass a limit of 1,000, its 1,485 4-cycles do not (they grow as deg^4); triangles still lift
    k12 = TextualGraph.from_networkx(nx.complete_graph(12))
    monkeypatch.setattr(importlib.import_module("toporag_core.cells.lift"), "MAX_RING_WEDGES", 1000)
    with pytest.raises(ValueError, match="1,485 4-cycles, more than 1,000"):
        lift(k12, tree="rings")
    assert lift(k12, tree="rings", max_cycle_len=3).num_cells2 == 220  # C(12, 3) triangles


def test_rings_make_every_scene_loop_question_a_2cell(tmp_path):
    """Why rings exist: a generated closed-loop question's loop is always one of the ring 2-cells,
    and with a BFS tree only for some questions. The CLI accepts the lifting wherever it takes --tree."""
    from toporag_core.cli import build_parser
    from toporag_core.cells.lift import LIFTINGS
    from toporag_core.tasks import load_raw
    from toporag_core.tasks.prep import PrepConfig
    from toporag_core.tasks.scenes import write_dataset

    write_dataset(tmp_path, n=6, seed=5, per_type=3)
    loops = [r for split in load_raw("scene_graphs", tmp_path).values() for r in split if r.qtype == "2-cell"]
    assert loops

    def is_cell(r, tree):
        cx = lift(r.graph, tree=tree)
        return any(set(cx.cell2_nodes(c).tolist()) == set(r.support) for c in range(cx.num_cells2))

    assert all(is_cell(r, "rings") for r in loops)
    assert not all(is_cell(r, "bfs") for r in loops)
    for cmd in (["lift", "g.csv"], ["train"], ["eval"]):
        assert build_parser().parse_args([*cmd, "--tree", "rings"]).tree == "rings"
    assert "rings" in LIFTINGS and PrepConfig(tree="rings").tree == "rings"
    with pytest.raises(ValueError, match="tree must be one of"):
        PrepConfig(tree="ring")


def test_liftings_registry_is_the_one_list_and_its_module_loads_no_scipy():
    """Every lifting is one registry entry (name, label, spanning tree, 2-cell builder); ``lift`` and the
    CLI's ``--tree`` choices read it, and the module imports scipy only where it computes (the package
    itself may load it; the module's own import does not need it)."""
    import ast
    import importlib
    import inspect

    lift_mod = importlib.import_module("toporag_core.cells.lift")
    from toporag_core.cli import build_parser

    assert lift_mod.lifting_names() == list(lift_mod.LIFTINGS) == ["bfs", "dfs", "random", "rings"]
    assert all(s.name == n and s.label and s.spanning_tree in lift_mod.TREE_METHODS
               for n, s in lift_mod.LIFTING_SPECS.items())
    top = [n for n in ast.parse(inspect.getsource(lift_mod)).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [n for n in top if "scipy" in ast.dump(n)]
    for cmd in (["lift", "g.csv"], ["train"], ["eval"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*cmd, "--tree", "ring"])
    g = TextualGraph.from_networkx(nx.complete_graph(4))
    assert lift(g, tree="rings").num_cells2 == 4 + 3  # 4 triangles + 3 squares
    with pytest.raises(ValueError, match="unknown lifting 'ring'; choose one of"):
        lift(g, tree="ring")
