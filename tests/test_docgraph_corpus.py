"""Corpus readers (JSONL, folder, BEIR, HotpotQA layouts) and the document-graph corpus index:
round trip, atomic writes, incremental add, retrieval ranking and the eval JSON. Hashing encoder
(model-free, fast); the MiniLM numbers live in benchmarks/bench_docgraph_corpus.py."""
from __future__ import annotations

import json

import pytest

from toporag_core.corpus import CORPUS_FORMATS, detect_corpus_format, load_multihop, multihop_corpus, read_corpus
from toporag_core.graph import GraphFormatError


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


# ----------------------------------------------------------------------------- readers
def test_registry_lists_the_formats_and_detects_each(tmp_path):
    assert {"jsonl", "folder", "beir", "hotpotqa"} <= set(CORPUS_FORMATS)
    j = _jsonl(tmp_path / "docs.jsonl", [{"id": "a", "text": "Alpha."}])
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "a.md").write_text("# Alpha\n\nAlpha text.")
    (tmp_path / "beir").mkdir()
    _jsonl(tmp_path / "beir" / "corpus.jsonl", [{"_id": "1", "title": "", "text": "x"}])
    h = tmp_path / "hotpot.json"
    h.write_text(json.dumps([{"question": "q?", "answer": "a", "context": [["T", ["s."]]]}]))
    assert [detect_corpus_format(p) for p in (j, tmp_path / "folder", tmp_path / "beir", h)] == \
        ["jsonl", "folder", "beir", "hotpotqa"]
    with pytest.raises(GraphFormatError, match="not a corpus"):
        detect_corpus_format(_jsonl(tmp_path / "x.csv", ["a,b"]))


def test_jsonl_reader_ids_titles_and_fallbacks(tmp_path):
    p = _jsonl(tmp_path / "docs.jsonl", [{"id": 7, "title": "Seven", "text": "Seven is a number."}, "",
                                         {"title": "Alpha", "text": "Alpha text."}])
    c = read_corpus(p)
    assert c.format == "jsonl" and [d.id for d in c.documents] == ["7", "Alpha"]
    assert [d.name for d in c.documents] == ["Seven", "Alpha"] and c.documents[1].line == 3


@pytest.mark.parametrize("rows, line, field, reason", [
    ([{"id": "a", "text": "x"}, {"id": "b"}], 2, "text", "missing"),
    ([{"id": "a", "text": "  "}], 1, "text", "empty text"),
    ([{"id": "a", "text": 3}], 1, "text", "not a string"),
    ([{"text": "x"}], 1, "id", "missing"),
    ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], 2, "id", "repeats"),
    ([{"id": "a", "text": "x"}, "{not json"], 2, None, "not valid JSON"),
    ([{"id": "a", "text": "x"}, "[1, 2]"], 2, None, "expected a JSON object"),
    ([{"id": "a", "text": "x", "title": ["t"]}], 1, "title", "not a string"),
    ([{"id": True, "text": "x"}], 1, "id", "not a string or whole number"),
])
def test_jsonl_bad_lines_name_file_line_and_field(tmp_path, rows, line, field, reason):
    p = _jsonl(tmp_path / "docs.jsonl", rows)
    with pytest.raises(GraphFormatError) as e:
        read_corpus(p)
    assert e.value.file == str(p) and e.value.line == line and e.value.field == field
    assert reason in str(e.value) and f"line {line}" in str(e.value)


def test_jsonl_bad_utf8_names_the_line(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_bytes(b'{"id": "a", "text": "x"}\n{"id": "b", "text": "\xff"}\n')
    with pytest.raises(GraphFormatError, match="line 2"):
        read_corpus(p)


def test_folder_reader_titles_ids_and_skipped_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.md").write_text("# Alpha Title\n\nAlpha was founded in 1200.\n")
    (tmp_path / "sub" / "b.txt").write_text("Beta text only.\n")
    (tmp_path / "c.txt").write_bytes(b"ok\n\xff\xfe bad")
    (tmp_path / "d.bin").write_bytes(b"\x00\x01")
    (tmp_path / ".hidden.md").write_text("# Hidden\n\ntext")
    c = read_corpus(tmp_path)
    assert c.format == "folder"
    assert [(d.id, d.title) for d in c.documents] == [("a.md", "Alpha Title"), ("sub/b.txt", "b")]
    assert "Alpha Title" not in c.documents[0].text and "founded" in c.documents[0].text
    assert len(c.skipped) == 1 and "c.txt" in c.skipped[0] and "line 2" in c.skipped[0]


def test_folder_with_no_usable_file_raises_naming_it(tmp_path):
    (tmp_path / "e.md").write_text("   \n")
    with pytest.raises(GraphFormatError, match="no usable document.*e.md.*'text'"):
        read_corpus(tmp_path)


def test_beir_reader_corpus_queries_qrels(tmp_path):
    _jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "title": "One", "text": "first"},
                                       {"_id": "d2", "title": "", "text": "second"}])
    _jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "which first?"}])
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\n")
    c = read_corpus(tmp_path)
    assert c.format == "beir" and c.ids() == ["d1", "d2"] and c.documents[1].name == "d2"
    assert [q.text for q in c.queries] == ["which first?"] and c.qrels == {"q1": {"d1": 2, "d2": 0}}


@pytest.mark.parametrize("qrels, line, field", [
    ("query-id\tcorpus-id\tscore\nq1\tdX\t1\n", 2, "corpus-id"),
    ("query-id\tcorpus-id\tscore\nq9\td1\t1\n", 2, "query-id"),
    ("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", 2, "score"),
    ("query-id\tcorpus-id\tscore\nq1\td1\n", 2, None),
])
def test_beir_bad_qrels_name_file_line_and_field(tmp_path, qrels, line, field):
    _jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "title": "One", "text": "first"}])
    _jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "q"}])
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text(qrels)
    with pytest.raises(GraphFormatError) as e:
        read_corpus(tmp_path)
    assert e.value.file.endswith("test.tsv") and e.value.line == line and e.value.field == field


HOTPOT = {"_id": "x1", "question": "Who founded Alpha Works?", "answer": "Bo Lind", "type": "bridge",
          "level": "hard", "supporting_facts": [["Alpha Works", 0], ["Bo Lind", 1]],
          "context": [["Alpha Works", ["Alpha Works was founded by Bo Lind.", " It makes glass."]],
                      ["Bo Lind", ["Bo Lind was a painter.", " Lind was born in 1900."]]]}


def test_hotpotqa_original_and_hf_layouts_load_the_same(tmp_path):
    hf = {"id": "x1", "question": HOTPOT["question"], "answer": "Bo Lind", "type": "bridge", "level": "hard",
          "supporting_facts": {"title": ["Alpha Works", "Bo Lind"], "sent_id": [0, 1]},
          "context": {"title": ["Alpha Works", "Bo Lind"],
                      "sentences": [HOTPOT["context"][0][1], HOTPOT["context"][1][1]]}}
    a, b = tmp_path / "orig.json", tmp_path / "hf.jsonl"
    a.write_text(json.dumps([HOTPOT]))
    b.write_text(json.dumps(hf) + "\n")
    ra, rb = load_multihop(a), load_multihop(b)
    assert ra == rb
    c = multihop_corpus(ra)
    assert c.ids() == ["Alpha Works", "Bo Lind"] and c.documents[0].text == "Alpha Works was founded by Bo Lind. " \
                                                                           "It makes glass."
    assert c.qrels == {"x1": {"Alpha Works": 1, "Bo Lind": 1}}
    assert read_corpus(a).format == "hotpotqa"


@pytest.mark.parametrize("record, field", [
    ({"answer": "a", "context": []}, "question"),
    ({"question": "q?", "answer": "a", "context": "text"}, "context"),
    ({"question": "q?", "answer": "a", "context": {"title": ["t"], "sentences": []}}, "context"),
    ({"question": "q?", "answer": "a", "context": [["t", ["s"]]], "supporting_facts": {"title": ["t"]}},
     "supporting_facts"),
    ({"question": "q?", "answer": 3, "context": []}, "answer"),
])
def test_hotpotqa_bad_records_name_record_and_field(tmp_path, record, field):
    p = tmp_path / "h.json"
    p.write_text(json.dumps([HOTPOT, record]))
    with pytest.raises(GraphFormatError) as e:
        load_multihop(p)
    assert e.value.record == 1 and e.value.field == field and e.value.file == str(p)


# ----------------------------------------------------------------------------- the corpus index
import numpy as np  # noqa: E402

from toporag_core.cli import main  # noqa: E402
from toporag_core.corpus import Corpus, Document  # noqa: E402
from toporag_core.docgraph.corpus_eval import iter_rows, summarize  # noqa: E402
from toporag_core.datagen.docgraph_corpus import generate_corpus  # noqa: E402
from toporag_core.docgraph.corpus_search import CorpusSearcher, SearchConfig  # noqa: E402
from toporag_core.docgraph.index import DocGraphIndex, IndexConfig, build_index, work_folder  # noqa: E402
from toporag_core.docgraph.mentions import TitleMatcher  # noqa: E402
from toporag_core.embed import get_encoder  # noqa: E402


@pytest.fixture(scope="module")
def enc():
    return get_encoder("hashing-384", cached=False)


@pytest.fixture(scope="module")
def world():
    recs, docs = generate_corpus(160, 12, seed=5)
    return recs, [Document(d["id"], d["title"], d["text"], "gen.jsonl", i + 1) for i, d in enumerate(docs)]


class CountingEncoder:
    """The hashing encoder, counting texts, raising after ``fail_after`` calls (a killed run)."""

    def __init__(self, base, fail_after: int | None = None) -> None:
        self.base, self.fail_after, self.calls, self.texts = base, fail_after, 0, 0
        self.name, self.dim = base.name, base.dim

    def encode(self, texts, show_progress=False):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.calls += 1
        self.texts += len(texts)
        return self.base.encode(texts)


def test_title_matcher_longest_whole_phrase_in_order():
    m = TitleMatcher(["New York", "New York City", "York", "It", "Alpha Works"])
    assert m.named("Alpha Works moved to new york city, not York.") == [4, 1, 2]
    assert m.named("Newark and Yorkshire") == [] and m.named("") == []


def test_index_round_trip_layout_and_vectors(tmp_path, world, enc):
    _, docs = world
    idx, rep = build_index(Corpus(docs), enc, tmp_path / "idx")
    back = DocGraphIndex.load(tmp_path / "idx")
    assert back.ids == idx.ids == [d.id for d in docs] and back.fingerprints == idx.fingerprints
    assert np.array_equal(back.x, idx.x) and np.array_equal(back.knn, idx.knn) and back.text == idx.text
    assert rep["texts_encoded"] == rep["paragraphs"] == 2 * len(docs)  # pooled: one text per paragraph
    # document rows are contiguous, a document's node is its first row, norms are 1
    assert np.all(back.level[back.doc_ptr[:-1]] == 1) and np.allclose(np.linalg.norm(back.x, axis=1), 1, atol=1e-5)
    # neighbours never point into the paragraph's own document, best first
    paras = back.paragraph_rows()
    ok = back.knn >= 0
    assert np.all(back.doc[back.knn[ok]] != np.repeat(back.doc[paras], back.knn.shape[1]).reshape(back.knn.shape)[ok])
    assert np.all(np.diff(back.knn_sim, axis=1) <= 1e-6)
    # the stored article rebuilds the same node layout
    art = back.article(3)
    assert art.title == docs[3].name and [h for h, _ in art.sections] == ["Early life", "Career"] or \
        [h for h, _ in art.sections] in (["Geography", "History"], ["History", "Operations"])
    # BM25 ranks the document whose title is asked for first
    assert back.ids[int(np.argmax(back.bm25.scores(docs[7].title)))] == docs[7].id
    assert not work_folder(tmp_path / "idx").exists()


def test_index_save_is_atomic(tmp_path, world, enc, monkeypatch):
    _, docs = world
    out = tmp_path / "idx"
    build_index(Corpus(docs[:50]), enc, out)
    before = sorted(p.name for p in out.iterdir())
    import safetensors.numpy as stn

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(stn, "save_file", boom)
    with pytest.raises(OSError, match="disk full"):
        build_index(Corpus(docs), enc, out)
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == before and DocGraphIndex.load(out).num_docs == 50
    # a crash between the two renames leaves the old index aside: the next load puts it back
    out.rename(tmp_path / ".idx.old-999")
    assert DocGraphIndex.load(out).num_docs == 50


def test_embedding_resumes_after_a_killed_run(tmp_path, world, enc):
    _, docs = world
    out = tmp_path / "idx"
    cfg = IndexConfig(chunk_size=64)
    with pytest.raises(KeyboardInterrupt):
        build_index(Corpus(docs), CountingEncoder(enc, fail_after=3), out, cfg)
    assert not out.exists() and len(list(work_folder(out).glob("*.safetensors"))) == 3
    again = CountingEncoder(enc)
    idx, rep = build_index(Corpus(docs), again, out, cfg)
    assert again.texts == rep["texts_encoded"] - 3 * 64  # only the chunks not stored yet
    ref, _ = build_index(Corpus(docs), enc, None, cfg)
    assert np.allclose(idx.x, ref.x) and not work_folder(out).exists()


def test_incremental_add_encodes_only_new_documents(tmp_path, world, enc):
    _, docs = world
    out = tmp_path / "idx"
    build_index(Corpus(docs[:100]), enc, out)
    counter = CountingEncoder(enc)
    idx, rep = build_index(Corpus(docs), counter, out)
    assert (rep["added"], rep["kept"], rep["replaced"], rep["removed"]) == (60, 100, 0, 0)
    assert counter.texts == 2 * 60
    ref, _ = build_index(Corpus(docs), enc, None)
    assert idx.ids == ref.ids and np.allclose(idx.x, ref.x, atol=1e-6)
    assert np.allclose(idx.knn_sim, ref.knn_sim, atol=1e-5)  # extended neighbour lists = recomputed ones
    assert np.array_equal(idx.bm25.scores("founded river"), ref.bm25.scores("founded river"))
    # a changed document is re-encoded, nothing else; --prune drops what the corpus no longer has
    changed = [Document(d.id, d.title, d.text + " It also has a harbour.", d.source) if i == 5 else d
               for i, d in enumerate(docs)]
    counter = CountingEncoder(enc)
    _, rep = build_index(Corpus(changed), counter, out)
    assert (rep["replaced"], rep["added"], rep["kept"]) == (1, 0, 159) and counter.texts == 2
    _, rep = build_index(Corpus(changed[:120]), enc, out, prune=True)
    assert rep["removed"] == 40 and DocGraphIndex.load(out).num_docs == 120
    with pytest.raises(ValueError, match="--rebuild"):
        build_index(Corpus(docs), get_encoder("hashing-128", cached=False), out)


def test_search_ranks_from_a_small_neighbourhood(world, enc):
    recs, docs = world
    idx, _ = build_index(Corpus(docs), enc, None)
    s = CorpusSearcher(idx, enc, SearchConfig(max_articles=6))
    r = next(x for x in recs if x["type"] == "bridge")
    res = s.search(r["question"])
    assert len(res.neighbourhood) <= 6 and res.graph.titles == [idx.titles[i] for i in res.neighbourhood]
    assert res.named and set(res.named) <= set(res.neighbourhood)  # the question's entity is in the graph
    assert 1 <= res.articles <= 6 and len(res.ranking) >= 10 and len(set(res.ranking)) == len(res.ranking)
    shown = [idx.titles[i] for i in res.ranking[: res.articles]]
    assert all(f"# {t}" in res.context or f"{t}:" in res.context for t in shown)
    with pytest.raises(ValueError, match="encoder"):
        CorpusSearcher(idx, get_encoder("hashing-128", cached=False))


def test_eval_rows_and_summary_keys(world, enc):
    recs, docs = world
    idx, _ = build_index(Corpus(docs), enc, None)
    rows = list(iter_rows(recs[:6], CorpusSearcher(idx, enc)))
    s = summarize(rows)
    for key in ("questions", "recall_both", "recall_any", "articles_per_question", "bm25_recall_both",
                "dense_recall_both", "title_rule_recall_both", "p50_ms", "p95_ms", "peak_rss_mb"):
        assert key in s
    assert s["questions"] == 6 and s["gold_in_index"] == 1.0
    assert all(0 <= s[k] <= 1 for k in ("recall_both", "bm25_recall_both", "dense_recall_both"))
    assert s["recall_both"] <= s["recall_any"] and s["p50_ms"] <= s["p95_ms"]
    assert s["articles_per_question"] == pytest.approx(np.mean([r["articles"] for r in rows]), abs=1e-3)


def test_cli_index_retrieve_eval(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    data, out = tmp_path / "data", tmp_path / "idx"
    assert main(["docgraph", "generate-corpus", "--articles", "80", "--questions", "4", "--out", str(data)]) == 0
    assert "80 articles" in capsys.readouterr().out
    assert main(["docgraph", "index", str(data / "corpus.jsonl"), "--out", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["documents"] == 80 and rep["added"] == 80
    assert main(["docgraph", "retrieve", "--index", str(out), "-q", "Who founded the company?", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [x["rank"] for x in r["ranking"]] == list(range(1, len(r["ranking"]) + 1))
    assert [x["in_context"] for x in r["ranking"]] == [i < r["articles"] for i in range(len(r["ranking"]))]
    rows = tmp_path / "rows.jsonl"
    assert main(["docgraph", "eval", str(data / "questions.json"), "--index", str(out), "--json",
                 "--out", str(rows)]) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["questions"] == 4 and "eval 4/4" in cap.err and len(rows.read_text().splitlines()) == 4
    assert {"bm25_recall_both", "dense_recall_both", "title_rule_recall_both", "peak_rss_mb"} <= set(s)
    # the HotpotQA file itself is a corpus too (its paragraphs), and converts to JSONL
    assert main(["docgraph", "convert", str(data / "questions.json"), "--out", str(tmp_path / "c.jsonl")]) == 0
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == len({t for q in json.loads(
        (data / "questions.json").read_text()) for t, _ in q["context"]})


def test_cli_index_bad_corpus_names_file_line_field(tmp_path, capsys):
    bad = _jsonl(tmp_path / "docs.jsonl", [{"id": "a", "text": "Alpha."}, {"id": "b", "txt": "Beta."}])
    assert main(["docgraph", "index", str(bad), "--out", str(tmp_path / "idx"), "--encoder", "hashing"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "docs.jsonl, line 2, field 'text': missing" in err
    assert not (tmp_path / "idx").exists()
    assert main(["docgraph", "retrieve", "--index", str(tmp_path / "nope"), "-q", "x"]) == 2
    assert "not a document-graph index" in capsys.readouterr().err
