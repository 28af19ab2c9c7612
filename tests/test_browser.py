"""End to end in a real browser: ``streamlit run app.py`` on 127.0.0.1, driven by Debian's chromium.

Never downloads a browser: it uses /usr/bin/chromium (``apt-get install chromium``) and skips
when that is absent. ``TOPORAG_UPDATE_SCREENSHOT=1`` also writes the README screenshot
``assets/screenshot_retrieval_lab.png``.
"""
from __future__ import annotations

import os
import shutil

import pytest

from ._browser import CHROMIUM, ROOT, click_tab, load_sample, settle, streamlit_server, upload

EVIL = "<script>alert(1)</script>"
# A view has finished drawing when every label that must show is painted (or it sits in a hidden tab).
DRAWN = ("() => window.innerHeight === 0 || (window.TOPORAG_DRAWN && TOPORAG_LABELS.filter(l => l.always)"
         ".every(l => window.TOPORAG_DRAWN.some(d => d.id === l.id)))")

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


def _graph_frame(pg):
    """The pyvis iframe once its canvas exists and vis-network has its data. A rerun still in flight can
    replace the iframe while the frames are read (seen on a loaded CI machine: "Frame was detached"):
    the page is settled first, and a frame detached under the check is looked for once more."""
    from playwright.sync_api import Error as PlaywrightError

    for attempt in (1, 2, 3):
        settle(pg)
        pg.frame_locator("iframe").first.locator("canvas").first.wait_for()
        for frame in pg.frames:
            if frame == pg.main_frame or frame.is_detached():
                continue
            try:
                if frame.evaluate("() => typeof network !== 'undefined' && !!network"):
                    return frame
            except PlaywrightError as e:
                if "detached" not in str(e) or attempt == 3:
                    raise
    raise AssertionError("no frame with a vis-network graph")


def test_retrieval_lab_in_the_browser(server, page, tmp_path):
    from toporag_core.embed import CachedEncoder, SentenceTransformerEncoder
    from toporag_core.retrieval import EmbeddedComplex, retrieve
    from toporag_core.io import samples
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
    load_sample(page, "Knowledge graph: the Curies")
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
    frame.wait_for_function(DRAWN)  # the labels are painted: the picture is complete
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
    click_tab(page, "Upload")
    uploader = page.get_by_test_id("stFileUploader").first
    upload(page, uploader, evil)  # the upload has reached the server: only now click
    page.get_by_role("button", name="Load file").click()
    page.get_by_text("Loaded evil.csv").wait_for()

    upload(page, uploader, bad)
    settle(page)  # the rerun the upload triggers must finish before the click
    page.get_by_role("button", name="Load file").click()
    err = page.get_by_test_id("stAlertContentError")
    err.wait_for()
    assert "line 3" in err.inner_text() and "relation" in err.inner_text()
    page.get_by_text("Still using the previously loaded graph").wait_for()

    page.get_by_role("link", name="Explore").first.click()
    frame = _graph_frame(page)
    labels = frame.evaluate("() => TOPORAG_LABELS.map(l => [l.id, l.lines.join(' ')])")
    evil_id = next(i for i, t in labels if t == EVIL)  # painted on the canvas, exactly as typed
    title = frame.evaluate(f"() => nodes.get({evil_id}).title.textContent")
    assert EVIL in title  # the tooltip element shows the text, its HTML was escaped
    assert frame.evaluate("() => document.querySelectorAll('body script').length") >= 1
    frame.wait_for_function(DRAWN)  # the view's scripts have all run: an alert would have been recorded
    assert page.dialogs == []  # no alert ever ran


def _check_views(pg) -> list:
    """Every vis-network frame: nothing clipped (the page fits its iframe) and the painted labels
    cover every node that matters, in full, without overlapping. Returns the drawn labels."""
    # Streamlit puts every tab's views in the page at once (hidden tabs too) and draws them one by one,
    # so "the last iframe" may be a hidden tab's view: wait for every *visible* view's canvas instead.
    # The set of visible frames changes while a tab switch settles, so wait on the page's state as a whole:
    # at least one visible frame, and a canvas in every visible one.
    from playwright.sync_api import Error as PlaywrightError

    for attempt in range(3):  # a rerun still in flight may replace a view while it is read: read them again
        settle(pg)
        try:
            return _read_views(pg)
        except PlaywrightError as err:
            if "detached" not in str(err) or attempt == 2:
                raise
    return []


def _read_views(pg) -> list:
    """The checks of :func:`_check_views` on the views as they are now."""
    pg.locator("iframe:visible").first.wait_for()
    pg.wait_for_function("""() => {
        const frames = [...document.querySelectorAll('iframe')].filter(f => f.offsetParent !== null);
        return frames.length > 0 && frames.every(f => f.contentDocument && f.contentDocument.querySelector('canvas'));
    }""", timeout=300_000)
    out = []
    for frame in pg.frames:
        if frame == pg.main_frame or not frame.evaluate("() => typeof network !== 'undefined' && !!network"):
            continue
        frame.wait_for_function(DRAWN, timeout=120_000)
        fits = frame.evaluate("() => { const r = document.getElementById('mynetwork').getBoundingClientRect();"
                              " return [r.bottom, window.innerHeight, document.documentElement.scrollHeight]; }")
        bottom, inner, scroll = fits
        if inner == 0:  # a view in a hidden tab
            continue
        assert bottom <= inner + 0.5 and scroll <= inner + 0.5, f"view clipped: {fits}"
        drawn = frame.evaluate("() => window.TOPORAG_DRAWN")
        wanted = frame.evaluate("() => TOPORAG_LABELS.filter(l => l.always).map(l => [l.id, l.lines.join(' ')])")
        got = {d["id"]: d["text"] for d in drawn}
        for i, text in wanted:
            assert got.get(i) == text and "\u2026" not in text
        boxes = [d["box"] for d in drawn]
        for a in range(len(boxes)):
            for b in range(a + 1, len(boxes)):
                p, q = boxes[a], boxes[b]
                w = min(p[2], q[2]) - max(p[0], q[0])
                h = min(p[3], q[3]) - max(p[1], q[1])
                assert not (w > 0.5 and h > 0.5), f"labels overlap: {drawn[a]['text']!r} / {drawn[b]['text']!r}"
        out.append(drawn)
    return out


def test_learn_views_are_not_clipped_and_labels_do_not_overlap(server, page):
    page.goto(server)
    page.get_by_text("Current graph:").wait_for()
    page.get_by_role("link", name="Learn").first.click()
    page.get_by_text("Learn: cell-complex retrieval, step by step").wait_for()
    assert _check_views(page)
    click_tab(page, "3. One retrieval")
    page.get_by_text("Prize-collecting Steiner tree").wait_for()
    page.get_by_text("b1 of the complex").first.wait_for(state="attached")  # in the (hidden) tab 2
    views = _check_views(page)
    assert any(len(v) >= 3 for v in views)
    # the explore view of the same graph, and the lab
    page.get_by_role("link", name="Explore").first.click()
    page.get_by_text("Explore the complex").first.wait_for()
    _check_views(page)
    page.get_by_role("link", name="Retrieval lab").first.click()
    page.locator("textarea[aria-label='Question']").wait_for()
    _check_views(page)


def test_gqa_upload_with_question_picker_in_the_browser(server, page, tmp_path):
    import json

    from .test_app import GQA_QUESTIONS, GQA_SCENES

    scenes = tmp_path / "val_sceneGraphs.json"
    scenes.write_text(json.dumps(GQA_SCENES))
    qcsv = tmp_path / "questions.csv"
    qcsv.write_text(GQA_QUESTIONS)
    page.goto(server)
    page.get_by_text("Current graph:").wait_for()
    click_tab(page, "Upload")
    upload(page, page.get_by_test_id("stFileUploader").filter(has_text="Graph file"), scenes,
           shown="Record (2 in this file)")
    page.get_by_test_id("stSelectbox").filter(has_text="Record (2 in this file)").click()
    page.get_by_role("option").nth(1).click()
    # the pick reruns the page: wait until that has finished, else the next upload can land in a
    # widget the rerun is replacing (seen on a loaded CI machine)
    upload(page, page.get_by_test_id("stFileUploader").filter(has_text="questions.csv"), qcsv,
           shown="Question (2 for this image)")
    page.get_by_test_id("stSelectbox").filter(has_text="Question (2 for this image)").click()
    page.get_by_role("option", name="What is near the ball?").click()
    settle(page)  # the rerun the pick triggers must finish before the click, else the old pick is loaded
    page.get_by_role("button", name="Load file").click()
    page.get_by_text("Loaded val_sceneGraphs.json").wait_for()
    page.get_by_text("Question that comes with this graph").wait_for()
    page.get_by_text("What is near the ball?").first.wait_for()  # the picked question, not the first one
    assert page.dialogs == []
