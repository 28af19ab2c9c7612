"""The Document-graph page (AppTest, model-free hashing encoder); expected values come from the
library run here, not from the page."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

from toporag_core.docgraph import TraversalConfig, Traverser, build_docgraph
from toporag_core.datagen.docgraph import generate
from toporag_core.docgraph.records import record_articles
from toporag_core.embed import HashingEncoder
from toporag_core.graph import TextualGraph
from toporag_core.studio import state

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "8_Document_graph.py")


@pytest.fixture(autouse=True)
def _fast_encoder(monkeypatch, tmp_path):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))


def charts(at) -> int:
    return len(at.get("plotly_chart"))


def test_page_shows_traversal_and_opens_the_graph_in_explore():
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    rec = generate(20, seed=0)[0][0]
    enc = HashingEncoder()
    g = build_docgraph(record_articles(rec), enc)
    res = Traverser(g, enc, TraversalConfig()).run(rec["question"])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["nodes"] == str(g.num_nodes) and metrics["FGW calls"] == str(res.fgw_calls)
    assert metrics["fusions"] == str(len(res.fusions()))
    assert charts(at) == 3  # tree, FGW curve, coupling
    assert res.context in at.code[0].value
    at.slider(key="dg_step").set_value(1).run()
    at.radio(key="dg_view").set_value("after evolution").run()
    assert not at.exception and charts(at) == 3
    at.button(key="dg_open").click().run()
    graph = at.session_state[state.GRAPH]
    assert isinstance(graph, TextualGraph) and graph.num_nodes == g.num_nodes
    assert "has sentence" in graph.edge_text


def test_page_bad_input_gets_a_message():
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.number_input(key="dg_eps").set_value(-0.5).run()
    assert not at.exception and "epsilon must be >= 0" in at.error[0].value
    at.number_input(key="dg_eps").set_value(0.05)
    at.number_input(key="dg_depth").set_value(0).run()
    assert "max_depth must be >= 1" in at.error[0].value
    at.number_input(key="dg_depth").set_value(3)
    at.radio(key="dg_source").set_value("Paste documents").run()
    at.text_area(key="dg_pasted").set_value("   ").run()
    assert "empty document" in at.error[0].value
    at.text_area(key="dg_pasted").set_value("# Big\n\n" + "<b>word</b> " * 3000).run()
    assert "exceeds max_paragraph_chars" in at.error[0].value
    at.text_area(key="dg_pasted").set_value("# <script>x</script>\n\nAlpha is <i>here</i>. Beta too.").run()
    assert not at.exception and not at.error
    at.text_input(key="dg_q_").set_value("Where is alpha?").run()
    assert not at.exception and charts(at) >= 1


def test_page_opens_a_corpus_index(tmp_path):
    from toporag_core.corpus import Corpus, Document
    from toporag_core.datagen.docgraph_corpus import generate_corpus
    from toporag_core.docgraph.corpus_search import CorpusSearcher, SearchConfig
    from toporag_core.docgraph.index import build_index
    from toporag_core.embed import get_encoder

    recs, docs = generate_corpus(60, 2, seed=2)
    enc = get_encoder("hashing", cached=False)
    index, _ = build_index(Corpus([Document(d["id"], d["title"], d["text"]) for d in docs]), enc, tmp_path / "idx",
                           encoder_spec="hashing")
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    at.radio(key="dg_source").set_value("Corpus index").run()
    assert not at.exception and "Type the folder" in at.info[0].value
    at.text_input(key="dg_index").set_value(str(tmp_path / "nope")).run()
    assert not at.exception and "not a document-graph index" in at.error[0].value
    at.text_input(key="dg_index").set_value(str(tmp_path / "idx")).run()
    q = recs[0]["question"]
    at.text_input(key="dg_q_").set_value(q).run()
    assert not at.exception
    ref = CorpusSearcher(index, enc).search(q, config=SearchConfig())
    table = at.dataframe[0].value
    assert list(table["title"])[: ref.articles] == [index.titles[i] for i in ref.ranking[: ref.articles]]
    assert {m.label: m.value for m in at.metric}["nodes"] == str(ref.graph.num_nodes)
    assert charts(at) == 3 and ref.context in at.code[0].value
