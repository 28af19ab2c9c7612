"""Renderers of the generated hybrid corpus: tables in five formats, prose paragraphs, line labels.

:func:`render_table` writes one table as Markdown, HTML, TSV, CSV or 2-space-aligned text
(:data:`~toporag_core.datagen.hybrid_facts.TABLE_FORMATS`); the paragraph writers turn a fact into prose,
wrapped as a text file is (at most 96 characters a line; ``<p>...</p>`` in HTML). A
:class:`DocLines` is a document under construction whose every line carries its router label
(1 table line, 0 prose, -1 blank), so the gold spans of the questions are the renderer's own
line numbers.
"""
from __future__ import annotations

import random

from .hybrid_facts import BUYERS, REGIONS, VARIETIES


def render_table(header: list[str], rows: list[list[str]], fmt: str) -> list[str]:
    """Lines of one table in ``fmt`` (see :data:`TABLE_FORMATS`)."""
    if fmt == "markdown":
        return (["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
                + ["| " + " | ".join(r) + " |" for r in rows])
    if fmt == "html":
        return (["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
                + ["<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows] + ["</table>"])
    if fmt == "tsv":
        return ["\t".join(header)] + ["\t".join(r) for r in rows]
    if fmt == "csv":
        return [",".join(header)] + [",".join(r) for r in rows]
    if fmt == "aligned":
        w = [max(len(x) for x in col) for col in zip(header, *rows)]
        line = lambda r: "  ".join(c.ljust(n) for c, n in zip(r, w)).rstrip()  # noqa: E731
        return [line(header), "  ".join("-" * n for n in w)] + [line(r) for r in rows]
    raise ValueError(f"unknown table format {fmt!r}")


def profile_paragraph(p: str, f: dict) -> str:
    return (f"{p} is a family business based in {f['region']}. It was founded in {f['founded']} and today "
            f"farms {f['hectares']} hectares of cherry orchards under the direction of {f['manager']}. "
            f"The farm holds the {f['certification']} certification.")


def contract_paragraph(p: str, b: str, c: dict) -> str:
    return (f"Under its supply contract with {b}, {p} is paid within {c['payment_days']} days of delivery. "
            f"Late deliveries cost a penalty of {c['penalty']} percent of the invoice, and the exclusivity "
            f"clause for {c['variety']} cherries starts in week {c['week']}.")


def market_note(rng: random.Random, facts: dict) -> str:
    p = rng.choice(list(facts["producers"]))
    b, v = rng.choice(BUYERS), rng.choice(VARIETIES)
    w = rng.randint(20, 34)
    return rng.choice([
        f"Market note: in week {w} demand for {v} at {b} rose sharply, and growers such as {p} reported "
        f"longer queues at the packing station.",
        f"Buyers including {b} asked {p} about early {v} volumes for week {w}, but no price was agreed "
        f"in the talks.",
        f"Weather in {rng.choice(REGIONS)} delayed the {v} harvest by about a week; {p} expects normal "
        f"volumes for {b} after week {w}.",
    ])


class DocLines:
    """A document under construction: lines, per-line labels and named spans."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.labels: list[int] = []

    def blank(self) -> None:
        if self.lines and self.lines[-1] != "":
            self.lines.append("")
            self.labels.append(-1)

    def add(self, lines: list[str], label: int) -> tuple[int, int]:
        start = len(self.lines)
        self.lines += lines
        self.labels += [label] * len(lines)
        return start, len(self.lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _wrap(text: str, width: int = 96) -> list[str]:
    """Wrap prose like a text file does (lines of at most ``width`` characters)."""
    out, cur = [], ""
    for w in text.split():
        if cur and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return out + ([cur] if cur else [])


def prose_lines(text: str, fmt: str) -> list[str]:
    lines = _wrap(text)
    if fmt == "html":
        lines[0] = "<p>" + lines[0]
        lines[-1] = lines[-1] + "</p>"
    return lines
