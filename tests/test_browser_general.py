"""End to end in a real browser: the Ask page on the Curie sample names the general checkpoint and it answers.

No checkpoint named (``TOPORAG_CHECKPOINT`` unset): the page's default for a knowledge graph of no trained
task is the committed general checkpoint; before and after asking, the page says in one line that it
answers and why; its answer to the sample's own question is "polonium", an open answer (no label
probabilities), and the question is not called "not the example's own question". Real default sentence
encoder and the packaged SmolLM2 (the checkpoint's own), so it is slow. Uses Debian's /usr/bin/chromium.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ._browser import CHROMIUM, CHROMIUM_ARGS, ask, load_sample, streamlit_server

GENERAL = Path(__file__).resolve().parents[1] / "assets" / "checkpoints" / "general"

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)"),
              pytest.mark.skipif(not (GENERAL / "config.json").is_file(), reason="no committed general checkpoint")]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (PyPI) not installed")


@pytest.fixture(scope="module")
def llm_folder() -> Path:
    """The converted packaged LLM (the checkpoint's own): the user's cache when it is there (read only), else
    converted once into the test cache."""
    from toporag_core.model.llm import ensure_default_llm

    home = Path.home() / ".cache" / "toporag" / "llm" / "smollm2-135m-instruct"
    try:
        return ensure_default_llm(home if (home / "config.json").is_file() else None)
    except Exception as e:  # package missing, or no gguf support here
        pytest.skip(f"packaged SmolLM2 cannot be loaded: {type(e).__name__}: {e}")


def test_ask_on_the_curie_sample_names_the_general_checkpoint(tmp_path_factory, tmp_path, llm_folder):
    log = tmp_path_factory.mktemp("server_general") / "streamlit.log"
    env = {"TOPORAG_CACHE": str(tmp_path_factory.mktemp("cache_general")), "TOPORAG_LLM": str(llm_folder)}
    with streamlit_server(log, env, drop_env=("TOPORAG_ENCODER", "TOPORAG_CHECKPOINT", "TOPORAG_CHECKPOINTS")) as url, \
            sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1440, "height": 1150})
            pg.set_default_timeout(300_000)  # model load + first embedding on a busy 2-core machine
            pg.goto(url)
            load_sample(pg, "Knowledge graph: the Curies")
            pg.get_by_role("link", name="Ask").first.click()
            before = pg.get_by_text("Answering model:").first
            before.wait_for()
            text = before.inner_text()
            assert "the General checkpoint" in text and "no task-specific checkpoint matches" in text
            assert pg.get_by_test_id("stAlertContentWarning").filter(has_text="Answering model:").count() == 0
            answer = ask(pg)
            assert "polonium" in answer.inner_text().lower()
            after = pg.get_by_text("Answering model: the General checkpoint")
            assert after.count() >= 1
            assert pg.get_by_text("Label probabilities").count() == 0
            assert pg.get_by_text("not the example's own question").count() == 0
            pg.screenshot(path=str(tmp_path / "ask_general.png"))
        finally:
            browser.close()
