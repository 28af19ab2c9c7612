"""The DuckDB knowledge-graph store: import, k-hop extraction (against networkx), entity linking,
bad files (file, line, field), the CLI."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from toporag_core.cli import main
from toporag_core.graph import GraphFormatError
from toporag_core.kg import KGStore, generate_kg, link_entities, question_subgraph, retrieve_from_kg
from toporag_core.kg.generate import entity_name


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    d = tmp_path_factory.mktemp("kg")
    src = generate_kg(d / "kg.parquet", n_entities=400, n_triples=1500, n_relations=20, seed=1)
    store = KGStore.create(d / "kg.duckdb", [src])
    yield store, src
    store.close()


def _nx_graph(src):
    import duckdb

    rows = duckdb.connect().execute(f"SELECT head, relation, tail FROM read_parquet('{src}')").fetchall()
    g = nx.MultiDiGraph()
    g.add_edges_from((h, t, {"r": r}) for h, r, t in rows)
    return g, rows


@pytest.mark.parametrize("hops", [0, 1, 2, 3])
def test_k_hop_subgraph_equals_networkx(kg, hops):
    store, src = kg
    g, rows = _nx_graph(src)
    und = g.to_undirected(as_view=True)
    rng = np.random.default_rng(hops)
    for seeds in ([entity_name(int(i)) for i in rng.choice(400, 2, replace=False)], [entity_name(250)]):
        seeds = [s for s in seeds if s in g]
        want_nodes = set()
        for s in seeds:
            want_nodes |= set(nx.single_source_shortest_path_length(und, s, cutoff=hops))
        want_triples = sorted((h, r, t) for h, r, t in rows if h in want_nodes and t in want_nodes)
        nb = store.subgraph(store.lookup(seeds), hops=hops, max_nodes=None)
        gr = nb.graph
        assert set(gr.node_text) == want_nodes and nb.hops_done == hops and not nb.truncated
        s, t = gr.edge_index
        got = sorted((gr.node_text[a], r, gr.node_text[b]) for a, r, b in zip(s.tolist(), gr.edge_text, t.tolist()))
        assert got == want_triples
        assert sorted(gr.node_text[i] for i in nb.seeds) == sorted(seeds)


def test_max_nodes_stops_before_the_hop_that_exceeds_it(kg):
    store, _ = kg
    full = store.subgraph([0], hops=2, max_nodes=None).graph.num_nodes
    one = store.subgraph([0], hops=1, max_nodes=None).graph.num_nodes
    nb = store.subgraph([0], hops=2, max_nodes=full - 1)
    assert nb.truncated and nb.hops_done == 1 and nb.graph.num_nodes == one


def test_entity_linking_exact_longest_and_fuzzy(kg):
    store, _ = kg
    a, b = entity_name(17), entity_name(123)
    links = link_entities(store, f"How is {a.title()} related to {b}?")
    assert {lk.name for lk in links} == {a, b} and {lk.how for lk in links} == {"exact"}
    typo = a.replace(a.split()[1], a.split()[1][:-1] + "x")  # one letter wrong in the noun
    fz = link_entities(store, f"what about {typo}")
    assert fz and fz[0].name == a and fz[0].how == "fuzzy" and fz[0].score >= 0.92
    assert link_entities(store, f"what about {typo}", mode="exact") == []
    with pytest.raises(ValueError, match="no entity"):
        question_subgraph(store, "nothing here at all")


def test_store_linking_reaches_demonyms_and_weakens_relation_words(tmp_path):
    src = tmp_path / "wq.csv"
    src.write_text("head,relation,tail\n"
                   "Jamaica,location.country.languages_spoken,Jamaican English\n"
                   "Kennedy,government.us_president.vice_president,Lyndon B. Johnson\n"
                   "Vice President,government.government_office.holder,Lyndon B. Johnson\n")
    with KGStore.create(tmp_path / "wq.duckdb", [src]) as store:
        assert {"vice", "president", "languages", "spoken"} <= store.relation_words()
        links = link_entities(store, "what does jamaican people speak")  # no exact name: a prefix of "jamaican"
        assert [(lk.name, lk.how) for lk in links] == [("Jamaica", "fuzzy")] and links[0].score >= 0.92
        assert link_entities(store, "what does jamaican people speak", mode="exact") == []
        links = link_entities(store, "who was vice president after kennedy died")
        assert [(lk.name, lk.weak) for lk in links] == [("Kennedy", False)]
        links = link_entities(store, "who is the vice president")  # only the relation words name anything
        assert [(lk.name, lk.weak) for lk in links] == [("Vice President", True)]


def test_retrieve_from_kg_lifts_the_subgraph(kg):
    from toporag_core.embed import HashingEncoder

    store, _ = kg
    steps = []
    res = retrieve_from_kg(store, f"what is {entity_name(5)} part of", HashingEncoder(32), hops=1,
                           progress=lambda f, m: steps.append(f))
    sub = res["subcomplex"]
    assert steps[0] == 0.0 and steps[-1] == 1.0
    assert not sub.is_empty() and set(sub.node_texts()) <= set(res["neighbourhood"].graph.node_text)


@pytest.mark.parametrize("content, line, field, msg", [
    ("head,relation,tail\na,r,b\nc,r\n", 3, None, "expected 3 fields"),
    ("a,r,b\nc,r,d\ne,,f\n", 3, "relation", "empty value"),
    ("head\trelation\ttail\na\tr\tb\n\t r\tc\n", 3, "head", "empty value"),
    ("a,r,b\n\nc,r,d\n", 2, None, "empty line"),
])
def test_bad_csv_names_file_line_and_field(tmp_path, content, line, field, msg):
    p = tmp_path / ("bad.tsv" if "\t" in content else "bad.csv")
    p.write_text(content)
    with pytest.raises(GraphFormatError, match=msg) as e:
        KGStore.create(tmp_path / "x.duckdb", [p])
    assert e.value.file == str(p) and e.value.line == line and e.value.field == field
    assert not (tmp_path / "x.duckdb").exists()  # nothing half-built


def test_bad_parquet_and_unknown_type(tmp_path):
    import duckdb

    p = tmp_path / "bad.parquet"
    duckdb.connect().execute(f"COPY (SELECT 'a' AS head, 'b' AS tail) TO '{p}' (FORMAT PARQUET)")
    with pytest.raises(GraphFormatError, match="missing column") as e:
        KGStore.create(tmp_path / "x.duckdb", [p])
    assert e.value.field == "relation" and "bad.parquet" in str(e.value)
    q = tmp_path / "t.json"
    q.write_text("[]")
    with pytest.raises(GraphFormatError, match="unknown triple file type"):
        KGStore.create(tmp_path / "x.duckdb", [q])


def test_cli_import_subgraph_retrieve(tmp_path, capsys):
    src = tmp_path / "kg.csv"
    assert main(["kg", "generate", str(src), "--entities", "300", "--triples", "900"]) == 0
    db = tmp_path / "kg.duckdb"
    assert main(["kg", "import", str(db), str(src), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["triples"] > 800 and out["entities"] <= 300
    q = f"where is {entity_name(42)}"
    assert main(["kg", "subgraph", str(db), "-q", q, "--kg-hops", "1", "--json", "--out", str(tmp_path / "s.csv")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["links"][0]["name"] == entity_name(42) and out["nodes"] >= 1
    assert (tmp_path / "s.csv").read_text().startswith("head,relation,tail")
    assert main(["kg", "retrieve", str(db), "-q", q, "--encoder", "hashing", "--k", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "toporag-seeded" and out["subgraph"]["nodes"] >= 1 and out["nodes"]
    assert len(out["params"]["seeds"]) == 1 and entity_name(42) in out["nodes"]  # seeded from the linked entity
    assert main(["kg", "import", str(db), str(src)]) == 2  # exists: clear error, non-zero
    assert "already exists" in capsys.readouterr().err
