"""Dynamic batching of concurrent answer requests: one forward pass for a few requests.

Requests arrive on many server threads; each puts a job on a queue and waits on its future. A
worker thread takes the first job, then keeps collecting for at most ``max_wait_ms`` (or until
``max_batch`` jobs are in hand), and calls ``run_batch(jobs) -> results`` once:

    t_batch <= max_wait + t_forward(B)      instead of      B x t_forward(1)

``workers`` threads share the queue: one at a time collects a batch (under a lock), then runs it
while the next collects the following one, so up to ``workers`` batches are in ``run_batch`` at
once. On a CPU a batch's prompt pass is compute-bound (a batch of 8 costs about 0.8x eight single
passes), so batching alone cannot use a second core; with torch on one thread per worker (torch
releases the GIL inside its ops) ``workers`` batches run on ``workers`` cores. ``run_batch`` must
then be safe to call from several threads at once (:class:`~.engine.CoreEngine` gives each
worker its own model replica).

Jobs with a different ``group`` (the answer length ``max_new_tokens``) never share a batch, so the
output of each request is what it would be alone. With ``enabled=False`` the worker takes one
job at a time (the same queue and the same code path, batch size 1), which is the reference the
equality test and ``benchmarks/bench_serve.py`` compare against.

Back-pressure: the queue holds at most ``max_queue`` jobs; :meth:`DynamicBatcher.submit` raises
:class:`QueueFull` beyond that, and a caller that waits longer than its timeout gets
``TimeoutError`` (the service answers 503 in both cases instead of hanging).
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable


class QueueFull(RuntimeError):
    """The batcher's queue is full (the service is overloaded)."""


@dataclass(frozen=True)
class BatchConfig:
    """``enabled``: batch at all; ``max_batch``: most jobs per forward pass; ``max_wait_ms``: how long
    the first job of a batch waits for company; ``max_queue``: most jobs waiting."""

    enabled: bool = True
    max_batch: int = 8
    max_wait_ms: float = 5.0
    max_queue: int = 256

    def __post_init__(self) -> None:
        if not isinstance(self.max_batch, int) or self.max_batch < 1:
            raise ValueError(f"BatchConfig.max_batch must be >= 1, got {self.max_batch!r}")
        if not self.max_wait_ms >= 0:
            raise ValueError(f"BatchConfig.max_wait_ms must be >= 0, got {self.max_wait_ms!r}")
        if not isinstance(self.max_queue, int) or self.max_queue < 1:
            raise ValueError(f"BatchConfig.max_queue must be >= 1, got {self.max_queue!r}")


@dataclass
class Job:
    payload: Any
    group: Hashable = None
    future: Future = field(default_factory=Future)
    enqueued: float = field(default_factory=time.perf_counter)


class DynamicBatcher:
    """A queue and ``workers`` threads calling ``run_batch(payloads) -> results`` (same order)."""

    def __init__(self, run_batch: Callable[[list[Any]], list[Any]], config: BatchConfig | None = None,
                 name: str = "toporag-batcher", workers: int = 1) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"DynamicBatcher: workers must be a whole number >= 1, got {workers!r}")
        self.config = config or BatchConfig()
        self.run_batch = run_batch
        self.queue: queue.Queue[Job | None] = queue.Queue(maxsize=self.config.max_queue)
        self.stats = {"batches": 0, "jobs": 0, "max_batch_seen": 0, "workers": workers, "max_running_seen": 0}
        self.held: list[Job] = []  # jobs taken from the queue that belong to another group
        self.take_lock = threading.Lock()  # one worker collects a batch at a time
        self.stats_lock = threading.Lock()
        self.running = 0  # batches inside run_batch now
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self.loop, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for t in self.threads:
            t.start()

    def submit(self, payload: Any, group: Hashable = None, timeout: float | None = None) -> Any:
        """Queue one job and wait for its result (re-raises the job's exception)."""
        if self.stopped.is_set():
            raise RuntimeError("the batcher is stopped")
        job = Job(payload, group)
        try:
            self.queue.put_nowait(job)
        except queue.Full:
            raise QueueFull(f"{self.config.max_queue} requests are already waiting") from None
        return job.future.result(timeout=timeout)

    def close(self) -> None:
        self.stopped.set()
        try:
            self.queue.put_nowait(None)
        except queue.Full:
            pass
        for t in self.threads:
            t.join(timeout=5)

    # -- the worker -------------------------------------------------------------------
    def next_job(self, timeout: float | None) -> Job | None:
        if self.held:
            return self.held.pop(0)
        try:
            return self.queue.get(timeout=timeout) if timeout is None or timeout > 0 else self.queue.get_nowait()
        except queue.Empty:
            return None

    def collect(self) -> list[Job]:
        """The next batch (empty once stopped); called under :attr:`take_lock`. The first job is
        waited for in short polls, so every worker notices :meth:`close`."""
        first = None
        while first is None and not self.stopped.is_set():
            first = self.next_job(0.25)
        if first is None:
            return []
        jobs = [first]
        if not self.config.enabled:
            return jobs
        deadline = time.perf_counter() + self.config.max_wait_ms / 1000.0
        other: list[Job] = []
        while len(jobs) < self.config.max_batch:
            job = self.next_job(deadline - time.perf_counter())
            if job is None:
                break
            if job.group == first.group:
                jobs.append(job)
            else:
                other.append(job)
        self.held = other + self.held
        return jobs

    def loop(self) -> None:
        while not self.stopped.is_set():
            with self.take_lock:
                jobs = self.collect()
            jobs = [j for j in jobs if j is not None and not j.future.cancelled()]
            if jobs:
                self.run(jobs)

    def run(self, jobs: list[Job]) -> None:
        """One ``run_batch`` call; its results (or its error) go to the jobs' futures."""
        with self.stats_lock:
            self.running += 1
            self.stats["max_running_seen"] = max(self.stats["max_running_seen"], self.running)
        try:
            results = self.run_batch([j.payload for j in jobs])
            if len(results) != len(jobs):
                raise RuntimeError(f"run_batch returned {len(results)} results for {len(jobs)} jobs")
        except BaseException as e:  # noqa: BLE001 - every waiting caller gets the error
            for j in jobs:
                j.future.set_exception(e)
            return
        finally:
            with self.stats_lock:
                self.running -= 1
        with self.stats_lock:
            self.stats["batches"] += 1
            self.stats["jobs"] += len(jobs)
            self.stats["max_batch_seen"] = max(self.stats["max_batch_seen"], len(jobs))
        for j, r in zip(jobs, results):
            j.future.set_result(r)
