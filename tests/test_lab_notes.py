"""Retrieval lab: the C2 note says over which range C2 changes nothing and why (from the retrieval's own
prizes), and two methods are compared cell by cell (only A, only B, both) in one full-width view."""
from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from toporag_core.embed import HashingEncoder
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve
from toporag_core.retrieval.toporag import cell_prizes
from toporag_core.io import samples
from toporag_core.studio import lab

from ._apptest import iframes
from .conftest import ROOT


@pytest.fixture(scope="module")
def kg():
    g = samples.load_sample("kg")
    return EmbeddedComplex.from_graph(g, HashingEncoder()), g.meta["question"]


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("c2", [0.0, 0.5, 1.0, 2.5, 3.0])
def test_c2_range_keeps_the_candidates_and_ends_where_they_change(kg, k, c2):
    ecx, q = kg
    setting = RetrievalSetting.make("toporag", k=k, c2=c2)
    eff = lab.c2_effect(ecx, q, setting)
    s0, s1, _ = ecx.similarities(q)

    def cands(c):
        return cell_prizes(ecx.complex, s0, s1, k, k, k, c).candidates.tolist()

    assert eff.lo <= c2 <= eff.hi or np.isclose(eff.lo, c2) or np.isclose(eff.hi, c2)
    for c in np.linspace(eff.lo, eff.hi, 7):
        assert cands(float(c)) == eff.candidates
    if eff.lo > 0:
        assert cands(eff.lo - 0.05) != eff.candidates
    if eff.hi < 3.0:
        assert cands(eff.hi + 0.05) != eff.candidates
    ends = [retrieve(ecx, q, setting=setting.replace(c2=v)) for v in (eff.lo, eff.hi)]
    now = retrieve(ecx, q, setting=setting)
    assert eff.same_retrieval == all(sorted(e.cells2.tolist()) == sorted(now.cells2.tolist())
                                     and sorted(e.nodes.tolist()) == sorted(now.nodes.tolist()) for e in ends)
    if not eff.candidates:
        assert "No 2-cell has a positive prize" in eff.note
    else:
        assert f"C2 from {eff.lo:g} to {eff.hi:g} keeps the same candidate 2-cells" in eff.note


def test_c2_note_for_methods_without_c2_and_without_2cells(kg):
    ecx, q = kg
    assert lab.c2_effect(ecx, q, RetrievalSetting.make("topk-triples", k=3)) is None
    assert lab.c2_effect(ecx, "  ", RetrievalSetting.make("toporag", k=3)) is None
    eff = lab.c2_effect(ecx, q, RetrievalSetting.make("toporag", k=3, c2=0.5).replace(k2=0))
    assert "k2 = 0" in eff.note and eff.candidates == []


def test_membership_splits_the_cells(kg):
    ecx, q = kg
    a = retrieve(ecx, q, setting=RetrievalSetting.make("toporag", k=3))
    b = retrieve(ecx, q, setting=RetrievalSetting.make("toporag", k=5, c2=0.0))
    mem = lab.membership(a, b)
    for r, (x, y) in enumerate(((a.nodes, b.nodes), (a.edges, b.edges), (a.cells2, b.cells2))):
        assert sorted(mem[r]["only A"] + mem[r]["both"]) == sorted(x.tolist())
        assert sorted(mem[r]["only B"] + mem[r]["both"]) == sorted(y.tolist())
        assert not set(mem[r]["only A"]) & set(mem[r]["only B"])
    marks = lab.compare_marks(a, b, "A", "B")
    assert set(marks["node_marks"]) == set(a.nodes.tolist()) | set(b.nodes.tolist())
    assert {marks["node_marks"][i][0] for i in mem[0]["both"]} <= {lab.COMPARE_COLOURS["both"]}


def test_lab_page_shows_the_c2_note_and_the_compare_view(monkeypatch):
    monkeypatch.setenv("TOPORAG_ENCODER", "hashing")
    at = AppTest.from_file(str(ROOT / "pages/2_Retrieval_lab.py"), default_timeout=120).run()
    at.sidebar.slider(key="lab_k").set_value(5).run()
    assert not at.exception
    notes = [i.value for i in at.info if i.value.startswith("**C2")]
    ecx = EmbeddedComplex.from_graph(samples.load_sample("scene"), HashingEncoder())
    eff = lab.c2_effect(ecx, samples.load_sample("scene").meta["question"],
                        RetrievalSetting.make("toporag", k=5, c2=0.5, edge_cost=0.5))
    assert (eff.lo < eff.hi) == bool(notes) and (not notes or eff.note in notes[0])
    at.sidebar.toggle(key="lab_compare").set_value(True).run()
    at.sidebar.selectbox(key="lab_method_b").set_value("g-retriever").run()
    assert not at.exception and len(iframes(at)) == 3
    table = next(d.value for d in at.dataframe if "both" in d.value.columns)
    assert table["cells"].tolist() == ["0-cells", "1-cells", "2-cells"]
