"""The ready-made graphs the Home and Learn pages offer: built-in samples and the benchmark data.

* Built-in samples: :data:`SAMPLE_KEYS` (``scene`` | ``kg`` | ``argument``), :func:`sample` (a
  :class:`~toporag_core.io.samples.Sample` with its ``title`` and ``description``) and
  :func:`load_sample` (the graph, read with the ordinary loaders).
* Benchmark data under ``../shared/data``: :func:`shared_data_dir` (``None`` when it is missing), the
  ExplaGraphs rows (:func:`explagraphs_rows`, one made a graph by :func:`explagraphs_graph`) and the
  WebQSP records (:func:`webqsp_records`, :func:`webqsp_graph`).

All of them are :mod:`toporag_core.io.samples`' own, re-exported so that a page reaches them through the
studio; the Home page caches the benchmark reads per server.
"""
from __future__ import annotations

from ..io.samples import (SAMPLE_KEYS, explagraphs_graph, explagraphs_rows, load_sample, sample, shared_data_dir,
                          webqsp_graph, webqsp_records)

__all__ = ["SAMPLE_KEYS", "explagraphs_graph", "explagraphs_rows", "load_sample", "sample", "shared_data_dir",
           "webqsp_graph", "webqsp_records"]
