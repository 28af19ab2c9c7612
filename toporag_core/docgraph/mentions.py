"""Which document titles a text names: a whole-phrase, case-insensitive title dictionary.

Titles and texts are cut into lower-case word / punctuation tokens (``\\w+|[^\\w\\s]``); a title
is named where its token sequence occurs in the text's, scanned left to right taking the
longest title at each position (matches do not overlap), as a longest-first regular
expression would, but in time linear in the text (``O(len(text) x distinct title lengths)``
dictionary look-ups) whatever the number of titles: a regular expression of 100,000 titles
is slow to compile and to run. Titles shorter than ``min_chars`` characters are ignored
(``"It"`` is not a mention).

Within one question's graph (a few documents) a regular expression is enough:
:func:`title_pattern` compiles the graph's titles, longest first, into one whole-phrase,
case-insensitive pattern, and :func:`named_documents` lists the documents whose title a text names.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from .build import DocGraph

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class TitleMatcher:
    """``named(text)``: indices of the titles the text names, in order of first mention."""

    def __init__(self, titles: Sequence[str], min_chars: int = 3, max_tokens: int = 16) -> None:
        self.table: dict[tuple[str, ...], list[int]] = {}
        for i, t in enumerate(titles):
            t = str(t).strip()
            if len(t) < min_chars:
                continue
            key = tuple(tokens(t))
            if 0 < len(key) <= max_tokens:
                self.table.setdefault(key, []).append(i)
        self.lengths = sorted({len(k) for k in self.table}, reverse=True)

    def named(self, text: str) -> list[int]:
        if not text or not self.table:
            return []
        toks = tokens(text)
        out: dict[int, None] = {}
        i, n = 0, len(toks)
        while i < n:
            for length in self.lengths:
                if i + length <= n and (hit := self.table.get(tuple(toks[i:i + length]))) is not None:
                    out.update(dict.fromkeys(hit))
                    i += length
                    break
            else:
                i += 1
        return list(out)


def title_pattern(titles: list[str], min_chars: int = 3) -> re.Pattern | None:
    """One case-insensitive pattern matching any document title (at least ``min_chars``
    characters) as a whole phrase, longest titles first; ``None`` when there is none."""
    names = sorted({t.strip() for t in titles if len(t.strip()) >= min_chars}, key=len, reverse=True)
    if not names:
        return None
    return re.compile(r"(?<!\w)(" + "|".join(re.escape(t) for t in names) + r")(?!\w)", re.IGNORECASE)


def named_documents(graph: DocGraph, text: str, pattern: re.Pattern | None = None) -> np.ndarray:
    """Sorted document indices (``graph.doc`` values) whose title ``text`` names."""
    pattern = pattern if pattern is not None else title_pattern(graph.titles)
    if pattern is None or not text:
        return np.zeros(0, np.int64)
    found = {m.group(1).lower() for m in pattern.finditer(text)}
    return np.asarray([d for d, t in enumerate(graph.titles) if t.strip().lower() in found], np.int64)
