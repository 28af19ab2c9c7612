"""Answer coverage against context tokens, per retrieval method, on knowledge-graph questions.

For each question the method's subcomplex is textualized (the general checkpoint's ``compact`` text) and
fitted to a token budget by prize (:func:`toporag_core.retrieval.budget.fit_context`, the answering
path's own cut; tokens counted by the packaged LLM's tokenizer). **Coverage** at a budget: a normalised
gold answer occurs as a whole phrase in the fitted text (what the reader can see). Questions: the
generated ``general`` task's split (``--split``, ``--per-kind`` per question kind; ``toporag data
general --n 360 --seed 3 --out data/general-n360-s3``) and the shared WebQSP sample (12 real questions
with their Freebase subgraphs), each graph lifted once. Reference: G-Retriever's PCST (``g-retriever``),
measured in the same run; paired exact McNemar of each method against it and against the paper's
``toporag`` over all questions at each budget.

    python benchmarks/bench_kg_retrieval.py --split test --per-kind 40
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from _common import ROOT, SHARED
from toporag_core.embed import get_encoder
from toporag_core.metrics import mcnemar_exact, normalize
from toporag_core.retrieval import EmbeddedComplex, RetrievalSetting, retrieve
from toporag_core.retrieval.budget import fit_context

DEFAULT_METHODS = ('toporag:{"k": 3}', 'g-retriever:{"k": 3}', 'g-retriever:{"k": 5}', 'topk-triples:{"k": 10}',
                   'toporag-seeded:{}')


def covered(text: str, answers) -> bool:
    t = f" {normalize(text)} "
    return any(f" {a} " in t for a in (normalize(x) for x in answers) if a)


def questions(split: str, per_kind: int, data_dir: Path, enc):
    from toporag_core.tasks.general.dataset import load_general

    out, graphs = [], {}
    if (data_dir / "questions.jsonl").is_file():
        seen: dict[str, int] = defaultdict(int)
        for e in load_general(data_dir)[split]:
            if str(e.qtype).startswith("scene") or seen[e.qtype] >= per_kind:
                continue  # scene answers are attributes: docs/results/scene_graphs_retrieval.md covers them
            seen[e.qtype] += 1
            if id(e.graph) not in graphs:
                graphs[id(e.graph)] = EmbeddedComplex.from_graph(e.graph, enc)
            out.append((e.qtype, graphs[id(e.graph)], e.query, e.label))
    else:
        print(f"skipped the general task: {data_dir} has no questions.jsonl")
    wq = SHARED / "webqsp_sample.json"
    if wq.is_file():
        from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph

        for rec in read_webqsp(wq):
            out.append(("webqsp", EmbeddedComplex.from_graph(webqsp_record_to_graph(rec), enc), rec["question"],
                        list(rec["answers"])))
    else:
        print(f"skipped WebQSP: {wq} is absent")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--per-kind", type=int, default=40)
    ap.add_argument("--data-dir", default=str(ROOT / "data" / "general-n360-s3"))
    ap.add_argument("--budgets", default="128,256,512")
    ap.add_argument("--methods", nargs="*", default=list(DEFAULT_METHODS), help="NAME:JSON-PARAMS")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from toporag_core.model.llm import ensure_default_llm

    tok = AutoTokenizer.from_pretrained(str(ensure_default_llm()))

    def count(text: str) -> int:
        return len(tok(text, add_special_tokens=False)["input_ids"])

    enc = get_encoder()
    items = questions(args.split, args.per_kind, Path(args.data_dir), enc)
    budgets = [int(b) for b in args.budgets.split(",")]
    kinds = list(dict.fromkeys(k for k, *_ in items))
    hit: dict[tuple[str, int], np.ndarray] = {}
    rows = []
    for spec in args.methods:
        name, _, js = spec.partition(":")
        setting = RetrievalSetting.make(name, **json.loads(js or "{}"))
        got = np.zeros((len(items), len(budgets)), bool)
        full_tok, ms = [], []
        for i, (_, ecx, q, ans) in enumerate(items):
            t = time.perf_counter()
            sub = retrieve(ecx, q, setting=setting)
            ms.append(1000 * (time.perf_counter() - t))
            for j, b in enumerate(budgets):
                fit = fit_context(sub, b, count, include_cells2=True, fmt="compact")
                got[i, j] = covered(fit.text, ans)
            full_tok.append(fit.full_tokens)
        hit[(spec, 0)] = got
        for j, b in enumerate(budgets):
            row = {"method": spec, "budget": b}
            for k in kinds:
                sel = [i for i, it in enumerate(items) if it[0] == k]
                row[k] = float(got[sel, j].mean())
            row["all"] = float(got[:, j].mean())
            row["full tokens (median)"] = float(np.median(full_tok))
            row["ms (median)"] = float(np.median(ms))
            rows.append(row)
    ref = [m for m in args.methods if m.startswith("g-retriever")][:1]
    paper = [m for m in args.methods if m.startswith("toporag:")][:1]
    for row in rows:
        j = budgets.index(row["budget"])
        a = hit[(row["method"], 0)][:, j]
        for tag, base in (("vs G-Retriever", ref), ("vs toporag", paper)):
            if base and base[0] != row["method"]:
                b = hit[(base[0], 0)][:, j]
                only_a, only_b, p = mcnemar_exact(a.tolist(), b.tolist())
                row[f"{tag} (only it / only ref, p)"] = f"{only_a} / {only_b}, p = {p:.2g}"
    n_by = {k: sum(1 for it in items if it[0] == k) for k in kinds}
    print("questions per kind: " + ", ".join(f"{k} {n}" for k, n in n_by.items()))
    cols = ["method", "budget", *kinds, "all", "full tokens (median)", "ms (median)",
            "vs G-Retriever (only it / only ref, p)", "vs toporag (only it / only ref, p)"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in cols) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
