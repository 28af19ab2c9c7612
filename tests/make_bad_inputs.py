"""Generator of the bad-input corpus (``python tests/make_bad_inputs.py OUT`` writes it; the tests call
:func:`build`). Every case says its class: ``ok`` (loads, with a check on the result) or ``error`` (one
line naming the file, the line/record and the field, with the reason's key words).

Kept small (a few MB at most): the 60 MB and 195 MB files live in ``benchmarks/bench_input.py``.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

LONG = 100_000  # == toporag_core.graph.MAX_TEXT_CHARS (the test asserts they agree)


@dataclass
class Case:
    name: str
    path: Path
    kind: str                       # "ok" | "error"
    parts: tuple[str, ...] = ()     # error: substrings of the one-line message (file, line/record, field, reason)
    check: Callable | None = None   # ok: predicate on the loaded graph
    limits: dict = field(default_factory=dict)
    issue: str = ""                 # issue 13 item the case covers


def _w(folder: Path, name: str, content: str | bytes) -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8", newline="")
    return p


def build(folder: Path) -> list[Case]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    H = "head,relation,tail\n"
    c: list[Case] = []

    def err(name, content, *parts, issue="", **limits):
        c.append(Case(name, _w(folder, name, content), "error", (name, *parts), limits=limits, issue=issue))

    def ok(name, content, check, issue="", **limits):
        c.append(Case(name, _w(folder, name, content), "ok", check=check, limits=limits, issue=issue))

    # 1. strict CSV quoting
    err("quote_trailing.csv", H + 'cup,on,table\n"x"y,on,table\n', "line 3", "field 'head'", "after the closing quote",
        issue="1")
    err("quote_html.csv", H + 'cup,""><img src=x>",table\n', "line 2", "field 'relation'", "after the closing quote",
        issue="1")
    err("quote_trailing.tsv", "head\trelation\ttail\ncup\ton\t\"t\"able\n", "line 2", "field 'tail'",
        "after the closing quote", issue="1")
    ok("quote_inside_unquoted.csv", H + 'tv,has,5" screen\n', lambda g: '5" screen' in g.node_text, issue="1")
    ok("quote_proper.csv", H + '"cup, red","on ""top"" of","ta\nble"\n',
       lambda g: g.node_text == ["cup, red", "ta\nble"] and g.edge_text == ['on "top" of'], issue="1")
    # 2. headers
    err("header_misspelt.csv", "head,relaton,tail\ncup,on,table\n", "line 1", "field 'relaton'",
        "did you mean 'relation'", issue="2")
    err("header_missing_role.csv", "head,tail,foo\ncup,table,x\n", "line 1", "field 'relation'", "no relation column",
        issue="2")
    err("pair_misspelt/nodes.csv", "node_id,node_atr\n0,cup\n", "line 1", "field 'node_attr'",
        "did you mean 'node_attr' for 'node_atr'", issue="2")
    _w(folder, "pair_misspelt/edges.csv", "src,edge_attr,dst\n")
    ok("header_unknown.csv", "foo,bar,baz\ncup,on,table\n",
       lambda g: g.num_edges == 2 and any("no header recognised" in w for w in g.meta["warnings"]), issue="2")
    # 3. JSON non-finite numbers
    err("nan.json", '[["a", "r", "b"],\n ["c", NaN, "d"]]', "line 2", "column 8", "NaN", issue="3")
    err("inf.json", '{"id": "q", "nodes": ["a"],\n"edges": [],\n"score": -Infinity}', "line 3", "-Infinity", issue="3")
    ok("nan_in_string.json", '[["NaN", "is", "Infinity"]]', lambda g: g.node_text == ["NaN", "Infinity"], issue="3")
    # 4. one rule for 0-node graphs
    err("pair_headers_only/nodes.csv", "node_id,node_attr\n", "no nodes", issue="4")
    _w(folder, "pair_headers_only/edges.csv", "src,edge_attr,dst\n")
    err("webqsp_empty.json", json.dumps({"id": "q", "nodes": [], "edges": []}), "no nodes", issue="4")
    err("triples_header_only.csv", H, "no triples", issue="4")
    err("triples_empty_list.json", "[]", "non-empty", issue="4")
    ok("webqsp_nodes_no_edges.json", json.dumps({"id": "q", "nodes": ["a", "b"], "edges": []}),
       lambda g: g.num_nodes == 2 and g.num_edges == 0, issue="4")
    # 6. lone surrogates
    err("surrogate.json", '[["a", "r", "\\ud800"]]', "record 0", "field 'tail'", "lone surrogate U+D800", issue="6")
    err("surrogate_webqsp.json", '{"nodes": ["\\udfff"], "edges": []}', "field 'nodes[0]'", "lone surrogate",
        issue="6")
    ok("surrogate_pair.json", '[["\\ud83d\\ude00", "r", "b"]]', lambda g: g.node_text[0] == "\U0001F600", issue="6")
    # 8. one text-length limit
    err("long.csv", H + "cup,on," + "t" * (LONG + 1) + "\n", "line 2", "field 'tail'", "max_text_chars=100000",
        issue="8")
    err("long.json", json.dumps([["cup", "on", "t" * (LONG + 1)]]), "record 0", "field 'tail'",
        "max_text_chars=100000", issue="8")
    err("long.txt", "(cup; on; " + "t" * (LONG + 1) + ")", "field 'graph'", "max_text_chars=100000", issue="8")
    ok("long_ok.csv", H + "cup,on," + "t" * LONG + "\n", lambda g: len(g.node_text[1]) == LONG, issue="8")
    ok("long_ok.json", json.dumps([["cup", "on", "t" * LONG]]), lambda g: len(g.node_text[1]) == LONG, issue="8")
    # 9. unterminated quote where it opens; symlinks
    err("unterminated.csv", H + 'cup,on,table\nplate,"on\nlamp,on,table\nx,y,z\n', "line 3", "field 'relation'",
        "unterminated quote", issue="9")
    err("unterminated_long.csv", H + 'a,"' + "x\n" * (LONG // 2 + 10), "line 2", "field 'relation'",
        "closing quote missing", issue="9")
    loop = folder / "loop.csv"
    if not loop.is_symlink():
        os.symlink(loop.name, loop)
    c.append(Case("loop.csv", loop, "error", ("loop.csv", "symbolic link loop"), issue="9"))
    broken = folder / "broken.csv"
    if not broken.is_symlink():
        os.symlink("does-not-exist.csv", broken)
    c.append(Case("broken.csv", broken, "error", ("broken.csv", "broken symbolic link"), issue="9"))
    # 11. control characters never reach the terminal raw
    err("ansi/nodes.csv", "node_id,node_attr\n\x1b[31mred,cup\n\x1b[31mred,plate\n", "line 3", "field 'node_id'",
        "\\x1b[31mred", issue="11")
    _w(folder, "ansi/edges.csv", "src,edge_attr,dst\n")
    # 13. limits checked while streaming (small limits here; 60/195 MB in the benchmark)
    err("many_edges.csv", H + "".join(f"n{i % 50},r,n{(i * 7) % 50}\n" for i in range(20_000)), "line 1002",
        "max_edges=1000", issue="13", max_edges=1000)
    err("many_nodes.csv", H + "".join(f"n{i},r,m{i}\n" for i in range(20_000)), "line 52", "max_nodes=100",
        issue="13", max_nodes=100)
    err("many_edges.json", json.dumps([[f"n{i % 50}", "r", f"n{i % 7}"] for i in range(20_000)]), "record 1000",
        "max_edges=1000", issue="13", max_edges=1000)
    # other bad bytes
    err("nul.csv", H + "cup,o\x00n,table\n", "line 2", "field 'relation'", "NUL", issue="-")
    err("latin1.csv", (H + "caf\xe9,on,table\n").encode("latin-1"), "line 2", "not UTF-8", "0xe9", issue="-")
    err("blank.csv", "  \n\n", "empty", issue="-")
    err("fields.csv", H + "cup,on\n", "line 2", "expected 3 fields", issue="-")
    err("json_syntax.json", '[["a", "r", "b"],\n ["c" "r", "d"]]', "line 2", "column", issue="-")
    return c


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bad_inputs")
    for case in build(out):
        print(f"{case.kind:5s}  issue {case.issue:2s}  {case.path}")
