"""Which tokens of a readback does a question's own graph-token set make likelier than another question's?

Readback (:func:`toporag_core.evaluation.arms.readback`) pairs each row's per-token loss given its own graph tokens with
the loss given another row's, averaged over the row. This splits the same pairing by what each target token
is in a node line ``name [i]: attribute, attribute``: the name, the index, the separator, an attribute, a
comma, a line break, the end of the answer. A graph path that carries names but not attributes shows its
gap in the name rows only. Per class it prints the number of tokens, the mean loss with the row's own tokens
and with another row's (seed-0 derangement, as readback), the gap and the share of tokens where own is lower.

    python experiments/bench_readback_tokens.py --checkpoint CKPT --dataset scene_graphs --limit 64 \
        [--target nodes|attributes]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the package, and benchmarks/_common.py

from _common import add_eval_checkpoint_args, eval_model_and_split  # noqa: E402

CLASSES = ("header", "name", "index", "separator", "attribute", "comma", "newline", "end")
_LINE = re.compile(r"^(?P<name>[^\n\[]*?)(?P<index> \[\d+\])(?P<sep>: ?)(?P<attrs>.*)$")


def char_classes(text: str, target: str = "nodes") -> list[str]:
    """The class of every character of a readback target (``CLASSES``): an attributes answer (``brown, glass``)
    is attributes and commas; in node lines, lines that are not ``name [i]: ...`` (the ``nodes`` header) are
    the header."""
    if target == "attributes":
        return ["comma" if c == "," else "attribute" for c in text]
    out: list[str] = []
    for k, line in enumerate(text.split("\n")):
        if k:
            out.append("newline")
        m = _LINE.match(line)
        if m is None:
            out += ["header"] * len(line)
            continue
        out += ["name"] * len(m["name"]) + ["index"] * len(m["index"]) + ["separator"] * len(m["sep"])
        out += ["comma" if c == "," else "attribute" for c in m["attrs"]]
    return out


def token_classes(tokenizer, ids: list[int], text: str, target: str = "nodes") -> list[str]:
    """One class per target token: the class of the first non-space character it covers (the last token,
    after the text, is the end)."""
    chars, pos, out = char_classes(text, target), 0, []
    for t in ids:
        piece = tokenizer.decode([t])
        span = range(pos, min(pos + len(piece), len(chars)))
        pos += len(piece)
        cls = [chars[i] for i in span if not text[i].isspace() or chars[i] == "newline"]
        out.append(cls[0] if cls else ("end" if pos > len(chars) else "separator"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_eval_checkpoint_args(ap, limit=64)
    ap.add_argument("--target", default="nodes", choices=("nodes", "attributes"))
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    args = ap.parse_args(argv)

    import torch

    from toporag_core.evaluation.arms import derangement, readback_rows, token_lines
    from toporag_core.tasks.batching import make_batch

    model, examples = eval_model_and_split(args)
    rows = readback_rows(examples, args.target, token_lines(model))
    sigma = derangement(len(rows), 0)
    stats: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])  # own, other, own lower, n
    with torch.no_grad():
        for i in range(0, len(rows), 8):
            chunk = rows[i:i + 8]
            batch = make_batch(chunk).to(model.device)
            partners = make_batch([rows[int(j)] for j in sigma[i:i + 8]], with_answers=False).to(model.device)
            own, row, ids = model.answer_token_nll(batch)
            other, _, _ = model.answer_token_nll(batch, soft=model.graph_tokens(partners.cells))
            for r, ex in enumerate(chunk):
                sel = (row == r).nonzero()[:, 0].tolist()
                for k, cls in zip(sel, token_classes(model.tokenizer, ids[sel].tolist(), ex.answer, args.target)):
                    a, b = float(own[k]), float(other[k])
                    s = stats[cls]
                    s[0] += a
                    s[1] += b
                    s[2] += a < b
                    s[3] += 1
    table = {c: {"tokens": int(s[3]), "own": s[0] / s[3], "other": s[1] / s[3], "gap": (s[1] - s[0]) / s[3],
                 "own_lower": s[2] / s[3]} for c, s in ((c, stats[c]) for c in CLASSES) if s[3]}
    print(f"readback ({args.target}) of {len(rows)} rows, {args.checkpoint}, {args.dataset} {args.split}")
    print("| token | tokens | loss own | loss another's | gap | share own lower |\n|---|---|---|---|---|---|")
    for c, t in table.items():
        print(f"| {c} | {t['tokens']} | {t['own']:.3f} | {t['other']:.3f} | {t['gap']:.3f} | {t['own_lower']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": len(rows), "target": args.target, "table": table}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
