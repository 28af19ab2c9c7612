"""Linear fusion of the lexical, dense and table routes, steered by a question router.

For one question and the ``U`` units of an index, each route gives a score vector: BM25 ``b (U,)``
(:mod:`~toporag_core.hybrid.lexical`), the dense cosine ``d (U,)`` of the question with every unit's
MiniLM vector, and the CALI table score ``c (T,)`` on the table units
(:mod:`~toporag_core.hybrid.index`). Each is min-max scaled over its units (``n_b, n_d, n_c`` in
``[0, 1]``; ``n_c = 0`` on narrative units) and combined::

    s(u) = n_b(u) + w_dense n_d(u) + w_table p_T n_c(u) + w_prior (p_T - 1/2   if u is a table
                                                                    p_X - 1/2   if u is text)
    s'(u) = s(u) + w_doc * max_{v != u, doc(v) = doc(u)} s(v)          (document propagation)

* ``p_T`` / ``p_X``: the **question router**'s probabilities that the answer needs a table / a text
  unit (:class:`QueryRouter`: TF-IDF of word uni+bigrams, two logistic regressions); without a
  router ``p_T = p_X = 1`` (the prior term is then the same for every unit and changes nothing).
* Document propagation: a unit whose document (TAT-QA: its context; a user corpus: its file) holds
  another strong unit moves up; table-text questions need both units of one document.

The weights are fitted by :func:`fit_weights` on one half of the TAT-QA test contexts (a seeded split,
:func:`toporag_core.hybrid.tatqa.split_by_context`): a grid search maximising the *worst* per-source
margin of nDCG@10 over the better of BM25 and dense (so no answer source is sacrificed for the mean),
with the router's probabilities on that half cross-fitted (5 folds) so the weights do not trust an
over-confident router. The numbers reported are on the other half.
"""
from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import asdict, dataclass

import numpy as np

_ROUTER_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern


@dataclass
class FusionWeights:
    """Weights of the linear fusion (module docstring); the defaults are the fitted ones
    (docs/results/hybrid_tatqa.md, fit half of the TAT-QA test contexts, seed 0)."""

    w_dense: float = 0.5
    w_table: float = 0.25
    w_prior: float = 0.0
    w_doc: float = 0.3
    use_router: bool = True

    def __post_init__(self) -> None:
        for name in ("w_dense", "w_table", "w_prior", "w_doc"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict:
        return asdict(self)


def minmax_rows(x: np.ndarray) -> np.ndarray:
    """Min-max scale each row to ``[0, 1]`` over its finite entries; ``nan``/``-inf`` and constant rows give 0."""
    x = np.where(np.isfinite(x), x, np.nan)
    with np.errstate(all="ignore"):
        lo = np.nanmin(x, axis=-1, keepdims=True)
        hi = np.nanmax(x, axis=-1, keepdims=True)
        out = (x - lo) / np.where(hi - lo > 1e-12, hi - lo, np.inf)
    return np.nan_to_num(out, nan=0.0)


class DocGroups:
    """Units grouped by document: ``propagate(s, w)`` adds ``w`` times the best *other* unit of the
    same document to each unit's score (vectorised with ``reduceat`` over documents)."""

    def __init__(self, doc_ids: list[str]) -> None:
        _, gid = np.unique(np.array(doc_ids, dtype=object).astype(str), return_inverse=True)
        self.order = np.argsort(gid, kind="stable")
        g = gid[self.order]
        self.bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if g.size else np.zeros(0, int)
        self.group = np.repeat(np.arange(self.bounds.size), np.diff(np.r_[self.bounds, g.size]))

    def propagate(self, s: np.ndarray, w: float) -> np.ndarray:
        """``s (..., U)`` -> ``s + w * max over the other units of the same document`` (0 when alone)."""
        if w == 0 or s.shape[-1] == 0:
            return s
        ss = s[..., self.order]
        m1 = np.maximum.reduceat(ss, self.bounds, axis=-1)[..., self.group]
        is_max = ss >= m1 - 1e-12
        m2 = np.maximum.reduceat(np.where(is_max, -np.inf, ss), self.bounds, axis=-1)[..., self.group]
        other = np.where(is_max, m2, m1)
        # the max itself: the second best of its document (a tie for max: the other max)
        tie = is_max & (np.add.reduceat(is_max.astype(np.int32), self.bounds, axis=-1)[..., self.group] > 1)
        other = np.where(tie, m1, other)
        out = np.empty_like(s)
        out[..., self.order] = ss + w * np.where(np.isfinite(other), other, 0.0)
        return out


def normalise_routes(bm25: np.ndarray, dense: np.ndarray, table: np.ndarray,
                     is_table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(n_b, n_d, n_c)``: each route min-max scaled over its units, ``n_c = 0`` on narrative units."""
    return minmax_rows(bm25), minmax_rows(dense), np.where(is_table, minmax_rows(table), 0.0)


def combine(norm: tuple[np.ndarray, np.ndarray, np.ndarray], is_table: np.ndarray, groups: DocGroups,
            weights: FusionWeights, p_table=1.0, p_text=1.0) -> np.ndarray:
    """The fused score ``s'`` from normalised routes (:func:`normalise_routes`)."""
    n_b, n_d, n_c = norm
    if not weights.use_router:
        p_table = p_text = 1.0
    s = n_b + weights.w_dense * n_d + weights.w_table * np.asarray(p_table) * n_c
    if weights.w_prior:
        s = s + weights.w_prior * np.where(is_table, np.asarray(p_table) - 0.5, np.asarray(p_text) - 0.5)
    return groups.propagate(s, weights.w_doc)


def fuse_scores(bm25: np.ndarray, dense: np.ndarray, table: np.ndarray, is_table: np.ndarray, groups: DocGroups,
                weights: FusionWeights, p_table=1.0, p_text=1.0) -> np.ndarray:
    """The fused score ``s'`` (module docstring) of every unit; inputs ``(..., U)`` (``table`` is
    ``nan``/``-inf`` on narrative units); ``p_table``/``p_text`` scalars or ``(..., 1)``."""
    return combine(normalise_routes(bm25, dense, table, is_table), is_table, groups, weights, p_table, p_text)


class QueryRouter:
    """``p(table needed | question)`` and ``p(text needed | question)``: TF-IDF (word 1-2 grams,
    sublinear tf, l2) and two logistic regressions, stored as JSON (vocabulary, idf, coefficients).
    Fitted with scikit-learn; applied in numpy (equal to scikit-learn's ``predict_proba``: tested)."""

    def __init__(self, vocab: dict[str, int], idf: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> None:
        self.vocab = dict(vocab)
        self.idf = np.asarray(idf, np.float64)
        self.coef = np.asarray(coef, np.float64).reshape(2, -1)  # rows: table, text
        self.intercept = np.asarray(intercept, np.float64).reshape(2)

    def features(self, question: str) -> np.ndarray:
        toks = _ROUTER_TOKEN.findall(question.lower())
        grams = toks + [f"{a} {b}" for a, b in zip(toks, toks[1:])]
        x = np.zeros(len(self.vocab))
        for g in grams:
            j = self.vocab.get(g)
            if j is not None:
                x[j] += 1
        nz = x > 0
        x[nz] = (1 + np.log(x[nz])) * self.idf[nz]
        n = np.linalg.norm(x)
        return x / n if n > 0 else x

    def predict(self, question: str) -> tuple[float, float]:
        z = self.coef @ self.features(question) + self.intercept
        p = 1 / (1 + np.exp(-z))
        return float(p[0]), float(p[1])

    @classmethod
    def fit(cls, questions: list[str], needs_table: np.ndarray, needs_text: np.ndarray, c: float = 1.0,
            min_df: int = 2) -> "QueryRouter":
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=min_df, sublinear_tf=True).fit(questions)
        x = vec.transform(questions)
        heads = [LogisticRegression(C=c, max_iter=2000).fit(x, y) for y in (needs_table, needs_text)]
        return cls({k: int(v) for k, v in vec.vocabulary_.items()}, vec.idf_,
                   np.stack([h.coef_[0] for h in heads]), np.array([h.intercept_[0] for h in heads]))

    @staticmethod
    def cross_fit(questions: list[str], needs_table: np.ndarray, needs_text: np.ndarray, folds: int = 5,
                  seed: int = 0) -> np.ndarray:
        """``(n, 2)`` out-of-fold probabilities (each question scored by a router not fitted on it)."""
        out = np.zeros((len(questions), 2))
        fold = np.random.default_rng(seed).permutation(len(questions)) % folds
        for f in range(folds):
            tr, te = fold != f, fold == f
            r = QueryRouter.fit([q for q, t in zip(questions, tr) if t], needs_table[tr], needs_text[tr])
            out[te] = [r.predict(q) for q, t in zip(questions, te) if t]
        return out

    def to_dict(self) -> dict:
        return {"vocab": self.vocab, "idf": self.idf.tolist(), "coef": self.coef.tolist(),
                "intercept": self.intercept.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "QueryRouter":
        return cls(d["vocab"], np.array(d["idf"]), np.array(d["coef"]), np.array(d["intercept"]))


GRID = {"w_dense": (0.25, 0.5, 1.0), "w_table": (0.25, 0.5, 1.0), "w_doc": (0.0, 0.2, 0.3, 0.5),
        "w_prior": (0.0, 0.25, 0.5, 1.0)}


def fit_weights(route_scores: dict[str, np.ndarray], gold: np.ndarray, sources: np.ndarray, is_table: np.ndarray,
                groups: DocGroups, p: np.ndarray, grid: dict | None = None) -> tuple[FusionWeights, list[dict]]:
    """Grid search (module docstring). ``route_scores``: ``bm25``, ``dense``, ``table`` each ``(Q, U)``;
    ``gold (Q, U)`` bool; ``sources (Q,)`` answer source; ``p (Q, 2)`` router probabilities. Returns the
    best weights and every grid point's per-source nDCG@10 (best first)."""
    from .metrics import ndcg_at_k

    grid = grid or GRID
    base = {m: ndcg_at_k(route_scores[m], gold) for m in ("bm25", "dense")}
    kinds = sorted(set(sources.tolist()))
    ref = {s: max(base["bm25"][sources == s].mean(), base["dense"][sources == s].mean()) for s in kinds}
    rows = []
    norm = normalise_routes(route_scores["bm25"], route_scores["dense"], route_scores["table"], is_table)
    for vals in itertools.product(*grid.values()):
        w = FusionWeights(**dict(zip(grid.keys(), vals)))
        nd = ndcg_at_k(combine(norm, is_table, groups, w, p[:, :1], p[:, 1:]), gold)
        per = {s: float(nd[sources == s].mean()) for s in kinds}
        rows.append({"weights": w.to_dict(), "ndcg10": float(nd.mean()), "by_source": per,
                     "worst_margin": min(per[s] - ref[s] for s in kinds)})
    rows.sort(key=lambda r: (-round(r["worst_margin"], 4), -r["ndcg10"]))
    return FusionWeights(**rows[0]["weights"]), rows


def save_json_atomic(path, obj) -> None:
    """Write JSON to ``path`` through a temporary file and ``os.replace`` (never half-written)."""
    import os
    import uuid
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(json.dumps(obj, ensure_ascii=False))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
