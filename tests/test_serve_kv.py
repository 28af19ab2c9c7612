"""The context key/value store of the core service (:class:`~toporag_core.model.FrozenKVStore`).

Behaviour only, no timing: a batch computes each distinct frozen part once, later batches reuse it,
a reused cache is the one the row gets alone (to float round-off), the store stays within its byte
bound (LRU), and answers served with the store - batched, on two workers, through HTTP - equal the
in-process single-request answers.
"""
from __future__ import annotations


import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from toporag_core.embed import HashingEncoder  # noqa: E402
from toporag_core.model import FrozenKVStore, QABatch  # noqa: E402
from toporag_core.model.frozen_kv import context_kv  # noqa: E402
from toporag_core.answering.pipeline import DecodeJob, TopoRAGPipeline  # noqa: E402
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve  # noqa: E402
from toporag_core.serve import BatchConfig  # noqa: E402
from toporag_core.serve.engine import CoreEngine  # noqa: E402
from toporag_core.serve.server import ServeConfig  # noqa: E402
from toporag_core.io import samples  # noqa: E402
from toporag_core.model.tiny import build_tiny_checkpoint, tiny_model  # noqa: E402

from .test_serve import answers_equal_in_process, submit_concurrently, make_server  # noqa: E402

CONTEXTS = ["cup: red, glass", "plate: white", "knife: steel, sharp, next to the plate"]


def lora_model(seed: int = 3):
    """A LoRA model in the cacheable layout with non-zero adapters (adapters on and off differ)."""
    torch.manual_seed(seed)
    model = tiny_model(mode="lora", graph_position="before_question", answer_set=("support", "counter"))
    with torch.no_grad():
        for n, p in model.llm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    return model.eval()


def test_a_batch_reads_each_distinct_context_once_and_later_batches_reuse_it():
    model = lora_model()
    store = FrozenKVStore()
    rows = [0, 1, 0, 2, 1]
    batch = QABatch(None, ["q one", "q two", "q three", "q four", "q five"], [CONTEXTS[i] for i in rows])
    got = store.lookup(model, batch)
    s = store.stats()
    assert (s["misses"], s["shared_in_batch"], s["hits"], s["entries"]) == (3, 2, 0, 3)
    assert got[0] is got[2] and got[1] is got[4]
    for i, t in enumerate(got):
        alone = context_kv(model, QABatch(None, [batch.questions[i]], [batch.contexts[i]]))[0]
        assert t.shape == alone.shape
        torch.testing.assert_close(t, alone, atol=1e-5, rtol=1e-5)
    again = store.lookup(model, QABatch(None, ["other"] * 3, CONTEXTS))
    s = store.stats()
    assert (s["misses"], s["hits"]) == (3, 3)
    assert all(a is got[j] for a, j in zip(again, (0, 1, 3)))


def test_the_store_is_an_lru_bounded_in_bytes():
    model = lora_model()
    sizes = [t.numel() * t.element_size() for t in context_kv(model, QABatch(None, ["q"] * 3, CONTEXTS))]
    store = FrozenKVStore(max_bytes=sizes[1] + sizes[2])  # the last two fit, not all three
    for c in CONTEXTS:
        store.lookup(model, QABatch(None, ["q"], [c]))
    s = store.stats()
    assert s["bytes"] == sizes[1] + sizes[2] <= s["max_bytes"] and s["evictions"] == 1 and s["entries"] == 2
    store.lookup(model, QABatch(None, ["q"], [CONTEXTS[2]]))  # the newest is kept
    assert store.stats()["hits"] == 1
    store.lookup(model, QABatch(None, ["q"], [CONTEXTS[0]]))  # the oldest was evicted
    assert store.stats()["hits"] == 1
    tiny = FrozenKVStore(max_bytes=16)  # nothing fits: computed, returned, not kept
    out = tiny.lookup(model, QABatch(None, ["q"], [CONTEXTS[0]]))
    torch.testing.assert_close(out[0], context_kv(model, QABatch(None, ["q"], [CONTEXTS[0]]))[0])
    assert tiny.stats()["entries"] == 0 and tiny.stats()["bytes"] == 0


def test_misses_run_in_length_sorted_passes_of_bounded_padded_tokens():
    store = FrozenKVStore(chunk_tokens=10)
    lengths = [3, 12, 3, 4, 5, 3]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    passes = store.chunks(order, lengths)
    assert sorted(i for p in passes for i in p) == list(range(len(lengths)))
    for p in passes:
        assert len(p) == 1 or max(lengths[i] for i in p) * len(p) <= 10, passes
    assert [1] in passes  # longer than the bound: alone


@pytest.mark.parametrize("bad", [{"max_bytes": -1}, {"max_bytes": True}, {"max_bytes": 1.5},
                                 {"chunk_tokens": 0}, {"chunk_tokens": "8"}])
def test_store_arguments_are_validated(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        FrozenKVStore(**bad)


@pytest.mark.parametrize("bad", [-1, True, 2.5, "64"])
def test_kv_cache_mb_is_validated(bad):
    with pytest.raises(ValueError, match="kv_cache_mb"):
        ServeConfig(kv_cache_mb=bad)


def decode_jobs(pipe: TopoRAGPipeline) -> list[DecodeJob]:
    g = samples.load_sample("argument")
    ecx = EmbeddedComplex.from_graph(g, HashingEncoder())
    jobs = []
    for k in (1, 2, 3):
        sub = retrieve(ecx, "support or counter?", setting=RetrievalSetting.make("toporag", k=k))
        jobs.append(DecodeJob(sub, ecx, "support or counter?", pipe.fit_context(sub, "support or counter?").text,
                              ("support", "counter")))
    return jobs


def test_two_workers_with_a_shared_store_give_the_single_request_probabilities():
    ref = TopoRAGPipeline(lora_model(), HashingEncoder())
    pipe = TopoRAGPipeline(lora_model(), HashingEncoder())
    jobs = decode_jobs(ref)
    assert len({j.context for j in jobs}) > 1
    want = [ref.decode([j])[0][0] for j in jobs]  # one request at a time, no store
    engine = CoreEngine(pipe, BatchConfig(max_batch=4, max_wait_ms=50.0), workers=2, kv_cache_mb=16)
    try:
        assert engine.pipe.kv_store is not None
        got = submit_concurrently(engine, jobs[:3])
        for i, (res, _) in enumerate(got):
            assert res["answer"] == want[i % 3]["answer"], i
            assert res["label_probs"] == pytest.approx(want[i % 3]["label_probs"], abs=1e-5), i
        s = engine.pipe.kv_store.stats()
        assert s["hits"] + s["shared_in_batch"] > 0 and s["misses"] >= len({j.context for j in jobs})
    finally:
        engine.close()


def test_no_store_without_a_cacheable_layout_or_with_zero_megabytes():
    prefix = TopoRAGPipeline(tiny_model(), HashingEncoder())
    cacheable = TopoRAGPipeline(lora_model(), HashingEncoder())
    for pipe, mb in ((prefix, 64), (cacheable, 0)):
        engine = CoreEngine(pipe, BatchConfig(), kv_cache_mb=mb)
        try:
            assert engine.pipe.kv_store is None
        finally:
            engine.close()


def test_the_service_with_a_context_store_answers_like_the_in_process_pipeline(tmp_path):
    ckpt = build_tiny_checkpoint(tmp_path / "lora", mode="lora", graph_position="before_question")
    ref = TopoRAGPipeline.load(ckpt, device="cpu", encoder=HashingEncoder())
    srv = make_server(ckpt, kv_cache_mb=16, batch=BatchConfig(max_batch=8, max_wait_ms=200.0))
    try:
        store = srv.engine.pipe.kv_store
        assert store is not None
        first = answers_equal_in_process(srv.url, ref)
        misses = store.stats()["misses"]
        again = answers_equal_in_process(srv.url, ref)  # the same contexts: read from the store
        s = store.stats()
        assert s["misses"] == misses and s["hits"] >= len(again)
        assert [a["answer"] for a in first] == [a["answer"] for a in again]
    finally:
        srv.stop()
