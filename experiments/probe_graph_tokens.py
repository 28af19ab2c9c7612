"""Do a checkpoint's cell tokens still hold what their cells say? Linear probes on the cell path's stages.

For the node slots of the cell path (``graph_path = "cells"`` with nodes first, ``cell_order = [0, 2, 1]``:
slot ``s + 1`` is the subcomplex's ``s``-th node line), a logistic regression decodes the node's name and its
first attribute (a SceneGraphs node's colour) from three stages of :class:`~toporag_core.model.graph_tokens.CellTokens`:

* ``z``: the cell state the projector reads (``h + W x + e_rank``);
* ``pre``: the projector's MLP output, before its LayerNorm;
* ``token``: the graph token the LLM reads.

It also prints how much of the variance of the nodes' input embeddings (``x``, the cell text's sentence
embedding) lies between names and between first attributes: the share of a label's class means.

Each probe is fit on 70% of the node slots and scored on the rest (a fixed seeded split), on features
standardised per dimension with the training part's statistics, and on the raw features. It prints the
accuracy beside the majority class, and per stage the norm of the features' mean and of their standard
deviation across cells: a token whose cell-specific part is a few percent of its norm reads the same to the
LLM for every cell, even when a standardised probe can still decode it.

    python experiments/probe_graph_tokens.py --checkpoint CKPT [--limit 400] [--reset-projector]
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the package, and benchmarks/_common.py

from _common import add_eval_checkpoint_args, eval_model_and_split  # noqa: E402

_LINE = re.compile(r"^(?P<name>\S.*?) \[\d+\]: (?P<first>[^,]+)")
STAGES = ("z", "pre", "token")


def node_labels(context: str) -> list[tuple[str, str]]:
    """``(name, first attribute)`` of each node line of a textualized subcomplex's first block."""
    return [(m["name"], m["first"].strip()) for m in map(_LINE.match, context.split("\n\n")[0].splitlines()) if m]


def probe(x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, standardise: bool) -> float:
    from sklearn.linear_model import LogisticRegression

    if standardise:
        mu, sd = x[train].mean(0), x[train].std(0) + 1e-8
        x = (x - mu) / sd
    return float(LogisticRegression(max_iter=3000).fit(x[train], y[train]).score(x[test], y[test]))


def between_share(x: np.ndarray, y: np.ndarray) -> float:
    """The share of ``x``'s total variance that lies between the classes of ``y`` (sum of squared class means,
    weighted by class size, over the total sum of squares; ``x`` centred)."""
    x = x - x.mean(0)
    between = sum((y == v).sum() * float((x[y == v].mean(0) ** 2).sum()) for v in set(y.tolist()))
    return between / float((x ** 2).sum())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_eval_checkpoint_args(ap, limit=400, limit_help="examples whose node slots are probed")
    ap.add_argument("--reset-projector", action="store_true",
                    help="re-initialise the projector first (seed 0): what an untrained projector keeps")
    args = ap.parse_args(argv)

    import torch

    from toporag_core.tasks.batching import make_batch

    model, examples = eval_model_and_split(args)
    if model.config.graph_path != "cells":
        raise SystemExit("probe_graph_tokens: the checkpoint needs graph_path = \"cells\"")
    proj = model.projector
    if args.reset_projector:
        torch.manual_seed(0)
        for m in proj.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
    seen: dict[str, list] = {s: [] for s in STAGES}

    def at_mlp(_m, inp, out):
        seen["z"].append(inp[0].detach().float())
        seen["pre"].append(out.detach().float())

    def at_norm(_m, _inp, out):
        seen["token"].append(out.detach().float())

    proj.proj.register_forward_hook(at_mlp)
    proj.norm.register_forward_hook(at_norm)
    feats: dict[str, list] = {s: [] for s in STAGES}
    names, firsts, inputs = [], [], []
    slots = model.config.num_graph_tokens - 1
    examples = [e for e in examples if e.context.strip()]
    with torch.no_grad():
        for i in range(0, len(examples), 16):
            chunk = examples[i:i + 16]
            cells = make_batch(chunk, with_answers=False).to(model.device).cells
            for s in STAGES:
                seen[s].clear()
            model.graph_tokens(cells)
            owners = [o for o in (cells.batch0, cells.batch1, cells.batch2) if o is not None]
            count = sum(torch.bincount(o, minlength=len(chunk)) for o in owners).clamp(max=slots).tolist()
            start = 0  # the last projector call holds the cell slots, example by example in slot order
            for r, e in enumerate(chunk):
                labels = node_labels(e.context)[: count[r]]
                x0 = cells.x0[cells.batch0 == r]  # the example's nodes in local (text) order
                for s, (name, first) in enumerate(labels):
                    inputs.append(x0[s].float().cpu().numpy())
                    for st in STAGES:
                        feats[st].append(seen[st][-1][start + s].reshape(-1).cpu().numpy())  # (k H,): k tokens a cell
                    names.append(name)
                    firsts.append(first)
                start += count[r]
    n = len(names)
    order = np.random.default_rng(0).permutation(n)
    train, test = order[: int(0.7 * n)], order[int(0.7 * n):]
    print(f"{n} node slots of {len(examples)} examples, {args.checkpoint}"
          f"{' (projector re-initialised)' if args.reset_projector else ''}")
    print("| stage | mean norm | std norm | name, standardised | name, raw | first attribute, standardised "
          "| first attribute, raw |\n|---|---|---|---|---|---|---|")
    ys = {k: np.array(v) for k, v in (("name", names), ("first", firsts))}
    for st in STAGES:
        x = np.stack(feats[st])
        acc = {(k, std): probe(x, y, train, test, std) for k, y in ys.items() for std in (True, False)}
        print(f"| {st} | {np.linalg.norm(x.mean(0)):.2f} | {np.linalg.norm(x.std(0)):.3f} | "
              f"{acc['name', True]:.3f} | {acc['name', False]:.3f} | {acc['first', True]:.3f} | "
              f"{acc['first', False]:.3f} |")
    for k, y in ys.items():
        top = max(np.mean(y[test] == v) for v in set(y[train].tolist()))
        print(f"majority {k}: {top:.3f} ({len(set(y.tolist()))} classes); share of the input embeddings' "
              f"variance between {k} classes: {between_share(np.stack(inputs), y):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
