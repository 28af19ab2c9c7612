"""The Home page's "Knowledge graph" source (AppTest) and its library, toporag_core.studio.kg_source:
a question's k-hop subgraph of a DuckDB store becomes the current graph (checked against the store's own
extraction), bad files get one message naming file, line and field, and the previous graph stays."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from toporag_core.graph import GraphFormatError  # noqa: E402
from toporag_core.kg import KGStore, generate_kg  # noqa: E402
from toporag_core.kg.generate import entity_name  # noqa: E402
from toporag_core.studio import kg_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fast(monkeypatch, tmp_path):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    d = tmp_path_factory.mktemp("kgapp")
    src = generate_kg(d / "kg.csv", n_entities=300, n_triples=900, n_relations=12, seed=2)
    KGStore.create(d / "kg.duckdb", [src]).close()
    return d / "kg.duckdb", src


def home() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def extract(at: AppTest, path, question: str, hops: int = 1, entities: str = "") -> AppTest:
    at.text_input(key="kg_path").set_value(str(path))
    at.text_input(key="kg_question").set_value(question)
    at.number_input(key="kg_hops").set_value(hops)
    at.text_input(key="kg_entities").set_value(entities)
    at.button(key="load_kg").click()
    return at.run()


def test_home_loads_the_questions_k_hop_subgraph_and_the_lab_uses_it(kg):
    db, _ = kg
    q = f"what is {entity_name(42)} part of"
    with KGStore(db) as store:
        want = store.subgraph(store.lookup([entity_name(42)]), hops=1, max_nodes=None).graph
    at = home().run()
    at = extract(at, db, q, hops=1)
    assert not at.exception and not at.error
    m = metrics(at)
    assert int(m["|V| nodes"]) == want.num_nodes and int(m["|E| edges"]) == want.num_edges
    assert any("1-hop subgraph of kg.duckdb" in s.value for s in at.subheader)
    assert any(q in t.value for t in at.text)  # the question comes with the graph
    g = at.session_state["graph"]
    assert sorted(g.node_text) == sorted(want.node_text) and g.meta["kg"]["links"][0]["name"] == entity_name(42)
    # the lab retrieves on the subgraph, with the question filled in
    at.switch_page("pages/2_Retrieval_lab.py").run()
    assert not at.exception
    assert any(ta.value == q for ta in at.text_area)
    assert at.session_state["graph"] is g


def test_two_hops_and_named_entities(kg):
    db, _ = kg
    a, b = entity_name(5), entity_name(77)
    with KGStore(db) as store:
        want = store.subgraph(store.lookup([a, b]), hops=2, max_nodes=None).graph
    at = extract(home().run(), db, "no entity is named in this text", hops=2, entities=f"{a}; {b}")
    assert not at.exception and not at.error
    assert int(metrics(at)["|V| nodes"]) == want.num_nodes


@pytest.mark.parametrize("content, where", [
    ("head,relation,tail\na,r,b\nc,r\n", "bad.csv, line 3: expected 3 fields"),
    ("a,r,b\nc,r,d\ne,,f\n", "bad.csv, line 3, field 'relation': empty value"),
])
def test_bad_triple_file_names_file_line_field_and_keeps_the_previous_graph(kg, tmp_path, content, where):
    at = home().run()
    before = metrics(at)
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    at = extract(at, bad, "where is a")
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and where in errors[0], errors
    assert metrics(at) == before
    assert any("Still using the previously loaded graph" in i.value for i in at.info)


@pytest.mark.parametrize("make, msg", [
    (lambda d: d / "missing.duckdb", "no such file"),
    (lambda d: (d / "junk.duckdb").write_bytes(b"not a database at all" * 50) and d / "junk.duckdb",
     "not a DuckDB knowledge-graph store"),
    (lambda d: d, "a folder"),
])
def test_bad_store_paths_get_one_clear_message(tmp_path, make, msg):
    at = home().run()
    before = metrics(at)
    at = extract(at, make(tmp_path), "where is a")
    assert not at.exception and len(at.error) == 1 and msg in at.error[0].value
    assert metrics(at) == before


def test_nothing_linked_says_so(kg):
    at = extract(home().run(), kg[0], "zzz qqq xxx")
    assert len(at.error) == 1 and "no entity of the knowledge graph is mentioned" in at.error[0].value


# ---------------------------------------------------------------------------- library
def test_upload_is_imported_once_and_gives_the_stores_subgraph(kg):
    db, src = kg
    data = src.read_bytes()
    steps = []
    p1 = kg_source.store_from_upload(data, "my triples.csv", lambda f, t: steps.append((f, t)))
    assert steps and "importing" in steps[0][1]
    inode, again = p1.stat().st_ino, []
    p2 = kg_source.store_from_upload(data, "again.csv", lambda f, t: again.append(t))
    assert p2 == p1 and p2.stat().st_ino == inode and again == []  # not imported again
    q = f"where is {entity_name(42)}"
    prog = []
    g = kg_source.load_kg_subgraph(p1, q, hops=2, progress=lambda f, t: prog.append(f))
    with KGStore(db) as store:
        want = store.subgraph(store.lookup([entity_name(42)]), hops=2, max_nodes=None).graph
    assert sorted(g.node_text) == sorted(want.node_text)
    assert sorted(zip(g.edge_index[0].tolist(), g.edge_text)) == sorted(zip(want.edge_index[0].tolist(),
                                                                          want.edge_text))
    assert prog[0] == 0.0 and prog[-1] == 1.0 and np.all(np.diff(prog) >= 0) and len(prog) >= 4  # link + 2 hops
    assert g.meta["question"] == q and g.meta["kg"]["hops_done"] == 2


def test_upload_errors_name_the_uploaded_file_not_the_temporary_copy():
    with pytest.raises(GraphFormatError) as e:
        kg_source.store_from_upload(b"head,relation,tail\na,r,b\n\nc,r,d\n", "facts.csv")
    assert e.value.file == "facts.csv" and e.value.line == 3 and "empty line" in str(e.value)
    with pytest.raises(GraphFormatError, match="unknown triple file type") as e:
        kg_source.store_from_upload(b"[]", "facts.json")
    assert e.value.file == "facts.json"
    with pytest.raises(GraphFormatError) as e:
        kg_source.store_from_upload(b"PAR1 this is not parquet", "broken.parquet")
    assert e.value.file == "broken.parquet"
    assert not list(kg_source.imports_dir().glob("*.duckdb"))  # nothing half-built is kept


def test_truncated_expansion_is_reported(kg):
    db, _ = kg
    with KGStore(db) as store:
        one = store.subgraph(store.lookup([entity_name(0)]), hops=1, max_nodes=None).graph.num_nodes
    g = kg_source.load_kg_subgraph(db, "", hops=3, entities=[entity_name(0)], max_nodes=one)
    assert g.num_nodes == one and g.meta["kg"]["hops_done"] == 1
    assert "stopped after 1 of 3 hops" in g.meta["warnings"][0]
    assert kg_source.parse_entities(" a b ; c,d\n e ") == ["a b", "c,d", "e"]


def test_an_uploaded_store_is_named_by_its_file_name_with_duplicates_numbered(kg):
    """The import is kept under its content hash, but the user sees the file's name: a second upload of
    other triples under the same name gets " (2)"; the same triples again keep their first name."""
    db, src = kg
    data = src.read_bytes()
    p1 = kg_source.store_from_upload(data, "my triples.csv")
    assert kg_source.store_label(p1) == "my triples.csv" and p1.stem not in kg_source.store_label(p1)
    other = data.rstrip(b"\n") + f"\n{entity_name(1)},knows,{entity_name(2)}\n".encode()
    p2 = kg_source.store_from_upload(other, "dir/my triples.csv")
    assert p2 != p1 and kg_source.store_label(p2) == "my triples.csv (2)"
    assert kg_source.store_label(kg_source.store_from_upload(data, "again.csv")) == "my triples.csv"
    g = kg_source.load_kg_subgraph(p2, f"where is {entity_name(42)}", hops=1)
    assert g.name.startswith("1-hop subgraph of my triples.csv (2): ") and p2.stem not in g.name
    assert kg_source.store_label(db) == db.name  # a store on disk keeps its own file name
