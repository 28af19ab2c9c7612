"""``toporag docgraph`` and ``toporag hybrid`` options are made from their config dataclasses: every
generated option's parsed default is the field's default (so the two cannot drift), and what the
options parse builds the same config the library uses by default."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

from toporag_core.cli import build_parser
from toporag_core.commands import docgraph as dg_cmd
from toporag_core.commands import hybrid as hy_cmd
from toporag_core.docgraph import BuildConfig, FGWConfig, TraversalConfig
from toporag_core.docgraph.corpus_search import SearchConfig as CorpusSearchConfig
from toporag_core.docgraph.index import IndexConfig
from toporag_core.datagen.hybrid import GeneratorConfig
from toporag_core.hybrid import RouterConfig, SearchConfig


def subparser(command: str, sub: str) -> argparse.ArgumentParser:
    parser = build_parser(command)
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    mid = next(a for a in top.choices[command]._actions if isinstance(a, argparse._SubParsersAction))
    return mid.choices[sub]


def field_default(cls: type, name: str):
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


# (command, sub-command, options, the dataclass each option's field belongs to, parsed defaults set otherwise)
CASES = [
    *[("docgraph", sub, dg_cmd.traversal_options, (TraversalConfig, FGWConfig), {"fuse_embedding": None})
      for sub in ("retrieve", "eval", "cluster")],
    *[("docgraph", sub, dg_cmd.theta_options, (BuildConfig,), {}) for sub in ("build", "retrieve", "eval", "cluster")],
    *[("docgraph", sub, dg_cmd.search_options, (CorpusSearchConfig,), {}) for sub in ("retrieve", "eval")],
    ("docgraph", "index", dg_cmd.index_options, (IndexConfig,), {}),
    ("hybrid", "route", hy_cmd.router_options, (RouterConfig,), {}),
    ("hybrid", "search", hy_cmd.search_options, (SearchConfig,), {}),
    ("hybrid", "eval", lambda: hy_cmd.search_options(("k",)), (SearchConfig,), {}),
    ("hybrid", "generate", hy_cmd.generator_options, (GeneratorConfig,), {}),
]


@pytest.mark.parametrize("command, sub, options, classes, overridden", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2].__name__}" for c in CASES])
def test_a_dataclass_default_is_the_parsers_default(command, sub, options, classes, overridden):
    parser = subparser(command, sub)
    by_dest = {a.dest: a for a in parser._actions}
    opts = options()
    assert opts
    for o in opts:
        cls = next(c for c in classes if o.dest in {f.name for f in dataclasses.fields(c)})
        want = field_default(cls, o.dest)
        assert o.default == want
        action = by_dest[o.dest]
        assert o.flag in action.option_strings
        assert action.default == overridden.get(o.dest, want), (sub, o.flag)
        if isinstance(want, bool):
            assert action.const is (not want)  # --x sets a False default to True, --no-x a True one to False
        elif o.dest not in overridden:
            assert f"(default {want})" in action.help


def test_a_changed_dataclass_default_changes_the_option(monkeypatch):
    """The parser reads the default from the field, not a copy of it."""
    fields = {f.name: f for f in dataclasses.fields(RouterConfig)}
    monkeypatch.setattr(fields["tau"], "default", 0.25)
    action = next(a for a in subparser("hybrid", "route")._actions if a.dest == "tau")
    assert action.default == 0.25


def test_the_parsed_defaults_build_the_library_defaults():
    p = build_parser("docgraph")
    args = p.parse_args(["docgraph", "retrieve", "src", "-q", "q"])
    assert dg_cmd._config(args) == TraversalConfig()
    search = dg_cmd._search_config(args)
    assert search == CorpusSearchConfig()
    args = p.parse_args(["docgraph", "retrieve", "src", "--no-semantic-graft", "--no-mention-graft",
                         "--feature-weight", "0.2", "--theta", "0.5", "--seed-candidates", "2"])
    cfg = dg_cmd._config(args)
    assert (cfg.graft_semantic, cfg.graft_mentions, cfg.fgw.feature_weight) == (False, False, 0.2)
    assert (dg_cmd._search_config(args).seed, dg_cmd._search_config(args).theta) == (2, 0.5)
    args = p.parse_args(["docgraph", "index", "corpus", "--out", "o"])
    assert IndexConfig(**dg_cmd._values(args, dg_cmd.index_options())) == IndexConfig()
    args = p.parse_args(["docgraph", "index", "corpus", "--out", "o", "--sentences"])
    assert IndexConfig(**dg_cmd._values(args, dg_cmd.index_options())).sentence_nodes is True
    h = build_parser("hybrid")
    args = h.parse_args(["hybrid", "search", "idx", "-q", "q", "--score", "maxsim"])
    assert SearchConfig(**hy_cmd._values(args, hy_cmd.search_options())) == SearchConfig(table_score="maxsim")
    args = h.parse_args(["hybrid", "route", "f.md"])
    assert hy_cmd._router(args) == RouterConfig()
    args = h.parse_args(["hybrid", "generate", "--out", "o"])
    assert GeneratorConfig(**hy_cmd._values(args, hy_cmd.generator_options())) == GeneratorConfig()
