"""Large graphs: lift, embed, retrieve (exact and indexed) and peak memory for 2k .. 1M nodes, and
DuckDB k-hop extraction from a generated KG of >= 1M triples.

Random graphs as in issue 17: every node has 3 out-edges to uniform random nodes, 50 relation texts,
node texts "<word> <word> item <i>"; the hashing encoder (256-d, uncached) embeds, so the sentence
model is not the bottleneck; MiniLM's throughput is measured separately on a 512-text sample.
Each size runs in its own child process under an address-space limit (``--mem-limit-gb``, default
16), so a blow-up kills only that child; peak RSS is the child's ``ru_maxrss``. Retrieval: k0 = 3,
k1 = 5, k2 = 3, median over 4 questions after one warm-up; "exact" = ``toporag`` (the reference),
"indexed" = ``toporag-local`` with ``index=flat`` (exact prizes from one BLAS pass + PCST on the radius-3
hop neighbourhood, grown only when the tree reaches its edge), "ivf" = the same with faiss IVF top-k
0-cells (approximate), with the index build times separate and whether each gave the exact subcomplex.

    python benchmarks/bench_scale.py                    # 2k, 20k, 200k, 1M nodes + KG (1M triples)
    python benchmarks/bench_scale.py --sizes 2000 20000 --kg-triples 100000 --no-plot
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["which red city is left of the river", "author born in paris item 17", "blue film song",
             "table cup near the school item 4242"]
WORDS = ["red", "blue", "cup", "table", "left", "river", "city", "born", "author", "paris", "film", "song", "school"]


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def random_graph(n: int, seed: int = 0):
    from toporag_core.graph import TextualGraph

    rng = np.random.default_rng(seed)
    s = np.repeat(np.arange(n), 3)
    t = rng.integers(0, n, 3 * n)
    w = len(WORDS)
    nodes = [f"{WORDS[i % w]} {WORDS[(i // w) % w]} item {i}" for i in range(n)]
    rel_names = [f"relation {WORDS[i % w]} {i}" for i in range(50)]
    rel = [rel_names[r] for r in rng.integers(0, 50, 3 * n).tolist()]
    return TextualGraph(nodes, np.stack([s, t]), rel)


def same(a, b) -> bool:
    return (np.array_equal(a.nodes, b.nodes) and np.array_equal(a.edges, b.edges)
            and np.array_equal(a.cells2, b.cells2))


def child_size(n: int, exact: bool) -> None:
    """One size, printing one JSON line per phase (a killed child still leaves the earlier ones)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    from toporag_core.embed import HashingEncoder, embed_complex
    from toporag_core.cells.lift import lift
    from toporag_core.retrieval import EmbeddedComplex, retrieve
    from toporag_core.retrieval.scale import cell_index

    def out(**kw):
        print(json.dumps({"n": n, **kw, "rss_gb": round(rss_gb(), 3)}), flush=True)

    t = time.perf_counter()
    g = random_graph(n)
    out(phase="graph", s=time.perf_counter() - t)
    t = time.perf_counter()
    cx = lift(g)
    out(phase="lift", s=time.perf_counter() - t, shape=list(cx.shape), entries=int(cx.cell_ptr[-1]))
    enc = HashingEncoder()
    t = time.perf_counter()
    emb = embed_complex(cx, enc)
    out(phase="embed", s=time.perf_counter() - t)
    ecx = EmbeddedComplex(cx, emb, enc)
    qv = [ecx.question_vector(q) for q in QUESTIONS]
    params = dict(k0=3, k1=5, k2=3)
    t = time.perf_counter()
    cell_index(ecx, "flat")
    out(phase="index", s=time.perf_counter() - t)

    def timed(method, **kw):
        retrieve(ecx, qv[0], method, **params, **kw)
        res, ts = [], []
        for q in qv:
            t0 = time.perf_counter()
            res.append(retrieve(ecx, q, method, **params, **kw))
            ts.append(time.perf_counter() - t0)
        return res, float(np.median(ts))

    loc, t_loc = timed("toporag-local", index="flat")
    out(phase="indexed", s=t_loc, radius=[r.params["radius"] for r in loc],
        region=[r.params["region_nodes"] for r in loc])
    t = time.perf_counter()
    cell_index(ecx, "ivf")
    out(phase="ivf_index", s=time.perf_counter() - t)
    ivf, t_ivf = timed("toporag-local", index="ivf")
    out(phase="ivf", s=t_ivf, radius=[r.params["radius"] for r in ivf])
    if exact:
        ex, t_ex = timed("toporag")
        out(phase="exact", s=t_ex, same=sum(same(a, b) for a, b in zip(ex, loc)), of=len(qv),
            same_ivf=sum(same(a, b) for a, b in zip(ex, ivf)))


def child_minilm() -> None:
    sys.path.insert(0, str(ROOT))
    from toporag_core.embed import get_encoder

    enc = get_encoder("default", cached=False)
    texts = [f"{WORDS[i % 13]} {WORDS[(i * 7) % 13]} item {i}" for i in range(512)]
    enc.encode(texts[:32])
    t = time.perf_counter()
    enc.encode(texts)
    print(json.dumps({"minilm_texts_per_s": 512 / (time.perf_counter() - t)}), flush=True)


def child_kg(triples: int, workdir: str) -> None:
    sys.path.insert(0, str(ROOT))
    from toporag_core.kg import KGStore, generate_kg, link_entities
    from toporag_core.kg.generate import entity_name

    d = Path(workdir)
    ents = max(1000, triples // 3)
    t = time.perf_counter()
    src = generate_kg(d / "kg.parquet", ents, triples, 50)
    t_gen = time.perf_counter() - t
    t = time.perf_counter()
    store = KGStore.create(d / "kg.duckdb", [src], overwrite=True)
    t_imp = time.perf_counter() - t
    rng = np.random.default_rng(0)
    rows = []
    for i in rng.integers(ents // 10, ents, 5).tolist():  # not the hubs
        q = f"what is {entity_name(i)} connected to"
        t = time.perf_counter()
        links = link_entities(store, q)
        t_link = time.perf_counter() - t
        for hops in (1, 2):
            t = time.perf_counter()
            nb = store.subgraph([lk.id for lk in links], hops=hops, max_nodes=None)
            rows.append({"hops": hops, "link_s": t_link, "extract_s": time.perf_counter() - t,
                         "nodes": nb.graph.num_nodes, "triples": nb.graph.num_edges})
    print(json.dumps({"triples": store.counts()["triples"], "entities": store.counts()["entities"],
                      "generate_s": t_gen, "import_s": t_imp, "rows": rows, "rss_gb": rss_gb()}), flush=True)


def run_child(args: list[str], mem_gb: float, timeout: int) -> tuple[list[dict], str]:
    def limit():
        b = int(mem_gb * 1e9)
        resource.setrlimit(resource.RLIMIT_AS, (b, b))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    try:
        p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env,
                           preexec_fn=limit, timeout=timeout)
        status = "ok" if p.returncode == 0 else f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"
        stdout = p.stdout
    except subprocess.TimeoutExpired as e:
        status, stdout = f"timeout after {timeout} s", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
    return [json.loads(x) for x in stdout.splitlines() if x.startswith("{")], status


def fmt(x, unit=1.0, nd=3):
    return "-" if x is None else f"{x * unit:.{nd}f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000, 200000, 1000000])
    ap.add_argument("--kg-triples", type=int, default=1_000_000)
    ap.add_argument("--mem-limit-gb", type=float, default=16.0)
    ap.add_argument("--exact-max", type=int, default=1_000_000, help="largest size that also runs exact retrieval")
    ap.add_argument("--timeout", type=int, default=1500)
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind = a.child[0]
        if kind == "size":
            child_size(int(a.child[1]), a.child[2] == "1")
        elif kind == "minilm":
            child_minilm()
        else:
            child_kg(int(a.child[1]), a.child[2])
        return

    mini, _ = run_child(["--child", "minilm"], a.mem_limit_gb, 600)
    mps = mini[0]["minilm_texts_per_s"] if mini else None
    table = []
    for n in a.sizes:  # one size at a time, each in its own limited child
        rows, status = run_child(["--child", "size", str(n), "1" if n <= a.exact_max else "0"], a.mem_limit_gb,
                                 a.timeout)
        ph = {r["phase"]: r for r in rows}
        table.append((n, ph, status))
        print(f"# {n}: {status}", file=sys.stderr, flush=True)
    print(f"Random graphs, 3 edges per node, 50 relation texts, hashing encoder (256-d); MiniLM "
          f"(all-MiniLM-L6-v2, CPU, 512-text sample): {fmt(mps, nd=0)} texts/s; retrieval k0=3, k1=5, k2=3, "
          f"median of {len(QUESTIONS)} questions (warm); limit {a.mem_limit_gb:g} GB address space per size.\n")
    print("| nodes / 1-cells / 2-cells | boundary entries | lift_s | embed_s | embed_minilm_est_s | index_build_s "
          "| retrieve_exact_ms | retrieve_indexed_ms | speedup (x) | same result | radius | ivf_build_s | "
          "retrieve_ivf_ms | ivf speedup (x) | ivf same | peak_RSS_GB | status |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    plot = []
    for n, ph, status in table:
        lift_r, emb, ix, loc, ex = (ph.get(k) for k in ("lift", "embed", "index", "indexed", "exact"))
        ivx, ivf = ph.get("ivf_index"), ph.get("ivf")
        sp_ivf = ex["s"] / ivf["s"] if ex and ivf else None
        shape = "/".join(str(x) for x in lift_r["shape"]) if lift_r else f"{n}/-/-"
        peak = max((r["rss_gb"] for r in ph.values()), default=None)
        est = (n + 50) / mps if mps else None  # distinct texts: node texts + 50 relations
        sp = ex["s"] / loc["s"] if ex and loc else None
        same_txt = f"{ex['same']}/{ex['of']}" if ex else "-"
        print(f"| {shape} | {lift_r['entries'] if lift_r else '-'} | {fmt(lift_r and lift_r['s'])} "
              f"| {fmt(emb and emb['s'])} | {fmt(est, nd=0)} | {fmt(ix and ix['s'])} | {fmt(ex and ex['s'], 1000, 1)} "
              f"| {fmt(loc and loc['s'], 1000, 1)} | {fmt(sp, nd=1)} "
              f"| {same_txt} | {loc['radius'] if loc else '-'} | {fmt(ivx and ivx['s'])} "
              f"| {fmt(ivf and ivf['s'], 1000, 1)} | {fmt(sp_ivf, nd=1)} "
              f"| {str(ex['same_ivf']) + '/' + str(ex['of']) if ex else '-'} | {fmt(peak, nd=2)} "
              f"| {status} |")
        plot.append((n, lift_r and lift_r["s"], emb and emb["s"], ex and ex["s"], loc and loc["s"], peak))
    print("\nReference for the retrieval speedup: exact `toporag` on the same embedded complex, same run.")
    if a.kg_triples:
        import tempfile

        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as d:
            kg, status = run_child(["--child", "kg", str(a.kg_triples), d], a.mem_limit_gb, a.timeout)
        if kg:
            k = kg[0]
            print(f"\nDuckDB KG: {k['triples']} triples, {k['entities']} entities; generate {k['generate_s']:.1f} s, "
                  f"import {k['import_s']:.1f} s; peak RSS {k['rss_gb']:.2f} GB; 5 questions (non-hub entities)\n")
            print("| hops | link_ms (median) | extract_ms (median) | extract_ms (max) | nodes (median) "
                  "| triples (median) |")
            print("|---|---|---|---|---|---|")
            for h in (1, 2):
                r = [x for x in k["rows"] if x["hops"] == h]
                med = lambda key: float(np.median([x[key] for x in r]))  # noqa: E731
                print(f"| {h} | {med('link_s') * 1000:.1f} | {med('extract_s') * 1000:.1f} "
                      f"| {max(x['extract_s'] for x in r) * 1000:.1f} | {med('nodes'):.0f} | {med('triples'):.0f} |")
        else:
            print(f"\nDuckDB KG: no result ({status})")
    if not a.no_plot:
        make_plot(plot)


def make_plot(plot) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(no plot: matplotlib is not installed; the table above is the result)")
        return
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for i, label in ((1, "lift (s)"), (2, "embed, hashing (s)"), (3, "retrieve exact (s)"), (4, "retrieve indexed (s)")):
        xs = [n for n, *v in plot if v[i - 1] is not None]
        ax[0].plot(xs, [p[i] for p in plot if p[i] is not None], marker="o", label=label)
    ax[0].set(xscale="log", yscale="log", xlabel="nodes", ylabel="seconds", title="time against graph size")
    ax[0].legend()
    ax[1].plot([n for n, *v in plot if v[4] is not None], [p[5] for p in plot if p[5] is not None], marker="o")
    ax[1].set(xscale="log", xlabel="nodes", ylabel="GB", title="peak RSS (lift + embed + both retrievals)")
    fig.tight_layout()
    out = ROOT / "docs" / "scale_cost.png"
    fig.savefig(out, dpi=110)
    print(f"\nplot: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
