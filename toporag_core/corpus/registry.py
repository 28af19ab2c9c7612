"""The corpus-format registry: one entry per way a user's documents arrive.

A :class:`CorpusFormat` has a ``name`` (``--format``), a one-line ``label``, a ``detect(path)`` rule
for ``--format auto`` (tried in ``priority`` order, lower first) and ``read(path) -> Corpus``.
The built-in formats (``jsonl``, ``folder``, ``beir``, ``hotpotqa``) register themselves in
``corpus/<format>.py``, imported by ``corpus/__init__``; a new format is one
:func:`register_corpus_format` call. Every command that takes a corpus (``toporag docgraph
index``, ``toporag hybrid index``) reads it through :func:`read_corpus`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..graph import GraphFormatError
from .base import Corpus


@dataclass(frozen=True)
class CorpusFormat:
    """One corpus format: how to recognise it and how to read it."""

    name: str
    label: str
    detect: Callable[[Path], bool]
    read: Callable[[Path], Corpus]
    priority: int = 50


CORPUS_FORMATS: dict[str, CorpusFormat] = {}


def register_corpus_format(fmt: CorpusFormat) -> CorpusFormat:
    """Add (or replace) a format under ``fmt.name``."""
    if not fmt.name or not fmt.name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"corpus format name must be a word, got {fmt.name!r}")
    CORPUS_FORMATS[fmt.name] = fmt
    return fmt


def corpus_format_names() -> list[str]:
    """The registered names, ``auto`` first (``--format`` choices)."""
    return ["auto", *CORPUS_FORMATS]


def detect_corpus_format(path: str | os.PathLike) -> str:
    """The first registered format (by priority) whose ``detect`` accepts ``path``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    for fmt in sorted(CORPUS_FORMATS.values(), key=lambda f: (f.priority, f.name)):
        if fmt.detect(path):
            return fmt.name
    names = ", ".join(CORPUS_FORMATS)
    raise GraphFormatError(f"not a corpus this tool reads (formats: {names}); a JSONL of "
                           '{"id"|"title", "text"} documents, a folder of .txt/.md files, or a BEIR folder',
                           file=str(path))


def read_corpus(path: str | os.PathLike, format: str = "auto") -> Corpus:
    """Read ``path`` as ``format`` (``auto``: :func:`detect_corpus_format`)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    name = detect_corpus_format(path) if format == "auto" else format
    if name not in CORPUS_FORMATS:
        raise ValueError(f"unknown corpus format {name!r} (known: {', '.join(corpus_format_names())})")
    corpus = CORPUS_FORMATS[name].read(path)
    if not corpus.documents:
        raise GraphFormatError("no documents", file=str(path))
    corpus.format = name
    return corpus
