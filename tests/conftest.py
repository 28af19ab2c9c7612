"""Shared fixtures: where the real data lives, and a deterministic offline environment."""
from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The same precision on every CI machine: dtype "auto" would pick bf16 on a CPU with native bf16 (llm.py);
# tests that need the bf16 path set TOPORAG_CPU_BF16=1 themselves.
os.environ["TOPORAG_CPU_BF16"] = "0"
# Tests never write into the user's cache: one fresh cache per test session (embeddings, the
# converted LLM, prepared datasets), unless TOPORAG_TEST_CACHE names a folder to reuse.
_OWN_CACHE = None if os.environ.get("TOPORAG_TEST_CACHE") else tempfile.mkdtemp(prefix="toporag-test-cache-")
os.environ["TOPORAG_CACHE"] = os.environ.get("TOPORAG_TEST_CACHE") or _OWN_CACHE

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPORAG_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED.exists():
        pytest.skip(f"real data folder {SHARED} is absent (see README: ../shared/data)")
    return SHARED


@pytest.fixture(scope="session", autouse=True)
def _streamlit_components_scanned_once():
    """Every new ``AppTest`` scans all installed distributions' metadata for Streamlit components (about
    half a second each time, most of a page test's run); the installed set does not change during a test
    session, so page tests scan once per process."""
    if "streamlit.testing.v1" in sys.modules:
        from streamlit.components.v2 import manifest_scanner

        if not hasattr(manifest_scanner.scan_component_manifests, "cache_info"):
            manifest_scanner.scan_component_manifests = functools.lru_cache(maxsize=1)(
                manifest_scanner.scan_component_manifests)
    yield


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for a browser test module (Debian's, never a download). Tests of one module
    share it: a second sync Playwright started inside the first one's event loop fails."""
    from playwright import sync_api

    from ._browser import CHROMIUM, CHROMIUM_ARGS

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


def pytest_sessionfinish(session, exitstatus):
    if _OWN_CACHE:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)
