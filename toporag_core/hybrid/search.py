"""Two routes and their fusion: the hybrid retriever.

* **Route A (narrative)**: one embedding per narrative unit, ``X_A (N_A, d)``; the question
  vector ``q (d,)``; exact search ``s_A = X_A q`` (cosine, vectors are unit length).
* **Route B (tables, CALI)**: :class:`~toporag_core.hybrid.index.CellIndex` over every table unit
  with the question's unigram/bigram term vectors ``Q (K, d)``; ``s_B`` = MaxSim or the
  row-aware score (default).
* **Fusion**: the top-``k`` of each route, min-max scaled per route to ``[0, 1]``
  (``(s - min) / (max - min)``; a single hit or equal scores give 1). ``fusion="weighted"``
  (default) then multiplies each route's scaled scores by its *confidence* ``c_r / max(c_A, c_B)``
  with ``c_A`` = best cosine and ``c_B`` = best table score / K (mean best cosine per query term),
  so the route whose best hit fits the question better leads; ``c_B`` is multiplied by
  ``table_scale = 1.6`` because a mean of per-term best cosines of short cell texts sits lower
  than a sentence cosine (the scale was fitted on the validation split of the default corpus:
  the value with the best mean nDCG@10 over A/B/C; see docs/hybrid.md). ``fusion="minmax"`` uses
  the scaled scores as they are (both routes' best hits tie at 1). Units are disjoint between routes, so the
  merge is a sort of the union.
* **Linear fusion** (``fusion="linear"``, the default for indexes with a lexical route, i.e. every
  index written since version 2): BM25 over every unit (:mod:`~toporag_core.hybrid.lexical`), the
  dense cosine of every unit (narrative text; tables as :func:`~toporag_core.hybrid.tables.table_text`)
  and the CALI score of the tables, min-max scaled and summed with fitted weights, steered by the
  question router and propagated within a document (:mod:`~toporag_core.hybrid.fusion`).
* **Reranking** (optional): a cross-encoder (any local ``sentence_transformers.CrossEncoder``
  folder, or any object with ``predict(pairs)``) re-scores the fused top-``k`` on
  ``(question, textualized unit)``.

Textualization for the LLM: a narrative unit as its text; a table as its header plus the
``rows_per_table`` rows with the highest row coverage ``R(g)`` (Markdown).
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .documents import ParsedDocument, Unit
from .fusion import DocGroups, FusionWeights, QueryRouter, fuse_scores
from .index import CellIndex, ReductionConfig, query_terms
from .lexical import Lexical
from .tables import Table, table_text

ROUTES = ("narrative", "table", "both")
FUSIONS = ("linear", "weighted", "minmax")
TABLE_SCORES = ("rowaware", "maxsim")
TABLE_SCALE = 1.6  # fitted on the validation split of the default corpus (docs/hybrid.md)
INDEX_VERSION = 2
FUSION_FILE = "fusion.json"  # fitted fusion weights + question router (toporag hybrid fit), optional


@dataclass
class SearchConfig:
    """Query-time settings. ``toporag hybrid``'s options are made from the fields whose metadata carries a ``help``."""

    k: int = field(default=10, metadata={"help": "top-k per route and after fusion"})
    route: str = field(default="both", metadata={"help": "the routes searched", "choices": ROUTES})
    table_score: str = field(default="rowaware", metadata={"help": "table score", "flag": "--score",
                                                           "choices": TABLE_SCORES})
    lam: float = 0.5
    fusion: str = field(default="linear", metadata={
        "help": "linear: BM25 + dense + CALI with the fitted weights; weighted/minmax: the two-route fusions of "
                "dense prose + CALI", "choices": FUSIONS})
    weights: FusionWeights | None = None  # linear fusion; None: the index's fitted weights, else the defaults
    table_scale: float = TABLE_SCALE
    rows_per_table: int = 3

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.route not in ROUTES:
            raise ValueError(f"route must be one of {ROUTES}, got {self.route!r}")
        if self.table_score not in TABLE_SCORES:
            raise ValueError(f"table_score must be 'maxsim' or 'rowaware', got {self.table_score!r}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {self.lam}")
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        if self.table_scale <= 0:
            raise ValueError(f"table_scale must be > 0, got {self.table_scale}")
        if self.rows_per_table < 1:
            raise ValueError(f"rows_per_table must be >= 1, got {self.rows_per_table}")


def minmax(s: np.ndarray) -> np.ndarray:
    """``(s - min) / (max - min)``; all ones when the scores are equal (or there is one)."""
    s = np.asarray(s, np.float64)
    if s.size == 0:
        return s
    lo, hi = s.min(), s.max()
    return np.ones_like(s) if hi - lo < 1e-12 else (s - lo) / (hi - lo)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest finite scores, best first (stable for ties)."""
    ok = np.flatnonzero(np.isfinite(scores))
    return ok[np.argsort(-scores[ok], kind="stable")[:k]]


class HybridIndex:
    """Units of a corpus with every route's index: dense vectors of all units ``unit_vecs (U, d)``,
    the CALI cell index of the tables, and (version 2) the BM25 arrays of all units."""

    def __init__(self, units: list[Unit], unit_vecs: np.ndarray, cali: CellIndex, encoder=None,
                 meta: dict | None = None, lexical: Lexical | None = None, fusion: dict | None = None) -> None:
        self.units = units
        self.narr_idx = np.array([i for i, u in enumerate(units) if u.kind == "narrative"], dtype=np.int64)
        self.table_idx = np.array([i for i, u in enumerate(units) if u.kind == "table"], dtype=np.int64)
        if unit_vecs.shape[0] != len(units):
            raise ValueError(f"unit_vecs has {unit_vecs.shape[0]} rows for {len(units)} units")
        if cali.num_tables != self.table_idx.size:
            raise ValueError(f"CALI index has {cali.num_tables} tables for {self.table_idx.size} table units")
        self.unit_vecs = np.asarray(unit_vecs, np.float32)
        self.narr_vecs = self.unit_vecs[self.narr_idx]
        self.is_table = np.zeros(len(units), bool)
        self.is_table[self.table_idx] = True
        self.cali = cali
        self.encoder = encoder
        self.meta = dict(meta or {})
        self.lexical = lexical
        self.groups = DocGroups([u.doc_id for u in units])
        self.fusion = dict(fusion or {})  # {"weights": {...}, "router": {...}, "fit": {...}} from fusion.json
        self.router = QueryRouter.from_dict(self.fusion["router"]) if self.fusion.get("router") else None
        self._term_vecs: dict[str, np.ndarray] = {}

    # -- construction ------------------------------------------------------------------
    @classmethod
    def build(cls, docs: list[ParsedDocument], encoder, row_tag: bool = False,
              reduction: ReductionConfig | None = None) -> "HybridIndex":
        """Index the units of parsed documents (see :meth:`build_units`)."""
        idx = cls.build_units([u for d in docs for u in d.units], encoder, row_tag, reduction)
        idx.meta["warnings"] = [w for d in docs for w in d.warnings]
        return idx

    @classmethod
    def build_units(cls, units: list[Unit], encoder, row_tag: bool = False,
                    reduction: ReductionConfig | None = None, show_progress: bool = False) -> "HybridIndex":
        """Embed every unit (tables as :func:`~toporag_core.hybrid.tables.table_text`) and every kept
        cell, index the unit texts with BM25. With a cached encoder (:func:`toporag_core.embed.get_encoder`)
        each chunk of vectors is committed as it is made, so a killed build resumes where it stopped."""
        t0 = time.perf_counter()
        texts = [index_text(u) for u in units]
        enc_kw = {"show_progress": True} if show_progress else {}
        vecs = encoder.encode(texts, **enc_kw) if texts else np.zeros((0, encoder.dim), np.float32)
        tables = [u.table for u in units if u.kind == "table"]
        if show_progress and hasattr(encoder, "prefetch"):
            from .index import cell_text, is_stop_cell

            red = reduction or ReductionConfig(drop_stop_cells=False)
            encoder.encode([cell_text(t.header[j], v, (r[0] if row_tag and r else None)) for t in tables
                            for r in t.rows for j, v in enumerate(r)
                            if not (red.drop_stop_cells and is_stop_cell(v))], show_progress=True)
        cali = CellIndex.build(tables, encoder, row_tag=row_tag, reduction=reduction)
        lexical = Lexical.build(texts)
        meta = {"encoder": encoder.name, "dim": encoder.dim, "row_tag": row_tag,
                "reduction": asdict(reduction) if reduction else None, "build_s": time.perf_counter() - t0,
                "warnings": []}
        return cls(units, np.asarray(vecs, np.float32), cali, encoder, meta, lexical)

    def describe(self) -> dict:
        return {"units": len(self.units), "narrative": int(self.narr_idx.size), "tables": int(self.table_idx.size),
                "encoder": self.meta.get("encoder"), "cali": self.cali.describe(),
                "narrative_bytes": int(self.narr_vecs.nbytes), "unit_bytes": int(self.unit_vecs.nbytes),
                "lexical_terms": len(self.lexical.vocab) if self.lexical else 0,
                "fitted_fusion": self.fusion.get("weights"), "router": self.router is not None}

    # -- persistence (safetensors + JSON, atomic) ---------------------------------------
    def save(self, folder: str | os.PathLike) -> Path:
        """``index.safetensors`` + ``index.json`` (each written to a temporary file and renamed; a shared
        random token in both tells a reader that they come from one write)."""
        from safetensors.numpy import save_file

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex
        arrays = {"unit_vecs": self.unit_vecs, **self.cali.arrays(), **(self.lexical.arrays() if self.lexical else {})}
        units = [{"doc_id": u.doc_id, "kind": u.kind, "start": u.start, "end": u.end, "text": u.text, "sds": u.sds,
                  "table": u.table.to_dict() if u.table else None} for u in self.units]
        meta = {"version": INDEX_VERSION, "token": token, "meta": self.meta, "cali": self.cali.meta(),
                "lexical": self.lexical.meta() if self.lexical else None, "units": units}
        for name, write in (("index.safetensors", lambda p: save_file(arrays, str(p), metadata={"token": token})),
                            ("index.json", lambda p: p.write_text(json.dumps(meta, ensure_ascii=False)))):
            tmp = out / f".{name}.{token}.tmp"
            try:
                write(tmp)
                os.replace(tmp, out / name)
            finally:
                tmp.unlink(missing_ok=True)
        (out / FUSION_FILE).unlink(missing_ok=True)  # fitted for other units: refit (toporag hybrid fit)
        return out

    @classmethod
    def load(cls, folder: str | os.PathLike, encoder=None) -> "HybridIndex":
        """Open an index folder; ``encoder=None`` attaches the numpy MiniLM on the first question
        (:mod:`~toporag_core.embed.minilm_numpy`: no torch import, the first query in well under 1 s)."""
        from safetensors import safe_open
        from safetensors.numpy import load_file

        folder = Path(folder)
        jpath, apath = folder / "index.json", folder / "index.safetensors"
        if not jpath.is_file() or not apath.is_file():
            raise FileNotFoundError(f"{folder}: not a hybrid index (index.json + index.safetensors expected)")
        try:
            meta = json.loads(jpath.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{jpath}: damaged index file ({e}); rebuild it with `toporag hybrid index`") from None
        if not isinstance(meta, dict) or meta.get("version") != INDEX_VERSION:
            got = meta.get("version") if isinstance(meta, dict) else None
            raise ValueError(f"{jpath}: index version {got} (expected {INDEX_VERSION}); rebuild it")
        with safe_open(str(apath), framework="numpy") as f:
            if (f.metadata() or {}).get("token") != meta["token"]:
                raise ValueError(f"{folder}: index.json and index.safetensors come from different writes; rebuild")
        arrays = load_file(str(apath))
        units = [Unit(u["doc_id"], u["kind"], u["start"], u["end"], u["text"], u["sds"],
                      Table(u["table"]["header"], u["table"]["rows"], u["table"]["format"], u["table"]["warnings"])
                      if u["table"] else None) for u in meta["units"]]
        lexical = Lexical.from_arrays(arrays, meta["lexical"]) if meta.get("lexical") else None
        fusion = None
        fpath = folder / FUSION_FILE
        if fpath.is_file():
            try:
                fusion = json.loads(fpath.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ValueError(f"{fpath}: damaged fusion file ({e}); refit with `toporag hybrid fit`") from None
            if fusion.get("token") != meta["token"]:
                raise ValueError(f"{fpath}: fitted for another build of this index; refit with `toporag hybrid fit`")
        return cls(units, arrays["unit_vecs"], CellIndex.from_arrays(arrays, meta["cali"]), encoder, meta["meta"],
                   lexical, fusion)

    def save_fusion(self, folder: str | os.PathLike, weights: FusionWeights, router: QueryRouter | None,
                    fit: dict) -> Path:
        """Write ``fusion.json`` (atomically) next to the index: fitted weights, router, how they were fitted."""
        from .fusion import save_json_atomic

        folder = Path(folder)
        token = json.loads((folder / "index.json").read_text(encoding="utf-8"))["token"]
        self.fusion = {"token": token, "weights": weights.to_dict(),
                       "router": router.to_dict() if router else None, "fit": fit}
        self.router = router
        save_json_atomic(folder / FUSION_FILE, self.fusion)
        return folder / FUSION_FILE

    # -- search ------------------------------------------------------------------------
    def query_encoder(self):
        """The attached encoder, else the numpy MiniLM when the index was built with MiniLM."""
        if self.encoder is None:
            from ..embed import NUMPY_MINILM, get_encoder
            from ..embed.minilm_numpy import NumpyMiniLM

            if self.meta.get("encoder") != NumpyMiniLM.name:
                raise ValueError(f"this index was built with encoder {self.meta.get('encoder')!r}; pass encoder= "
                                 "to HybridIndex.load")
            self.encoder = get_encoder(NUMPY_MINILM, cached=False)
        return self.encoder

    def encode_query(self, question: str) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(terms, q (d,), Q (K, d))``: the question vector and its terms' vectors (texts already seen,
        or given to :meth:`warm_queries`, come from memory)."""
        terms = query_terms(question) or [question.strip()]
        new = [t for t in dict.fromkeys([question] + terms) if t not in self._term_vecs]
        if new:
            vecs = self.query_encoder().encode(new)
            if len(self._term_vecs) > 50_000:
                self._term_vecs.clear()
            self._term_vecs.update(zip(new, vecs))
        return terms, self._term_vecs[question], np.stack([self._term_vecs[t] for t in terms])

    def warm_queries(self, questions: list[str], encoder) -> None:
        """Encode many questions and their terms in one batched call of ``encoder`` (e.g. a
        :class:`~toporag_core.embed.CachedEncoder` around the same model) before searching them:
        evaluation and fitting, where per-question latency is not what is measured."""
        texts = list(dict.fromkeys(t for q in questions for t in [q] + (query_terms(q) or [q.strip()])))
        texts = [t for t in texts if t not in self._term_vecs]
        if texts:
            self._term_vecs.update(zip(texts, np.asarray(encoder.encode(texts), np.float32)))

    def route_narrative(self, qvec: np.ndarray) -> np.ndarray:
        """``(N_A,)`` cosine of every narrative unit."""
        return self.narr_vecs @ np.asarray(qvec, np.float32)

    def route_scores(self, question: str, cfg: SearchConfig | None = None) -> dict[str, Any]:
        """Every route's raw scores over all ``U`` units: ``bm25``, ``dense`` (cosine), ``table`` (CALI,
        ``nan`` on narrative units), plus ``terms``, ``cell_sims``, ``best_row`` and the router's ``p``."""
        cfg = cfg or SearchConfig()
        t0 = time.perf_counter()
        terms, qvec, qterms = self.encode_query(question)
        encode_s = time.perf_counter() - t0
        from ..embed import single_thread_blas

        with single_thread_blas():
            dense = self.unit_vecs @ np.asarray(qvec, np.float32)
            table = np.full(len(self.units), np.nan)
            sc = self.cali.scores(qterms, mode=cfg.table_score, lam=cfg.lam) if self.table_idx.size else None
        if sc is not None:
            table[self.table_idx] = np.where(np.isfinite(sc["score"]), sc["score"], np.nan)
        bm25 = self.lexical.scores(question) if self.lexical else np.zeros(len(self.units))
        p = self.router.predict(question) if self.router else (1.0, 1.0)
        return {"terms": terms, "qvec": qvec, "bm25": bm25, "dense": dense, "table": table, "p": p,
                "encode_s": encode_s, "cell_sims": sc["cell_sims"] if sc else None, "cali": sc}

    def fusion_weights(self, cfg: SearchConfig) -> FusionWeights:
        if cfg.weights is not None:
            return cfg.weights
        return FusionWeights(**self.fusion["weights"]) if self.fusion.get("weights") else FusionWeights()

    def search(self, question: str, config: SearchConfig | None = None, reranker=None) -> dict[str, Any]:
        """All routes, fusion and optional reranking for one question (see the module docstring)."""
        cfg = config or SearchConfig()
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        if cfg.fusion == "linear" and self.lexical is None:
            cfg = replace(cfg, fusion="weighted")
        t0 = time.perf_counter()
        rs = self.route_scores(question, cfg)
        t1 = time.perf_counter()
        out: dict[str, Any] = {"question": question, "terms": rs["terms"], "narrative": [], "table": [],
                               "lexical": [], "dense": [], "router": {"p_table": rs["p"][0], "p_text": rs["p"][1]}}
        conf = {}
        if self.narr_idx.size:
            s = rs["dense"][self.narr_idx]
            top = top_k(s, cfg.k)
            out["narrative"] = [{"unit": int(self.narr_idx[i]), "uid": self.units[self.narr_idx[i]].uid,
                                 "score": float(s[i])} for i in top]
            conf["narrative"] = float(s[top[0]]) if top.size else 0.0
        sc = rs["cali"]
        if sc is not None:
            top = top_k(sc["score"], cfg.k)
            out["table"] = [{"unit": int(self.table_idx[t]), "uid": self.units[self.table_idx[t]].uid,
                             "table": int(t), "score": float(sc["score"][t]), "maxsim": float(sc["maxsim"][t]),
                             "row_score": float(sc["row"][t]), "best_row": int(sc["best_row"][t])} for t in top]
            conf["table"] = (cfg.table_scale * float(sc["score"][top[0]]) / max(len(rs["terms"]), 1)
                             if top.size else 0.0)
        for name in ("lexical", "dense"):
            s = rs["bm25" if name == "lexical" else "dense"]
            out[name] = [{"unit": int(i), "uid": self.units[i].uid, "score": float(s[i])} for i in top_k(s, cfg.k)]
        if cfg.route != "both":
            keep = cfg.route
            out["narrative" if keep == "table" else "table"] = []
        t2 = time.perf_counter()
        if cfg.fusion == "linear" and cfg.route == "both":
            fused = fuse_scores(rs["bm25"], rs["dense"], rs["table"], self.is_table, self.groups,
                                self.fusion_weights(cfg), rs["p"][0], rs["p"][1])
            out["fused"] = [{"unit": int(i), "uid": self.units[i].uid, "route": self.units[i].kind,
                             "route_rank": r + 1, "rank": r + 1, "score": float(fused[i])}
                            for r, i in enumerate(top_k(fused, cfg.k))]
        else:
            out["fused"] = self.fuse(out, conf if cfg.route == "both" else {cfg.route: 1.0},
                                     cfg if cfg.fusion != "linear" else replace(cfg, fusion="weighted"))
        out["confidence"] = conf
        out["reranked"] = None
        if reranker is not None and out["fused"]:
            out["reranked"] = self.rerank(question, out["fused"], reranker, rs["cell_sims"], cfg)
        t3 = time.perf_counter()
        out["_cell_sims"] = rs["cell_sims"]
        out["_routes"] = rs  # raw per-unit scores of every route (evaluation reuses them)
        enc = rs["encode_s"]
        out["timings"] = {"encode": enc, "routes": t1 - t0 - enc, "lists": t2 - t1, "fuse_rerank": t3 - t2,
                          "retrieve": t3 - t0 - enc, "total": t3 - t0}
        return out

    @staticmethod
    def fuse(res: dict, conf: dict, cfg: SearchConfig) -> list[dict]:
        """Min-max per route (weighted by route confidence when ``cfg.fusion == "weighted"``), merged."""
        rows = []
        best = max(conf.values()) if conf else 1.0
        for route in ("narrative", "table"):
            hits = res[route]
            if not hits:
                continue
            scaled = minmax(np.array([h["score"] for h in hits]))
            w = conf[route] / best if cfg.fusion != "minmax" and best > 0 else 1.0
            for rank, (h, s) in enumerate(zip(hits, scaled), start=1):
                rows.append({"unit": h["unit"], "uid": h["uid"], "route": route, "route_rank": rank,
                             "score": float(w * s)})
        rows.sort(key=lambda r: (-r["score"], r["route_rank"], r["route"]))
        for rank, r in enumerate(rows[:cfg.k], start=1):
            r["rank"] = rank
        return rows[:cfg.k]

    def rerank(self, question: str, fused: list[dict], reranker, cell_sims, cfg: SearchConfig) -> list[dict]:
        """Cross-encoder scores on ``(question, textualized unit)``, best first."""
        if isinstance(reranker, (str, os.PathLike)):
            reranker = load_reranker(reranker)
        texts = [self.unit_text(f["unit"], cell_sims, cfg.rows_per_table) for f in fused]
        scores = np.asarray(reranker.predict([(question, t) for t in texts]), np.float64).reshape(-1)
        order = np.argsort(-scores, kind="stable")
        return [{**fused[i], "rerank_score": float(scores[i]), "rank": r + 1, "fused_rank": fused[i]["rank"]}
                for r, i in enumerate(order)]

    # -- textualization ----------------------------------------------------------------
    def table_number(self, unit: int) -> int:
        """Position of a table unit in the CALI index."""
        pos = np.searchsorted(self.table_idx, unit)
        if pos >= self.table_idx.size or self.table_idx[pos] != unit:
            raise ValueError(f"unit {unit} is not a table")
        return int(pos)

    def row_coverage(self, cell_sims: np.ndarray, unit: int) -> np.ndarray:
        """``(R,)`` row coverage ``R(g) = sum_k max_{c in row} S[k, c]`` of one table unit."""
        t = self.table_number(unit)
        tab = self.units[unit].table
        grid = self.cali.table_cell_grid(cell_sims, t, tab.shape)  # (K, R, C)
        with np.errstate(invalid="ignore"):
            best = np.where(np.isnan(grid), -np.inf, grid).max(axis=2)  # (K, R)
        best = np.where(np.isfinite(best), best, 0.0)
        return best.sum(0)

    def unit_text(self, unit: int, cell_sims: np.ndarray | None = None, rows_per_table: int = 3) -> str:
        """Narrative text, or a table's header + its best-covered rows (all rows without ``cell_sims``)."""
        u = self.units[unit]
        if u.table is None:
            return u.text
        if cell_sims is None:
            return u.table.to_markdown()
        cov = self.row_coverage(cell_sims, unit)
        rows = sorted(np.argsort(-cov, kind="stable")[:rows_per_table].tolist())
        return u.table.to_markdown(rows)

    def context(self, result: dict, n_units: int = 4, rows_per_table: int = 3) -> str:
        """The text handed to the LLM: the first ``n_units`` of the final ranking, textualized."""
        ranking = result.get("reranked") or result["fused"]
        parts = []
        for r in ranking[:n_units]:
            u = self.units[r["unit"]]
            parts.append(f"[{u.kind} {u.uid}]\n" + self.unit_text(r["unit"], result.get("_cell_sims"), rows_per_table))
        return "\n\n".join(parts)

    def explain_table(self, result: dict, unit: int) -> dict:
        """Heatmap data for one table unit: ``grid (K, R, C)`` term-cell similarities, the per-term
        best cell and the header/rows."""
        cs = result.get("_cell_sims")
        if cs is None:
            raise ValueError("this result has no table route scores")
        t = self.table_number(unit)
        tab = self.units[unit].table
        grid = self.cali.table_cell_grid(cs, t, tab.shape)
        best = self.cali.best_cells(cs, t)
        for term, b in zip(result["terms"], best):
            b["term"] = term
            b["header"] = tab.header[b["col"]] if b["col"] is not None else None
            b["value"] = tab.rows[b["row"]][b["col"]] if b["row"] is not None else None
        return {"grid": grid, "best": best, "header": tab.header, "rows": tab.rows, "terms": result["terms"]}


def open_index(folder: str | os.PathLike, encoder=None) -> HybridIndex:
    """Open an index folder for searching: a MiniLM index gets the numpy MiniLM (fast first query);
    another index gets ``encoder``, which must be the one it was built with (``ValueError`` otherwise)."""
    from ..embed.minilm_numpy import NumpyMiniLM

    idx = HybridIndex.load(folder)
    built = idx.meta.get("encoder")
    if built == NumpyMiniLM.name:
        return idx
    if encoder is None or encoder.name != built:
        raise ValueError(f"{folder}: index was built with encoder {built!r}, not "
                         f"{getattr(encoder, 'name', None)!r}; choose that encoder")
    idx.encoder = encoder
    return idx


def index_text(unit: Unit) -> str:
    """What BM25 and the dense encoder see of a unit: narrative text, or a table as
    :func:`~toporag_core.hybrid.tables.table_text` (header once, one ``label: header value; ...`` line per row)."""
    return unit.text if unit.table is None else table_text(unit.table)


def load_reranker(path: str | os.PathLike):
    """A local ``sentence_transformers.CrossEncoder`` folder (no hub download)."""
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: reranker folder does not exist (a local CrossEncoder folder is needed)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(str(p), device="cpu")
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: cannot load a CrossEncoder from this folder: {str(e).splitlines()[0]}") from e
