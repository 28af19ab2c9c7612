"""Several batch workers in the core service: concurrency, equal answers, replicas, validation.

Behaviour only, no timing: two batches are proven to run at once by a ``run_batch`` that blocks
until both are inside it; answers with two workers must equal the in-process pipeline's; a
replica shares every weight tensor but no module object; ``workers`` is validated everywhere.
"""
from __future__ import annotations

import os
import threading

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from toporag_core.embed import HashingEncoder  # noqa: E402
from toporag_core.answering.pipeline import DecodeJob, TopoRAGPipeline  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve  # noqa: E402
from toporag_core.serve import BatchConfig, DynamicBatcher  # noqa: E402
from toporag_core.serve.engine import CoreEngine, replica  # noqa: E402
from toporag_core.serve.server import ServeConfig, batch_workers, load_engine, start_background  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.model.tiny import build_tiny_checkpoint, tiny_model  # noqa: E402

from .test_serve import answers_equal_in_process, submit_concurrently  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_tiny_checkpoint(tmp_path_factory.mktemp("workers_ckpt") / "ckpt")


def blocking_batcher(workers: int):
    """A batcher whose ``run_batch`` counts the batches inside it and blocks until ``release`` is set."""
    inside, release, lock = [], threading.Event(), threading.Lock()
    both = threading.Event()

    def run_batch(xs):
        with lock:
            inside.append(xs)
            if len(inside) == 2:
                both.set()
        release.wait(10)
        return xs

    return DynamicBatcher(run_batch, BatchConfig(max_batch=1, max_wait_ms=0.0), workers=workers), inside, both, release


@pytest.mark.parametrize("workers", [1, 2])
def test_two_workers_run_two_batches_at_once_one_worker_one(workers):
    b, inside, both, release = blocking_batcher(workers)
    res: dict = {}
    ts = [threading.Thread(target=lambda i=i: res.__setitem__(i, b.submit(i, timeout=20))) for i in range(2)]
    try:
        [t.start() for t in ts]
        assert both.wait(5 if workers == 2 else 0.5) is (workers == 2), inside
        release.set()
        [t.join(20) for t in ts]
        assert res == {0: 0, 1: 1}
        assert b.stats["max_running_seen"] == workers and b.stats["workers"] == workers
    finally:
        release.set()
        b.close()
    assert not any(t.is_alive() for t in b.threads)  # close() stops every worker


def test_a_failing_batch_fails_its_jobs_only_and_the_workers_go_on():
    def run_batch(xs):
        if "bad" in xs:
            raise ValueError("bad job")
        return xs

    b = DynamicBatcher(run_batch, BatchConfig(max_batch=1, max_wait_ms=0.0), workers=2)
    try:
        with pytest.raises(ValueError, match="bad job"):
            b.submit("bad", timeout=10)
        assert [b.submit(i, timeout=10) for i in range(4)] == [0, 1, 2, 3]
    finally:
        b.close()


def test_a_replica_shares_the_weights_but_no_module():
    model = tiny_model(mode="lora", graph_position="before_question")
    pipe = TopoRAGPipeline(model, HashingEncoder())
    rep = replica(pipe)
    assert rep.lock is not pipe.lock and rep.model is not model
    assert {id(m) for m in rep.model.modules()}.isdisjoint(id(m) for m in model.modules())  # adapter switches
    for (name, a), (_, b) in zip(model.named_parameters(), rep.model.named_parameters()):
        assert a is b, name
    for (name, a), (_, b) in zip(model.named_buffers(), rep.model.named_buffers()):
        assert a is b, name


def test_lora_replicas_decoding_at_once_give_the_single_answers():
    """A LoRA checkpoint with a cached frozen part switches its adapters around that pass: two
    workers on one model would see each other's switch; replicas must not."""
    torch.manual_seed(3)
    model = tiny_model(mode="lora", graph_position="before_question", answer_set=("support", "counter"))
    with torch.no_grad():  # non-zero adapters, so adapters on and off give different scores
        for n, p in model.llm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    pipe = TopoRAGPipeline(model, HashingEncoder())
    g = samples.load_sample("argument")
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    jobs = []
    for k in (1, 2, 3):
        sub = retrieve(ecx, "support or counter?", setting=RetrievalSetting.make("toporag", k=k))
        jobs.append(DecodeJob(sub, ecx, "support or counter?", pipe.fit_context(sub, "support or counter?").text, ("support", "counter")))
    want = [r["label_probs"] for r in pipe.decode(jobs)[0]]
    engine = CoreEngine(pipe, BatchConfig(max_batch=1, max_wait_ms=0.0), workers=2)
    try:
        got = submit_concurrently(engine, jobs[:3])
        for i, (res, _) in enumerate(got):
            assert res["label_probs"] == pytest.approx(want[i % 3], abs=1e-5), i
    finally:
        engine.close()


def test_two_workers_serve_the_in_process_answers(checkpoint):
    ref = TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())
    pipe = TopoRAGPipeline.load(checkpoint, device="cpu", encoder=HashingEncoder())
    config = ServeConfig(port=0, batch=BatchConfig(max_batch=2, max_wait_ms=50.0), workers=2)
    srv = start_background(load_engine(config, pipe=pipe), config)
    try:
        assert srv.engine.batcher.stats["workers"] == 2
        got = answers_equal_in_process(srv.url, ref)
        assert len({a["answer"] for a in got}) > 1
    finally:
        srv.stop()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_workers_is_validated(bad):
    with pytest.raises(ValueError, match="workers"):
        ServeConfig(workers=bad)
    with pytest.raises(ValueError, match="workers"):
        DynamicBatcher(lambda xs: xs, workers=bad)


def test_default_workers_fill_the_cores():
    cores = os.cpu_count() or 1
    assert batch_workers(ServeConfig(), 1) == cores
    assert batch_workers(ServeConfig(), cores) == 1
    assert batch_workers(ServeConfig(), 2 * cores) == 1  # at least one
    assert batch_workers(ServeConfig(), None) == 1  # a GPU: one worker
    assert batch_workers(ServeConfig(workers=3), 1) == 3  # given: kept
