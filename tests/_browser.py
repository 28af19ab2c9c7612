"""Shared pieces of the browser tests: Debian's chromium flags and a real Streamlit server."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(log: Path, env_overrides: dict[str, str], drop_env: tuple[str, ...] = ()) -> Iterator[str]:
    """``streamlit run app.py`` on 127.0.0.1 and a free port; yields its URL, stops it afterwards."""
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **env_overrides)
    for key in drop_env:
        env.pop(key, None)
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", "127.0.0.1",
           "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"streamlit did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


_BUSY = ("() => !document.querySelector('[data-testid=stStatusWidgetRunningIcon],"
         "[data-testid=stStatusWidgetRunningManIcon],[data-stale=true]')")


def settle(pg) -> None:
    """Wait until Streamlit has finished the current rerun: its "Running..." status is gone and no
    element of the previous run is still on the page (Streamlit marks those ``data-stale``). The
    short first pause lets a rerun that an interaction has just triggered begin."""
    pg.wait_for_timeout(300)
    pg.wait_for_function(_BUSY, timeout=120_000)


def click_tab(pg, name: str) -> None:
    """Click the tab called ``name`` once the page shows exactly one (while a rerun replaces a tab
    group, the old and the new group are both on the page for a moment)."""
    from playwright.sync_api import expect

    settle(pg)
    tab = pg.get_by_role("tab", name=name)
    expect(tab).to_have_count(1, timeout=120_000)
    tab.click()


def upload(pg, uploader, path: Path, shown: str | None = None) -> None:
    """Put ``path`` into ``uploader``'s file input and wait until the page shows ``shown`` (default: the
    file name, i.e. the upload reached the server). A rerun still in flight can replace the widget and
    drop the file (seen on a loaded CI machine): settle first, and send it once more if it was dropped."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    target = pg.get_by_text(shown) if shown else uploader.get_by_text(path.name)
    for attempt in (1, 2):
        settle(pg)
        uploader.locator("input[type=file]").set_input_files(str(path))
        try:
            target.first.wait_for(timeout=60_000 * attempt)
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise


def ask(pg, question: str | None = None):
    """On the Ask page: type ``question`` (default: keep the graph's own), press Ask once the page has settled
    and return the (first) answer's locator once it is shown."""
    box = pg.locator("textarea[aria-label='Question']")
    box.wait_for()
    if question is not None:
        box.fill(question)
        box.press("Control+Enter")
    settle(pg)  # the rerun an edit or a page switch triggers must finish before the click
    pg.get_by_role("button", name="Ask", exact=True).click()
    answer = pg.locator("[class*='st-key-ask_answer_'] code").first  # the checkpoint's method: toporag or seeded
    answer.wait_for()
    return answer


@contextlib.contextmanager
def ask_page_of(url: str, timeout_ms: int = 300_000) -> Iterator[Any]:
    """A Chromium page on the Ask page of the app at ``url`` (1440 x 1150), closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1440, "height": 1150})
            pg.set_default_timeout(timeout_ms)
            pg.goto(url)
            pg.get_by_text("Current graph:").wait_for()
            pg.get_by_role("link", name="Ask").first.click()
            yield pg
        finally:
            browser.close()


def load_sample(pg, title: str) -> None:
    """On Home: pick the sample graph ``title``, load it and wait for the page to say so."""
    pg.get_by_text("Current graph:").wait_for()
    pg.get_by_test_id("stSelectbox").filter(has_text="Sample").click()
    pg.get_by_role("option", name=title).click()
    pg.get_by_role("button", name="Load sample").click()
    pg.get_by_text(f"Loaded {title}").wait_for()


@contextlib.contextmanager
def shipped_scene_server(tmp_path_factory, name: str, checkpoint: str = "scene_graphs") -> Iterator[str]:
    """The app on a committed checkpoint (default the SceneGraphs one) with its own encoder and LLM (a fresh
    cache named after ``name``); skips when that checkpoint is not committed here."""
    from toporag_core.studio.ask import CHECKPOINT_ROOT

    folder = CHECKPOINT_ROOT / checkpoint
    if not (folder / "config.json").is_file():
        pytest.skip(f"the {checkpoint} checkpoint is not committed here")
    log = tmp_path_factory.mktemp(f"server_{name}") / "streamlit.log"
    with streamlit_server(log, {"TOPORAG_CHECKPOINT": str(folder),
                                "TOPORAG_CACHE": str(tmp_path_factory.mktemp(f"cache_{name}"))},
                          drop_env=("TOPORAG_ENCODER", "TOPORAG_LLM")) as url:
        yield url
