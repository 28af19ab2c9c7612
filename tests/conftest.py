"""Shared fixtures: where the real data lives, and a deterministic offline environment."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPORAG_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test writes caches under one session tmp dir, never into ~/.cache."""
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path_factory.getbasetemp() / "toporag-cache"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED.exists():
        pytest.skip(f"real data folder {SHARED} is absent (see README: ../shared/data)")
    return SHARED
