"""Page state in a real browser: an upload survives a reload of another page, the lab shows an
uploaded graph at once, and the question typed on Ask is carried into the Retrieval lab.

One browser session, the tiny checkpoint (the Ask page loads it; nothing is answered) and the
model-free hashing encoder. Uses Debian's /usr/bin/chromium; skips when it is absent.
"""
from __future__ import annotations

import re

import pytest

from ._browser import CHROMIUM, click_tab, settle, streamlit_server, upload

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)")]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (PyPI) not installed")

MUSEUM = ("head,relation,tail\nRijksmuseum,exhibits,The Night Watch\nRijksmuseum,exhibits,The Milkmaid\n"
          "Mauritshuis,exhibits,Girl with a Pearl Earring\nRijksmuseum,located in,Amsterdam\n"
          "Mauritshuis,located in,The Hague\nThe Night Watch,painted by,Rembrandt\n")
QUESTION = "Which museum exhibits The Night Watch?"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from toporag_core.model.tiny import build_tiny_checkpoint

    ckpt = build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ckpt")
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server(log, {"TOPORAG_ENCODER": "hashing", "TOPORAG_CHECKPOINT": str(ckpt),
                                "TOPORAG_LLM": str(ckpt / "llm"),
                                "TOPORAG_CACHE": str(tmp_path_factory.mktemp("cache"))}) as url:
        yield url


def question_box(pg):
    box = pg.locator("textarea[aria-label='Question']")
    box.wait_for()
    return box


def go(pg, page: str) -> None:
    settle(pg)
    pg.get_by_role("link", name=page).first.click()
    pg.get_by_role("heading", name=page).first.wait_for()
    settle(pg)


def test_an_upload_survives_a_reload_and_the_question_follows_into_the_lab(browser, server, tmp_path):
    csv = tmp_path / "museum.csv"
    csv.write_text(MUSEUM)
    pg = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    pg.set_default_timeout(180_000)
    pg.goto(server)
    pg.get_by_text("Current graph:").wait_for()
    click_tab(pg, "Upload")
    upload(pg, pg.get_by_test_id("stFileUploader").first, csv)
    pg.get_by_role("button", name="Load file").click()
    pg.get_by_text("Loaded museum.csv").wait_for()
    pg.wait_for_url(re.compile(r"graph=upload(:|%3A)[0-9a-f]{20}"))
    # the lab shows the uploaded graph at once, with a suggested question
    go(pg, "Retrieval lab")
    assert question_box(pg).input_value() == "What is Rijksmuseum connected to?"
    pg.locator("iframe").first.wait_for()
    # the question typed on Ask is carried into the lab
    go(pg, "Ask")
    box = question_box(pg)
    box.fill(QUESTION)
    box.press("Control+Enter")
    go(pg, "Retrieval lab")
    assert question_box(pg).input_value() == QUESTION
    # a reload of the lab (a new session) keeps the upload and says so; no silent switch to the scene sample
    pg.reload()
    pg.get_by_text("Restored museum from the page address").wait_for()
    settle(pg)
    assert re.search(r"graph=upload(:|%3A)[0-9a-f]{20}", pg.url)
    assert pg.get_by_text(re.compile(r"^museum: 8 nodes")).count() == 1
    assert pg.get_by_text("breakfast").count() == 0 and pg.get_by_text("was lost").count() == 0
    pg.locator("iframe").first.wait_for()
    pg.screenshot(path=str(tmp_path / "reloaded_lab.png"))
