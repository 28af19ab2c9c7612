"""Citation-constrained decoding against plain greedy decoding: the open answers of one cited checkpoint.

Why: a cited checkpoint (``answer_style="cited"``) answers an open question by copying the context
lines its answer rests on, then the label (``cabinet [5]: yellow, wooden; cabinet [5] in front of
clock [9]. Answer: clock``). Greedy decoding sometimes writes a line the context does not have (on
the scene test set, 79 of 354 open answers did, and those were right 0.47 of the time against 0.84
for answers citing real lines). Constrained decoding
(:class:`~toporag_core.retrieval.citations.CitationGrammar`,
:meth:`~toporag_core.model.TopoRAGModel.generate` with ``constrain``) keeps every cited line a whole
line of the row's context. The reference is plain greedy decoding (``constrain=False``), measured in
the same run on the same weights and batches.

Method. Every open question of ``--split`` (or the first ``--limit``) is answered greedily in
batches of ``--batch-size``. Constrained decoding can only differ where greedy's text leaves the
grammar (its final text neither a bare label nor real lines + ``". Answer:"``; a text that ends
inside the grammar was inside it at every step, and there the two decoders pick the same tokens:
``tests/test_decoding.py``). Those rows are answered again with constraints, and so is a seeded sample
of ``--check`` rows that stayed inside, to measure that invariance here too (printed: how many of them
came out the same). Printed: accuracy of both decoders on the open questions and on the rows greedy
left the grammar, the changed rows, a paired exact McNemar test, the share of answers whose cited
lines are all real, and seconds per question of each decoder on the re-decoded rows.

    .venv/bin/python experiments/bench_constrained.py --checkpoint assets/checkpoints/scene_graphs --threads 2
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the package, and benchmarks/_common.py


def answer_all(model, examples, batch_size: int, constrain: bool) -> tuple[list[dict], float]:
    """``model.answer`` over ``examples`` in batches, with or without citation constraints."""
    from toporag_core.training.batching import make_batch

    model.constrain_citations = constrain
    out, t0 = [], time.perf_counter()
    for i in range(0, len(examples), batch_size):
        out += model.answer(make_batch(examples[i:i + batch_size], with_answers=False))
    return out, time.perf_counter() - t0


def main() -> None:
    from _common import checkpoint_split, load_checkpoint_model
    from toporag_core.metrics import is_correct, mcnemar_exact
    from toporag_core.model import choices_for, get_style
    from toporag_core.retrieval.citations import CitationGrammar
    from toporag_core.retrieval.report import format_table
    from toporag_core.tasks import metric_of

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="assets/checkpoints/scene_graphs")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=None, help="only the first N open questions")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--check", type=int, default=40, help="rows inside the grammar re-decoded to check invariance")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="JSONL of every re-decoded row (both decoders)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = Path(args.checkpoint)
    meta, examples = checkpoint_split(folder, args.split)
    dataset = meta["dataset"]
    model = load_checkpoint_model(folder, meta)
    if not get_style(model.config.answer_style).open_citations:
        raise SystemExit(f"{folder}: answer_style {model.config.answer_style!r}; constraints apply to cited models")
    examples = [e for e in examples if choices_for(model.config, e.question) is None][: args.limit]
    metric = metric_of(dataset)

    def right(o, e) -> bool:
        return bool(is_correct(metric, o["answer"], e.label))

    greedy, _ = answer_all(model, examples, args.batch_size, constrain=False)
    grammars = [CitationGrammar(e.context) for e in examples]
    outside = [i for i, (o, g) in enumerate(zip(greedy, grammars)) if g.state(o["raw"]) not in ("free", "done")]
    inside = sorted(set(range(len(examples))) - set(outside))
    sample = sorted(random.Random(0).sample(inside, min(args.check, len(inside))))
    redo = outside + sample
    g_redo, t_g = answer_all(model, [examples[i] for i in redo], args.batch_size, constrain=False)
    c_redo, t_c = answer_all(model, [examples[i] for i in redo], args.batch_size, constrain=True)
    constrained = list(greedy)
    for k, i in enumerate(redo):
        constrained[i] = c_redo[k]
    same_inside = sum(c_redo[k]["raw"] == greedy[i]["raw"] for k, i in enumerate(redo) if i in set(sample))

    def real(o, g) -> bool:
        ev = o.get("evidence") or ""
        return not g.missing(ev) if "[" in ev else True

    rows = []
    for name, outs in (("greedy (reference)", greedy), ("citation-constrained", constrained)):
        ok = [right(o, e) for o, e in zip(outs, examples)]
        ok_out = [ok[i] for i in outside]
        b, c, p = mcnemar_exact(ok, [right(o, e) for o, e in zip(greedy, examples)])
        rows.append({"decoding": name, "open questions": len(examples), "accuracy": f"{np.mean(ok):.3f}",
                     f"on the {len(outside)} greedy left": f"{np.mean(ok_out):.3f}" if outside else "-",
                     "cited lines all real": f"{np.mean([real(o, g) for o, g in zip(outs, grammars)]):.3f}",
                     "changed answers": sum(o["answer"] != r["answer"] for o, r in zip(outs, greedy)),
                     "only this / only greedy right": "(reference)" if outs is greedy else f"{b} / {c} (p = {p:.3g})",
                     "s / re-decoded question": f"{(t_g if outs is greedy else t_c) / max(len(redo), 1):.3f}"})
    by_type: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for e, g0, c0 in zip(examples, greedy, constrained):
        by_type[e.qtype or "?"].append((right(g0, e), right(c0, e)))
    print(f"{folder} ({dataset} {args.split}, {len(examples)} open questions, batch {args.batch_size}, "
          f"{torch.get_num_threads()} threads, LLM {model.dtype})")
    print(format_table(rows))
    print(f"rows inside the grammar re-decoded with constraints: {same_inside} / {len(sample)} unchanged "
          f"(greedy's second pass on the re-decoded rows: "
          f"{sum(a['raw'] == greedy[i]['raw'] for a, i in zip(g_redo, redo))} / {len(redo)} equal to its first)")
    print(format_table([{"type": t, "n": len(v), "greedy": f"{np.mean([a for a, _ in v]):.3f}",
                         "constrained": f"{np.mean([b for _, b in v]):.3f}"} for t, v in sorted(by_type.items())]))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            for k, i in enumerate(redo):
                e = examples[i]
                f.write(json.dumps({"id": e.id, "qtype": e.qtype, "gold": e.label, "outside": i in set(outside),
                                    "greedy": greedy[i]["raw"], "constrained": c_redo[k]["raw"],
                                    "greedy_right": right(greedy[i], e), "constrained_right": right(c_redo[k], e)})
                        + "\n")


if __name__ == "__main__":
    main()
