"""End to end in a real browser: ``streamlit run app.py`` on 127.0.0.1, driven by Debian's chromium.

Never downloads a browser: it uses /usr/bin/chromium (``apt-get install chromium``) and skips
when that is absent. ``TOPORAG_UPDATE_SCREENSHOT=1`` also writes the README screenshot
``assets/screenshot_retrieval_lab.png``.
"""
from __future__ import annotations

import os
import shutil

import pytest

from ._browser import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_server

EVIL = "<script>alert(1)</script>"

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)")]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (PyPI) not installed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real Streamlit server for this module (real default sentence encoder, private cache)."""
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server(log, {"TOPORAG_CACHE": str(tmp_path_factory.mktemp("cache"))},
                          drop_env=("TOPORAG_ENCODER",)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1440, "height": 1150})
    pg = ctx.new_page()
    pg.set_default_timeout(120_000)  # first model load + encoding on a busy 2-core machine
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs
    yield pg
    ctx.close()


def _load_sample(pg, title: str) -> None:
    pg.get_by_text("Current graph:").wait_for()
    pg.get_by_test_id("stSelectbox").filter(has_text="Sample").click()
    pg.get_by_role("option", name=title).click()
    pg.get_by_role("button", name="Load sample").click()
    pg.get_by_text(f"Loaded {title}").wait_for()


def _graph_frame(pg):
    """The pyvis iframe once its canvas exists and vis-network has its data."""
    pg.frame_locator("iframe").first.locator("canvas").first.wait_for()
    for frame in pg.frames:
        if frame != pg.main_frame and frame.evaluate("() => typeof network !== 'undefined' && !!network"):
            return frame
    raise AssertionError("no frame with a vis-network graph")


def test_retrieval_lab_in_the_browser(server, page, tmp_path):
    from toporag_core.embed import CachedEncoder, SentenceTransformerEncoder
    from toporag_core.retrieval import EmbeddedComplex, retrieve
    from toporag_core.studio import samples
    from toporag_core.studio.graph_view import ROLE_COLOURS

    question = "Where in Paris are Marie and Pierre Curie buried?"
    graph = samples.load_sample("kg")
    ecx = EmbeddedComplex.from_graph(graph, CachedEncoder(SentenceTransformerEncoder(), cache_dir=tmp_path / "c"))
    expected = retrieve(ecx, question, k0=3, k1=3, k2=3, c2=0.5, edge_cost=0.5)
    n, m, f = expected.counts
    # the page starts with the sample's own question; the counts must tell the two apart, so that
    # seeing them proves the typed question was used
    assert retrieve(ecx, graph.meta["question"]).counts != expected.counts

    page.goto(server)
    _load_sample(page, "Knowledge graph: the Curies")
    page.get_by_role("link", name="Retrieval lab").first.click()  # in-app navigation keeps the session
    box = page.locator("textarea[aria-label='Question']")
    box.wait_for()
    box.fill(question)
    box.press("Control+Enter")
    summary = f"{n} 0-cells, {m} 1-cells, {f} 2-cells"
    page.get_by_text(summary).first.wait_for()
    assert f >= 1, "the Curie graph question should pull in at least one 2-cell"

    frame = _graph_frame(page)
    drawn = frame.evaluate("() => nodes.get().map(x => [x.id, x.color])")
    assert len(drawn) == graph.num_nodes  # small graph: nothing capped
    terminals = sorted(i for i, c in drawn if c == ROLE_COLOURS["terminal"])
    assert terminals == sorted(i for i, r in expected.role_of(0).items() if r == "terminal")
    cells = frame.evaluate("() => TOPORAG_CELLS.filter(c => c.stroke).map(c => c.nodes)")
    assert sorted(map(sorted, cells)) == sorted(sorted(ecx.complex.cell2_nodes(c).tolist()) for c in expected.cells2)
    page.wait_for_timeout(2500)  # let the physics settle for the picture
    page.evaluate("() => window.scrollTo(0, 0)")
    shot = tmp_path / "retrieval_lab.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    if os.environ.get("TOPORAG_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, ROOT / "assets" / "screenshot_retrieval_lab.png")
    assert page.dialogs == []


def test_upload_escaping_and_bad_file_in_the_browser(server, page, tmp_path):
    evil = tmp_path / "evil.csv"
    evil.write_text(f"head,relation,tail\n\"{EVIL}\",likes,cup\ncup,on,table\ntable,near,\"{EVIL}\"\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("head,relation,tail\na,r,b\nc,,d\n")

    page.goto(server)
    page.get_by_text("Current graph:").wait_for()
    page.get_by_role("tab", name="Upload").click()
    uploader = page.get_by_test_id("stFileUploader").first
    uploader.locator("input[type=file]").set_input_files(str(evil))
    uploader.get_by_text("evil.csv").wait_for()  # the upload has reached the server: only now click
    page.get_by_role("button", name="Load file").click()
    page.get_by_text("Loaded evil.csv").wait_for()

    uploader.locator("input[type=file]").set_input_files(str(bad))
    uploader.get_by_text("bad.csv").wait_for()
    page.wait_for_timeout(500)  # the rerun the upload triggers must finish before the click
    page.get_by_role("button", name="Load file").click()
    err = page.get_by_test_id("stAlertContentError")
    err.wait_for()
    assert "line 3" in err.inner_text() and "relation" in err.inner_text()
    page.get_by_text("Still using the previously loaded graph").wait_for()

    page.get_by_role("link", name="Explore").first.click()
    frame = _graph_frame(page)
    labels = frame.evaluate("() => nodes.get().map(x => x.label)")
    assert EVIL in labels  # shown as canvas text, exactly as typed
    title = frame.evaluate("() => nodes.get().find(x => x.label.includes('alert')).title.textContent")
    assert EVIL in title  # the tooltip element shows the text, its HTML was escaped
    assert frame.evaluate("() => document.querySelectorAll('body script').length") >= 1
    page.wait_for_timeout(1500)
    assert page.dialogs == []  # no alert ever ran
