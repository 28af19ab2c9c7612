"""A bounded store of frozen-part key/value caches, so a context is read by the LLM once.

In the cacheable layout (``graph_position="before_question"``, :mod:`~toporag_core.model.frozen_kv`) the
frozen part ``[chat prefix] context \\n`` of a row (``S_i`` tokens, 150-300 for ExplaGraphs) is read
by the plain frozen LLM; its cache

    kv_i = context_kv(frozen ids of row i)        (layers, 2, kv_heads, S_i, head_dim)

depends on those token ids and nothing else. On a CPU that pass is most of an answer's work (about
0.7 of 0.9 s for SmolLM2-135M on one core) and it is compute-bound: ``B`` rows cost about ``B``
times one, batched or not. What is left after it - the tail (graph tokens, question, chat suffix:
15-25 tokens a row) and the label scoring pass - reads every weight once per forward pass whatever
``B`` is, which is where a batch pays. So the store:

* **deduplicates** a batch: rows with the same frozen ids share one computation;
* **reuses** across batches: an LRU keyed by the exact frozen ids, bounded by ``max_bytes`` of
  cached tensors (SmolLM2-135M in fp32: ``30 x 2 x 3 x 64 x 4`` B = 46 KB a token, 13 MB for a
  285-token part; an entry bigger than the bound is computed and not kept);
* computes the misses in passes of rows sorted by length, at most ``chunk_tokens`` padded tokens a
  pass (padding to a batch's longest row wastes compute, and a pass over a few thousand tokens
  runs out of cache on a CPU core).

A stored cache is the one the row gets when it is computed alone up to float round-off of the
batched matrix products (exactly it when every miss is computed in a pass of its own: batching off).
``max_bytes=0`` keeps nothing across batches and still deduplicates within one. Thread-safe: the
map is under a lock; misses are computed outside it (two workers missing the same part at once both
compute it; the result is the same). Training's :class:`~toporag_core.training.DiskKVShards` is another
thing: every example's cache precomputed once, in float16 shards on disk, keyed by example id.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from torch import Tensor

from .qa_batch import QABatch
from .frozen_kv import context_kv


class FrozenKVStore:
    """An LRU of frozen-part caches keyed by their token ids (see the module docstring)."""

    def __init__(self, max_bytes: int = 256 << 20, chunk_tokens: int = 1024) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"FrozenKVStore: max_bytes must be a whole number >= 0, got {max_bytes!r}")
        if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 1:
            raise ValueError(f"FrozenKVStore: chunk_tokens must be a whole number >= 1, got {chunk_tokens!r}")
        self.max_bytes, self.chunk_tokens = max_bytes, chunk_tokens
        self.items: OrderedDict[bytes, Tensor] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()
        self.hits = self.misses = self.shared = self.evictions = 0

    @staticmethod
    def key(ids: list[int]) -> bytes:
        return np.asarray(ids, dtype=np.int64).tobytes()

    def get(self, key: bytes) -> Tensor | None:
        with self.lock:
            t = self.items.get(key)
            if t is not None:
                self.items.move_to_end(key)
            return t

    def put(self, key: bytes, t: Tensor) -> None:
        size = t.numel() * t.element_size()
        if size > self.max_bytes:
            return
        with self.lock:
            old = self.items.pop(key, None)
            if old is not None:
                self.bytes -= old.numel() * old.element_size()
            self.items[key] = t
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, gone = self.items.popitem(last=False)
                self.bytes -= gone.numel() * gone.element_size()
                self.evictions += 1

    def lookup(self, model, batch: QABatch) -> list[Tensor]:
        """The frozen-part cache of every row of ``batch`` (``model``: a cacheable
        :class:`~toporag_core.model.TopoRAGModel`), ``(layers, 2, kv_heads, S_i, head_dim)`` each,
        for ``QABatch.kv``: stored ones reused, the rest computed once per distinct part."""
        rows = [model.prompter.frozen_ids(c, q) for c, q in zip(batch.contexts, batch.questions)]
        keys = [self.key(r) for r in rows]
        found: dict[bytes, Tensor] = {}
        for k in dict.fromkeys(keys):
            t = self.get(k)
            if t is not None:
                found[k] = t
        first = {k: i for i, k in reversed(list(enumerate(keys)))}  # one row per distinct key
        todo = sorted((i for k, i in first.items() if k not in found), key=lambda i: len(rows[i]))
        with self.lock:
            self.hits += sum(k in found for k in keys)
            self.misses += len(todo)
            self.shared += len(keys) - sum(k in found for k in keys) - len(todo)
        for chunk in self.chunks(todo, [len(r) for r in rows]):
            sub = QABatch(None, [batch.questions[i] for i in chunk], [batch.contexts[i] for i in chunk])
            for i, t in zip(chunk, context_kv(model, sub)):
                found[keys[i]] = t
                self.put(keys[i], t)
        return [found[k] for k in keys]

    def chunks(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """``order`` (rows sorted by length) cut into passes of at most ``chunk_tokens`` padded
        tokens (a longer row alone)."""
        out: list[list[int]] = []
        for i in order:
            if out and lengths[i] * (len(out[-1]) + 1) <= self.chunk_tokens:
                out[-1].append(i)
            else:
                out.append([i])
        return out

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {"entries": len(self.items), "bytes": self.bytes, "max_bytes": self.max_bytes,
                    "hits": self.hits, "misses": self.misses, "shared_in_batch": self.shared,
                    "evictions": self.evictions, "chunk_tokens": self.chunk_tokens}
