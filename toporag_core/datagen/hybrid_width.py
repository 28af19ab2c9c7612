"""The table-width sweep: tables of 5..52 columns (4 key columns + measurements), one-cell questions.

Each table holds ``rows_per_table`` shipments of the fact store with ``width - 4`` measurement
columns (``Brix at harvest``, ``Firmness at packing``, ...: 12 bases x 4 stages), written in
Markdown; every question (type B) asks for one cell at the row of ``(producer, buyer, variety,
week)`` and one measurement column, its gold span the table's lines.
"""
from __future__ import annotations

import random

from ..hybrid.dataset import HybridDataset
from .hybrid_facts import MEASURE_BASES, STAGES, build_facts
from .hybrid_render import DocLines, render_table


def measure_columns(n: int) -> list[str]:
    """``n`` distinct measurement column names (``Brix at harvest``, ...)."""
    names = [f"{b} {s}" for s in STAGES for b in MEASURE_BASES]
    if n > len(names):
        raise ValueError(f"at most {len(names)} measurement columns, asked for {n}")
    return names[:n]


def generate_width_corpus(width: int, n_tables: int = 60, n_questions: int = 40, seed: int = 0,
                          rows_per_table: int = 8) -> HybridDataset:
    """Tables of ``width`` columns (4 key columns + measurements), Markdown; B questions on one cell."""
    if not 5 <= width <= 52:
        raise ValueError(f"width must be in [5, 52], got {width}")
    rng = random.Random(seed * 1000 + width)
    facts = build_facts(rng, 30, n_tables * rows_per_table)
    keys = list(facts["shipments"])
    meas = measure_columns(width - 4)
    header = ["Producer", "Buyer", "Variety", "Week"] + meas
    docs, labels, kinds, qs = {}, {}, {}, []
    values: dict[tuple, list[str]] = {}
    where: dict[tuple, tuple] = {}
    for t in range(n_tables):
        chunk = keys[t * rows_per_table:(t + 1) * rows_per_table]
        d = DocLines()
        d.add([f"# Quality report {t + 1}"], 0)
        d.blank()
        rows = []
        for k in chunk:
            values[k] = [f"{rng.randint(10, 999) / 10:.1f}" for _ in meas]
            rows.append([k[0], k[1], k[2], str(k[3])] + values[k])
        doc_id = f"width{width}_{t:03d}.md"
        span = d.add(render_table(header, rows, "markdown"), 1)
        for k in chunk:
            where[k] = (doc_id,) + span
        docs[doc_id], labels[doc_id], kinds[doc_id] = d.text(), d.labels, "table"
    pick = rng.sample(list(where), min(n_questions, len(where)))
    for i, k in enumerate(pick):
        j = rng.randrange(len(meas))
        p, b, v, w = k
        qs.append({"id": f"W{width}-{i:03d}", "type": "B", "split": "test",
                   "question": f"What was the {meas[j]} of the {v} cherries {p} shipped to {b} in week {w}?",
                   "answer": values[k][j], "gold": [{"doc": where[k][0], "start": where[k][1], "end": where[k][2]}],
                   "meta": {"producer": p, "buyer": b, "variety": v, "week": w, "column": meas[j]}})
    return HybridDataset(docs, labels, kinds, qs, {})
