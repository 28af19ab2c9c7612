"""Loaders (toporag_core.io) and dataset readers (toporag_core.io, toporag_core.tasks): round trips, auto-detection,
every bad-input error naming file / line-or-record / field, and the real shared data."""
from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from toporag_core.io.explagraphs import explagraphs_question, explagraphs_row_to_graph, read_explagraphs
from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph
from toporag_core.tasks import seeded_split
from toporag_core.graph import GraphFormatError, TextualGraph
from toporag_core.io import (detect_format, load_csv_pair_from_bytes, load_graph, load_graph_from_bytes,
                             load_graph_from_text, parse_explagraphs_graph)
from toporag_core.io.samples import shared_data_dir

SHARED = shared_data_dir() or Path(__file__).resolve().parents[1].parent / "shared" / "data"  # $TOPORAG_SHARED_DATA first
TRIPLES = [("cup", "on", "table"), ("plate", "left of", "cup"), ("table", "under", "plate"),
           ("cup", "next to", "table"), ("cup", "holds", "cup")]  # a parallel edge and a self-loop


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def csv_pair(tmp_path: Path, nodes: str, edges: str) -> Path:
    write(tmp_path / "nodes.csv", nodes)
    write(tmp_path / "edges.csv", edges)
    return tmp_path


NODES = "node_id,node_attr\n0,cup\n1,table\n2,\"plate, white\"\n"
EDGES = "src,edge_attr,dst\n0,on,1\n2,left of,0\n1,under,2\n0,next to,1\n0,holds,0\n"


def expect(err: pytest.ExceptionInfo, *parts: str) -> None:
    msg = str(err.value)
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"


# ------------------------------------------------------------------ round trips + detection
def test_csv_pair_directory_and_either_file(tmp_path):
    d = csv_pair(tmp_path, NODES, EDGES)
    for path in (d, d / "nodes.csv", d / "edges.csv"):
        g = load_graph(path)
        assert g.node_text == ["cup", "table", "plate, white"]
        assert g.node_ids == ["0", "1", "2"]
        assert g.edge_text == ["on", "left of", "under", "next to", "holds"]
        assert g.edge_index.tolist() == [[0, 2, 1, 0, 0], [1, 0, 2, 1, 0]]
    assert detect_format(d) == "csv-pair" and detect_format(d / "edges.csv") == "csv-pair"


def test_csv_pair_gretriever_folder_layout_and_explicit_nodes_path(tmp_path):
    (tmp_path / "nodes").mkdir()
    (tmp_path / "edges").mkdir()
    write(tmp_path / "nodes" / "7.csv", NODES)
    write(tmp_path / "edges" / "7.csv", EDGES)
    assert load_graph(tmp_path / "edges" / "7.csv").num_edges == 5
    write(tmp_path / "mine.csv", EDGES)
    g = load_graph(tmp_path / "mine.csv", format="csv-pair", nodes_path=tmp_path / "nodes" / "7.csv")
    assert g.num_nodes == 3 and g.num_edges == 5


def test_csv_pair_from_bytes():
    g = load_csv_pair_from_bytes(NODES.encode(), EDGES.encode())
    assert g.triples()[1] == ("plate, white", "left of", "cup")


@pytest.mark.parametrize("sep,header,ext", [("\t", True, "tsv"), (",", True, "csv"), ("\t", False, "tsv"),
                                            (",", False, "csv"), ("\t", False, "txt")])
def test_triples_table_round_trip(tmp_path, sep, header, ext):
    lines = (["head" + sep + "relation" + sep + "tail"] if header else []) + [sep.join(t) for t in TRIPLES]
    p = write(tmp_path / f"g.{ext}", "\n".join(lines) + "\n")
    assert detect_format(p) == "triples"
    g = load_graph(p)
    assert g.triples() == TRIPLES
    assert g.num_nodes == 3 and g.num_edges == 5


def test_triples_header_in_other_order_and_stripping(tmp_path):
    p = write(tmp_path / "g.csv", "tail,head,relation\n table , cup ,  on \nplate,table,under\n")
    assert load_graph(p).triples() == [("cup", "on", "table"), ("table", "under", "plate")]


def test_triples_json_round_trip(tmp_path):
    p = write(tmp_path / "t.json", json.dumps([list(t) for t in TRIPLES]))
    assert detect_format(p) == "triples"
    assert load_graph(p).triples() == TRIPLES
    objs = [{"head": h, "relation": r, "tail": t} for h, r, t in TRIPLES]
    assert load_graph_from_text(json.dumps(objs)).triples() == TRIPLES


def test_explagraphs_string_file_and_tsv_rows(tmp_path):
    s = "(Cannabis; synonym of; Marijuana)( legal ;Causes; more available )(marijuana; capable of; good thing)"
    p = write(tmp_path / "one.txt", s)
    assert detect_format(p) == "explagraphs"
    g = load_graph(p)
    assert g.triples() == [("cannabis", "synonym of", "marijuana"), ("legal", "causes", "more available"),
                           ("marijuana", "capable of", "good thing")]
    assert g.num_nodes == 5
    tsv = "arg1\targ2\tlabel\tgraph\nA one\tA two\tsupport\t(a; b; c)\nB one\tB two\tcounter\t(x; y; z)(z; w; x)\n"
    p = write(tmp_path / "rows.tsv", tsv)
    assert detect_format(p) == "explagraphs"
    assert load_graph(p).triples() == [("a", "b", "c")]
    g = load_graph(p, record=1)
    assert g.num_edges == 2 and g.meta["label"] == "counter"
    assert g.meta["question"] == explagraphs_question("B one", "B two")


def test_webqsp_record_list_and_names_only_in_edges(tmp_path):
    rec = {"id": "Q1", "question": "who?", "q_entity": ["a"], "answers": ["b"], "nodes": ["a", "b"],
           "edges": [["a", "r1", "b"], ["a", "r2", "b"], ["b", "r3", "c"], ["c", "r4", "c"]]}
    p = write(tmp_path / "one.json", json.dumps(rec))
    assert detect_format(p) == "webqsp"
    g = load_graph(p)
    assert g.node_text == ["a", "b", "c"] and g.meta["nodes_from_edges"] == 1
    assert g.edge_index.tolist() == [[0, 0, 1, 2], [1, 1, 2, 2]]
    assert g.meta["question"] == "who?" and g.meta["answers"] == ["b"] and g.name == "Q1"
    other = dict(rec, id="Q2", nodes=["z"], edges=[["z", "r", "y"]])
    p = write(tmp_path / "many.json", json.dumps([rec, other]))
    assert load_graph(p).name == "Q1"
    assert load_graph(p, record=1).node_text == ["z", "y"]
    assert load_graph(p, record="Q2").name == "Q2"


def test_bytes_and_text_entry_points():
    g = load_graph_from_bytes("head\trelation\ttail\ncup\ton\ttable\n".encode(), "up.tsv")
    assert g.triples() == [("cup", "on", "table")] and g.name == "up"
    assert load_graph_from_text("cup, on, table\ntable, under, cup").num_edges == 2
    assert load_graph_from_text("(a; b; c)").node_text == ["a", "c"]
    with pytest.raises(GraphFormatError) as e:
        load_graph_from_bytes(NODES.encode(), "nodes.csv")
    expect(e, "nodes.csv", "load_csv_pair_from_bytes")


def test_parallel_edges_and_self_loops_preserved():
    g = load_graph_from_text("\n".join("\t".join(t) for t in TRIPLES))
    s, t = g.edge_index
    assert int((s == t).sum()) == 1                       # the self-loop
    pairs = [tuple(sorted(p)) for p in g.edge_index.T.tolist()]
    assert pairs.count((0, 1)) == 2                       # cup-table twice


def test_networkx_round_trip_and_pyg_shapes():
    g = TextualGraph.from_triples(TRIPLES, name="t")
    nxg = g.to_networkx()
    assert isinstance(nxg, nx.MultiDiGraph) and nxg.number_of_edges() == 5 and nxg.number_of_nodes() == 3
    back = TextualGraph.from_networkx(nxg)
    # networkx iterates edges grouped by source node, so the multiset of triples survives, not the order
    assert sorted(back.triples()) == sorted(TRIPLES) and back.node_text == g.node_text
    assert sorted(load_graph(nxg).triples()) == sorted(TRIPLES)   # load_graph accepts a networkx graph
    plain = nx.Graph()
    plain.add_edge("x", "y", relation="r")
    assert TextualGraph.from_networkx(plain).triples() == [("x", "r", "y")]
    data = g.to_pyg(node_emb=np.zeros((3, 4)), edge_emb=np.ones((5, 2)))
    assert tuple(data.edge_index.shape) == (2, 5) and data.num_nodes == 3
    assert tuple(data.x.shape) == (3, 4) and tuple(data.edge_attr.shape) == (5, 2)
    assert data.edge_index.dtype.is_floating_point is False and data.node_text == g.node_text


# ------------------------------------------------------------------ errors
def test_csv_pair_errors(tmp_path):
    cases = [
        ("id,node_attr\n0,cup\n", EDGES, "nodes.csv", "line 1", "node_id", "missing column"),
        (NODES, "src,relation,dst\n0,on,1\n", "edges.csv", "line 1", "edge_attr", "missing column"),
        (NODES, "src,edge_attr,dst\n0,on,1\n0,on,17\n", "edges.csv", "line 3", "'dst'", "unknown node id '17'"),
        (NODES, "src,edge_attr,dst\n9,on,1\n", "edges.csv", "line 2", "'src'", "unknown node id '9'"),
        ("node_id,node_attr\n0,cup\n1,table\n0,plate\n", EDGES, "nodes.csv", "line 4", "node_id", "duplicate"),
        ("node_id,node_attr\n0,cup\n1,  \n", EDGES, "nodes.csv", "line 3", "node_attr", "empty text"),
        (NODES, "src,edge_attr,dst\n0,on,1\n0,,1\n", "edges.csv", "line 3", "edge_attr", "empty text"),
        (NODES, "src,edge_attr,dst\n0,on\n", "edges.csv", "line 2", "expected 3 fields", ""),
    ]
    for i, (nodes, edges, *parts) in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        with pytest.raises(GraphFormatError) as e:
            load_graph(csv_pair(d, nodes, edges))
        expect(e, *parts)


def test_csv_pair_missing_sibling(tmp_path):
    write(tmp_path / "nodes.csv", NODES)
    with pytest.raises(GraphFormatError) as e:
        load_graph(tmp_path / "nodes.csv")
    expect(e, "edges.csv", "file not found")


def test_triples_errors(tmp_path):
    cases = [
        ("g.tsv", "head\trelation\ttail\ncup\ton\ttable\ncup\ton\n", "line 3", "expected 3 fields"),
        ("g.tsv", "cup\ton\ttable\n\t on\ttable\n", "line 2", "field 'head'", "empty text"),
        ("g.csv", "head,relation,tail\ncup,,table\n", "line 2", "field 'relation'", "empty text"),
        ("g.csv", "head,relation,tail\ncup,on, \n", "line 2", "field 'tail'"),
        ("g.csv", "head,relation,tail\n", "no triples"),
        ("g.json", '[["a", "r", "b"], ["a", "r"]]', "record 1", "malformed triple", "2 fields"),
        ("g.json", '[["a", "r", "b"], ["a", "", "b"]]', "record 1", "field 'relation'"),
        ("g.json", '[{"head": "a", "tail": "b"}]', "record 0", "field 'relation'"),
        ("g.json", '[["a", "r", "b"],\n ["a", "r" "b"]]', "line 2", "column", "invalid JSON"),
        ("g.json", '[["a", null, "b"]]', "record 0", "field 'relation'", "expected text"),
    ]
    for i, (name, text, *parts) in enumerate(cases):
        p = write(tmp_path / f"{i}_{name}", text)
        with pytest.raises(GraphFormatError) as e:
            load_graph(p)
        expect(e, p.name, *parts)


def test_explagraphs_errors():
    cases = [
        ("(a; b; c)(d; e; f", "triple 2", "never closed"),
        ("(a; b; c)(d; (e; f)", "triple 2", "not closed before"),
        ("(a; b; c))", "triple 2", "unexpected ')'"),
        ("(a; b; c)(d; e f)", "triple 2", "found 1"),
        ("(a; b; c)(d; e; f; g)", "triple 2", "found 3"),
        ("(a; b; c) junk (d; e; f)", "triple 2", "expected '('"),
        ("(a; ; c)", "triple 1", "empty relation"),
        ("(a; b;  )", "triple 1", "empty tail"),
        ("   ", "no triples"),
    ]
    for text, *parts in cases:
        with pytest.raises(GraphFormatError) as e:
            parse_explagraphs_graph(text, file="x.tsv", line=7)
        expect(e, "x.tsv", "line 7", "field 'graph'", *parts)


def test_explagraphs_tsv_errors(tmp_path):
    p = write(tmp_path / "rows.tsv", "arg1\targ2\tlabel\tgraph\na\tb\tsupport\t(a; b; c)\nc\td\tcounter\t(a; b c)\n")
    with pytest.raises(GraphFormatError) as e:
        load_graph(p, record=1)
    expect(e, "rows.tsv", "line 3", "field 'graph'", "triple 1")
    with pytest.raises(GraphFormatError) as e:
        load_graph(p, record=5)
    expect(e, "rows.tsv", "record 5", "out of range")
    p = write(tmp_path / "bad.tsv", "arg1\targ2\tlabel\tgraf\na\tb\tsupport\t(a; b; c)\n")
    with pytest.raises(GraphFormatError) as e:
        read_explagraphs(p)
    expect(e, "bad.tsv", "line 1", "field 'graph'", "missing column")
    p = write(tmp_path / "short.tsv", "arg1\targ2\tlabel\tgraph\na\tb\tsupport\n")
    with pytest.raises(GraphFormatError) as e:
        read_explagraphs(p)
    expect(e, "short.tsv", "line 2", "expected 4")


def test_webqsp_errors(tmp_path):
    base = {"id": "Q", "question": "q", "nodes": ["a", "b"], "edges": [["a", "r", "b"]]}
    cases = [
        (dict(base, nodes=["a", "b", "a"]), "field 'nodes[2]'", "duplicate node name 'a'"),
        (dict(base, nodes=["a", ""]), "field 'nodes[1]'", "empty text"),
        (dict(base, edges=[["a", "r", "b"], ["a", "b"]]), "field 'edges[1]'", "malformed triple"),
        (dict(base, edges=[["a", "r", "b"], ["a", " ", "b"]]), "field 'edges[1][1]'", "empty text"),
        (dict(base, edges="nope"), "field 'edges'", "expected a list"),
    ]
    for i, (rec, *parts) in enumerate(cases):
        p = write(tmp_path / f"w{i}.json", json.dumps([base, rec]))
        with pytest.raises(GraphFormatError) as e:
            load_graph(p, format="webqsp", record=1)
        expect(e, p.name, "record 1", *parts)
    p = write(tmp_path / "list.json", json.dumps([base]))
    for record, part in ((3, "out of range"), ("nope", "no record with id 'nope'")):
        with pytest.raises(GraphFormatError) as e:
            load_graph(p, record=record)
        expect(e, "list.json", part)
    with pytest.raises(GraphFormatError) as e:
        read_webqsp(write(tmp_path / "r.json", json.dumps([base, {"id": "x", "nodes": []}])))
    expect(e, "r.json", "record 1", "field 'edges'")


def test_file_level_errors(tmp_path):
    with pytest.raises(GraphFormatError) as e:
        load_graph(tmp_path / "missing.tsv")
    expect(e, "missing.tsv", "file not found")
    with pytest.raises(GraphFormatError) as e:
        load_graph(write(tmp_path / "empty.tsv", " \n\n"))
    expect(e, "empty.tsv", "empty")
    with pytest.raises(GraphFormatError) as e:
        load_graph(write(tmp_path / "latin.tsv", b"cup\ton\ttable\ncaf\xe9\ton\tcup\n"))
    expect(e, "latin.tsv", "line 2", "not UTF-8", "0xe9", "byte offset 16")
    with pytest.raises(GraphFormatError) as e:
        load_graph_from_bytes(b"\xff\xfe", "up.json")
    expect(e, "up.json", "byte offset 0")
    with pytest.raises(GraphFormatError) as e:
        load_graph_from_text("")
    expect(e, "pasted", "empty")


def test_size_limits(tmp_path):
    p = write(tmp_path / "g.tsv", "\n".join(f"n{i}\tr\tn{i + 1}" for i in range(10)))
    assert load_graph(p, max_edges=10, max_nodes=11).num_edges == 10
    with pytest.raises(GraphFormatError) as e:
        load_graph(p, max_edges=9)
    expect(e, "g.tsv", "line 10", "max_edges=9")
    with pytest.raises(GraphFormatError) as e:
        load_graph(p, max_nodes=10)
    expect(e, "g.tsv", "max_nodes=10")
    with pytest.raises(GraphFormatError) as e:
        load_graph(p, max_bytes=20)
    expect(e, "g.tsv", "max_bytes=20")
    with pytest.raises(GraphFormatError) as e:
        load_graph(csv_pair(tmp_path, NODES, EDGES), max_nodes=2)
    expect(e, "nodes.csv", "line 4", "max_nodes=2")
    with pytest.raises(GraphFormatError) as e:
        load_graph_from_bytes(b"a\tr\tb\n" * 5, "up.tsv", max_bytes=10)
    expect(e, "up.tsv", "max_bytes=10")


def test_unknown_format_and_networkx_format(tmp_path):
    p = write(tmp_path / "g.tsv", "a\tr\tb\n")
    with pytest.raises(ValueError, match="unknown format"):
        load_graph(p, format="graphml")
    with pytest.raises(ValueError, match="networkx"):
        load_graph(p, format="networkx")


# ------------------------------------------------------------------ datasets helpers
def test_question_and_split_rule():
    q = explagraphs_question("A.", "B.")
    assert q == ("Argument 1: A.\nArgument 2: B.\nQuestion: Do argument 1 and argument 2 support or counter each "
                 "other? Answer in one word in the form of 'support' or 'counter'.\n\nAnswer:")
    tr, va, te = seeded_split(10, seed=1)
    assert (len(tr), len(va), len(te)) == (6, 2, 2)
    assert tr + va + te == np.random.default_rng(1).permutation(10).tolist()
    assert seeded_split(10, seed=1) == (tr, va, te) and seeded_split(10, seed=2) != (tr, va, te)


# ------------------------------------------------------------------ real data
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared data not found at {SHARED}")


@needs_shared
def test_real_explagraphs_all_rows_parse_and_split():
    path = SHARED / "expla_graphs_train_dev.tsv"
    assert detect_format(path) == "explagraphs"
    rows = read_explagraphs(path)
    assert len(rows) == 2766
    assert {r["label"] for r in rows} == {"support", "counter"}
    graphs = [explagraphs_row_to_graph(r, file=str(path)) for r in rows]
    assert min(g.num_edges for g in graphs) >= 1
    assert all(t == t.lower().strip() for g in graphs[:200] for t in g.node_text + g.edge_text)
    assert graphs[0].triples()[0] == ("cannabis", "synonym of", "marijuana")
    assert rows[802]["arg1"].startswith('The "three strikes" law')     # CSV quoting as pandas reads it
    tr, va, te = seeded_split(len(rows), seed=42)
    assert (len(tr), len(va), len(te)) == (1659, 553, 554)
    assert sorted(tr + va + te) == list(range(len(rows)))


@needs_shared
def test_real_webqsp_records():
    path = SHARED / "webqsp_sample.json"
    assert detect_format(path) == "webqsp"
    records = read_webqsp(path)
    assert len(records) == 12
    for i, rec in enumerate(records):
        g = webqsp_record_to_graph(rec, file=str(path), record=i)
        extra = {x for h, _, t in rec["edges"] for x in (h, t)} - set(rec["nodes"])
        assert g.num_nodes == len(rec["nodes"]) + len(extra) == len(rec["nodes"]) + g.meta["nodes_from_edges"]
        assert g.node_text[:len(rec["nodes"])] == rec["nodes"]
        assert g.num_edges == len(rec["edges"]) and g.triples() == [tuple(e) for e in rec["edges"]]
        assert g.meta["question"] == rec["question"] and g.meta["answers"] == rec["answers"]
    assert load_graph(path, record="WebQTest-3").meta["id"] == "WebQTest-3"


def test_streamed_lines_across_chunk_boundaries():
    """Byte streams are decoded in chunks: a multi-byte character or a CRLF split by a chunk edge, a BOM,
    and a bad byte's offset and line all come out as from a whole-file decode."""
    from toporag_core.io.text import bytes_chunks, iter_byte_lines, iter_lines

    text = "\ufeffhead,relation,tail\r\ncafé,über,日本\r\n\"multi\nline\",r,😀\n"
    data = text.encode("utf-8")
    for size in (1, 2, 3, 5, 7, 64):
        assert "".join(iter_byte_lines(bytes_chunks(data, size), "f")) == text[1:]
    assert list(iter_lines("a\nb\r\nc")) == ["a\n", "b\r\n", "c"]
    bad = "a,b,c\nd,e,f\n".encode() + b"\xff,x,y\n"
    with pytest.raises(GraphFormatError, match=r"line 3.*0xff at byte offset 12"):
        list(iter_byte_lines(bytes_chunks(bad, 4), "f"))


def test_big_csv_same_from_path_bytes_and_text(tmp_path):
    """Over the 64 KiB head, a table is streamed from the file or the bytes: the graph is the same."""
    rows = "".join(f"node {i},rel {i % 7},node {(i * 13) % 5000} é\n" for i in range(6000))
    p = write(tmp_path / "big.csv", "head,relation,tail\n" + rows)
    a = load_graph(p)
    b = load_graph_from_bytes(p.read_bytes(), "big.csv")
    c = load_graph_from_text(p.read_text(encoding="utf-8"), name="big.csv")
    for g in (b, c):
        assert g.node_text == a.node_text and g.edge_text == a.edge_text
        assert np.array_equal(g.edge_index, a.edge_index)
    assert a.num_edges == 6000


def test_streamed_json_list_matches_json_loads():
    """``stream_json_list`` over pieces of any size gives json.loads' items, and its errors' line and column."""
    from toporag_core.io.json_stream import stream_json_list

    text = '[ ["a", "r", "b"],\n {"head": "ü", "relation": 1.5e3, "tail": [1, {"x": null}]}, "s\\"x", 123 ,\n true ]'
    for size in (1, 2, 3, 5, 8, 1000):
        pieces = [text[i:i + size] for i in range(0, len(text), size)]
        assert list(stream_json_list(pieces, "f")) == json.loads(text)
    assert stream_json_list(['{"a": 1}'], "f") is None
    for bad, where in (('[["a", "r", "b"],\n ["c" "r"]]', "line 2: invalid JSON at column 7: Expecting ','"),
                       ('[1,\n2, NaN]', "line 2: invalid JSON at column 4: NaN"), ('[1, 2', "line 1: invalid JSON"),
                       ('[1] x', "line 1: invalid JSON at column 5: Extra data")):
        for size in (1, 4, 100):
            with pytest.raises(GraphFormatError, match=where):
                list(stream_json_list([bad[i:i + size] for i in range(0, len(bad), size)], "f"))
