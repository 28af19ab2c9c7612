"""The documentation stays something a newcomer can carry: README.md at most 250 lines, no text about
how the work was organised ("session"), no absolute machine paths, and every relative link in README.md,
docs/ and the shipped checkpoints' READMEs points at a file or folder that exists."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").rglob("*.md"))
CHECKPOINT_READMES = sorted((ROOT / "assets" / "checkpoints").glob("*/README.md"))
ALL = [README, *DOCS, *CHECKPOINT_READMES]

# [text](target) and ![alt](target); a target may carry a "title" and an #anchor
LINK = re.compile(r"!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:work|root|tmp)/")


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # code blocks hold commands, not links
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # http(s):, mailto:, in-page anchors
        out.append(unquote(target.split("#", 1)[0]))
    return out


def test_readme_is_short():
    n = len(README.read_text().splitlines())
    assert n <= 250, f"README.md has {n} lines; move detail to docs/ (at most 250)"


def test_docs_exist():
    assert (ROOT / "docs" / "results").is_dir() and DOCS


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_no_session_word(path):
    bad = [f"{i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1)
           if "session" in line.lower()]
    assert not bad, f"{rel(path)} says 'session' (state the finding, its command and number):\n" + "\n".join(bad)


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_no_machine_paths(path):
    bad = [f"{i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1)
           if MACHINE_PATH.search(line)]
    assert not bad, f"{rel(path)} names an absolute machine path (use a relative one):\n" + "\n".join(bad)


@pytest.mark.parametrize("path", ALL, ids=rel)
def test_relative_links_resolve(path):
    missing = [t for t in relative_links(path) if not (path.parent / t).exists()]
    assert not missing, f"{rel(path)} links to missing files: {missing}"


def test_link_pattern_reads_the_forms_used():
    assert LINK.findall("see [a](docs/a.md), ![img](x.png \"t\") and [b](c.md#sec)") == \
        ["docs/a.md", "x.png", "c.md#sec"]
    assert MACHINE_PATH.search("cd /work/x") and MACHINE_PATH.search("`/tmp/a`")
    assert not MACHINE_PATH.search("runs/tmp/a and ./work/b")
