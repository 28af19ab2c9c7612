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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .documents import ParsedDocument, Unit
from .index import CellIndex, ReductionConfig, query_terms
from .tables import Table

ROUTES = ("narrative", "table", "both")
FUSIONS = ("weighted", "minmax")
TABLE_SCALE = 1.6  # fitted on the validation split of the default corpus (docs/hybrid.md)
INDEX_VERSION = 1


@dataclass
class SearchConfig:
    """Query-time settings."""

    k: int = 10
    route: str = "both"
    table_score: str = "rowaware"  # "maxsim" | "rowaware"
    lam: float = 0.5
    fusion: str = "weighted"
    table_scale: float = TABLE_SCALE
    rows_per_table: int = 3

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.route not in ROUTES:
            raise ValueError(f"route must be one of {ROUTES}, got {self.route!r}")
        if self.table_score not in ("maxsim", "rowaware"):
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
    """Units of a corpus with both routes' indexes."""

    def __init__(self, units: list[Unit], narr_vecs: np.ndarray, cali: CellIndex, encoder=None,
                 meta: dict | None = None) -> None:
        self.units = units
        self.narr_idx = np.array([i for i, u in enumerate(units) if u.kind == "narrative"], dtype=np.int64)
        self.table_idx = np.array([i for i, u in enumerate(units) if u.kind == "table"], dtype=np.int64)
        if narr_vecs.shape[0] != self.narr_idx.size:
            raise ValueError(f"narr_vecs has {narr_vecs.shape[0]} rows for {self.narr_idx.size} narrative units")
        if cali.num_tables != self.table_idx.size:
            raise ValueError(f"CALI index has {cali.num_tables} tables for {self.table_idx.size} table units")
        self.narr_vecs = np.asarray(narr_vecs, np.float32)
        self.cali = cali
        self.encoder = encoder
        self.meta = dict(meta or {})

    # -- construction ------------------------------------------------------------------
    @classmethod
    def build(cls, docs: list[ParsedDocument], encoder, row_tag: bool = False,
              reduction: ReductionConfig | None = None) -> "HybridIndex":
        units = [u for d in docs for u in d.units]
        narr = [u.text for u in units if u.kind == "narrative"]
        t0 = time.perf_counter()
        narr_vecs = encoder.encode(narr) if narr else np.zeros((0, encoder.dim), np.float32)
        tables = [u.table for u in units if u.kind == "table"]
        cali = CellIndex.build(tables, encoder, row_tag=row_tag, reduction=reduction)
        meta = {"encoder": encoder.name, "dim": encoder.dim, "row_tag": row_tag,
                "reduction": asdict(reduction) if reduction else None, "build_s": time.perf_counter() - t0,
                "warnings": [w for d in docs for w in d.warnings]}
        return cls(units, narr_vecs, cali, encoder, meta)

    def describe(self) -> dict:
        return {"units": len(self.units), "narrative": int(self.narr_idx.size), "tables": int(self.table_idx.size),
                "encoder": self.meta.get("encoder"), "cali": self.cali.describe(),
                "narrative_bytes": int(self.narr_vecs.nbytes)}

    # -- persistence (safetensors + JSON, atomic) ---------------------------------------
    def save(self, folder: str | os.PathLike) -> Path:
        from safetensors.numpy import save_file

        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex
        arrays = {"narr_vecs": self.narr_vecs, **self.cali.arrays()}
        units = [{"doc_id": u.doc_id, "kind": u.kind, "start": u.start, "end": u.end, "text": u.text, "sds": u.sds,
                  "table": u.table.to_dict() if u.table else None} for u in self.units]
        meta = {"version": INDEX_VERSION, "token": token, "meta": self.meta, "cali": self.cali.meta(), "units": units}
        for name, write in (("index.safetensors", lambda p: save_file(arrays, str(p), metadata={"token": token})),
                            ("index.json", lambda p: p.write_text(json.dumps(meta, ensure_ascii=False)))):
            tmp = out / f".{name}.{token}.tmp"
            try:
                write(tmp)
                os.replace(tmp, out / name)
            finally:
                tmp.unlink(missing_ok=True)
        return out

    @classmethod
    def load(cls, folder: str | os.PathLike, encoder=None) -> "HybridIndex":
        from safetensors import safe_open
        from safetensors.numpy import load_file

        folder = Path(folder)
        jpath, apath = folder / "index.json", folder / "index.safetensors"
        if not jpath.is_file() or not apath.is_file():
            raise FileNotFoundError(f"{folder}: not a hybrid index (index.json + index.safetensors expected)")
        meta = json.loads(jpath.read_text())
        if meta.get("version") != INDEX_VERSION:
            raise ValueError(f"{jpath}: index version {meta.get('version')} (expected {INDEX_VERSION}); rebuild it")
        with safe_open(str(apath), framework="numpy") as f:
            if (f.metadata() or {}).get("token") != meta["token"]:
                raise ValueError(f"{folder}: index.json and index.safetensors come from different writes; rebuild")
        arrays = load_file(str(apath))
        units = [Unit(u["doc_id"], u["kind"], u["start"], u["end"], u["text"], u["sds"],
                      Table(u["table"]["header"], u["table"]["rows"], u["table"]["format"], u["table"]["warnings"])
                      if u["table"] else None) for u in meta["units"]]
        return cls(units, arrays["narr_vecs"], CellIndex.from_arrays(arrays, meta["cali"]), encoder, meta["meta"])

    # -- search ------------------------------------------------------------------------
    def route_narrative(self, qvec: np.ndarray) -> np.ndarray:
        """``(N_A,)`` cosine of every narrative unit."""
        return self.narr_vecs @ np.asarray(qvec, np.float32)

    def search(self, question: str, config: SearchConfig | None = None, reranker=None) -> dict[str, Any]:
        """Both routes, fusion and optional reranking for one question (see the module docstring)."""
        cfg = config or SearchConfig()
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        if self.encoder is None:
            raise ValueError("this index has no encoder attached (pass encoder= to HybridIndex.load)")
        t0 = time.perf_counter()
        terms = query_terms(question) or [question.strip()]
        vecs = self.encoder.encode([question] + terms)
        qvec, qterms = vecs[0], vecs[1:]
        t1 = time.perf_counter()
        out: dict[str, Any] = {"question": question, "terms": terms, "narrative": [], "table": []}
        conf = {}
        if cfg.route in ("narrative", "both") and self.narr_idx.size:
            s = self.route_narrative(qvec)
            top = top_k(s, cfg.k)
            out["narrative"] = [{"unit": int(self.narr_idx[i]), "uid": self.units[self.narr_idx[i]].uid,
                                 "score": float(s[i])} for i in top]
            conf["narrative"] = float(s[top[0]]) if top.size else 0.0
        t2 = time.perf_counter()
        cell_sims = None
        if cfg.route in ("table", "both") and self.table_idx.size:
            sc = self.cali.scores(qterms, mode=cfg.table_score, lam=cfg.lam)
            cell_sims = sc["cell_sims"]
            top = top_k(sc["score"], cfg.k)
            out["table"] = [{"unit": int(self.table_idx[t]), "uid": self.units[self.table_idx[t]].uid,
                             "table": int(t), "score": float(sc["score"][t]), "maxsim": float(sc["maxsim"][t]),
                             "row_score": float(sc["row"][t]), "best_row": int(sc["best_row"][t])} for t in top]
            conf["table"] = cfg.table_scale * float(sc["score"][top[0]]) / max(len(terms), 1) if top.size else 0.0
        t3 = time.perf_counter()
        out["fused"] = self.fuse(out, conf, cfg)
        out["confidence"] = conf
        out["reranked"] = None
        if reranker is not None and out["fused"]:
            out["reranked"] = self.rerank(question, out["fused"], reranker, cell_sims, cfg)
        t4 = time.perf_counter()
        out["_cell_sims"] = cell_sims
        out["timings"] = {"encode": t1 - t0, "narrative": t2 - t1, "table": t3 - t2, "fuse_rerank": t4 - t3,
                          "retrieve": t4 - t1, "total": t4 - t0}
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
