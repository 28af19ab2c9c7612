"""Issue 13: bad input and big input. The bad-input corpus (``tests/make_bad_inputs.py``) runs through the
loader and the CLI; every case asserts its class (correct result, or one line naming file, line/record and
field) within a time and memory bound. Then the CLI options, the tie warning, the self-healing cache,
chunked resumable embedding with progress, and the always-valid ``--json`` property."""
from __future__ import annotations

import json
import sqlite3
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.make_bad_inputs import LONG, build
from toporag_core.cli import main
from toporag_core.embed import CachedEncoder, HashingEncoder, format_progress
from toporag_core.graph import MAX_TEXT_CHARS, GraphFormatError, TextualGraph, safe_text
from toporag_core.io import load_graph, load_graph_from_bytes

CORPUS = build  # the generator the cases come from
TIME_BOUND_S = 5.0
MEMORY_BOUND_MB = 40  # Python-level peak (tracemalloc) of one load: the largest case file is ~0.5 MB


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return {c.name: c for c in build(tmp_path_factory.mktemp("bad"))}


def _names():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        return [c.name for c in build(Path(d))]


def test_limit_constant_agrees():
    assert LONG == MAX_TEXT_CHARS


@pytest.mark.parametrize("name", _names())
def test_corpus_case(corpus, name):
    case = corpus[name]
    tracemalloc.start()
    t = time.perf_counter()
    try:
        if case.kind == "ok":
            g = load_graph(case.path, **case.limits)
            assert case.check(g), f"{name}: wrong result {g}"
        else:
            with pytest.raises(GraphFormatError) as e:
                load_graph(case.path, **case.limits)
            msg = str(e.value)
            assert "\n" not in msg and "\x1b" not in msg
            for p in case.parts:
                assert p in msg, f"{name}: {p!r} not in {msg!r}"
    finally:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    assert time.perf_counter() - t < TIME_BOUND_S
    assert peak < MEMORY_BOUND_MB, f"{name}: peak {peak:.1f} MB"


@pytest.mark.parametrize("name", ["quote_html.csv", "header_misspelt.csv", "nan.json", "surrogate.json", "long.csv",
                                  "unterminated.csv", "many_edges.csv"])
def test_corpus_same_from_upload_bytes(corpus, name):
    """The app's upload path (bytes) gives the same class and message as the file path."""
    case = corpus[name]
    with pytest.raises(GraphFormatError) as e:
        load_graph_from_bytes(case.path.read_bytes(), case.name, **case.limits)
    for p in case.parts:
        assert p in str(e.value)


@pytest.mark.parametrize("command", ["lift", "retrieve"])
@pytest.mark.parametrize("name", ["quote_html.csv", "header_misspelt.csv", "nan.json", "surrogate.json",
                                  "pair_headers_only/nodes.csv", "webqsp_empty.json", "unterminated.csv", "loop.csv",
                                  "ansi/nodes.csv"])
def test_corpus_through_cli(corpus, capsys, command, name):
    case = corpus[name]
    extra = ["-q", "cup", "--encoder", "hashing"] if command == "retrieve" else []
    code = main([command, str(case.path), *extra, "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "\x1b" not in err, err
    for p in case.parts:
        assert p in lines[0]


def test_bare_quote_kept_verbatim_and_no_silent_change(corpus):
    g = load_graph(corpus["quote_inside_unquoted.csv"].path)
    assert g.node_text == ["tv", '5" screen']


def test_lone_surrogate_never_reaches_the_cache(tmp_path):
    with pytest.raises(GraphFormatError, match="node_text.*lone surrogate"):
        TextualGraph(["a", "\ud800"], [[0], [1]], ["r"])


# ----------------------------------------------------------------------------------------- 5. ties
def _complete_graph(n: int) -> TextualGraph:
    a, b = np.triu_indices(n, 1)
    return TextualGraph([f"node {i}" for i in range(n)], [a, b], ["linked to"] * a.size, name="K")


def test_g_retriever_tie_warning():
    from toporag_core.retrieval import EmbeddedComplex, retrieve

    enc = HashingEncoder()
    ecx = EmbeddedComplex.from_graph(_complete_graph(40), enc)
    sub = retrieve(ecx, "node 3", "g-retriever", k0=3, k1=3)
    n, m, _ = sub.counts
    assert n + m > 5 * 6, "parity with PyG: ties bring in the whole graph"
    assert len(sub.warnings) == 1 and "ties" in sub.warnings[0] and f"{m:,} edges" in sub.warnings[0]
    assert sub.to_dict()["warnings"] == sub.warnings
    assert retrieve(ecx, "node 3", "toporag", k0=3, k1=3, k2=3).warnings == []
    g = TextualGraph.from_triples([("cup", "on", "table"), ("plate", "left of", "cup"), ("lamp", "near", "plate")])
    assert retrieve(EmbeddedComplex.from_graph(g, enc), "cup", "g-retriever", k0=1, k1=1).warnings == []


def test_tie_warning_in_cli_json(tmp_path, capsys):
    p = tmp_path / "k.csv"
    g = _complete_graph(30)
    p.write_text("head,relation,tail\n" + "".join(f"{h},{r},{t}\n" for h, r, t in g.triples()))
    code = main(["retrieve", str(p), "-q", "node 3", "--method", "g-retriever", "--k", "3", "--encoder", "hashing",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and "warning: ties" in err and json.loads(out)["warnings"]


# ------------------------------------------------------------------------------------ 7. empty graph
def test_retrieve_empty_graph_names_file(corpus, capsys):
    code = main(["retrieve", str(corpus["webqsp_empty.json"].path), "-q", "x", "--encoder", "hashing"])
    err = capsys.readouterr().err
    assert code == 2 and "webqsp_empty.json" in err and "no nodes" in err


# ------------------------------------------------------------------------------------ 10. options
SCENE = "head,relation,tail\ncup,left of,plate\nplate,on,table\ntable,under,cup\n"


@pytest.fixture
def scene(tmp_path):
    p = tmp_path / "scene.csv"
    p.write_text(SCENE)
    return p


@pytest.mark.parametrize("argv, option", [
    (["--k", "-1"], "--k"), (["--method", "topk-triples", "--k", "-3"], "--k"), (["--c2", "nan"], "--c2"),
    (["--method", "g-retriever", "--edge-cost", "nan"], "--edge-cost"), (["--encoder", "hashing-0"], "--encoder"),
    (["--seed", "-1"], "--seed"), (["--k0", "inf"], "--k0"), (["--c2", "1e999"], "--c2"),
    (["--max-cycle-len", "-1"], "--max-cycle-len"), (["--k", "2.5"], "--k"),
    (["--method", "proximity", "--target", "cup", "--k", "0"], "--k"),
])
def test_bad_options_one_line_naming_option(scene, capsys, argv, option):
    with pytest.raises(SystemExit) as e:
        code = main(["retrieve", str(scene), "-q", "cup", "--encoder", "hashing", *argv, "--json"])
        raise SystemExit(code)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"argument {option}" in lines[0], err


def test_seed_of_lift_validated(scene, capsys):
    with pytest.raises(SystemExit):
        main(["lift", str(scene), "--seed", "-1"])
    assert "argument --seed: must be >= 0" in capsys.readouterr().err


def _strict_json(text: str):
    def bad(name):
        raise ValueError(name)
    return json.loads(text, parse_constant=bad)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["toporag", "g-retriever", "shortest-path", "topk-triples"]),
       k=st.one_of(st.none(), st.integers(-3, 12)),
       c2=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["nan", "-inf", "x"])),
       cost=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)))
def test_json_output_always_valid(scene, capsys, method, k, c2, cost):
    """Property: whatever the options, ``--json`` prints strict JSON (no NaN/Infinity) or fails with one line."""
    argv = ["retrieve", str(scene), "-q", "cup on table", "--encoder", "hashing", "--method", method, "--json"]
    if k is not None:
        argv += ["--k", str(k)]
    if c2 is not None and method == "toporag":
        argv += ["--c2", str(c2)]
    if cost is not None and method in ("toporag", "g-retriever"):
        argv += ["--edge-cost", str(cost)]
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    if code == 0:
        d = _strict_json(out)
        assert isinstance(d, dict) and "counts" in d
    else:
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------ 11. ANSI
def test_ansi_neutralised_in_terminal_output(tmp_path, capsys):
    p = tmp_path / "a.csv"
    p.write_text("head,relation,tail\n\x1b[2Jcup\x1b[0m,on,table\n")
    code = main(["retrieve", str(p), "-q", "cup", "--encoder", "hashing", "--k", "2"])
    out, _ = capsys.readouterr()
    assert code == 0 and "\x1b" not in out and "\\x1b[2Jcup" in out
    code = main(["retrieve", str(p), "-q", "cup", "--encoder", "hashing", "--json"])
    out, _ = capsys.readouterr()
    assert "\x1b" not in out and "\x1b[2Jcup\x1b[0m" in json.loads(out)["nodes"]  # JSON keeps it, escaped
    assert safe_text("a\x1b[31mb\nc", keep_newlines=False) == "a\\x1b[31mb\\nc"


# ------------------------------------------------------------------------------------ 12. the cache heals
def _corrupt_middle(path):
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(np.random.default_rng(0).bytes(max(4096, size // 4)))


def test_cache_corruption_detected_on_open(tmp_path, capsys):
    enc = CachedEncoder(HashingEncoder(64), tmp_path)
    texts = [f"text {i} " * 20 for i in range(3000)]
    ref = enc.encode(texts)
    _corrupt_middle(enc.path)
    CachedEncoder.checked_paths.discard(str(enc.path))  # a new process
    enc2 = CachedEncoder(HashingEncoder(64), tmp_path)
    err = capsys.readouterr().err
    assert enc2.notices and "damaged" in enc2.notices[0] and err.count("damaged") == 1 and str(enc2.path) in err
    assert enc2.path.with_suffix(".corrupt").exists()
    np.testing.assert_allclose(enc2.encode(texts[:10]), ref[:10])
    assert enc2.encoded_count == 10
    with sqlite3.connect(enc2.path) as con:
        assert con.execute("PRAGMA quick_check").fetchone()[0] == "ok"


def test_cache_corruption_at_lookup_heals(tmp_path, capsys):
    enc = CachedEncoder(HashingEncoder(64), tmp_path)
    enc.encode([f"text {i} " * 20 for i in range(3000)])
    _corrupt_middle(enc.path)  # after the open-time check (same process)
    enc2 = CachedEncoder(HashingEncoder(64), tmp_path)
    out = enc2.encode([f"text {i} " * 20 for i in range(3000)] + ["new"])
    assert out.shape == (3001, 64) and enc2.notices and "damaged" in capsys.readouterr().err


def test_cache_not_a_database(tmp_path):
    (tmp_path / "emb-hashing-8-8.sqlite").write_bytes(b"garbage" * 1000)
    enc = CachedEncoder(HashingEncoder(8), tmp_path)
    assert enc.notices and enc.encode(["a"]).shape == (1, 8)


# ------------------------------------------------------------------------------------ 14. chunks, resume, progress
class _Dies(HashingEncoder):
    """Encodes ``ok_calls`` chunks, then 'gets killed'."""

    def __init__(self, ok_calls):
        super().__init__(32)
        self.calls, self.ok_calls = 0, ok_calls

    def encode(self, texts, show_progress=False):
        self.calls += 1
        if self.calls > self.ok_calls:
            raise KeyboardInterrupt
        return super().encode(texts)


def test_chunked_commits_resume_and_progress(tmp_path):
    texts = [f"item {i}" for i in range(1000)]
    seen = []
    enc = CachedEncoder(_Dies(ok_calls=5), tmp_path, chunk_size=100, on_progress=lambda *a: seen.append(a))
    with pytest.raises(KeyboardInterrupt):
        enc.encode(texts)
    assert [s[0] for s in seen] == [100, 200, 300, 400, 500] and all(s[1] == 1000 and s[2] >= 0 for s in seen)
    resumed = CachedEncoder(HashingEncoder(32), tmp_path, chunk_size=100)
    out = resumed.encode(texts)
    assert resumed.encoded_count == 500  # the first 500 were committed chunk by chunk
    np.testing.assert_allclose(out, HashingEncoder(32).encode(texts), atol=1e-6)


def test_progress_line_and_app_callback():
    assert format_progress(4096, 100_000, 720) == "embedding 4,096/100,000 texts (4%), about 12 min left"
    from toporag_core.studio.state import progress_callback

    got = []
    progress_callback(lambda f, t: got.append((f, t)))(50, 100, 30.0)
    assert got == [(0.5, "embedding 50/100 texts (50%), about 30 s left")]


def test_state_shows_load_warnings(corpus):
    from toporag_core.studio.state import WARNINGS, try_load

    state = {}
    assert try_load(state, lambda: load_graph(corpus["header_unknown.csv"].path), "f") is None
    assert "no header recognised" in state["load_message"] and state[WARNINGS]


