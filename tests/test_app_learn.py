"""The Learn tabs "Hodge Laplacians and holes" and "Messages and graph tokens" in AppTest: the numbers are the
library's and the CLI's, gluing removes one harmonic cochain per 2-cell, and the message tab shows what the
checkpoint's own encoder computed."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from toporag_core import lift
from toporag_core.io import samples

from .conftest import ROOT

HODGE_TAB, MSG_TAB = "4. Hodge Laplacians and holes", "5. Messages and graph tokens"


def learn(tab: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages/3_Learn.py"), default_timeout=300)
    at.session_state["learn_tab"] = tab
    return at.run()


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def cli_hodge(capsys, tmp_path, tree: str) -> list[int]:
    from toporag_core.cli import main

    assert main(["lift", str(ROOT / "assets/samples/scene_breakfast.csv"), "--tree", tree, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["hodge"]["harmonic"]


def test_hodge_tab_numbers_are_the_clis_and_gluing_drops_h1_by_one(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    at = learn(HODGE_TAB)
    assert not at.exception
    got = metrics(at)
    want = cli_hodge(capsys, tmp_path, "bfs")
    assert [int(got[f"dim ker L{k}"]) for k in range(3)] == want == [1, 0, 0]
    cx = lift(samples.load_sample("scene"))
    glue_key = [s.key for s in at.slider if s.key and s.key.startswith("learn_glue_")][0]
    seen = []
    for j in (0, 1, 2, 5, cx.num_cells2):
        at.slider(key=glue_key).set_value(j).run()
        assert not at.exception
        seen.append(int(metrics(at)["harmonic 1-cochains (h1)"]))
    assert seen == [cx.betti1 - j for j in (0, 1, 2, 5, cx.num_cells2)]  # one fewer per glued 2-cell
    # the ring lifting of the same sample: the page's numbers are the CLI's, with cavities
    rings = cli_hodge(capsys, tmp_path, "rings")
    text = " ".join(m.value for m in at.markdown)
    assert f"dim ker L0, L1, L2 = **{tuple(rings)}**" in text and rings[2] > 0
    assert "pcst_fast" not in text and "cell_prizes" not in text  # plain wording
    table = next(d.value for d in at.dataframe if "dim ker Lk (eigenvalues)" in d.value.columns)
    assert table["dim ker Lk (eigenvalues)"].tolist() == want and table["agree"].all()


@pytest.mark.slow
def test_messages_tab_reads_the_checkpoints_encoder(monkeypatch):
    """Needs the real sentence encoder (the checkpoint's cell embeddings are MiniLM's)."""
    from toporag_core.nn import collate, subcomplex_tensors
    from toporag_core.retrieval import EmbeddedComplex, retrieve
    from toporag_core.studio.ask import CHECKPOINT_ROOT, load_pipeline

    folder = CHECKPOINT_ROOT / "scene_graphs"
    if not (folder / "config.json").is_file():
        pytest.skip("the scene_graphs checkpoint is not committed here")
    monkeypatch.delenv("TOPORAG_ENCODER", raising=False)
    monkeypatch.setenv("TOPORAG_CHECKPOINT", str(folder))
    at = learn(MSG_TAB)
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    frames = {tuple(d.value.columns[:2]): d.value for d in at.dataframe}
    counts, steps, slots = frames[("layer", "stage")], frames[("cell", "rank")], frames[("slot", "filled by")]
    # an independent run of the same encoder on the same subcomplex
    pipe = load_pipeline(str(folder), "")
    g = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(g, pipe.encoder)
    sub = retrieve(ecx, g.meta["question"], setting=pipe.default_setting())
    cells = collate([subcomplex_tensors(sub, ecx.emb, use_cells2=pipe.use_cells2)])
    import torch

    with torch.no_grad():
        h = pipe.model.encoder.cell_states(cells)
    n, m, f = sub.counts
    last = counts[counts["layer"] == counts["layer"].max()].set_index(["receiver", "kind"])["messages"]
    lens = np.diff(sub.complex.cell_ptr)[np.unique(sub.cells2)]
    assert last[("1-cells", "boundary")] == 2 * m and last[("2-cells", "boundary")] == lens.sum()
    assert last[("1-cells", "up")] == int((lens * (lens - 1)).sum())
    after = steps.set_index("cell")["|h| after"]
    for r, prefix in enumerate("vec"):
        ids = np.unique([sub.nodes, sub.edges, sub.cells2][r])
        want = h[r].norm(dim=-1).numpy()
        got = np.array([after[f"{prefix}{i}"] for i in ids])
        assert np.allclose(got, want, atol=2e-3)
    cfg = pipe.model.config
    assert len(slots) == cfg.num_graph_tokens and "whole subcomplex" in slots.loc[0, "filled by"]
    filled = slots[slots["cell"] != ""]
    order = [("vec".index(c[0]), int(c[1:])) for c in filled["cell"]]
    assert order == sorted(order)  # slots in text order: by rank, then id
    assert len(filled) == min(cfg.num_graph_tokens - 1, n + m + f)
    assert os.environ.get("TOPORAG_CHECKPOINT") == str(folder)
