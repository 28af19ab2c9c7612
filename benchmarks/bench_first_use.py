"""First use of every retrieval method on a WebQSP graph, against the lab's own first embedding.

What a user waits for the first time a method runs on a graph: the lab's first embedding of the
graph (every distinct node and relation text through a fresh encoder cache, in the app's own
chunks: :func:`toporag_core.studio.resources.embed_with_progress`, the function behind the page's
progress bar), then the method's first use on that graph:

* a cell method (``toporag``, ``topk-triples`` = KAPING, ...): its first retrieval on a new
  :class:`EmbeddedComplex` over the lab's cell embeddings, which it must reuse (KAPING's triples are
  the embedded 1-cells and their 0-cells: no new encoding);
* a node method (``proximity``, ``role``, ``text``, ``random``): what the lab builds on first use,
  the text index that picks the target from the question, the method's own top-``INDEX_K`` index
  and the retrieval (node texts come from the same encoder cache: no new encoding).

``texts_encoded`` counts the texts that reached the model during that first use (the question is
one). ``ratio`` = (embedding + the method's first use) / embedding; the goal is at most 3.

    python benchmarks/bench_first_use.py                 # the packaged sentence encoder
    python benchmarks/bench_first_use.py --encoder hashing --record 0   # quick, model-free

Skips with a reason when ../shared/data/webqsp_sample.json is absent.
"""
from __future__ import annotations

import argparse
import tempfile
import time

from _common import require_shared
from toporag_core.embed import CachedEncoder, get_encoder
from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph
from toporag_core.cells.lift import lift
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, method_names, retrieve
from toporag_core.retrieval.report import format_table
from toporag_core.studio.resources import embed_with_progress
from toporag_core.studio.topo_view import INDEX_K, INDEX_SEED
from toporag_core.topo.retriever import TopoNodeIndex, retrieve_nodes

GOAL = 3.0


class CountingEncoder:
    """Counts the texts that reach the wrapped encoder (what a method encodes on first use)."""

    def __init__(self, inner) -> None:
        self.inner, self.texts = inner, 0
        self.dim, self.name = inner.dim, getattr(inner, "name", "encoder")

    def encode(self, texts, show_progress: bool = False):
        self.texts += len(texts)
        return self.inner.encode(texts)


def largest_record(records: list[dict]) -> int:
    return max(range(len(records)), key=lambda i: len(records[i].get("nodes") or []))


def first_node_use(graph, method: str, question: str, enc: CachedEncoder) -> None:
    """The lab's first use of a node method: the text index (target from the question), the method's
    index, one retrieval (:mod:`toporag_core.studio.topo_view` without Streamlit's cache)."""
    text = TopoNodeIndex.build(graph, method="text", K=INDEX_K, encoder=enc, seed=INDEX_SEED)
    target, _ = text.target_for_question(question, enc)
    index = text if method == "text" else TopoNodeIndex.build(graph, method=method, K=INDEX_K, encoder=enc,
                                                              seed=INDEX_SEED)
    retrieve_nodes(index, target=target, k=5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoder", default="default", help="default (MiniLM) | hashing | hashing-<dim> | a model folder")
    ap.add_argument("--record", type=int, default=None, help="WebQSP record index (default: the largest graph)")
    args = ap.parse_args()
    records = read_webqsp(require_shared("webqsp_sample.json"))
    i = largest_record(records) if args.record is None else args.record
    rec = records[i]
    graph = webqsp_record_to_graph(rec)
    cx = lift(graph)
    with tempfile.TemporaryDirectory() as cache:
        counting = CountingEncoder(get_encoder(args.encoder, cached=False))
        enc = CachedEncoder(counting, cache_dir=cache)  # a fresh cache: the lab's real first embedding
        t = time.perf_counter()
        emb = embed_with_progress(cx, enc)
        t_embed = time.perf_counter() - t
        embedded_texts = counting.texts
        rows = []
        for method in method_names("cells") + method_names("nodes"):
            counting.texts = 0
            t = time.perf_counter()
            if method in method_names("cells"):
                ecx = EmbeddedComplex(cx, emb, enc)  # a new object: nothing cached from another method's first use
                retrieve(ecx, rec["question"], setting=RetrievalSetting.make(method))
            else:
                first_node_use(graph, method, rec["question"], enc)
            first = time.perf_counter() - t
            rows.append({"method": method, "first_use_s": round(first, 3), "texts_encoded": counting.texts,
                         "with_embedding_s": round(t_embed + first, 2),
                         "ratio": round((t_embed + first) / t_embed, 2) if t_embed > 0 else float("nan")})
    print(f"WebQSP record {i} ({rec.get('id', '')}): {graph.num_nodes} nodes, {graph.num_edges} edges; encoder "
          f"{args.encoder}; the lab's first embedding: {t_embed:.2f} s ({embedded_texts} texts encoded)")
    print(format_table(rows))
    worst = max(r["ratio"] for r in rows)
    print(f"worst ratio {worst:.2f} (goal <= {GOAL:g}): {'met' if worst <= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
