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
