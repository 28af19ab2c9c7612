"""Hybrid text-and-table retrieval: router, parsers, CALI scores, reduction, generator, bad input, CLI.

Everything runs with the model-free HashingEncoder; expected values are computed here by brute
force or by independent parsing, never read back from the code under test.
"""
from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest

from toporag_core.cli import main as cli
from toporag_core.datagen.hybrid import GeneratorConfig, generate
from toporag_core.embed import HashingEncoder
from toporag_core.hybrid import (
    DocumentError,
    HybridIndex,
    ReductionConfig,
    RouterConfig,
    SearchConfig,
    Table,
    TableError,
    decode_document,
    minmax,
    parse_document,
    parse_table,
    query_terms,
    route_text,
)
from toporag_core.hybrid.evaluate import ndcg_recall, parse_corpus, router_f1
from toporag_core.hybrid.lexical import Lexical
from toporag_core.hybrid.index import CellIndex, cell_text

ENC = HashingEncoder(384)

HEADER = ["Producer", "Buyer", "Week", "Price"]
ROWS = [["Verna Farms", "Mercadona", "42", "2.35"], ["Maro Growers", "Lidl", "41", "1.90"],
        ["Verna Orchards", "Aldi", "42", "2.10"]]
FORMATS = {
    "markdown": "| Producer | Buyer | Week | Price |\n|---|---|---|---|\n| Verna Farms | Mercadona | 42 | 2.35 |\n"
                "| Maro Growers | Lidl | 41 | 1.90 |\n| Verna Orchards | Aldi | 42 | 2.10 |",
    "html": "<table>\n<tr><th>Producer</th><th>Buyer</th><th>Week</th><th>Price</th></tr>\n"
            "<tr><td>Verna Farms</td><td>Mercadona</td><td>42</td><td>2.35</td></tr>\n"
            "<tr><td>Maro Growers</td><td>Lidl</td><td>41</td><td>1.90</td></tr>\n"
            "<tr><td>Verna Orchards</td><td>Aldi</td><td>42</td><td>2.10</td></tr>\n</table>",
    "tsv": "Producer\tBuyer\tWeek\tPrice\nVerna Farms\tMercadona\t42\t2.35\nMaro Growers\tLidl\t41\t1.90\n"
           "Verna Orchards\tAldi\t42\t2.10",
    "csv": "Producer,Buyer,Week,Price\nVerna Farms,Mercadona,42,2.35\nMaro Growers,Lidl,41,1.90\n"
           "Verna Orchards,Aldi,42,2.10",
    "aligned": "Producer        Buyer      Week  Price\n--------------  ---------  ----  -----\n"
               "Verna Farms     Mercadona  42    2.35\nMaro Growers    Lidl       41    1.90\n"
               "Verna Orchards  Aldi       42    2.10",
}


# ----------------------------------------------------------------------------- router
HAND = [  # (line, structured?) labelled by hand; None = blank
    ("Verna Farms is a family business in the Jerte Valley. It sells most of its cherries to", 0),
    ("supermarkets and keeps a small share for the local market in the spring.", 0),
    ("", None),
    ("In week 42 it shipped 12.5 tonnes of Lapins to Mercadona at 2.35 EUR per kg.", 0),
    ("", None),
    ("| Producer | Buyer | Week | Price |", 1),
    ("|---|---|---|---|", 1),
    ("| Verna Farms | Mercadona | 42 | 2.35 |", 1),
    ("| Maro Growers | Lidl | 41 | 1.90 |", 1),
    ("", None),
    ("The prices below were agreed in the spring talks with each of the buyers:", 0),
    ("Producer,Buyer,Week,Price", 1),
    ("Verna Farms,Aldi,40,2.05", 1),
    ("Olmo Estates,Tesco,39,2.40", 1),
    ("", None),
    ("All deliveries are checked on arrival and the results are shared with the grower.", 0),
]


def test_router_matches_hand_labelled_lines():
    text = "\n".join(line for line, _ in HAND)
    r = route_text(text, RouterConfig(tau=0.4))
    for i, (line, lab) in enumerate(HAND):
        if lab is not None:
            assert bool(r.structured[i]) == bool(lab), (i, line, r.line_sds[i], r.line_vote[i])
    kinds = [b.kind for b in r.blocks]
    assert kinds == ["narrative", "narrative", "table", "narrative", "table", "narrative"]


def test_router_tau_extremes_and_config_validation():
    text = "\n".join(line for line, _ in HAND)
    assert not route_text(text, RouterConfig(tau=1.0)).structured.any()
    counts = [route_text(text, RouterConfig(tau=t)).structured.sum() for t in (0.2, 0.4, 0.6, 0.8)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    with pytest.raises(ValueError, match="tau"):
        RouterConfig(tau=1.5)
    with pytest.raises(ValueError, match="window"):
        RouterConfig(window=0)


def test_router_f1_on_generated_mixed_documents():
    ds = generate(GeneratorConfig(n_docs=40, n_questions=9, seed=3))
    assert router_f1(ds, ("mixed",))["f1"] >= 0.95


# ----------------------------------------------------------------------------- tables
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_parses_to_the_same_grid(fmt):
    t = parse_table(FORMATS[fmt])
    assert t.fmt == fmt
    assert t.header == HEADER
    assert t.rows == ROWS
    assert t.warnings == []


def test_ragged_rows_are_fixed_with_a_warning_naming_the_row():
    t = parse_table("a,b,c\n1,2\n4,5,6,7\n")
    assert t.rows == [["1", "2", ""], ["4", "5", "6 7"]]
    assert any("row 2" in w and "padded" in w for w in t.warnings)
    assert any("row 3" in w and "joined" in w for w in t.warnings)


def test_html_scripts_and_entities():
    t = parse_table("<table><tr><th>A &amp; B</th><th>C</th></tr><script>alert('x')</script>"
                    "<tr><td>1<script>evil()</script></td><td><b>two</b></td></tr></table>")
    assert t.header == ["A & B", "C"]
    assert t.rows == [["1", "two"]]


def test_ten_thousand_columns_is_a_clear_error_and_the_document_survives():
    wide = ",".join(f"c{i}" for i in range(10_000))
    with pytest.raises(TableError, match="10000 columns"):
        parse_table(wide + "\n" + wide)
    doc = parse_document("Intro line about Verna Farms and its buyers in the valley.\n\n" + wide + "\n" + wide
                         + "\n\n" + FORMATS["markdown"], "wide.csv")
    assert any("10000 columns" in w and "wide.csv" in w for w in doc.warnings)
    assert [u.kind for u in doc.units].count("table") == 1  # the good table is still a table


# ----------------------------------------------------------------------------- documents
def test_bad_documents_get_clear_messages(tmp_path):
    with pytest.raises(DocumentError, match="binary"):
        decode_document(b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", "img.png")
    with pytest.raises(DocumentError, match="empty"):
        decode_document(b"  \n\n ", "blank.txt")
    with pytest.raises(DocumentError, match="empty"):
        parse_document("", "x")
    (tmp_path / "good.md").write_text(FORMATS["markdown"])
    (tmp_path / "bad.txt").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "empty.txt").write_text("")
    from toporag_core.hybrid import load_folder

    docs, errors = load_folder(tmp_path)
    assert [d.doc_id for d in docs] == ["good.md"]
    assert len(errors) == 2 and any("bad.txt" in e and "binary" in e for e in errors)


def test_html_document_with_script_never_leaks_script_text():
    html_doc = ("<html><body><script>document.write('<b>pwned</b>')</script>\n<p>Verna Farms sells cherries "
                "to several supermarkets in the region every spring.</p>\n\n" + FORMATS["html"] + "\n</body></html>")
    doc = parse_document(html_doc, "page.html")
    assert all("pwned" not in u.text and "document.write" not in u.text for u in doc.units if u.kind == "narrative")
    tables = [u.table for u in doc.units if u.table is not None]
    assert len(tables) == 1 and tables[0].rows == ROWS


# ----------------------------------------------------------------------------- CALI
def _tables():
    return [Table(HEADER, [r[:] for r in ROWS], "markdown"),
            Table(["Variety", "Brix", "Note"], [["Lapins", "18", "-"], ["Kordia", "18", "firm"],
                                                ["Lapins", "18", "-"]], "csv"),
            Table(["Producer", "Buyer"], [["Olmo Estates", "Tesco"]], "tsv")]


def _brute(tables, q, row_tag=False, drop=False):
    """MaxSim and row coverage with one separately encoded vector per cell, by loops."""
    from toporag_core.hybrid.index import is_stop_cell

    maxsim, row = [], []
    for t in tables:
        best_t = np.full(len(q), -np.inf)
        best_row = -np.inf
        for r in t.rows:
            br = np.full(len(q), -np.inf)
            for j, v in enumerate(r):
                if drop and is_stop_cell(v):
                    continue
                vec = ENC.encode([cell_text(t.header[j], v, r[0] if row_tag else None)])[0]
                br = np.maximum(br, q @ vec)
            best_t = np.maximum(best_t, br)
            if np.isfinite(br).all():
                best_row = max(best_row, br.sum())
        maxsim.append(best_t.sum())
        row.append(best_row)
    return np.array(maxsim), np.array(row)


@pytest.mark.parametrize("row_tag", [False, True])
def test_maxsim_and_row_score_equal_brute_force(row_tag):
    tables = _tables()
    q = ENC.encode(query_terms("price of Lapins from Verna Farms to Mercadona in week 42"))
    idx = CellIndex.build(tables, ENC, row_tag=row_tag)
    sc = idx.scores(q, mode="rowaware", lam=0.5)
    ms, rw = _brute(tables, q, row_tag)
    np.testing.assert_allclose(sc["maxsim"], ms, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sc["row"], rw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sc["score"], 0.5 * ms + 0.5 * rw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(idx.scores(q, mode="maxsim")["score"], ms, rtol=1e-5, atol=1e-5)


def test_duplicate_merging_leaves_maxsim_unchanged():
    tables = _tables()
    q = ENC.encode(query_terms("Lapins Brix 18 firm"))
    idx = CellIndex.build(tables, ENC)
    # identical cell texts share one vector ...
    assert idx.stats["unique_vectors"] < idx.stats["cells_kept"]
    # ... and a table with a duplicated row scores like the table without it
    dedup = CellIndex.build([Table(tables[1].header, tables[1].rows[:2], "csv")], ENC)
    assert idx.scores(q)["maxsim"][1] == pytest.approx(dedup.scores(q)["maxsim"][0], abs=1e-6)
    # near-duplicate merging at threshold 1.0 only joins identical vectors: scores unchanged
    near = CellIndex.build(tables, ENC, reduction=ReductionConfig(drop_stop_cells=False, near_duplicate=1.0))
    np.testing.assert_allclose(near.scores(q)["maxsim"], idx.scores(q)["maxsim"], atol=1e-5)


def test_row_aware_score_prefers_the_row_holding_every_term():
    gold = Table(HEADER, [["Verna Farms", "Mercadona", "42", "2.35"], ["Olmo Estates", "Lidl", "30", "2.00"]], "md")
    trap = Table(HEADER, [["Verna Farms", "Lidl", "30", "2.35"], ["Olmo Estates", "Mercadona", "30", "2.00"],
                          ["Maro Growers", "Aldi", "42", "2.10"]], "md")
    q = ENC.encode(query_terms("Verna Farms Mercadona week 42"))
    sc = CellIndex.build([gold, trap], ENC).scores(q)
    assert sc["maxsim"][1] >= sc["maxsim"][0] - 1e-6  # plain MaxSim cannot tell them apart
    assert sc["row"][0] > sc["row"][1]
    assert sc["score"][0] > sc["score"][1]
    assert sc["best_row"][0] == 0


def test_stop_cells_dropped_and_pq_shrinks_the_index():
    tables = _tables() * 4
    full = CellIndex.build(tables, ENC, reduction=ReductionConfig(drop_stop_cells=False))
    small = CellIndex.build(tables, ENC, reduction=ReductionConfig(pq_subspaces=48, pq_centroids=16))
    assert small.stats["cells_kept"] == full.stats["cells_kept"] - 8  # the "-" cells
    assert small.codes is not None and small.codes.shape[1] == 48 and small.vecs is None
    assert small.codes.nbytes * 30 < full.vecs.nbytes  # 48 uint8 codes vs 384 float32 per vector
    q = ENC.encode(["Lapins", "Verna Farms"])
    exact = CellIndex.build(tables, ENC, reduction=ReductionConfig()).cell_sims(q)
    approx = small.cell_sims(q)
    assert np.corrcoef(exact.ravel(), approx.ravel())[0, 1] > 0.9
    # 48 does not divide 100: the largest divisor <= 48 (25 sub-spaces) is used
    odd = CellIndex.build(tables, HashingEncoder(100), reduction=ReductionConfig(pq_subspaces=48))
    assert odd.codes.shape[1] == 25


def test_query_terms_unigrams_then_bigrams():
    assert query_terms("What was the price of Lapins in week 42?") == ["price", "Lapins", "week", "42", "week 42"]


# ----------------------------------------------------------------------------- fusion, metrics
def test_minmax_and_ndcg():
    np.testing.assert_allclose(minmax(np.array([1.0, 3.0, 2.0])), [0.0, 1.0, 0.5])
    np.testing.assert_allclose(minmax(np.array([2.0, 2.0])), [1.0, 1.0])
    from toporag_core.hybrid import Unit

    units = [Unit("d", "narrative", 0, 2, "x", 0.1), Unit("d", "table", 3, 8, "y", 0.9), Unit("e", "narrative", 0, 1,
                                                                                               "z", 0.1)]
    gold = [{"doc": "d", "start": 4, "end": 6}]
    assert ndcg_recall(units, [1, 0], gold) == (1.0, 1.0)
    nd, rc = ndcg_recall(units, [0, 2, 1], gold)
    assert rc == 1.0 and nd == pytest.approx(1 / np.log2(4))
    assert ndcg_recall(units, [0, 2], gold) == (0.0, 0.0)


def test_bm25_ranks_the_document_with_the_rare_term_first():
    bm = Lexical.build(["cherry price", "cherry lapins price", "cherry"])
    s = bm.scores("lapins price")
    assert s.argmax() == 1 and s[2] == 0.0


# ----------------------------------------------------------------------------- generator
def _cells_of(lines: list[str], fmt_hint: str) -> list[list[str]]:
    """Independent re-parsing of a rendered table (regex / csv module, not the library)."""
    text = "\n".join(lines)
    if "<td>" in text or "<th>" in text:
        return [re.findall(r"<t[dh]>(.*?)</t[dh]>", x) for x in lines if "<tr>" in x]
    if all(x.startswith("|") for x in lines):
        return [[c.strip() for c in x.strip("|").split("|")] for x in lines if not set(x) <= set("|-")]
    if all("\t" in x for x in lines):
        return [x.split("\t") for x in lines]
    if fmt_hint == "csv" or all("," in x for x in lines):
        return list(csv.reader(io.StringIO(text)))
    return [re.split(r" {2,}", x.strip()) for x in lines if not set(x.strip()) <= set("- ")]


def test_generator_answers_rederived_from_the_rendered_documents():
    ds = generate(GeneratorConfig(n_docs=60, n_questions=30, seed=5))
    assert {q["type"] for q in ds.questions} == {"A", "B", "C"}
    checked = 0
    for q in ds.questions:
        spans = [(g["doc"], ds.docs[g["doc"]].splitlines()[g["start"]:g["end"]]) for g in q["gold"]]
        if q["type"] == "A":
            text = " ".join(spans[0][1])
            assert q["meta"]["producer"] in text and q["answer"] in text
            continue
        m = q["meta"]
        doc, lines = spans[-1]
        grid = _cells_of(lines, doc.rsplit(".", 1)[-1])
        head, rows = grid[0], grid[1:]
        hits = [r for r in rows if r[head.index("Producer")] == m["producer"] and r[head.index("Buyer")] == m["buyer"]
                and r[head.index("Variety")] == m["variety"] and r[head.index("Week")] == str(m["week"])]
        assert len(hits) == 1, q
        assert hits[0][head.index(m["column"])] == q["answer"]
        if q["type"] == "C":  # the prose part holds the fact the question leaves out
            prose = " ".join(spans[0][1])
            assert (f"week {m['week']}" in prose) if m["via"] == "contract" else (m["producer"] in prose)
            assert m["producer"] not in q["question"] or m["via"] == "contract"
        checked += 1
    assert checked >= 15
    # every (producer, buyer, variety, week) key occurs in exactly one real shipment table row
    keys = [(s["producer"], s["buyer"], s["variety"], s["week"]) for s in ds.facts["shipments"]]
    assert len(keys) == len(set(keys))


def test_generator_is_deterministic_and_validates():
    a, b = generate(GeneratorConfig(n_docs=30, n_questions=6, seed=1)), generate(GeneratorConfig(n_docs=30,
                                                                                               n_questions=6, seed=1))
    assert a.docs == b.docs and a.questions == b.questions
    with pytest.raises(ValueError, match="n_docs"):
        GeneratorConfig(n_docs=2)


# ----------------------------------------------------------------------------- search end to end
@pytest.fixture(scope="module")
def small():
    ds = generate(GeneratorConfig(n_docs=40, n_questions=12, seed=2))
    docs = parse_corpus(ds)
    return ds, docs, HybridIndex.build(docs, ENC)


def test_table_route_finds_the_gold_table_of_cell_questions(small):
    ds, docs, idx = small
    units = idx.units
    found = 0
    bq = [q for q in ds.questions if q["type"] == "B"]
    for q in bq:
        res = idx.search(q["question"], SearchConfig(route="table", k=3))
        found += ndcg_recall(units, [r["unit"] for r in res["fused"]], q["gold"], 3)[1]
    assert found >= len(bq) - 1


def test_search_result_shape_and_save_load_roundtrip(small, tmp_path):
    ds, docs, idx = small
    q = ds.questions[-1]["question"]
    res = idx.search(q, SearchConfig(k=5))
    assert len(res["fused"]) <= 5 and [r["rank"] for r in res["fused"]] == list(range(1, len(res["fused"]) + 1))
    assert {r["route"] for r in res["fused"]} <= {"narrative", "table"}
    ex = idx.explain_table(res, res["table"][0]["unit"])
    assert ex["grid"].shape[0] == len(res["terms"]) and len(ex["best"]) == len(res["terms"])
    idx.save(tmp_path / "ix")
    back = HybridIndex.load(tmp_path / "ix", ENC)
    res2 = back.search(q, SearchConfig(k=5))
    assert [r["uid"] for r in res2["fused"]] == [r["uid"] for r in res["fused"]]
    ctx = idx.context(res)
    assert ctx.count("| ---") == 0 and "[table" in ctx or "[narrative" in ctx
    with pytest.raises(ValueError, match="non-empty"):
        idx.search("  ")


def test_reranker_reorders_the_fused_list(small):
    ds, docs, idx = small

    class LengthReranker:  # any object with predict(pairs) works (a CrossEncoder has one)
        def predict(self, pairs):
            return [-len(t) for _, t in pairs]

    res = idx.search(ds.questions[0]["question"], SearchConfig(k=6), reranker=LengthReranker())
    lengths = [len(idx.unit_text(r["unit"], res["_cell_sims"])) for r in res["reranked"]]
    assert lengths == sorted(lengths)
    assert sorted(r["fused_rank"] for r in res["reranked"]) == list(range(1, len(res["fused"]) + 1))


def test_answer_from_context_with_the_tiny_llm():
    from toporag_core.hybrid.answer import answer_from_context, frozen_reader
    from toporag_core.model.tiny import tiny_llm, tiny_tokenizer

    tok = tiny_tokenizer(chat=True)
    reader = frozen_reader(model=tiny_llm(len(tok)), tokenizer=tok)
    out = answer_from_context("What was the price?", "| Price |\n|---|\n| 2.35 |", reader, max_new_tokens=4)
    assert isinstance(out["answer"], str)
    assert "2.35" in out["prompt"]["context"] and out["prompt"]["question"] == "What was the price?"


# ----------------------------------------------------------------------------- CLI
def test_cli_generate_route_index_search_eval(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    assert cli(["hybrid", "generate", "--out", str(data), "--n-docs", "30", "--n-questions", "6", "--seed", "4"]) == 0
    mixed = sorted((data / "docs").glob("mixed_*"))[0]
    capsys.readouterr()
    assert cli(["hybrid", "route", str(mixed), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any(b["kind"] == "table" for b in out["blocks"]) and all("sds" in b for b in out["blocks"])
    assert len(out["lines"]) == len(mixed.read_text().splitlines())
    assert cli(["hybrid", "index", str(data / "docs"), "--out", str(tmp_path / "ix"), "--reduce"]) == 0
    capsys.readouterr()
    q = json.loads((data / "questions.jsonl").read_text().splitlines()[-1])["question"]
    assert cli(["hybrid", "search", str(tmp_path / "ix"), "-q", q, "--k", "4", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["table"] and all("cells" in t and "score" in t for t in res["table"])
    assert all({"term", "row", "col", "sim", "header", "value"} <= set(c) for c in res["table"][0]["cells"])
    assert cli(["hybrid", "eval", str(data), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in ev["table"]] == ["naive", "parent-child", "bm25", "hybrid"]


def test_cli_bad_input_exits_with_one_line(tmp_path, capsys):
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"\x00\x01\x02\x03")
    assert cli(["hybrid", "route", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "x.bin" in err and "binary" in err and err.count("\n") == 1
    empty = tmp_path / "e.txt"
    empty.write_text("")
    assert cli(["hybrid", "route", str(empty)]) == 2
    assert "empty" in capsys.readouterr().err
    assert cli(["hybrid", "search", str(tmp_path / "nothing"), "-q", "x"]) == 2
