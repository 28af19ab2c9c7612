"""The "Hybrid tables" page (AppTest, HashingEncoder) and the escaping of its figures."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from toporag_core.datagen.hybrid import GeneratorConfig, generate  # noqa: E402
from toporag_core.embed import HashingEncoder  # noqa: E402
from toporag_core.hybrid import (  # noqa: E402
    HybridIndex,
    RouterConfig,
    SearchConfig,
    parse_document,
    route_text,
    view,  # noqa: E402
)

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "7_Hybrid_tables.py")


@pytest.fixture(autouse=True)
def _fast_encoder(monkeypatch, tmp_path):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))


def test_page_shows_strip_routes_ranks_heatmap_without_the_llm():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 2  # SDS strip + cell heatmap
    # the page's table route equals the library's, computed here independently
    ds = generate(GeneratorConfig(n_docs=60, n_questions=15, seed=0))
    idx = HybridIndex.build([parse_document(t, d, RouterConfig(tau=0.4)) for d, t in ds.docs.items()],
                            HashingEncoder())  # what the app builds for TOPORAG_ENCODER=hashing
    q = at.text_input(key="hy_question").value
    want = idx.search(q, SearchConfig(k=10))["table"]
    frames = [d.value for d in at.dataframe]
    route_b = [f for f in frames if list(f.columns) == ["rank", "unit", "score", "preview"]][1]
    # same scores in the same order (units with tied scores may swap places)
    assert list(route_b["score"]) == pytest.approx([round(h["score"], 4) for h in want], abs=2e-4)
    assert route_b["unit"][0] == want[0]["uid"]
    ranks = [f for f in frames if "fused rank" in f.columns][0]
    assert list(ranks["fused rank"]) == list(range(1, len(ranks) + 1))
    assert "reranked rank" not in ranks.columns and not ranks.isna().any().any()  # no reranker: no None column
    assert any(b.label.startswith("Answer with") for b in at.button)  # answering is a button, not required
    # moving tau re-routes the shown document without errors
    at.sidebar.slider(key="hy_tau").set_value(0.9).run()
    assert not at.exception


def test_rank_frame_shows_the_reranked_rank_only_with_a_reranker():
    ds = generate(GeneratorConfig(n_docs=12, n_questions=6, seed=1))
    idx = HybridIndex.build([parse_document(t, d, RouterConfig(tau=0.4)) for d, t in ds.docs.items()],
                            HashingEncoder())

    class LengthReranker:  # shortest unit first
        def predict(self, pairs):
            return [-len(t) for _, t in pairs]

    q = ds.questions[0]["question"]
    plain = view.rank_frame(idx.search(q, SearchConfig(k=5)))
    assert "reranked rank" not in plain.columns and not plain.isna().any().any()
    res = idx.search(q, SearchConfig(k=5), reranker=LengthReranker())
    ranked = view.rank_frame(res)
    want = {r["uid"]: str(r["rank"]) for r in res["reranked"]}
    assert list(ranked["reranked rank"]) == [want[u] for u in ranked["unit"]]
    assert sorted(int(x) for x in ranked["reranked rank"]) == list(range(1, len(ranked) + 1))
    partial = {**res, "reranked": res["reranked"][:1]}  # a unit the reranker did not rank: a dash, not None
    col = list(view.rank_frame(partial)["reranked rank"])
    assert col.count(view.NOT_RERANKED) == len(col) - 1 and "None" not in col


def test_page_empty_question_keeps_the_strip():
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.text_input(key="hy_question").set_value("   ").run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 1
    assert any("Type a question" in i.value for i in at.info)


def test_figures_escape_document_text():
    r = route_text("<script>alert(1)</script> Verna\n| a | b |\n| 1 | 2 |\n| 3 | 4 |")
    fig = view.sds_strip(r, 0.4)
    hover = " ".join(fig.data[0].hovertext)
    assert "<script>" not in hover and "&lt;script&gt;" in hover
    ex = {"grid": __import__("numpy").zeros((1, 1, 2)), "header": ["<b>x</b>", "y"], "rows": [["<img src=x>", "2"]],
          "best": [{"row": 0, "col": 0, "sim": 0.5, "term": "t", "header": "<b>x</b>", "value": "<img src=x>"}],
          "terms": ["t"]}
    hm = view.cell_heatmap(ex)
    assert hm.data[0].text[0][0] == "&lt;img src=x&gt;"
    assert "&lt;b&gt;" in hm.layout.xaxis.ticktext[0]


def test_heatmap_and_term_table_number_rows_alike():
    import numpy as np

    ex = {"grid": np.array([[[0.1, 0.2], [0.3, 0.9]]]), "header": ["name", "score"],
          "rows": [["a", "1"], ["b", "2"]],
          "best": [{"row": 1, "col": 1, "sim": 0.9, "term": "t", "header": "score", "value": "2"}], "terms": ["t"]}
    hm = view.cell_heatmap(ex)
    shape = hm.layout.shapes[0]
    assert list(hm.data[0].y) == [1, 2]  # data rows from 1
    row = int(view.best_cell_frame(ex)["row"][0])
    assert row == 2 and shape.y0 < row < shape.y1  # the outlined cell sits on the row the table names
    assert hm.data[0].text[row - 1][1] == "2"


def test_uploads_that_are_not_documents_are_refused_naming_file_and_line():
    from toporag_core.hybrid import DocumentError, read_upload

    with pytest.raises(DocumentError, match=r"^facts\.json: JSON data, not a document"):
        read_upload(b'{"rows": [[1, 2]]}', "facts.json")
    with pytest.raises(DocumentError, match=r"^scores\.csv, line 3: 2 field\(s\), but the header \(line 1\) has 3 "
                                            r"columns: name, year, score$"):
        read_upload(b"name,year,score\nada,1843,9\nbob,7\n", "scores.csv")
    with pytest.raises(DocumentError, match=r"^t\.tsv, line 1: header column name 'x' is repeated"):
        read_upload(b"x\tx\n1\t2\n", "t.tsv")
    with pytest.raises(DocumentError, match=r"^e\.csv, line 1: header column 2 has no name"):
        read_upload(b"a,,c\n1,2,3\n", "e.csv")
    assert read_upload(b"name,year\nada,1843\n", "ok.csv").startswith("name,year")
    assert read_upload(b"# notes\n\nplain text", "notes.md") == "# notes\n\nplain text"


def test_follow_top_moves_the_selection_only_when_the_top_changes():
    ss = {}
    view.follow_top(ss, "k", ["a", "b"])
    assert ss["k"] == "a"
    ss["k"] = "b"  # the user's choice among the same options stays
    view.follow_top(ss, "k", ["a", "b"])
    assert ss["k"] == "b"
    view.follow_top(ss, "k", ["upload.md", "a", "b"])  # a new top (an upload, a new ranking) is shown
    assert ss["k"] == "upload.md"
    view.follow_top(ss, "k", [])
    assert ss["k"] == "upload.md"


def test_page_term_table_rows_are_the_heatmaps_rows():
    """On the page itself: every query term's best cell, by the row the term table names, is the cell
    of that row on the heatmap (its text is the table's value, and an outline spans that row)."""
    import html
    import json

    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    fig = json.loads(at.get("plotly_chart")[1].proto.spec)
    heat = fig["data"][0]
    best = [d.value for d in at.dataframe if list(d.value.columns)[:2] == ["term", "row"]][0]
    best = best[best["row"].notna()]
    assert len(best) >= 1
    for _, b in best.iterrows():
        row = int(b["row"])
        col = heat["x"].index(next(i for i, h in enumerate(fig["layout"]["xaxis"]["ticktext"])
                                   if h == html.escape(b["column"])))
        assert heat["y"][row - 1] == row and heat["text"][row - 1][col] == html.escape(str(b["value"]))
        assert any(s["y0"] < row < s["y1"] and s["x0"] < col < s["x1"] for s in fig["layout"]["shapes"])


def test_page_opens_an_index_folder_and_searches_it(tmp_path):
    import json

    from tests.test_hybrid_corpus import tatqa_fixture
    from toporag_core.hybrid.tatqa import parse_tatqa

    units = parse_tatqa(tatqa_fixture(), "fixture").units
    HybridIndex.build_units(units, HashingEncoder()).save(tmp_path / "ix")
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    at.sidebar.text_input(key="hy_index").set_value(str(tmp_path / "ix")).run()
    assert not at.exception and not at.error
    q = "What is the capacity of the Lakeside solar park?"
    at.text_input(key="hy_index_question").set_value(q).run()
    assert not at.exception
    want = HybridIndex.load(tmp_path / "ix", HashingEncoder()).search(q, SearchConfig(k=10))["fused"]
    fused = [d.value for d in at.dataframe if "kind" in d.value.columns][0]
    assert list(fused["unit"]) == [r["uid"] for r in want] and fused["unit"][0] == "borealis:1-1"
    assert len(at.get("plotly_chart")) == 1  # the best table's cell heatmap
    at.sidebar.text_input(key="hy_index").set_value(str(tmp_path / "nowhere")).run()
    assert not at.exception and "Index not opened" in at.error[0].value
    json.dumps(fused.to_dict())  # plain values
