"""Does the leave-one-out attribution point at the answer? The hit rule, the random baseline, the verdicts.

:func:`~.graph_effect.attribute` ranks the retrieved cells by what removing each (from its graph tokens and
its context lines) does to the answer's log-probability. That ranking explains an answer only if its top
cell is where the answer is. ``benchmarks/bench_attribution.py`` measures it on the shipped checkpoints'
test questions with the rule below; docs/results/attribution.md has the table and the command, and
:data:`VERDICTS` records, per shipped checkpoint, whether the attribution beat a random retrieved cell (the
page shows the attribution as an explanation only then, :func:`attribution_verdict`).

**Answer nodes** ``A`` of one question (:func:`answer_nodes`), in the parent graph:

* the nodes the data names as answer-bearing (``support``: SceneGraphs node ids, the general task's
  entity names matched normalised against the node texts);
* for an open answer, the nodes whose normalised text contains the model's (normalised) answer as whole
  words: the attribution explains the answer given, right or wrong;
* ExplaGraphs (a label, no support): for a ``counter`` answer, the endpoints of the 1-cells whose
  relation negates (``not ...``, ``antonym of``), the cue a counter rests on; a ``support`` answer has
  no answer-bearing cell and is not counted.

**Hit** (:func:`cell_hits`): a retrieved cell hits when its closure contains an answer node (a 0-cell that
is one, a 1-cell with one as an endpoint, a 2-cell with one on its boundary), or, for a 0-cell, when it
shares a retrieved 1-cell with one. **Top-attributed**: the cell whose removal lowers the answer's
log-probability most (a tie at the top counts each tied cell equally, :func:`top_hit`). **Random**: a
uniformly random attributed cell, whose hit rate ``r`` is the share of hitting cells, exact, no sampling.

**Tests** over ``n`` questions with top hits ``h_i in [0, 1]`` and random rates ``r_i``
(:func:`compare_to_random`): the one-sided exact test of ``sum h_i`` against the Poisson-binomial law of
``sum Bernoulli(r_i)`` (the top cell drawn at random, :func:`poisson_binomial_sf`), and a paired two-sided
sign test on ``sign(h_i - r_i)``.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from math import comb
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..metrics import normalize
from ..answering.route import CHECKPOINT_ROOT

NEGATION = re.compile(r"\bnot\b|\bantonym", re.IGNORECASE)  # ExplaGraphs' stance cue (benchmarks/bench_expla_cue.py)
TIE = 1e-9  # drops within this of the top drop tie for the top


def answer_nodes(cx, answer: str | None = None, support: Iterable[int] = (), support_names: Iterable[str] = (),
                 negation_cue: bool = False) -> np.ndarray:
    """Sorted node ids of ``cx`` (a :class:`~toporag_core.cells.complex.CellComplex`) that bear the answer (module
    docstring): ``support`` ids, nodes whose normalised text equals one of ``support_names``, nodes whose text
    contains the open ``answer`` as whole words, and with ``negation_cue`` the endpoints of negating relations."""
    texts = [f" {normalize(t)} " for t in cx.graph.node_text]
    out = set(int(i) for i in support)
    names = {normalize(s) for s in support_names} - {""}
    a = normalize(answer or "")
    out.update(i for i, t in enumerate(texts) if t.strip() in names or (a and f" {a} " in t))
    if negation_cue:
        g = cx.graph
        neg = np.array([bool(NEGATION.search(r)) for r in g.edge_text], bool)
        if neg.size:
            out.update(np.unique(g.edge_index[:, neg]).tolist())
    return np.array(sorted(out), np.int64)


def cell_hits(sub, cells: Sequence[tuple[int, int]], targets: np.ndarray) -> np.ndarray:
    """``(K,)`` bool: whether each ``(dim, cell id)`` of the retrieved ``sub`` hits the answer nodes ``targets``
    (module docstring: its closure holds one, or a 0-cell shares a retrieved 1-cell with one)."""
    cx = sub.complex
    targets = np.asarray(targets, np.int64)
    ends = cx.edges[np.asarray(sub.edges, np.int64)].reshape(-1, 2)
    on_target = np.isin(ends, targets)
    near = np.union1d(targets, ends[on_target[:, ::-1]])  # the other endpoint of a retrieved 1-cell on a target
    out = np.zeros(len(cells), bool)
    for k, (dim, c) in enumerate(cells):
        if dim == 0:
            out[k] = np.isin(c, near)
        elif dim == 1:
            out[k] = np.isin(cx.edges[c], targets).any()
        else:
            out[k] = np.isin(cx.cell2_nodes(c), targets).any()
    return out


def top_hit(drops: np.ndarray, hits: np.ndarray) -> float:
    """The hit of the top-attributed cell: the mean hit over the cells whose drop ties the largest (a share in
    ``[0, 1]``; ``nan`` without cells)."""
    drops = np.asarray(drops, float)
    if drops.size == 0:
        return float("nan")
    top = drops >= drops.max() - TIE
    return float(np.asarray(hits, float)[top].mean())


def poisson_binomial_sf(k: float, probs: Sequence[float]) -> float:
    """``P(sum_i X_i >= k)`` for independent ``X_i ~ Bernoulli(probs[i])`` (exact, by convolution)."""
    pmf = np.ones(1)
    for p in np.asarray(probs, float):
        pmf = np.convolve(pmf, [1.0 - p, p])
    idx = int(np.ceil(k - 1e-9))
    return float(min(1.0, pmf[idx:].sum())) if idx < pmf.size else 0.0


@dataclass(frozen=True)
class RandomComparison:
    """Top-attributed against a random attributed cell over ``n`` questions."""

    n: int
    top_rate: float  # mean top hit
    random_rate: float  # mean exact random hit rate
    p_exact: float  # one-sided: P(random top cells hit at least as often)
    above: int  # questions where the top cell hits more than a random one would (h_i > r_i)
    below: int
    p_sign: float  # two-sided sign test on above / below

    @property
    def beats_random(self) -> bool:
        """The top cell hits more often than a random one, at the 5% level of the exact test."""
        return self.n > 0 and self.top_rate > self.random_rate and self.p_exact < 0.05


def compare_to_random(top: Sequence[float], rates: Sequence[float]) -> RandomComparison:
    """The two tests of the module docstring on per-question top hits ``top`` and random rates ``rates``."""
    h, r = np.asarray(top, float), np.asarray(rates, float)
    n = int(h.size)
    if n == 0:
        return RandomComparison(0, float("nan"), float("nan"), 1.0, 0, 0, 1.0)
    above, below = int((h > r + 1e-12).sum()), int((h < r - 1e-12).sum())
    m = above + below
    p_sign = min(1.0, 2 * sum(comb(m, i) for i in range(min(above, below) + 1)) / 2 ** m) if m else 1.0
    return RandomComparison(n, float(h.mean()), float(r.mean()), poisson_binomial_sf(h.sum(), r), above, below,
                            p_sign)


# ----------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """One shipped checkpoint's measurement (docs/results/attribution.md): the weights it was measured on
    (sha256 of ``model.safetensors``, first 16 hex digits), whether the text+token attribution beat a random
    retrieved cell, and the rates."""

    sha: str
    beats_random: bool
    top_rate: float
    random_rate: float
    p_exact: float
    n: int


# Written from the run in docs/results/attribution.md (python benchmarks/bench_attribution.py prints these
# lines); tests/test_graph_effect.py checks they agree with that file and with the shipped weights.
VERDICTS: dict[str, Verdict] = {
    "expla_graphs": Verdict(sha="6049094f46c4fbd5", beats_random=True, top_rate=0.967, random_rate=0.791, p_exact=0.0029, n=30),  # noqa: E501
    "scene_graphs": Verdict(sha="008ee09ad4e0533c", beats_random=False, top_rate=0.571, random_rate=0.634, p_exact=0.83, n=7),  # noqa: E501
    "general": Verdict(sha="dca9f5afa952b551", beats_random=True, top_rate=0.792, random_rate=0.374, p_exact=8.6e-06, n=24),  # noqa: E501
}


@lru_cache(maxsize=8)
def _sha(path: str, mtime: float) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def weights_sha(folder: str | Path) -> str | None:
    """The first 16 hex digits of the sha256 of ``folder/model.safetensors`` (``None`` when absent)."""
    f = Path(folder) / "model.safetensors"
    return _sha(str(f), f.stat().st_mtime) if f.is_file() else None


def verdict_for(checkpoint: str) -> Verdict | None:
    """The measured verdict of ``checkpoint`` (a folder): a shipped checkpoint under :data:`CHECKPOINT_ROOT`
    with the weights that were measured; ``None`` for any other folder (or retrained weights)."""
    try:
        folder = Path(checkpoint).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    v = VERDICTS.get(folder.name)
    if v is None or folder != (CHECKPOINT_ROOT / folder.name).resolve() or weights_sha(folder) != v.sha:
        return None
    return v


def attribution_verdict(checkpoint: str) -> tuple[bool, str]:
    """``(show the attribution as an explanation, the line that goes with it)`` for ``checkpoint``: a measured
    checkpoint whose attribution did not beat random gets ``False`` and a line saying so; an unmeasured one
    ``True`` with a line saying it was not measured."""
    v = verdict_for(checkpoint)
    if v is None:
        return True, ("This checkpoint's attribution was not measured against a random retrieved cell "
                      "(docs/results/attribution.md measures the shipped ones): read it with care.")
    rates = (f"its top cell held or neighboured the answer in {v.top_rate:.0%} of {v.n} test questions, "
             f"a random retrieved cell in {v.random_rate:.0%} (exact p = {v.p_exact:.2g})")
    if v.beats_random:
        return True, f"Measured on this checkpoint: {rates} (docs/results/attribution.md)."
    return False, (f"Not shown as an explanation: for this checkpoint the attribution did not beat a random "
                   f"retrieved cell in the benchmark: {rates} (docs/results/attribution.md).")
