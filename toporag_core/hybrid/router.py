"""Router: which lines of a document are a table and which are prose.

Structural density score of a block of lines ``b``::

    SDS(b) = (N_num(b) + N_sep(b) + N_ent(b)) / N_total(b)

* tokens: ``re.findall`` of :data:`TOKEN_RE` on every line - words, numbers, HTML table tags,
  ``|``, tabs, runs of 2+ spaces inside a line, commas/semicolons and any other single symbol;
* ``N_num``: numbers (``42``, ``1,200``, ``2.35``, ``12%``);
* ``N_sep``: separators - ``|``, tabs, 2+ space runs (column alignment), ``,``/``;``, the HTML tags
  ``<table> <tr> <td> <th> ...``, plus one "short-line break" per line shorter than
  :attr:`RouterConfig.short_line` characters (table rows are short, wrapped prose lines are not);
* ``N_ent``: entity-like tokens - capitalised words that do not open a sentence, all-caps acronyms
  and codes mixing letters and digits such as ``SKU-123`` or ``LOT7``.

A line's counts are a row of the ``(L, 4)`` matrix ``[num, sep, ent, total]``. Windows of
``window`` (5) consecutive lines, stride 1, never crossing a blank line, get
``SDS = sum(num+sep+ent) / sum(total)`` over the window (prefix sums, no Python loop over
windows). Every line votes with the windows that cover it: it is *structured* when more than
half of them have ``SDS > tau`` (``tau = 0.4``). A paragraph shorter than the window is one window.
Runs of structured lines of at least ``min_run`` (2) lines become table blocks; a lone structured
line goes back to prose (a number-heavy sentence is not a table). Consecutive prose lines
(blank lines cut) form narrative blocks.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np

TOKEN_RE = re.compile(
    r"</?(?:table|thead|tbody|tfoot|tr|td|th)\b[^>]*>"  # HTML table tags (separators)
    r"|\t| {2,}|[|,;]|[-=:]*[-=]{3,}[-=:]*"  # separators (incl. rules such as --- or :---:)
    r"|\d[\d.,:/%]*\d%?|\d%?"  # numbers
    r"|[A-Za-z][\w'&-]*"  # words and codes
    r"|\S",  # any other symbol
    re.IGNORECASE)
_SEP_RE = re.compile(r"^(?:</?(?:table|thead|tbody|tfoot|tr|td|th)\b[^>]*>|\t| {2,}|[|,;]|[-=:]*[-=]{3,}[-=:]*)$",
                     re.IGNORECASE)
_NUM_RE = re.compile(r"^\d[\d.,:/%]*$")
_CODE_RE = re.compile(r"^(?=.*[A-Za-z])(?=.*\d)[A-Za-z0-9][\w-]*$")
_ACRONYM_RE = re.compile(r"^[A-Z]{2,}$")
_SENT_END = {".", "!", "?", ":"}


@dataclass
class RouterConfig:
    """Router settings (see the module docstring).
    ``toporag hybrid``'s options are made from the fields whose metadata carries a ``help``."""

    tau: float = field(default=0.4, metadata={"help": "SDS threshold"})
    window: int = field(default=5, metadata={"help": "window length in lines"})
    min_run: int = 2
    short_line: int = 40

    def __post_init__(self) -> None:
        if not 0.0 <= self.tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1], got {self.tau}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")
        if self.min_run < 1:
            raise ValueError(f"min_run must be >= 1, got {self.min_run}")
        if self.short_line < 0:
            raise ValueError(f"short_line must be >= 0, got {self.short_line}")


@dataclass
class Block:
    """Lines ``[start, end)`` of a document (0-based), ``kind`` "narrative" or "table"."""

    kind: str
    start: int
    end: int
    text: str
    sds: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Routing:
    """Per-line results and the blocks of one document."""

    lines: list[str]
    line_sds: np.ndarray  # (L,) SDS of each line alone (nan on blank lines)
    line_vote: np.ndarray  # (L,) share of covering windows with SDS > tau (nan on blank lines)
    structured: np.ndarray  # (L,) bool, after the min_run rule
    blocks: list[Block] = field(default_factory=list)

    def to_dict(self) -> dict:
        def num(x):
            return None if np.isnan(x) else round(float(x), 4)
        return {"lines": [{"line": i + 1, "sds": num(s), "vote": num(v), "structured": bool(t)}
                          for i, (s, v, t) in enumerate(zip(self.line_sds, self.line_vote, self.structured))],
                "blocks": [b.to_dict() for b in self.blocks]}


def token_counts(line: str, short_line: int = 40) -> np.ndarray:
    """``[num, sep, ent, total]`` for one line (the short-line break included in ``sep``/``total``)."""
    toks = TOKEN_RE.findall(line.strip("\r\n"))
    # leading indentation is not a column separator
    if toks and toks[0].isspace() and line.startswith(toks[0]):
        toks = toks[1:]
    num = sep = ent = 0
    sentence_start = True
    for t in toks:
        if _SEP_RE.match(t):
            sep += 1
            continue
        if _NUM_RE.match(t):
            num += 1
        elif _CODE_RE.match(t) or _ACRONYM_RE.match(t) or (t[0].isupper() and not sentence_start):
            ent += 1
        sentence_start = t in _SENT_END
    total = len(toks)
    if total and len(line.strip()) < short_line:
        sep += 1
        total += 1
    return np.array([num, sep, ent, total], dtype=np.float64)


def route_lines(lines: list[str], config: RouterConfig | None = None) -> Routing:
    """Score, vote and block the lines of one document (see the module docstring)."""
    cfg = config or RouterConfig()
    n = len(lines)
    counts = np.array([token_counts(x, cfg.short_line) for x in lines], dtype=np.float64).reshape(n, 4)
    blank = counts[:, 3] == 0
    dense = counts[:, :3].sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        line_sds = np.where(blank, np.nan, dense / np.maximum(counts[:, 3], 1))
    # paragraphs: maximal runs of non-blank lines; a window never crosses a blank line
    para = np.cumsum(blank)  # same id within a paragraph (blank lines excluded below)
    cd = np.concatenate([[0.0], np.cumsum(dense)])
    ct = np.concatenate([[0.0], np.cumsum(counts[:, 3])])
    idx = np.flatnonzero(~blank)
    votes = np.zeros(n)
    cover = np.zeros(n)
    if idx.size:
        # paragraph bounds for every non-blank line
        pid = para[idx]
        starts = idx[np.r_[True, pid[1:] != pid[:-1]]]
        ends = idx[np.r_[pid[1:] != pid[:-1], True]] + 1
        plen = ends - starts
        w = np.minimum(cfg.window, plen)  # window length per paragraph
        nwin = plen - w + 1
        # every window: (start, end) inside its paragraph
        rep = np.repeat(np.arange(starts.size), nwin)
        off = np.arange(nwin.sum()) - np.repeat(np.cumsum(nwin) - nwin, nwin)
        ws = starts[rep] + off
        we = ws + w[rep]
        sds = (cd[we] - cd[ws]) / np.maximum(ct[we] - ct[ws], 1)
        above = (sds > cfg.tau).astype(np.float64)
        # each window adds its vote to lines [ws, we): difference arrays
        dv = np.zeros(n + 1)
        dc = np.zeros(n + 1)
        np.add.at(dv, ws, above)
        np.add.at(dv, we, -above)
        np.add.at(dc, ws, 1.0)
        np.add.at(dc, we, -1.0)
        votes = np.cumsum(dv)[:n]
        cover = np.cumsum(dc)[:n]
    with np.errstate(invalid="ignore", divide="ignore"):
        vote = np.where(blank, np.nan, votes / np.maximum(cover, 1))
    structured = (~blank) & (np.nan_to_num(vote) > 0.5)
    structured = _trim_edges(structured, np.nan_to_num(line_sds), cfg.tau)
    structured = _drop_short_runs(structured, blank, cfg.min_run)
    blocks = _blocks(lines, structured, blank, line_sds, counts)
    return Routing(lines=lines, line_sds=line_sds, line_vote=vote, structured=structured, blocks=blocks)


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends (exclusive) of the True runs of ``mask``."""
    edges = np.diff(np.r_[0, mask.astype(np.int8), 0])
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _trim_edges(structured: np.ndarray, line_sds: np.ndarray, tau: float) -> np.ndarray:
    """A window vote smears a table's edge onto the prose line next to it (a caption such as
    "Shipments in week 42:"): the first and last lines of a structured run whose own SDS is
    not above ``tau`` are handed back to prose, repeatedly."""
    out = structured.copy()
    for a, b in zip(*_runs(out)):
        while a < b and line_sds[a] <= tau:
            out[a] = False
            a += 1
        while b > a and line_sds[b - 1] <= tau:
            out[b - 1] = False
            b -= 1
    return out


def _drop_short_runs(structured: np.ndarray, blank: np.ndarray, min_run: int) -> np.ndarray:
    """Structured runs (blank lines end a run) shorter than ``min_run`` become prose."""
    out = structured.copy()
    if min_run <= 1 or not out.any():
        return out
    s, e = _runs(out)
    for a, b in zip(s[(e - s) < min_run], e[(e - s) < min_run]):
        out[a:b] = False
    return out


def _blocks(lines, structured, blank, line_sds, counts) -> list[Block]:
    """Maximal runs of same-kind non-blank lines; narrative runs are cut at blank lines, table runs
    too (two tables separated by a blank line are two tables)."""
    blocks: list[Block] = []
    i, n = 0, len(lines)
    while i < n:
        if blank[i]:
            i += 1
            continue
        kind = structured[i]
        j = i
        while j < n and not blank[j] and structured[j] == kind:
            j += 1
        c = counts[i:j]
        sds = float(c[:, :3].sum() / max(c[:, 3].sum(), 1))
        blocks.append(Block("table" if kind else "narrative", i, j, "\n".join(lines[i:j]), round(sds, 4)))
        i = j
    return blocks


def route_text(text: str, config: RouterConfig | None = None) -> Routing:
    """:func:`route_lines` on ``text.splitlines()``."""
    return route_lines(text.splitlines(), config)


def line_f1(pred: np.ndarray, gold: np.ndarray, blank: np.ndarray | None = None) -> dict:
    """Precision, recall and F1 of "structured" over non-blank lines."""
    keep = ~blank if blank is not None else np.ones(len(pred), bool)
    p, g = np.asarray(pred, bool)[keep], np.asarray(gold, bool)[keep]
    tp = float((p & g).sum())
    prec = tp / max(p.sum(), 1)
    rec = tp / max(g.sum(), 1)
    f1 = 2 * prec * rec / max(prec + rec, 1e-12)
    acc = float((p == g).mean()) if p.size else 1.0
    return {"precision": prec, "recall": rec, "f1": f1, "accuracy": acc, "lines": int(p.size)}
