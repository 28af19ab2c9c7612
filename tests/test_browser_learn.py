"""The Learn tabs "Hodge Laplacians and holes" and "Messages and graph tokens", and the pages changed with
them (Retrieval lab, Explore), in a real browser at 1400 x 1000.

* Hodge tab on the breakfast sample: dim ker L0, L1, L2 equal ``toporag lift --json``'s ``hodge.harmonic``;
  the glue slider lowers the harmonic count by one per glued 2-cell; the ring lifting's numbers are the CLI's.
* Messages tab: the retrieved subcomplex is the one the checkpoint's own retrieval setting gives.
* Every plotly chart: no title (or subplot title) meets a tick label, axis title or legend; every graph view:
  the label checks of the lab tests (no overlap, inside the panel, readable sizes).

``TOPORAG_UPDATE_SCREENSHOT=1`` also writes ``docs/learn_hodge.png`` and ``docs/learn_messages.png``.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from ._browser import CHROMIUM, ROOT, click_tab, settle, streamlit_server
from .test_browser_newcomer import _check_labels, _visible_views

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)")]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (PyPI) not installed")

SAMPLE = ROOT / "assets" / "samples" / "scene_breakfast.csv"
PLOT_OVERLAPS = """() => {
  const vis = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const out = [];
  let charts = 0;
  document.querySelectorAll('.js-plotly-plot').forEach(plot => {
    if (!vis(plot)) return;
    charts += 1;
    const titles = [...plot.querySelectorAll('.gtitle, .annotation-text')].filter(vis);
    const others = [...plot.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .legend')]
      .filter(vis);
    titles.forEach(t => others.forEach(o => {
      const p = box(t), q = box(o);
      const w = Math.min(p[2], q[2]) - Math.max(p[0], q[0]), h = Math.min(p[3], q[3]) - Math.max(p[1], q[1]);
      if (w > 0.5 && h > 0.5) out.push([t.textContent, o.textContent]);
    }));
  });
  return {charts: charts, overlaps: out};
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The app with the real sentence encoder (the checkpoint's cell embeddings are MiniLM's), private cache."""
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server(log, {"TOPORAG_CACHE": str(tmp_path_factory.mktemp("cache"))},
                          drop_env=("TOPORAG_ENCODER", "TOPORAG_CHECKPOINT", "TOPORAG_LLM")) as url:
        yield url


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(240_000)  # first checkpoint load (LLM conversion) on a busy 2-core machine
    yield pg
    ctx.close()


def _plots_clear(pg, at_least: int = 1) -> int:
    """Every visible plotly chart has drawn, and no title meets a tick label, axis title or legend."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    pg.locator(".js-plotly-plot:visible .main-svg").first.wait_for()
    try:  # plotly lays out titles after the first paint: wait until the layout is clear, then check it
        pg.wait_for_function(f"() => {{ const g = ({PLOT_OVERLAPS})(); return g.charts >= {at_least} && !g.overlaps.length; }}",
                             timeout=30_000)
    except PlaywrightTimeout:
        pass  # the assertions below say what is wrong
    got = pg.evaluate(PLOT_OVERLAPS)
    assert got["charts"] >= at_least, got
    assert not got["overlaps"], f"chart titles overlap: {got['overlaps'][:5]}"
    return got["charts"]


def _metric(pg, label: str) -> int:
    m = pg.get_by_test_id("stMetric").filter(has_text=label).first
    m.wait_for()
    return int(m.get_by_test_id("stMetricValue").inner_text())


def _cli_harmonic(tree: str) -> list[int]:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "toporag_core.cli", "lift", str(SAMPLE), "--tree", tree, "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["hodge"]["harmonic"]


def _shot(pg, tmp_path, name: str) -> None:
    shot = tmp_path / name
    pg.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("TOPORAG_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, ROOT / "docs" / name)


def test_learn_hodge_and_messages_tabs_in_the_browser(server, page, tmp_path):
    from toporag_core import lift
    from toporag_core.io import load_graph
    from toporag_core.model.checkpoint import read_config
    from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve
    from toporag_core.io import samples
    from toporag_core.studio.ask import CHECKPOINT_ROOT

    cx = lift(load_graph(SAMPLE))
    page.goto(f"{server}/Learn?graph=sample:scene")
    page.get_by_text("Learn: cell-complex retrieval, step by step").wait_for()
    click_tab(page, "4. Hodge Laplacians and holes")
    page.get_by_text("Gluing 2-cells removes harmonic cycles").wait_for()
    settle(page)
    assert [_metric(page, f"dim ker L{k}") for k in range(3)] == _cli_harmonic("bfs")
    rings = _cli_harmonic("rings")
    page.get_by_text(f"dim ker L0, L1, L2 = {tuple(rings)}").wait_for()
    assert rings[2] > 0  # the breakfast table's rings enclose a cavity
    thumb = page.locator("input[type=range][aria-label='2-cells glued']").first
    thumb.wait_for(state="attached")
    seen = [_metric(page, "harmonic 1-cochains (h1)")]
    for j in range(1, 4):
        thumb.focus()
        thumb.press("ArrowRight")
        page.wait_for_function("([el, v]) => el.value === v", arg=[thumb.element_handle(), str(j)])
        settle(page)
        page.get_by_text(f"2-cell c{j - 1} fills a cycle").wait_for()
        seen.append(_metric(page, "harmonic 1-cochains (h1)"))
    assert seen == [cx.betti1 - j for j in range(4)]  # one harmonic 1-cochain fewer per glued 2-cell
    _plots_clear(page, at_least=4)  # three Laplacians and the spectra
    for view in _visible_views(page):
        _check_labels(view)
    page.evaluate("() => window.scrollTo(0, 0)")
    page.get_by_role("tab", name="4. Hodge Laplacians and holes").scroll_into_view_if_needed()
    _shot(page, tmp_path, "learn_hodge.png")

    folder = CHECKPOINT_ROOT / "scene_graphs"
    if not (folder / "config.json").is_file():
        pytest.skip("the scene_graphs checkpoint is not committed here")
    click_tab(page, "5. Messages and graph tokens")
    page.get_by_text("From cell states to graph tokens").wait_for()
    settle(page)
    from toporag_core.embed import CachedEncoder, SentenceTransformerEncoder

    g = samples.load_sample("scene")
    ecx = EmbeddedComplex.from_graph(g, CachedEncoder(SentenceTransformerEncoder(), cache_dir=tmp_path / "c"))
    sub = retrieve(ecx, g.meta["question"], setting=RetrievalSetting.from_dict(read_config(folder)[1]["retrieval"]))
    n, e, f = sub.counts
    page.locator("strong:visible", has_text=f"{n} 0-cells, {e} 1-cells, {f} 2-cells").first.wait_for()
    assert _plots_clear(page) >= 1  # the message figure
    page.locator(".js-plotly-plot:visible").first.scroll_into_view_if_needed()
    _shot(page, tmp_path, "learn_messages.png")


def test_lab_and_explore_charts_and_labels_do_not_overlap_in_the_browser(server, page):
    page.goto(f"{server}/Retrieval_lab?graph=sample:kg")
    page.locator("textarea[aria-label='Question']").wait_for()
    settle(page)
    thumb = page.locator("input[type=range][aria-label='k (cells per dimension)']").first
    thumb.focus()
    for _ in range(2):  # k 3 -> 5
        thumb.press("ArrowRight")
    page.wait_for_function("([el, v]) => el.value === v", arg=[thumb.element_handle(), "5"])
    settle(page)
    page.get_by_text("keeps the same candidate 2-cells").first.wait_for()  # the C2 note
    click_tab(page, "Prizes")
    _plots_clear(page)
    click_tab(page, "Sweep: k and C2")
    assert _plots_clear(page) >= 2
    page.get_by_text("Compare two methods").click()
    page.locator("iframe:visible").nth(2).wait_for()
    settle(page)
    views = _visible_views(page)
    assert len(views) == 3
    assert all(_check_labels(v)["w"] > 900 for v in views)  # full width
    page.goto(f"{server}/Explore?graph=sample:kg")
    page.get_by_text("Explore the complex").first.wait_for()
    settle(page)
    page.get_by_text("Every cycle in full").first.wait_for()
    for view in _visible_views(page):
        _check_labels(view)
