"""The 12-question WebQSP sample (checks only): seeded 60/20/20 split like ExplaGraphs; the metric
is Hit (a gold answer is a substring of the normalised prediction)."""
from __future__ import annotations

from pathlib import Path

from ..io.webqsp import WEBQSP_FILE, read_webqsp, webqsp_record_to_graph
from ..model import graphqa_prompt
from .registry import SPLITS, RawExample, Task, data_dir_or_shared, register_task, seeded_split


def load_webqsp(data_dir: Path | None) -> dict[str, list[RawExample]]:
    path = data_dir_or_shared(data_dir) / WEBQSP_FILE
    recs = read_webqsp(path)
    out: dict[str, list[RawExample]] = {}
    for split, idx in zip(SPLITS, seeded_split(len(recs), seed=42)):
        out[split] = []
        for i in idx:
            r = recs[i]
            answers = [str(a) for a in r.get("answers", [])]
            out[split].append(RawExample(id=str(r.get("id", i)),
                                         graph=webqsp_record_to_graph(r, file=str(path), record=i),
                                         question=graphqa_prompt(r["question"]), label=answers,
                                         answer="|".join(answers), query=str(r["question"])))
    return out


register_task(Task("webqsp", load_webqsp, metric="webqsp", label="WebQSP (KGQA)",
                   matches=lambda g: "q_entity" in g.meta or "answers" in g.meta, prompt="graphqa"))
