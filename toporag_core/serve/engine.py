"""The core behind the service: one pipeline, a bounded cache of embedded graphs, batched answers.

* **Graphs** are lifted and embedded once, as an embedding job off the request path
  (:meth:`CoreEngine.start_upload`, :mod:`.jobs`; an inline graph waits for its job,
  :meth:`CoreEngine.add_graph`), and kept in an LRU
  cache keyed by ``(graph_id, tree, seed)`` (:class:`GraphCache`, at most ``max_graphs``
  entries and ``max_cached_nodes`` nodes in all); later requests name the graph by its
  content hash (:func:`~.protocol.graph_id`).
* **Retrieval** runs on the request's own thread (numpy; many at once).
* **Answers** are split in two: retrieval + textualization on the request's thread, then the
  neural part (cell-complex encoder -> soft prompt -> greedy decoding) on the
  :class:`~.batching.DynamicBatcher`'s worker, for up to ``max_batch`` requests at once:

      cells  = collate([subcomplex_tensors(sub_b, emb_b)]_b)        (B subcomplexes)
      soft   = model.graph_tokens(cells)                             (B, T, H)
      rows   = model.answer(QABatch(cells, questions, contexts))     label scoring / greedy, left padding

  The model pads on the left and counts positions over real tokens only, so a row of a batch
  sees exactly what it sees alone; greedy decoding then gives the same tokens up to float
  round-off of the batched matrix products (checked by ``tests/test_serve.py``; on a GPU in
  bf16 the round-off is larger: turn batching off with ``--no-batching`` for bit-for-bit
  single-request behaviour).
* **Workers**: with ``workers > 1`` the batcher runs that many batches at once, each on its own
  :func:`replica` of the pipeline (new module objects over the *same* weight tensors: no extra
  memory for weights). A replica is needed, not just a second thread on one model: the pipeline
  serialises :meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.decode` under its lock, and a LoRA
  checkpoint with a cacheable layout switches its adapters off and on around the frozen part's
  pass, module state that a concurrent pass on the same modules would see.
* **Frozen-part reuse** (``kv_cache_mb > 0``, checkpoints with a cacheable layout): the workers
  share one :class:`~toporag_core.model.FrozenKVStore`, so the frozen part (chat prefix + context,
  most of a prompt) is read once per distinct context: within a batch and across requests. On a
  CPU that pass is compute-bound (``B`` rows cost ``B`` times one), the rest of an answer (tail +
  label scoring) is one weight read per forward pass whatever ``B``: with the context reused, a
  batch costs little more than one request.
"""
from __future__ import annotations

import copy
import itertools
import logging
import os
import queue
import socket
import threading
import time
from collections import OrderedDict
from typing import Any


from ..cells.checks import LIFTINGS, check_lifting, check_seed
from ..model import FrozenKVStore
from ..answering.pipeline import DecodeJob, EncoderMismatch, TopoRAGPipeline
from ..retrieval import EmbeddedComplex, RetrievalSetting, retrieve, textualize
from .batching import BatchConfig, DynamicBatcher
from .jobs import EmbedJob, EmbedJobs
from .protocol import RequestError, subcomplex_to_json

TREES = LIFTINGS  # the CLI's liftings: bfs, dfs, random spanning trees and rings
log = logging.getLogger("toporag.serve")


class GraphCache:
    """A thread-safe LRU of embedded complexes, bounded in entries and in total nodes."""

    def __init__(self, max_graphs: int = 64, max_nodes: int = 500_000) -> None:
        if max_graphs < 1 or max_nodes < 1:
            raise ValueError("GraphCache: max_graphs and max_nodes must be >= 1")
        self.max_graphs, self.max_nodes = max_graphs, max_nodes
        self.items: OrderedDict[tuple, EmbeddedComplex] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def get(self, key: tuple) -> EmbeddedComplex | None:
        with self.lock:
            ecx = self.items.get(key)
            if ecx is None:
                self.misses += 1
                return None
            self.items.move_to_end(key)
            self.hits += 1
            return ecx

    def put(self, key: tuple, ecx: EmbeddedComplex) -> None:
        with self.lock:
            self.items[key] = ecx
            self.items.move_to_end(key)
            total = sum(e.complex.num_nodes for e in self.items.values())
            while len(self.items) > 1 and (len(self.items) > self.max_graphs or total > self.max_nodes):
                _, old = self.items.popitem(last=False)
                total -= old.complex.num_nodes
                self.evictions += 1

    def __contains__(self, key: tuple) -> bool:
        with self.lock:
            return key in self.items

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {"graphs": len(self.items), "nodes": sum(e.complex.num_nodes for e in self.items.values()),
                    "hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                    "max_graphs": self.max_graphs, "max_nodes": self.max_nodes}


def replica(pipe: TopoRAGPipeline) -> TopoRAGPipeline:
    """A pipeline that decodes like ``pipe`` with its own modules, lock and tokenizer, over the same
    parameter and buffer tensors (a deep copy that shares every tensor: weights are read-only in
    inference, so the copy costs the module objects only). For decoding only: its encoder is not set."""
    model = pipe.model
    shared = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    rep = TopoRAGPipeline(copy.deepcopy(model, shared), None, pipe.checkpoint, pipe.meta)
    rep.kv_store = pipe.kv_store  # thread-safe; one store for all workers
    return rep


class CoreEngine:
    """A loaded pipeline served to many threads (see the module docstring)."""

    def __init__(self, pipe: TopoRAGPipeline, batch: BatchConfig | None = None, max_graphs: int = 64,
                 max_cached_nodes: int = 500_000, name: str | None = None, upload_chunk: int = 256,
                 embed_workers: int = 1, max_pending_uploads: int = 16, workers: int = 1,
                 kv_cache_mb: int = 0) -> None:
        self.pipe = pipe
        if kv_cache_mb > 0 and pipe.model.cacheable:
            pipe.kv_store = FrozenKVStore(int(kv_cache_mb) << 20)
        self.cache = GraphCache(max_graphs, max_cached_nodes)
        self.batch_config = batch or BatchConfig()
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"CoreEngine: workers must be a whole number >= 1, got {workers!r}")
        self.decoders: queue.Queue[TopoRAGPipeline] = queue.Queue()  # one pipeline per batch worker
        for p in [pipe] + [replica(pipe) for _ in range(workers - 1)]:
            self.decoders.put(p)
        self.batcher = DynamicBatcher(self.run_batch, self.batch_config, workers=workers)
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.started = time.time()
        self.upload_chunk = int(upload_chunk)
        self.jobs = EmbedJobs(self.run_job, workers=embed_workers, max_pending=max_pending_uploads,
                              on_error=self.job_error)

    def close(self) -> None:
        self.batcher.close()
        self.jobs.close()

    # -- description ---------------------------------------------------------------------
    def core_tag(self) -> dict[str, str]:
        """Which core and device answered (sent with every answer)."""
        d = self.pipe.describe()
        return {"core": self.name, "device": d["device"], "dtype": d["dtype"]}

    def describe(self) -> dict[str, Any]:
        from ..retrieval import METHODS

        d = self.pipe.describe()
        enc = self.pipe.encoder
        return {**d, "core": self.name, "encoder_name": getattr(enc, "name", "?"), "encoder_dim": int(enc.dim),
                "default_setting": self.pipe.default_setting().to_dict(), "dataset": self.pipe.meta.get("dataset"),
                "max_new_tokens": int(self.pipe.model.config.max_new_tokens),
                "methods": {n: {"label": m.label, "dimension": m.dimension,
                                "params": [{"name": p.name, "type": p.type.__name__, "default": p.default,
                                            "min": p.min, "max": p.max} for p in m.params]}
                            for n, m in METHODS.items()},
                "batching": {**self.batch_config.__dict__, **self.batcher.stats},
                "cache": self.cache.stats(), "uploads": self.jobs.stats(),
                "kv_store": self.pipe.kv_store.stats() if self.pipe.kv_store is not None else None,
                "uptime_s": round(time.time() - self.started, 1)}

    # -- graphs ---------------------------------------------------------------------------
    def start_upload(self, gid: str, graph, tree: str = "bfs", seed: int = 0) -> tuple[EmbedJob | None, bool]:
        """``(job, cached)``: ``(None, True)`` when the graph is cached already, else the embedding
        job (new, or the one under way for the same graph) that lifts and embeds it off the request."""
        key = (gid, check_lifting(tree), check_seed(seed))
        if key in self.cache:
            return None, True
        job, _ = self.jobs.submit(key, graph)
        return job, False

    def add_graph(self, gid: str, graph, tree: str = "bfs", seed: int = 0,
                  timeout: float | None = None) -> tuple[EmbeddedComplex, bool]:
        """``(embedded complex, was it cached already)``: a graph sent inline with a question, embedded
        by its job (shared with a concurrent upload of the same graph) and waited for."""
        job, cached = self.start_upload(gid, graph, tree, seed)
        if job is not None:
            job.future.result(timeout=timeout)
        ecx = self.cache.get((gid, tree, int(seed)))
        if ecx is None:  # evicted at once by a flood of uploads: embed it again, here
            ecx = self.embed(gid, graph, tree, seed)
        return ecx, cached

    def embed(self, gid: str, graph, tree: str, seed: int, progress=None) -> EmbeddedComplex:
        """Lift and embed ``graph``, the distinct texts first through the encoder's own chunked
        :meth:`~toporag_core.embed.CachedEncoder.prefetch` (the encoder is free between chunks, so a
        question waits at most one chunk), and cache the result."""
        from ..embed import embed_complex
        from ..cells.lift import lift

        cx = lift(graph, tree=tree, seed=int(seed))
        enc = self.pipe.encoder
        texts = list(dict.fromkeys([*graph.node_text, *graph.edge_text]))
        if hasattr(enc, "prefetch"):
            enc.prefetch(texts, on_progress=progress, chunk_size=self.upload_chunk)
        ecx = EmbeddedComplex(cx, embed_complex(cx, enc), enc)
        if progress is not None:
            progress(len(texts), len(texts), 0.0)
        self.cache.put((gid, tree, int(seed)), ecx)
        return ecx

    def run_job(self, job: EmbedJob, graph) -> dict[str, Any]:
        gid, tree, seed = job.key
        return self.summary(gid, self.embed(gid, graph, tree, seed, progress=job.progress), False)

    @staticmethod
    def job_error(job: EmbedJob, exc: BaseException) -> dict[str, Any]:
        """What a failed job reports: the message of a bad input (a lifting refused: too dense for
        rings), a generic message with the job id otherwise (the traceback goes to the log)."""
        if isinstance(exc, ValueError):
            return {"code": "invalid_value", "message": str(exc)}
        log.error("embedding job %s failed", job.job_id, exc_info=exc)
        return {"code": "internal", "message": f"embedding failed (job {job.job_id}; see the core's log)"}

    def graph(self, gid: str, tree: str = "bfs", seed: int = 0) -> EmbeddedComplex:
        ecx = self.cache.get((gid, check_lifting(tree), check_seed(seed)))
        if ecx is None:
            raise RequestError(f"unknown graph {gid} (tree {tree}, seed {seed}): send the graph itself once",
                               404, "unknown_graph")
        return ecx

    @staticmethod
    def summary(gid: str, ecx: EmbeddedComplex, cached: bool) -> dict[str, Any]:
        cx = ecx.complex
        return {"graph_id": gid, "cached": cached, "nodes": int(cx.num_nodes), "edges": int(cx.num_edges),
                "cells2": int(cx.num_cells2), "embedding_dim": int(ecx.emb.x0.shape[1]) if ecx.emb.x0.size else 0}

    # -- retrieval and answers -------------------------------------------------------------
    def retrieve(self, ecx: EmbeddedComplex, question: str, setting: RetrievalSetting) -> dict[str, Any]:
        t0 = time.perf_counter()
        res = retrieve(ecx, question, setting=setting)
        if setting.spec.dimension == "nodes":
            out = {"dimension": "nodes", "result": res.to_dict()}
        else:
            out = {"dimension": "cells", "subcomplex": subcomplex_to_json(res), "context": textualize(res)}
        out["setting"] = setting.to_dict()
        out["seconds"] = time.perf_counter() - t0
        return out

    def answer(self, ecx: EmbeddedComplex, question: str, setting: RetrievalSetting | None, query: str | None = None,
               max_new_tokens: int | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Like :meth:`TopoRAGPipeline.answer`, with the neural part batched across requests."""
        pipe = self.pipe
        t1 = time.perf_counter()
        try:
            job = pipe.plan(ecx, question, setting, query=query)  # the checks, retrieval and fit of answer()
        except EncoderMismatch as e:
            raise RequestError(str(e), 409, "encoder_mismatch") from None
        except ValueError as e:
            raise RequestError(str(e), 422, "invalid_value") from None
        t2 = time.perf_counter()
        res, info = self.batcher.submit((job, max_new_tokens), group=max_new_tokens, timeout=timeout)
        t3 = time.perf_counter()
        out = pipe.finish(job, res, info)
        out.timings = {"retrieve": job.retrieve_s, "encode": info["encode"], "generate": info["generate"],
                       "queue": t3 - t2 - info["encode"] - info["generate"], "total": t3 - t1}
        return {**out.to_json(), "subcomplex": subcomplex_to_json(job.sub), "setting": job.setting.to_dict(),
                "batch_size": info["batch_size"], **self.core_tag()}

    def run_batch(self, jobs: list[tuple[DecodeJob, int | None]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """The neural part for ``B`` jobs of one ``max_new_tokens`` (the batcher groups by it):
        :meth:`TopoRAGPipeline.decode` (one encoder pass, label scoring / one batched generation)."""
        pipe = self.decoders.get()  # never waits: as many pipelines as batch workers
        try:
            rows, info = pipe.decode([j for j, _ in jobs], max_new_tokens=jobs[0][1])
        finally:
            self.decoders.put(pipe)
        return [(r, info) for r in rows]
