"""SceneGraphs as a training/evaluation dataset: registry loader, retrieval coverage, question templates.

* :func:`load_scene_examples` is registered as ``scene_graphs`` in
  :mod:`toporag_core.tasks` (metric ``scene_graphs``: the label is contained in the
  prediction). Folder: ``--data-dir DIR``, else ``$TOPORAG_SCENES_DIR``, else a deterministic
  generated default set, written once to ``$TOPORAG_CACHE/scenes/default-n200-s0``.
* :func:`scene_retrieval_coverage`: per retrieval setting, the share of questions whose
  answer-bearing objects (``support``) are *all* inside the retrieved subcomplex, overall and per
  question type. No model is involved, so it is cheap and exact.
* :func:`record_template`: the generator template that wrote a predictions record's question
  (per-template accuracy: :mod:`toporag_core.evaluation.scene_accuracy`).
"""
from __future__ import annotations

import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ...io.gqa import QUESTION_TYPES, SceneExample, read_gqa, split_by_image
from ...model import graphqa_prompt
from ...retrieval import EmbeddedComplex, RetrievalSetting, retrieve, textualize
from ...retrieval.citations import CITATION_SEP
from ...retrieval.textualize import node_label
from ..prep import support_covered
from ..registry import SPLITS, RawExample, Task, register_task

DEFAULT_SCENES = 200  # scenes in the generated default set (about 3,000 questions)
DEFAULT_SEED = 0
SPLIT_SEED = 42  # GraphQA's split seed


@dataclass
class SceneRawExample(RawExample):
    """A :class:`RawExample` that also remembers which objects the answer needs.

    ``support``: node indices (into ``graph``) of the answer-bearing objects; for a
    closed-loop (2-cell) question, the loop's objects. Empty when unknown (real GQA data).
    """

    support: list[int] = field(default_factory=list)
    full_answer: str = ""


_POLAR_FULL = re.compile(r"^\s*(yes|no)\s*[,.:;!-]\s*(\S.*)$", re.IGNORECASE | re.DOTALL)


def scene_evidence(raw: RawExample) -> str | None:
    """The evidence of a yes/no answer: GQA's full answer with its leading "Yes,"/"No," removed and
    the first letter raised (``"No, the metal cup is orange."`` -> ``"The metal cup is orange"``).
    ``None`` for open answers, a missing full answer, or one whose yes/no disagrees with the label
    (a row that contradicts itself trains nothing)."""
    label = str(raw.answer).strip().lower()
    m = _POLAR_FULL.match(str(getattr(raw, "full_answer", "") or ""))
    if label not in ("yes", "no") or not m or m.group(1).lower() != label:
        return None
    ev = " ".join(m.group(2).split()).rstrip(" .")
    return (ev[:1].upper() + ev[1:]) if ev else None


def scene_citation(raw: RawExample, example: Any) -> str | None:
    """The context lines an open scene answer rests on, copied verbatim from ``example.context``
    and joined with ``"; "`` (``toporag train --answer-style cited``): a chain that starts at the
    object the question names and ends at the answer, so each step is "find this line" rather
    than "know the answer".

    * colour / material (0-cell) and loop colour / material (2-cell): the asked object's node line,
      ``"laptop [6]: orange, plastic, small"`` (in a loop, the one object of the asked name whose
      line names the answer; ``None`` if that is not exactly one);
    * one-hop ``What is r the B?`` (support ``[a, b]``): B's node line, then the relation line from
      B to a (``"cabinet [5] in front of clock [9]"``: the data lists both directions; else a's line);
    * two-hop ``What is r1 the T that is r2 the L?`` (support ``[a, t, l]``): L's node line, L-T, T-a.

    Node ids are positions in the retrieved subcomplex, so the lines are found through
    ``example.cells["nodes"]`` (node texts in that order; a scene node's text carries its box, so
    it is unique). ``None`` (train on the bare label) for yes/no answers, unknown support, a
    support object that was not retrieved, or a line the context does not have (another text
    format than ``compact`` / ``short-loops``)."""
    from .questions import question_template

    label = str(raw.answer).strip()
    support = list(getattr(raw, "support", []) or [])
    texts = list((getattr(example, "cells", None) or {}).get("nodes", []))
    polar = label.lower() in ("yes", "no")
    if polar or not support or len(set(texts)) != len(texts):
        return None
    local = {t: i for i, t in enumerate(texts)}
    node_text = raw.graph.node_text
    if any(node_text[s] not in local for s in support):
        return None
    ids = [local[node_text[s]] for s in support]
    lines = [ln.strip() for ln in str(example.context).splitlines() if ln.strip()]

    def label_of(i: int) -> str:
        return node_label(texts[i], i)

    def node_line(i: int) -> str | None:
        head = label_of(i)
        return next((ln for ln in lines if ln == head or ln.startswith(head + ":")), None)

    def rel_line(i: int, j: int) -> str | None:
        a, b = label_of(i), label_of(j)
        found = [ln for ln in lines if ln.startswith(a + " ") and ln.endswith(" " + b)]
        found = found or [ln for ln in lines if ln.startswith(b + " ") and ln.endswith(" " + a)]
        return found[0] if found else None

    def named(name: str) -> list[int]:
        return [i for i in ids if label_of(i).rsplit(" [", 1)[0] == name]

    template = question_template(raw.question, raw.qtype)
    if raw.qtype == "2-cell" and template in ("colour", "material"):
        q = str(raw.query or raw.question).rsplit(": ", 1)[-1]
        name = q.split(" is the ", 1)[-1].replace(" made of", "").strip(" ?")
        want = [i for i in named(name)
                if label.lower() in (node_line(i) or "").split(":", 1)[-1].lower().replace(",", " ").split()]
        chain = [node_line(want[0])] if len(want) == 1 else [None]
    elif template in ("colour", "material"):
        chain = [node_line(ids[0])]
    elif template == "one-hop" and len(ids) == 2:
        chain = [node_line(ids[1]), rel_line(ids[1], ids[0])]
    elif template == "two-hop" and len(ids) == 3:
        chain = [node_line(ids[2]), rel_line(ids[2], ids[1]), rel_line(ids[1], ids[0])]
    else:
        return None
    return CITATION_SEP.join(chain) if chain and all(chain) else None  # type: ignore[arg-type]


def scene_question(question: str) -> str:
    """The prompt text the LLM sees (GraphQA's ``Question: ... Answer:`` layout; unchanged when the
    question is already in it)."""
    return graphqa_prompt(question)


def to_raw(ex: SceneExample) -> SceneRawExample:
    """One :class:`SceneExample` -> :class:`SceneRawExample` (id = ``q_id``, qtype = ``type``)."""
    return SceneRawExample(id=ex.q_id, graph=ex.graph, question=scene_question(ex.question), label=ex.answer,
                           answer=ex.answer, query=ex.question, qtype=ex.type, support=ex.support_nodes(),
                           full_answer=ex.full_answer)


def default_scenes_dir(n: int = DEFAULT_SCENES, seed: int = DEFAULT_SEED) -> Path:
    """The generated default set, written on first use (temp folder + rename, so a killed or
    concurrent first run never leaves a half-written folder that later runs would trust)."""
    from ...embed import default_cache_dir
    from .generate import write_dataset

    final = default_cache_dir() / "scenes" / f"default-n{n}-s{seed}"
    if (final / "questions.csv").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
    try:
        write_dataset(tmp, n=n, seed=seed)
        try:
            os.rename(tmp, final)
        except OSError:  # another process won the race: its folder is as good as ours
            if not (final / "questions.csv").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def scenes_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """``data_dir``, else ``$TOPORAG_SCENES_DIR``, else :func:`default_scenes_dir`."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("TOPORAG_SCENES_DIR")
    return Path(env) if env else default_scenes_dir()


def load_scene_examples(data_dir: Path | None = None) -> dict[str, list[SceneRawExample]]:
    """Registry loader: ``{"train", "val", "test"}`` split 60/20/20 *by image* (seed 42).

    ``data_dir`` holds ``train_sceneGraphs.json`` (or one ``*_sceneGraphs.json``) and
    ``questions.csv``, real GQA/GraphQA or generated. Retrieval query = the bare question.
    """
    parts = split_by_image(read_gqa(scenes_dir(data_dir)), seed=SPLIT_SEED)
    return {s: [to_raw(e) for e in part] for s, part in zip(SPLITS, parts)}


register_task(Task("scene_graphs", load_scene_examples, metric="scene_graphs", label="SceneGraphs (GQA format)",
                   matches=lambda g: "image_id" in g.meta, evidence=scene_evidence, citation=scene_citation,
                   prompt="graphqa"))


# ----------------------------------------------------------------------------- subsets
def stratified_subset(examples: Sequence[Any], per_type: int, types: Sequence[str] = QUESTION_TYPES) -> list[Any]:
    """The first ``per_type`` examples of each question type, in the original order.

    Works on anything with a ``qtype`` attribute (raw or preprocessed examples), so every
    method is evaluated on exactly the same questions.
    """
    left = {t: per_type for t in types}
    out = []
    for e in examples:
        t = getattr(e, "qtype", None)
        if left.get(t, 0) > 0:
            out.append(e)
            left[t] -= 1
    return out


# ----------------------------------------------------------------------------- coverage
@dataclass
class CoverageSetting:
    """A named retrieval setting for :func:`scene_retrieval_coverage`."""

    label: str
    setting: RetrievalSetting
    tree: str | None = None  # the lifting (a spanning tree, or rings); None: the ``tree`` of the call


def paper_settings(k2s: Sequence[int] = (0, 1, 2, 3)) -> list[CoverageSetting]:
    """GraphQA SceneGraphs settings (k0 = 3, k1 = 5): TopoRAG for each k2, then the baselines."""
    make = RetrievalSetting.make
    out = [CoverageSetting(f"toporag k2={k}", make("toporag", k0=3, k1=5, k2=k)) for k in k2s]
    out += [CoverageSetting("g-retriever (PCST)", make("g-retriever", k0=3, k1=5)),
            CoverageSetting("shortest-path (w/o TSR)", make("shortest-path", k0=3, k1=5)),
            CoverageSetting("top-k triples", make("topk-triples", k=5))]
    return out


def scene_retrieval_coverage(examples: Sequence[SceneRawExample], encoder,
                             settings: Sequence[CoverageSetting], tree: str = "bfs",
                             count_tokens: Callable[[str], int] | None = None, text: str = "compact") -> list[dict]:
    """Retrieval coverage per setting, overall and per question type.

    Args:
        examples: questions with ``support`` (examples without support are skipped).
        encoder: a :class:`~toporag_core.embed.TextEncoder` (the same for cells and questions).
        settings: what to compare (see :func:`paper_settings`).
        tree: spanning tree of the lifting (2-cells = its fundamental cycles) for settings without
            their own ``tree``.
        count_tokens: when given (e.g. the LLM tokenizer's length), each row also has ``tokens``, the
            mean length of the subcomplex written in format ``text``: what coverage costs in context
            (and so in KV-cache time and answer latency).

    Returns:
        One row per setting: ``method``, ``questions``, ``all`` and one column per question
        type (share of questions with every support object retrieved; NaN for a type with no
        questions), ``loop 2-cell`` (share of closed-loop questions whose loop is itself one of
        the retrieved 2-cells: what a 2-cell can add beyond the loop's nodes), ``cells0/cells1/
        cells2`` (mean retrieved cells per dimension) and, with ``count_tokens``, ``tokens``.
    """

    examples = [e for e in examples if e.support]
    # Graphs are shared between the questions of one image: lift and embed each once.
    ecx: dict[tuple[str, int], EmbeddedComplex] = {}

    def lifted(e: SceneRawExample, t: str) -> EmbeddedComplex:
        if (t, id(e.graph)) not in ecx:
            ecx[(t, id(e.graph))] = EmbeddedComplex.from_graph(e.graph, encoder, tree=t)
        return ecx[(t, id(e.graph))]

    q_vecs = encoder.encode([e.query or e.question for e in examples]) if examples else np.zeros((0, 1))
    types = np.array([e.qtype or "untyped" for e in examples])
    rows = []
    for cs in settings:
        hit = np.zeros(len(examples), dtype=bool)
        loop_cell = np.zeros(len(examples), dtype=bool)
        counts = np.zeros((len(examples), 3))
        tokens = np.zeros(len(examples))
        for i, e in enumerate(examples):
            sub = retrieve(lifted(e, cs.tree or tree), q_vecs[i], setting=cs.setting)
            hit[i] = support_covered(sub, e.support)
            if e.qtype == "2-cell" and sub.cells2.size:
                cx, want = sub.complex, set(e.support)
                loop_cell[i] = any(set(cx.cell2_nodes(f).tolist()) == want for f in sub.cells2.tolist())
            counts[i] = sub.counts
            if count_tokens is not None:
                tokens[i] = count_tokens(textualize(sub, fmt=text))
        row: dict[str, Any] = {"method": cs.label, "questions": len(examples),
                               "all": float(hit.mean()) if len(hit) else float("nan")}
        for t in QUESTION_TYPES:
            m = types == t
            row[t] = float(hit[m].mean()) if m.any() else float("nan")
        loops = types == "2-cell"
        row["loop 2-cell"] = float(loop_cell[loops].mean()) if loops.any() else float("nan")
        row.update(cells0=float(counts[:, 0].mean()) if len(hit) else 0.0,
                   cells1=float(counts[:, 1].mean()) if len(hit) else 0.0,
                   cells2=float(counts[:, 2].mean()) if len(hit) else 0.0)
        if count_tokens is not None:
            row["tokens"] = float(tokens.mean()) if len(hit) else 0.0
        rows.append(row)
    return rows


def record_template(record: dict) -> str | None:
    """``"<qtype>/<template>"`` of a predictions record (``"1-cell/two-hop"``: its type, then
    :func:`~.questions.question_template` of its ``question``); ``None`` when no template wrote it."""
    from .questions import question_template

    t = question_template(str(record.get("question") or ""), record.get("qtype"))
    return f"{record['qtype']}/{t}" if t else None
