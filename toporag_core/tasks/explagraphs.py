"""ExplaGraphs (Saha et al., 2021) as the GraphQA benchmark uses it: seeded 60/20/20 split,
the benchmark's question prompt, retrieval query = both arguments, closed answer set
``support`` / ``counter``. Data: ``expla_graphs_train_dev.tsv`` in the shared data folder, or
any ExplaGraphs-format TSV (``--data-file``)."""
from __future__ import annotations

import os
from pathlib import Path

from ..io.explagraphs import EXPLAGRAPHS_FILE, explagraphs_question, explagraphs_row_to_graph, read_explagraphs
from .registry import SPLITS, RawExample, Task, data_dir_or_shared, register_task, seeded_split

LABELS = ("support", "counter")


def explagraphs_examples(path: str | os.PathLike, split: bool = True) -> dict[str, list[RawExample]]:
    """Rows of an ExplaGraphs TSV as examples: the seeded split, or everything under ``"all"``."""
    rows = read_explagraphs(path)

    def example(i: int) -> RawExample:
        r = rows[i]
        return RawExample(id=str(r["id"]), graph=explagraphs_row_to_graph(r, file=str(path)),
                          question=explagraphs_question(r["arg1"], r["arg2"]), label=r.get("label", ""),
                          answer=r.get("label", ""), query=f"{r['arg1']} {r['arg2']}")

    if not split:
        return {"all": [example(i) for i in range(len(rows))]}
    return {s: [example(i) for i in idx] for s, idx in zip(SPLITS, seeded_split(len(rows), seed=42))}


def load_expla_graphs(data_dir: Path | None) -> dict[str, list[RawExample]]:
    """The shared ExplaGraphs file (or ``data_dir`` itself when it is a TSV file, e.g. a user's own rows)
    with the benchmark's seeded 60/20/20 split."""
    if data_dir is not None and Path(data_dir).is_file():
        return explagraphs_examples(data_dir)
    return explagraphs_examples(data_dir_or_shared(data_dir) / EXPLAGRAPHS_FILE)


register_task(Task("expla_graphs", load_expla_graphs, metric="expla_graphs", label="ExplaGraphs (stance)",
                   answer_set=LABELS, matches=lambda g: bool(g.meta.get("arg1")) and bool(g.meta.get("arg2"))))
