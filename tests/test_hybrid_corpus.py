"""Hybrid retrieval on a user's corpus and on TAT-QA: loader, readers, index round trip, fusion, eval JSON."""
from __future__ import annotations

import json

import numpy as np
import pytest

from toporag_core.cli import main as cli
from toporag_core.embed import HashingEncoder
from toporag_core.hybrid.corpus import read_hybrid_corpus
from toporag_core.hybrid.evaluate import ndcg_recall
from toporag_core.hybrid.fusion import DocGroups, FusionWeights, QueryRouter, fuse_scores, minmax_rows
from toporag_core.hybrid.labelled import gold_matrix
from toporag_core.hybrid.lexical import Lexical
from toporag_core.hybrid.metrics import ndcg_at_k, recall_at_k
from toporag_core.hybrid.search import HybridIndex, SearchConfig
from toporag_core.hybrid.tatqa import TatqaError, load_tatqa, split_by_context, split_header


def _context(uid: str, table: list[list[str]], paragraphs: list[str], questions: list[tuple]) -> dict:
    return {"table": {"uid": uid, "table": table},
            "paragraphs": [{"uid": f"{uid}-p{i}", "order": i, "text": t} for i, t in enumerate(paragraphs, 1)],
            "questions": [{"uid": f"{uid}-q{i}", "order": i, "question": q, "answer_from": src,
                           "rel_paragraphs": [str(r) for r in rel], "answer": ["x"]}
                          for i, (q, src, rel) in enumerate(questions, 1)]}


def tatqa_fixture() -> list[dict]:
    """Three contexts shaped like TAT-QA: a two-row header with a spanning label, a section row."""
    return [
        _context("acme", [["", "Years Ended", ""], ["", "2019", "2018"], ["Revenue:", "", ""],
                          ["Cloud subscriptions", "$1,200", "$950"], ["Licences", "300", "410"]],
                 ["Acme adopted the modified retrospective method for Topic 606 in fiscal 2019.",
                  "Cloud subscriptions grew because of new enterprise customers in Europe."],
                 [("What was the revenue from cloud subscriptions in 2019?", "table", []),
                  ("Which method did Acme use to adopt Topic 606?", "text", [1]),
                  ("Why did cloud subscriptions grow, and what were they in 2018?", "table-text", [2])]),
        _context("borealis", [["Facility", "Capacity (MW)", "Commissioned"], ["Northfield wind farm", "120", "2016"],
                              ["Lakeside solar park", "45", "2018"]],
                 ["Borealis operates renewable generation assets in Canada.",
                  "The Northfield wind farm was repowered after a turbine failure."],
                 [("What is the capacity of the Lakeside solar park?", "table", []),
                  ("Why was the Northfield wind farm repowered?", "text", [2])]),
        _context("cobalt", [["", "December 31, 2019"], ["Inventories", "1,571.7"], ["Receivables", "831.7"]],
                 ["Cobalt mines cobalt and nickel in Zambia.", "Receivables are stated net of doubtful accounts."],
                 [("What were inventories at December 31, 2019?", "table", []),
                  ("How are receivables stated?", "text", [2])]),
    ]


@pytest.fixture()
def tatqa_file(tmp_path):
    p = tmp_path / "tatqa_small.json"
    p.write_text(json.dumps(tatqa_fixture()))
    return p


# ----------------------------------------------------------------------------- loader
def test_loader_units_gold_and_multi_row_header(tatqa_file):
    c = load_tatqa(tatqa_file)
    assert len(c.units) == 3 + 6 and len(c.questions) == 7 and c.contexts == ["acme", "borealis", "cobalt"]
    acme = c.units[0]
    assert acme.kind == "table" and acme.uid == "acme:1-1"
    # the spanning "Years Ended" joins both year columns; the section row stays a row and prefixes labels
    assert acme.table.header[1:] == ["Years Ended 2019", "Years Ended 2018"]
    assert acme.table.rows[0] == ["Revenue:", "", ""]
    assert "Revenue: / Cloud subscriptions: Years Ended 2019 $1,200" in acme.text
    assert [u.uid for u in c.units[1:3]] == ["acme:2-2", "acme:3-3"]
    gold = {q["question"][:20]: q["gold"] for q in c.questions}
    assert gold["What was the revenue"] == [{"doc": "acme", "start": 0, "end": 1}]
    assert gold["Which method did Acm"] == [{"doc": "acme", "start": 1, "end": 2}]
    assert gold["Why did cloud subscr"] == [{"doc": "acme", "start": 0, "end": 1}, {"doc": "acme", "start": 2, "end": 3}]


def test_split_header_keeps_a_numeric_second_row_as_data():
    header, rows, n = split_header([["Name", "Age"], ["Avi Katz", "61"], ["Jo Lin", "45"]])
    assert n == 1 and header == ["Name", "Age"] and rows[0] == ["Avi Katz", "61"]
    header, rows, n = split_header([["", "FY19", "FY18"], ["", "$M", "$M"], ["Dividends", "23.9", "21.8"]])
    assert n == 2 and header == ["", "FY19 $M", "FY18 $M"] and rows == [["Dividends", "23.9", "21.8"]]


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d[1].pop("table"), ["record 1", "field 'table'", "missing"]),
    (lambda d: d[0]["questions"][1].update(rel_paragraphs=["7"]), ["record 0", "questions[1]", "rel_paragraphs", "7"]),
    (lambda d: d[2]["questions"][0].update(answer_from="chart"), ["record 2", "questions[0]", "answer_from", "chart"]),
    (lambda d: d[1]["paragraphs"][0].update(order="first"), ["record 1", "paragraphs[0]", "order"]),
    (lambda d: d[0]["table"]["table"][1].append({"x": 1}), ["record 0", "table.table", "row 1", "dict"]),
    (lambda d: d[2]["table"].update(uid="acme"), ["record 2", "table.uid", "repeats"]),
])
def test_bad_records_name_file_record_and_field(tmp_path, mutate, words):
    data = tatqa_fixture()
    mutate(data)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    with pytest.raises(TatqaError) as e:
        load_tatqa(p)
    msg = str(e.value)
    assert str(p) in msg and all(w in msg for w in words), msg


def test_bad_json_names_the_line(tmp_path, capsys):
    p = tmp_path / "broken.json"
    p.write_text('[\n{"table": {"uid": "a", "table": [["x"]]},\n "paragraphs": [,]}\n]')
    with pytest.raises(TatqaError, match=r"broken\.json, line 3: not valid JSON"):
        load_tatqa(p)
    assert cli(["hybrid", "eval", str(p), "--index", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "broken.json, line 3" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_split_by_context_is_seeded_and_disjoint():
    ctx = [f"c{i}" for i in range(11)]
    a, b = split_by_context(ctx, seed=3)
    assert a.isdisjoint(b) and a | b == set(ctx) and len(a) == 6
    assert split_by_context(ctx, seed=3) == (a, b) and split_by_context(ctx, seed=4) != (a, b)


# ----------------------------------------------------------------------------- readers (user's own files)
def test_reader_takes_csv_markdown_html_and_jsonl(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "prices.csv").write_text("Variety,Price,Week\nLapins,2.35,42\nKordia,2.80,43\n")
    (docs / "report.md").write_text("Shipments rose in autumn because demand in Asia grew.\n\n"
                                    "| Buyer | Volume |\n|---|---|\n| Fresco | 120 |\n| Norte | 80 |\n")
    (docs / "page.html").write_text("<p>Our farms are certified organic.</p>\n\n<table>\n"
                                    "<tr><th>Farm</th><th>Hectares</th></tr>\n<tr><td>Verna</td><td>40</td></tr>\n"
                                    "<tr><td>Norte</td><td>12</td></tr>\n</table>\n")
    c = read_hybrid_corpus(docs)
    kinds = {(u.doc_id, u.kind) for u in c.units}
    assert {("prices.csv", "table"), ("report.md", "table"), ("report.md", "narrative"),
            ("page.html", "table")} <= kinds
    md = next(u for u in c.units if u.doc_id == "report.md" and u.kind == "table")
    assert md.table.header == ["Buyer", "Volume"] and md.table.rows[0] == ["Fresco", "120"]
    jl = tmp_path / "c.jsonl"
    jl.write_text(json.dumps({"id": "d1", "text": "Cherry exports.\n\n| Port | Tons |\n|---|---|\n| Valparaiso | 9 |"})
                  + "\n" + json.dumps({"id": "d2", "text": "Plain prose only."}) + "\n")
    c = read_hybrid_corpus(jl)
    assert c.format == "jsonl" and {(u.doc_id, u.kind) for u in c.units} >= {("d1", "table"), ("d2", "narrative")}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "d1", "text": "ok"}) + "\n" + json.dumps({"id": "d2"}) + "\n")
    with pytest.raises(ValueError) as e:
        read_hybrid_corpus(bad)
    assert "bad.jsonl" in str(e.value) and "2" in str(e.value) and "text" in str(e.value)


# ----------------------------------------------------------------------------- routes and fusion
def test_lexical_scores_equal_bm25s():
    import bm25s

    texts = ["Revenue from cloud subscriptions was 1,200 in 2019", "Licences revenue fell", "Wind farm capacity 120 MW"]
    lex = Lexical.build(texts)
    ref = bm25s.BM25()
    ref.index([lex.tokenize(t) for t in texts], show_progress=False)
    q = "cloud revenue 2019 capacity"
    np.testing.assert_allclose(lex.scores(q), ref.get_scores(lex.tokenize(q)), rtol=1e-5)
    assert lex.scores("zzz").tolist() == [0.0, 0.0, 0.0]


def test_document_propagation_adds_the_best_other_unit_of_the_document():
    g = DocGroups(["a", "b", "a", "a"])
    out = g.propagate(np.array([[1.0, 5.0, 3.0, 0.5]]), 0.5)
    np.testing.assert_allclose(out, [[1.0 + 1.5, 5.0, 3.0 + 0.5, 0.5 + 1.5]])


def test_fusion_table_weight_and_router_move_tables():
    is_table = np.array([True, False, True])
    groups = DocGroups(["t", "p", "u"])
    bm25, dense, table = np.array([1.0, 2.0, 0.0]), np.array([0.1, 0.3, 0.0]), np.array([0.9, np.nan, 0.2])
    w = FusionWeights(w_dense=1.0, w_table=2.5, w_prior=0.0, w_doc=0.0)
    assert fuse_scores(bm25, dense, table, is_table, groups, w, 1.0, 1.0).argmax() == 0
    assert fuse_scores(bm25, dense, table, is_table, groups, w, 0.1, 1.0).argmax() == 1  # router: no table needed
    off = FusionWeights(w_dense=1.0, w_table=2.5, w_prior=0.0, w_doc=0.0, use_router=False)
    assert fuse_scores(bm25, dense, table, is_table, groups, off, 0.1, 1.0).argmax() == 0
    no_cali = FusionWeights(w_dense=1.0, w_table=0.0, w_prior=0.0, w_doc=0.0)
    assert fuse_scores(bm25, dense, table, is_table, groups, no_cali, 1.0, 1.0).argmax() == 1
    np.testing.assert_allclose(minmax_rows(np.array([[2.0, np.nan, 4.0], [3.0, 3.0, 3.0]])),
                               [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="w_table"):
        FusionWeights(w_table=-1)


def test_router_numpy_equals_scikit_learn():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    qs = ["What was the change in revenue between 2018 and 2019?", "Why did the company adopt Topic 606?",
          "What is the average inventory in 2019?", "How are receivables stated?",
          "What was the percentage change in revenue?", "Why was the wind farm repowered?"] * 3
    y_tab = np.array([True, False, True, False, True, False] * 3)
    r = QueryRouter.fit(qs, y_tab, ~y_tab)
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True).fit(qs)
    ref = LogisticRegression(C=1.0, max_iter=2000).fit(vec.transform(qs), y_tab)
    q = "What was the change in inventory in 2019?"
    assert r.predict(q)[0] == pytest.approx(ref.predict_proba(vec.transform([q]))[0, 1], abs=1e-9)
    assert r.predict(q)[0] > 0.5 > r.predict("Why did the company repower the farm?")[0]
    back = QueryRouter.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.predict(q) == pytest.approx(r.predict(q))


def test_vectorised_metrics_equal_the_span_metrics(tatqa_file):
    c = load_tatqa(tatqa_file)
    rng = np.random.default_rng(0)
    s = rng.normal(size=(len(c.questions), len(c.units)))
    idx = _index(c.units)
    gold = gold_matrix(idx, c.questions)
    nd, rc = ndcg_at_k(s, gold, 3), recall_at_k(s, gold, 3)
    for i, q in enumerate(c.questions):
        ranked = np.argsort(-s[i], kind="stable").tolist()
        assert (nd[i], rc[i]) == pytest.approx(ndcg_recall(c.units, ranked, q["gold"], 3))


# ----------------------------------------------------------------------------- index round trip, atomicity
def _index(units):
    return HybridIndex.build_units(units, HashingEncoder(64))


def test_index_round_trip_and_search(tatqa_file, tmp_path):
    c = load_tatqa(tatqa_file)
    idx = _index(c.units)
    idx.save(tmp_path / "ix")
    back = HybridIndex.load(tmp_path / "ix", HashingEncoder(64))
    assert [u.uid for u in back.units] == [u.uid for u in idx.units]
    assert back.units[0].table.header == idx.units[0].table.header
    q = "What is the capacity of the Lakeside solar park?"
    a, b = idx.search(q, SearchConfig(k=5)), back.search(q, SearchConfig(k=5))
    assert [r["uid"] for r in a["fused"]] == [r["uid"] for r in b["fused"]]
    assert a["fused"][0]["uid"] == "borealis:1-1"
    np.testing.assert_array_equal(back.unit_vecs, idx.unit_vecs)


def test_save_is_atomic_and_mixed_writes_are_refused(tatqa_file, tmp_path, monkeypatch):
    c = load_tatqa(tatqa_file)
    idx = _index(c.units)
    out = tmp_path / "ix"
    idx.save(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    smaller = _index(c.units[:4])

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("toporag_core.hybrid.search.json.dumps", boom)
    with pytest.raises(OSError, match="disk full"):
        smaller.save(out)
    monkeypatch.undo()
    # the safetensors file was replaced before the failure: the pair no longer matches, and loading says so
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
    with pytest.raises(ValueError, match="different writes"):
        HybridIndex.load(out, HashingEncoder(64))
    (out / "index.safetensors").write_bytes(before["index.safetensors"])
    assert len(HybridIndex.load(out, HashingEncoder(64)).units) == len(c.units)
    (out / "index.json").write_text("{not json")
    with pytest.raises(ValueError, match="damaged index file"):
        HybridIndex.load(out)


def test_fusion_file_must_match_its_index(tatqa_file, tmp_path):
    c = load_tatqa(tatqa_file)
    idx = _index(c.units)
    idx.save(tmp_path / "ix")
    idx.save_fusion(tmp_path / "ix", FusionWeights(w_dense=0.5), None, {"seed": 0, "contexts": ["acme"]})
    assert HybridIndex.load(tmp_path / "ix").fusion_weights(SearchConfig()).w_dense == 0.5
    idx.save(tmp_path / "ix")  # a rebuild drops the old fit
    assert not (tmp_path / "ix" / "fusion.json").exists()


# ----------------------------------------------------------------------------- CLI
def test_cli_index_fit_eval_json(tatqa_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    ix = tmp_path / "ix"
    assert cli(["hybrid", "index", str(tatqa_file), "--out", str(ix), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "tatqa" and out["tables"] == 3 and out["narrative"] == 6
    assert cli(["hybrid", "eval", str(tatqa_file), "--index", str(ix), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    for key in ("questions", "ndcg10", "recall10", "bm25_ndcg10", "dense_ndcg10", "by_source", "p50_ms",
                "first_query_ms"):
        assert key in ev, key
    assert ev["questions"] == 7 and ev["split"] == "all"
    assert set(ev["by_source"]) == {"table", "text", "table-text"}
    assert {"ndcg10", "bm25_ndcg10", "dense_ndcg10"} <= set(ev["by_source"]["table"])
    assert 0.0 <= ev["ndcg10"] <= 1.0 and ev["first_query_ms"] > 0
    assert "hybrid - CALI table route" in ev["methods"] and "hybrid_vs_bm25" in ev["paired"]
    assert cli(["hybrid", "fit", str(tatqa_file), "--index", str(ix), "--seed", "1", "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert fit["fit_contexts"] == 2 and set(fit["weights"]) >= {"w_dense", "w_table", "w_doc"}
    assert cli(["hybrid", "eval", str(tatqa_file), "--index", str(ix), "--json"]) == 0
    ev2 = json.loads(capsys.readouterr().out)
    assert ev2["split"] == "report" and ev2["questions"] < 7 and ev2["fitted_on"]["seed"] == 1
    assert cli(["hybrid", "search", str(ix), "-q", "capacity of the Lakeside solar park", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["fused"][0]["uid"] == "borealis:1-1"


def test_eval_of_a_tatqa_file_without_index_says_what_to_do(tatqa_file, capsys):
    assert cli(["hybrid", "eval", str(tatqa_file)]) == 2
    assert "--index DIR" in capsys.readouterr().err


# ----------------------------------------------------------------------------- real data
def test_real_tatqa_test_file(shared_data):
    path = shared_data / "tatqa" / "tatqa_dataset_test_gold.json"
    if not path.exists():
        pytest.skip(f"{path} is absent (see ../shared/data/README.md)")
    c = load_tatqa(path)
    assert len(c.contexts) == 277 and len(c.questions) == 1663
    assert sum(u.kind == "table" for u in c.units) == 277 and len(c.units) == 277 + 1279
    src = [q["type"] for q in c.questions]
    assert (src.count("table"), src.count("text"), src.count("table-text")) == (736, 381, 546)
    # every table-text question has the table and at least one paragraph as gold
    assert all(len(q["gold"]) >= 2 for q in c.questions if q["type"] == "table-text")
    # multi-row headers: some tables keep two or three header rows, none lose every data row
    tabs = [u.table for u in c.units if u.kind == "table"]
    assert all(t.rows for t in tabs)
    assert any(" " in h and h.split()[-1].isdigit() and not h.isdigit() for t in tabs for h in t.header[1:])


def test_numpy_minilm_equals_the_sentence_transformer():
    from toporag_core.embed import SentenceTransformerEncoder, get_encoder
    from toporag_core.embed.minilm_numpy import NumpyMiniLM

    texts = ["What was the revenue from cloud subscriptions in 2019?", "[COL: 2019] [VAL: $1,200]", "x",
             "Receivables are stated net of doubtful accounts. " * 40]  # the last one is cut at 256 tokens
    enc = get_encoder("minilm-numpy", cached=False)  # the encoder registry's name for it
    assert isinstance(enc, NumpyMiniLM) and enc.name == SentenceTransformerEncoder().name
    a, b = enc.encode(texts), SentenceTransformerEncoder().encode(texts)
    assert a.shape == b.shape == (4, 384)
    np.testing.assert_allclose((a * b).sum(1), 1.0, atol=1e-5)
