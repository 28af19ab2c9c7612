"""Reading HotpotQA-distractor records: the file, each record's articles and its gold titles.

The record layout (HotpotQA distractor plus one optional key, written by
:mod:`toporag_core.datagen.docgraph`)::

    {"_id", "question", "answer", "type": "bridge"|"comparison", "level": "medium",
     "supporting_facts": [[title, sentence index], ...],
     "context": [[title, [sentence, ...]], ...],
     "sections": {title: [[heading, [sentences per paragraph, ...]], ...]}}   # our extension

A real HotpotQA file (no ``sections``) loads too: one section, one paragraph per title. These are
what the document-graph system reads at run time (``toporag docgraph build`` / ``eval``, the app).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..graph import GraphFormatError
from .build import Article

DATA_FILE = "hotpot_dev_distractor.json"


def record_node_count(record: dict) -> int:
    """Nodes of the document graph one record becomes (root + documents + sections + paragraphs + sentences)."""
    return 1 + sum(1 + sum(1 + len(p) + sum(p) for _, p in secs) for secs in record_layouts(record).values())


def record_layouts(record: dict) -> dict[str, list[tuple[str, list[int]]]]:
    """``{title: [(heading, [sentences per paragraph, ...]), ...]}``: the ``sections`` layout, or one section
    of one paragraph per title when the record has none (a real HotpotQA record)."""
    secs = record.get("sections") or {}
    out = {}
    for title, sents in record["context"]:
        lay = secs.get(title)
        out[title] = [(h, list(p)) for h, p in lay] if lay else [(title, [len(sents)])]
    return out


def load_records(path: str | os.PathLike) -> list[dict]:
    """Read a HotpotQA-distractor JSON list (a file, or a folder holding ``hotpot_dev_distractor.json``),
    checking the fields the graph needs; errors name the file, record and field."""
    path = Path(path)
    if path.is_dir():
        path = path / DATA_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise GraphFormatError("binary file, not HotpotQA JSON", file=str(path))
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GraphFormatError(f"not valid JSON ({e})", file=str(path)) from None
    if not isinstance(data, list):
        raise GraphFormatError("expected a JSON list of records", file=str(path))
    for i, r in enumerate(data):
        for key, typ in (("question", str), ("answer", str), ("context", list)):
            if not isinstance(r, dict) or not isinstance(r.get(key), typ):
                raise GraphFormatError(f"missing or not a {typ.__name__}", file=str(path), record=i, field=key)
        for j, item in enumerate(r["context"]):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], list)):
                raise GraphFormatError(f"context item {j} is not [title, [sentences]]", file=str(path),
                                       record=i, field="context")
    return data


def record_articles(record: dict, where: str = "record") -> list[Article]:
    """The record's articles with their section / paragraph layout (``sections``) when given."""
    arts = []
    layouts = record_layouts(record)
    for title, sents in record["context"]:
        sents = [str(s).strip() for s in sents if str(s).strip()]
        lay = layouts[title]
        if sum(sum(p) for _, p in lay) != len(sents):
            lay = [(title, [len(sents)])]
        secs, k = [], 0
        for heading, paras in lay:
            ps = []
            for cnt in paras:
                if cnt:
                    ps.append(sents[k:k + cnt])
                k += cnt
            if ps:
                secs.append((heading, ps))
        if secs:
            arts.append(Article(title=title, sections=secs, source=f"{where}, article {title!r}"))
    if not arts:
        raise GraphFormatError("record has no sentences", file=where, field="context")
    return arts


def gold_titles(record: dict) -> list[str]:
    """The gold articles: ``gold_titles`` when present, else the titles of the supporting facts."""
    if record.get("gold_titles"):
        return list(record["gold_titles"])
    return list(dict.fromkeys(t for t, _ in record.get("supporting_facts", [])))
