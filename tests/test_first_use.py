"""First use of a retrieval method in the app: the texts already embedded by the lab are reused, and
what is new is encoded with a progress bar in the page (never behind a bare spinner)."""
from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from toporag_core.embed import CachedEncoder, HashingEncoder  # noqa: E402
from toporag_core.cells.lift import lift  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.studio import resources, topo_view  # noqa: E402


class Counting:
    """An encoder that records every batch of texts it is asked to encode."""

    def __init__(self) -> None:
        self.inner, self.calls = HashingEncoder(), []
        self.dim, self.name = self.inner.dim, "counting"

    def encode(self, texts, show_progress=False):
        self.calls.append(list(texts))
        return self.inner.encode(texts)


@pytest.fixture
def app_encoder(monkeypatch, tmp_path):
    """The app's encoder for choice "counting": a CachedEncoder over :class:`Counting`, fresh cache."""
    enc = CachedEncoder(Counting(), cache_dir=tmp_path)
    monkeypatch.setattr(resources, "app_encoder", lambda choice: enc)
    monkeypatch.setattr(topo_view, "app_encoder", lambda choice: enc)
    bars: list[list] = []

    def fake_bar(what="every cell"):
        calls: list = []
        bars.append(calls)

        class Bar:
            def empty(self):
                calls.append("emptied")
        return Bar(), lambda done, total, eta: calls.append((done, total))

    monkeypatch.setattr(resources, "_progress_bar", fake_bar)
    enc.bars = bars
    return enc


def test_uncached_counts_distinct_texts_missing_from_memory_and_disk(tmp_path):
    enc = CachedEncoder(HashingEncoder(), cache_dir=tmp_path)
    assert enc.uncached(["a", "b", "a"]) == 2
    enc.encode(["a"])
    assert enc.uncached(["a", "b", "a"]) == 1
    fresh = CachedEncoder(HashingEncoder(), cache_dir=tmp_path)  # a new process: "a" is on disk
    assert fresh.uncached(["a", "b"]) == 1 and fresh.encoded_count == 0


def test_node_texts_new_to_the_encoder_are_encoded_with_a_progress_bar(app_encoder):
    g = samples.load_sample("kg")
    texts = list(dict.fromkeys(g.node_text))
    resources.prefetch_texts(g.node_text, "counting", "the node texts")
    (bar,) = app_encoder.bars
    assert bar[-2] == (len(texts), len(texts)) and bar[-1] == "emptied"  # done, then the bar is removed
    assert sorted(t for call in app_encoder.encoder.calls for t in call) == sorted(texts)
    resources.prefetch_texts(g.node_text, "counting", "the node texts")
    assert len(app_encoder.bars) == 1  # all cached: no bar drawn, nothing encoded
    assert app_encoder.encoded_count == len(texts)


def test_a_node_method_after_the_labs_embedding_encodes_nothing_and_draws_no_bar(app_encoder):
    """The lab embeds every cell (node texts included) once; the text index of the node methods then
    reads the node texts' vectors from the same encoder cache."""
    g = samples.load_sample("kg")
    resources.embed_with_progress(lift(g), app_encoder)
    encoded = app_encoder.encoded_count
    app_encoder.encoder.calls.clear()
    index = topo_view.get_node_index("first-use-kg", "text", "counting", g)
    assert index.emb.shape[0] == g.num_nodes
    assert app_encoder.encoder.calls == [] and app_encoder.encoded_count == encoded
    assert app_encoder.bars == []
