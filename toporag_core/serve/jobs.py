"""Embedding jobs: a graph upload is lifted and embedded on a worker, off the request path.

``POST /v1/graphs`` used to lift and embed inside the request, under one lock, so a 20k-node
upload (about 100 s with all-MiniLM-L6-v2 on a CPU) held every other upload back, and the
encoder's lock held every query that needed its question embedded. Now an upload is an
:class:`EmbedJob`: the route returns its id at once (``202``), ``GET /v1/jobs/{job_id}`` reports
``status`` (``queued`` | ``running`` | ``done`` | ``failed``) and ``progress`` (texts encoded of
the graph's distinct texts, seconds left), and :class:`EmbedJobs` runs jobs on ``workers``
threads. Two uploads of one graph (same ``graph_id``, tree, seed) while its job is under way
share that job. The embedding itself releases the encoder between small chunks
(:meth:`~toporag_core.embed.CachedEncoder.prefetch`), so a question waits at most one chunk.

Bounded: at most ``max_pending`` jobs queued or running (:class:`~.batching.QueueFull`, a 503,
beyond) and the ``keep`` most recent finished jobs remembered for their status.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from .batching import QueueFull

STATES = ("queued", "running", "done", "failed")


@dataclass
class EmbedJob:
    """One upload being lifted and embedded (see the module docstring)."""

    key: tuple
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    status: str = "queued"
    done: int = 0
    total: int = 0
    seconds_left: float | None = None
    summary: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    created: float = field(default_factory=time.time)
    finished: float | None = None
    future: Future = field(default_factory=Future)

    def progress(self, done: int, total: int, seconds_left: float | None = None) -> None:
        """The encoder's progress callback: ``done`` of ``total`` distinct texts encoded."""
        self.done, self.total, self.seconds_left = int(done), int(total), seconds_left

    def to_json(self) -> dict[str, Any]:
        gid, tree, seed = self.key
        out = {"job_id": self.job_id, "graph_id": gid, "tree": tree, "seed": seed, "status": self.status,
               "progress": {"done": self.done, "total": self.total,
                            "seconds_left": None if self.seconds_left is None else round(self.seconds_left, 1)},
               "seconds": round((self.finished or time.time()) - self.created, 3)}
        if self.summary is not None:
            out["summary"] = self.summary
        if self.error is not None:
            out["error"] = self.error
        return out


class EmbedJobs:
    """Runs ``work(job, payload) -> summary`` for each submitted job on ``workers`` threads."""

    def __init__(self, work: Callable[[EmbedJob, Any], dict[str, Any]], workers: int = 1, max_pending: int = 16,
                 keep: int = 256, on_error: Callable[[EmbedJob, BaseException], dict[str, Any]] | None = None) -> None:
        if workers < 1 or max_pending < 1 or keep < 1:
            raise ValueError("EmbedJobs: workers, max_pending and keep must be >= 1")
        self.work, self.max_pending, self.keep = work, max_pending, keep
        self.on_error = on_error or (lambda job, e: {"code": "internal", "message": "embedding failed"})
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="toporag-embed")
        self.lock = threading.Lock()
        self.active: dict[tuple, EmbedJob] = {}  # key -> queued or running job
        self.jobs: OrderedDict[str, EmbedJob] = OrderedDict()  # job_id -> job (active and recent)

    def submit(self, key: tuple, payload: Any) -> tuple[EmbedJob, bool]:
        """``(job, new)``: the job under way for ``key``, or a new one (``QueueFull`` beyond ``max_pending``)."""
        with self.lock:
            job = self.active.get(key)
            if job is not None:
                return job, False
            if len(self.active) >= self.max_pending:
                raise QueueFull(f"{self.max_pending} graph uploads are already being embedded")
            job = EmbedJob(key)
            self.active[key] = job
            self.jobs[job.job_id] = job
            self.forget_old()
        self.pool.submit(self.run, job, payload)
        return job, True

    def forget_old(self) -> None:
        """Drop the oldest finished jobs beyond ``keep`` (caller holds the lock)."""
        finished = [j for j in self.jobs.values() if j.status in ("done", "failed")]
        for j in finished[:max(len(finished) - self.keep, 0)]:
            self.jobs.pop(j.job_id, None)

    def run(self, job: EmbedJob, payload: Any) -> None:
        job.status = "running"
        try:
            job.summary = self.work(job, payload)
            job.status = "done"
            job.future.set_result(job.summary)
        except BaseException as e:  # noqa: BLE001 - the job reports it; the worker lives on
            job.error = self.on_error(job, e)
            job.status = "failed"
            job.future.set_exception(e)
        finally:
            job.finished = time.time()
            with self.lock:
                self.active.pop(job.key, None)

    def get(self, job_id: str) -> EmbedJob | None:
        with self.lock:
            return self.jobs.get(job_id)

    def stats(self) -> dict[str, int]:
        with self.lock:
            counts = {s: 0 for s in STATES}
            for j in self.jobs.values():
                counts[j.status] += 1
            return {**counts, "max_pending": self.max_pending}

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
