"""What the graph alone says: a label head on each retrieval + encoder variant, no LLM.

For a dataset with a closed answer set (ExplaGraphs: support / counter), each variant's graph
encoder + a linear label head on its pooled graph is fitted alone
(:func:`toporag_core.train.pretrain_graph`: AdamW at ``--lr``, ``--epochs`` epochs, the epoch of
best validation accuracy restored), then scored on the test split. This isolates what the
retrieved subcomplex and the encoder carry about the answer from what the LLM reads in the text,
at a cost of seconds per epoch, so every ablation of the paper runs at the same budget and over
several seeds:

    ===================  ===========================================  ========
    variant              retrieval                                    encoder
    ===================  ===========================================  ========
    TopoRAG              toporag (k0 = k1 = k2 = 3, C2 = 0.5)         CW net
    w/o CRL              toporag with k2 = 0, no 2-cells              CW net
    w/o TSR              shortest-path (2-cells removed)              CW net
    w/o MTR              toporag                                      GCN
    G-Retriever-style    g-retriever PCST subgraph, no 2-cells        GCN
    ===================  ===========================================  ========

The reference is TopoRAG, measured in the same run: each row gives the mean test accuracy over
seeds, its ratio to TopoRAG's, and the exact McNemar test of the seed-wise paired predictions
pooled over seeds (only this right / only TopoRAG right). The majority answer of the training set
is the floor.

    .venv/bin/python benchmarks/bench_graph_probe.py                       # ExplaGraphs, 3 seeds
    .venv/bin/python benchmarks/bench_graph_probe.py --seeds 0 --epochs 3  # quick look

Cost: 2-6 s per epoch per run on one thread (the GCNs are faster), ~25 min for the default 5
variants x 3 seeds x 20 epochs on an idle 2-core machine (plus first-use retrieval of each setting).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from _common import require_shared
from toporag_core.metrics import mcnemar_exact
from toporag_core.retrieval import RetrievalSetting
from toporag_core.retrieval.report import format_table

VARIANTS = {  # name -> (retrieval setting, use 2-cells, encoder)
    "TopoRAG": (RetrievalSetting("toporag"), True, "cwn"),
    "w/o CRL": (RetrievalSetting("toporag"), False, "cwn"),
    "w/o TSR": (RetrievalSetting("shortest-path"), True, "cwn"),
    "w/o MTR": (RetrievalSetting("toporag"), True, "gcn"),
    "G-Retriever-style": (RetrievalSetting("g-retriever"), False, "gcn"),
}


def probe(name: str, data: dict, encoder: str, use_cells2: bool, answer_set: tuple[str, ...], llm, tok,
          seed: int, args) -> dict:
    """Fit one variant's encoder + label head with ``seed``; its validation / test correctness."""
    from toporag_core.model import TopoRAGConfig, TopoRAGModel
    from toporag_core.nn import CWNConfig
    from toporag_core.train import TrainConfig, graph_head_predictions, pretrain_graph, seed_everything

    seed_everything(seed)
    dim = data["train"][0].tensors.dim
    cfg = TopoRAGConfig(encoder=encoder, cwn=CWNConfig(in_dim=dim, hidden=args.hidden, use_cells2=use_cells2),
                        num_graph_tokens=1, answer_set=answer_set, graph_label_weight=1.0)
    model = TopoRAGModel(cfg, llm, tok)
    t0 = time.perf_counter()
    got = pretrain_graph(model, data["train"], data["val"],
                         TrainConfig(lr=args.lr, encoder_lr=args.lr, weight_decay=args.weight_decay,
                                     graph_pretrain_epochs=args.epochs, seed=seed), batch_size=args.batch_size)
    pred, target = graph_head_predictions(model, data["test"])
    return {"variant": name, "seed": seed, "val": got["graph_pretrain_val_accuracy"],
            "best_epoch": got["graph_pretrain_best_epoch"], "seconds": time.perf_counter() - t0,
            "correct": (pred == target).tolist()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="expla_graphs")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: " + ", ".join(VARIANTS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-4, help="AdamW lr (the CW encoder's ReLUs die at 5e-4)")
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write every run (with per-example correctness) here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.dataset == "expla_graphs":
        require_shared("expla_graphs_train_dev.tsv")
    from toporag_core.llm import DEFAULT_LLM, load_llm
    from toporag_core.tasks.prep import PrepConfig, prepare_dataset

    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; known: {list(VARIANTS)}")
    if "TopoRAG" not in names:
        names.insert(0, "TopoRAG")  # the reference of every ratio and paired test
    seeds = [int(s) for s in args.seeds.split(",")]
    llm, tok = load_llm(DEFAULT_LLM)  # only sizes the projector; the probe never runs the LLM
    runs, floor = [], None
    for name in names:
        setting, use_cells2, encoder = VARIANTS[name]
        t0 = time.perf_counter()
        data = prepare_dataset(args.dataset, PrepConfig(setting, use_cells2=use_cells2), show_progress=False)
        prep_s = time.perf_counter() - t0
        answers = [e.answer.strip() for e in data["train"]]
        answer_set = tuple(sorted(set(answers)))
        if len(answer_set) > 8:
            raise SystemExit(f"{args.dataset}: {len(answer_set)} distinct answers; the probe needs a closed set")
        if floor is None:
            major = max(answer_set, key=answers.count)
            floor = float(np.mean([e.answer.strip() == major for e in data["test"]])), major
        for seed in seeds:
            r = probe(name, data, encoder, use_cells2, answer_set, llm, tok, seed, args)
            r["prep_seconds"] = prep_s
            runs.append(r)
            print(f"{name} seed {seed}: val {r['val']:.3f} (epoch {r['best_epoch']}), "
                  f"test {np.mean(r['correct']):.3f}, {r['seconds']:.0f} s", flush=True)
    ref = {r["seed"]: r["correct"] for r in runs if r["variant"] == "TopoRAG"}
    ref_acc = float(np.mean([np.mean(c) for c in ref.values()]))
    rows = []
    for name in names:
        mine = [r for r in runs if r["variant"] == name]
        accs = [float(np.mean(r["correct"])) for r in mine]
        a = sum((r["correct"] for r in mine), [])
        b = sum((ref[r["seed"]] for r in mine), [])
        x, y, p = mcnemar_exact(a, b)
        rows.append({"variant": name, "val": f"{np.mean([r['val'] for r in mine]):.3f}",
                     "test": f"{np.mean(accs):.3f}", "sd": f"{np.std(accs):.3f}",
                     "vs TopoRAG": f"{np.mean(accs) / ref_acc:.3f}x",
                     "only this / only TopoRAG": f"{x} / {y}" if name != "TopoRAG" else "reference",
                     "McNemar p": f"{p:.3g}" if name != "TopoRAG" else "-",
                     "s per run": f"{np.mean([r['seconds'] for r in mine]):.0f}"})
    rows.append({"variant": f"majority ('{floor[1]}')", "val": "-", "test": f"{floor[0]:.3f}", "sd": "-",
                 "vs TopoRAG": f"{floor[0] / ref_acc:.3f}x", "only this / only TopoRAG": "-", "McNemar p": "-",
                 "s per run": "-"})
    print(f"\n## {args.dataset}: graph alone (encoder + label head, no LLM), {len(seeds)} seed(s), "
          f"{args.epochs} epochs at lr {args.lr}, test {len(next(iter(ref.values())))} examples\n")
    print(format_table(rows, list(rows[0])))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "runs": runs}, fh)


if __name__ == "__main__":
    main()
