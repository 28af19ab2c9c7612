"""Encoders are registered in one call and then offered everywhere (README, "What a newcomer touches").

* A toy graph encoder (a mean of the projected 0-cells) registered with ``nn.register_encoder`` is among
  ``toporag train --encoder``'s choices, a :class:`TopoRAGConfig` naming it validates and builds it; one
  without per-cell states is refused by ``graph_path="cells"``.
* A toy text encoder registered with ``embed.register_text_encoder`` is what ``get_encoder("toy")``,
  ``$TOPORAG_ENCODER=toy`` and ``toporag retrieve --encoder toy`` use.

Fixtures unregister both, so no other test sees them.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from toporag_core.cli import build_parser, main
from toporag_core.embed import (TEXT_ENCODERS, CachedEncoder, HashingEncoder, check_encoder_spec, get_encoder,
                                register_text_encoder, unregister_text_encoder)
from toporag_core.graph import TextualGraph
from toporag_core.model import TopoRAGConfig, TopoRAGModel
from toporag_core.model.tiny import tiny_llm, tiny_tokenizer
from toporag_core.nn import (ENCODERS, CellBatch, CWNConfig, build_encoder, collate, register_encoder,
                             subcomplex_tensors, unregister_encoder)
from toporag_core.retrieval import EmbeddedComplex, retrieve_subcomplex

SCENE = "head,relation,tail\ncup,left of,plate\nplate,on,table\ntable,under,cup\nlamp,on,table\n"


class ToyGraphEncoder(nn.Module):
    """``forward(batch) -> (B, hidden)``: the per-graph sum of ``Linear(x0)``."""

    def __init__(self, cfg: CWNConfig) -> None:
        super().__init__()
        self.proj = nn.Linear(cfg.in_dim, cfg.hidden)
        self.out_dim = cfg.hidden

    def forward(self, batch: CellBatch) -> torch.Tensor:
        h = self.proj(batch.x0)
        out = torch.zeros(batch.num_graphs, self.out_dim, dtype=h.dtype)
        return out.index_add(0, batch.batch0, h)


class ToyTextEncoder(HashingEncoder):
    """The hashing encoder under another name (so its vectors are known)."""

    def __init__(self) -> None:
        super().__init__(16)
        self.name = "toy-text"


@pytest.fixture
def toy_graph_encoder():
    spec = register_encoder(name="toy", build=ToyGraphEncoder)
    yield spec
    unregister_encoder("toy")


@pytest.fixture
def toy_text_encoder():
    spec = register_text_encoder(name="toy", build=lambda s: ToyTextEncoder())
    yield spec
    unregister_text_encoder("toy")


def test_builtin_graph_encoders_are_registered():
    assert list(ENCODERS)[:2] == ["cwn", "gcn"]
    assert ENCODERS["cwn"].cell_states and not ENCODERS["gcn"].cell_states
    with pytest.raises(ValueError, match="TopoRAGConfig.encoder: unknown 'toy'"):
        TopoRAGConfig(encoder="toy")


def test_a_registered_graph_encoder_is_offered_validated_and_built(toy_graph_encoder, capsys):
    assert build_parser().parse_args(["train", "--encoder", "toy"]).encoder == "toy"
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--encoder {cwn,gcn,toy}" in capsys.readouterr().out
    unregister_encoder("toy")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--encoder", "toy"])
    assert "invalid choice: 'toy'" in capsys.readouterr().err
    register_encoder(toy_graph_encoder)

    cfg = TopoRAGConfig(encoder="toy", cwn=CWNConfig(in_dim=16, hidden=4), projector_hidden=8, num_graph_tokens=2)
    assert TopoRAGConfig.from_dict(cfg.to_dict()).encoder == "toy"
    module = build_encoder(cfg.encoder, cfg.cwn)
    assert isinstance(module, ToyGraphEncoder) and module.out_dim == 4

    tok = tiny_tokenizer()
    model = TopoRAGModel(cfg, tiny_llm(len(tok)), tok)
    assert isinstance(model.encoder, ToyGraphEncoder)
    ecx = EmbeddedComplex.from_graph(TextualGraph.from_triples([("cup", "on", "table"), ("table", "near", "lamp")]),
                                     HashingEncoder(16))
    cells = collate([subcomplex_tensors(retrieve_subcomplex(ecx, "cup on table"), ecx.emb)])
    assert model.graph_tokens(cells).shape == (1, 2, model.llm_hidden)
    with pytest.raises(ValueError, match="needs per-cell states: encoder 'cwn', got 'toy'"):
        TopoRAGConfig(encoder="toy", graph_path="cells", num_graph_tokens=4)


def test_a_graph_encoder_with_cell_states_may_take_the_cells_path(toy_graph_encoder):
    register_encoder(name="toy", build=ToyGraphEncoder, cell_states=True)  # replaces the fixture's
    cfg = TopoRAGConfig(encoder="toy", graph_path="cells", num_graph_tokens=4)
    assert cfg.encoder == "toy"


def test_an_unregistered_graph_encoder_is_gone():
    register_encoder(name="toy", build=ToyGraphEncoder)
    unregister_encoder("toy")
    assert "toy" not in ENCODERS
    with pytest.raises(ValueError, match="unknown encoder 'toy'"):
        build_encoder("toy")


def test_builtin_text_encoders_are_registered():
    assert {"default", "sentence", "minilm", "hashing", "onnx", "onnx-int8", "minilm-numpy"} <= set(TEXT_ENCODERS)
    assert get_encoder("hashing", cached=False).name == "hashing-256"
    assert get_encoder("hashing-32", cached=False).dim == 32
    with pytest.raises(ValueError, match="whole dimension"):
        check_encoder_spec("hashing-0")


def test_a_registered_text_encoder_is_offered(toy_text_encoder, tmp_path, monkeypatch, capsys):
    assert isinstance(get_encoder("toy", cached=False), ToyTextEncoder)
    cached = get_encoder("toy", cache_dir=tmp_path)
    assert isinstance(cached, CachedEncoder) and isinstance(cached.encoder, ToyTextEncoder)
    vec = cached.encode(["red cup"])
    assert np.allclose(vec, HashingEncoder(16).encode(["red cup"]))

    monkeypatch.setenv("TOPORAG_ENCODER", "toy")
    assert isinstance(get_encoder(cached=False), ToyTextEncoder)

    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path / "cache"))
    scene = tmp_path / "scene.csv"
    scene.write_text(SCENE)
    code = main(["retrieve", str(scene), "-q", "is the cup left of the plate", "--encoder", "toy", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["nodes"]
    assert list((tmp_path / "cache").glob("emb-toy-text-16.sqlite"))


def test_an_unregistered_text_encoder_is_gone():
    register_text_encoder(name="toy", build=lambda s: ToyTextEncoder())
    unregister_text_encoder("toy")
    assert "toy" not in TEXT_ENCODERS


@pytest.mark.parametrize("command", [["retrieve"], ["kg", "retrieve"], ["hybrid", "index"], ["docgraph", "build"]])
def test_a_registered_text_encoder_is_named_in_every_encoder_help(toy_text_encoder, command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    assert "toy" in " ".join(capsys.readouterr().out.split())
