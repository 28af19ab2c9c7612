"""Can the LLM read a node's attributes out of its one graph token if the token holds their words? An oracle.

Attribute readback (``toporag eval --readback --readback-target attributes``) asks "What are the attributes of the
lamp?" with no text and pairs the loss of the answer (``brown, glass, small``) given the question's own graph
tokens against another question's (seed-0 derangement). Here each tokened node's slot (slot ``s + 1`` for the
``s``-th node line, nodes first) gets the sum of the LLM's own input embeddings of that node's attribute words
(``--oracle attrs``) or of its whole line (``line``) added to it; ``none`` leaves the tokens as trained. No
training: if even the exact words, summed into one token per node, give own tokens no clear advantage, one token
per node is too narrow a channel for this LLM, whatever the projector learns.

    python experiments/bench_attribute_oracle.py --checkpoint CKPT [--limit 200]
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

_LINE = re.compile(r"^(?P<name>\S.*?) \[\d+\]: (?P<attrs>.*)$")
ORACLES = ("none", "attrs", "line")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_eval_checkpoint_args(ap, limit=200)
    args = ap.parse_args(argv)

    import torch

    from toporag_core.evaluation.arms import derangement, readback_rows, token_lines
    from toporag_core.tasks.batching import make_batch
    from toporag_core.metrics import mcnemar_exact

    model, examples = eval_model_and_split(args)
    if model.config.tokens_per_cell != 1:
        print(f"this oracle sums words into a node's one token; {args.checkpoint} has tokens_per_cell = "
              f"{model.config.tokens_per_cell} (use a checkpoint with one token per cell)", file=sys.stderr)
        return 2
    words = model.llm.get_input_embeddings().weight.detach().float()
    examples = [e for e in examples if e.context.strip()]
    by_id = {e.id: e for e in examples}
    rows = readback_rows(examples, "attributes", token_lines(model))
    sigma = derangement(len(rows), 0)

    def soft(chunk, oracle: str):
        g = model.graph_tokens(make_batch(chunk, with_answers=False).to(model.device).cells).float().clone()
        if oracle == "none":
            return g.to(model.dtype)
        for r, e in enumerate(chunk):
            lines = [m for m in map(_LINE.match, e.context.split("\n\n")[0].splitlines()) if m]
            for s, m in enumerate(lines[: token_lines(model)]):
                text = m["attrs"] if oracle == "attrs" else f"{m['name']}: {m['attrs']}"
                ids = model.tokenizer.encode(" " + text.replace(",", ""), add_special_tokens=False)
                g[r, s + 1] += words[ids].sum(0).to(g.device)
        return g.to(model.dtype)

    print(f"attribute readback of {len(rows)} rows, {args.checkpoint}, {args.dataset} {args.split}")
    print("| oracle | loss own | loss another's | own lower / another's lower | sign test p |\n|---|---|---|---|---|")
    with torch.no_grad():
        for oracle in ORACLES:
            own, other = [], []
            for i in range(0, len(rows), 8):
                chunk = rows[i:i + 8]
                batch = make_batch(chunk).to(model.device)
                mine = soft([by_id[r.id] for r in chunk], oracle)
                theirs = soft([by_id[rows[int(j)].id] for j in sigma[i:i + 8]], oracle)
                own += model.answer_nll(batch, soft=mine).tolist()
                other += model.answer_nll(batch, soft=theirs).tolist()
            lo, hi, p = mcnemar_exact([a < b for a, b in zip(own, other)], [b < a for a, b in zip(own, other)])
            print(f"| {oracle} | {np.mean(own):.3f} | {np.mean(other):.3f} | {lo} / {hi} | {p:.2g} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
