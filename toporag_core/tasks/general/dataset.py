"""The ``general`` task: open questions over many textual graphs, answers from a fact store.

``toporag data general --n N --seed S --out DIR`` (:func:`write_dataset`) writes three families of
graphs, each with questions whose answers are computed from the facts (never from a retriever):

* **worlds** (about 70 %): :func:`~.facts.make_world` encyclopaedic KGs (people, places, prizes,
  discoveries, works) whose relations read either naturally ("born in", as the Curie sample) or as
  Freebase names ("people.person.place_of_birth", as WebQSP), with Freebase's
  ``common.topic.notable_types`` noise in the Freebase style; every kind of :data:`~.questions.KINDS`;
* **store cuts** (about 15 %): the 2-hop neighbourhood of a seed entity cut from a
  :class:`~toporag_core.kg.KGStore` of the generated benchmark KG (:func:`~toporag_core.kg.generate_kg`;
  what the app's knowledge-graph source hands to Ask), questions starting at the seed, whose
  neighbourhood the cut holds whole, answered from the store's triples;
* **scenes** (about 15 %): generated GQA scenes (:mod:`toporag_core.tasks.scenes`), their open
  questions only (colour, material, relations, loops) with the generator's answers.

Files: ``graphs.jsonl`` (``id, family, style, triples``), ``questions.jsonl`` (``id, graph, question,
answers, kind, family, support``), ``scenes/`` (GQA format) and ``stats.json``. :func:`load_general`
(the registry loader) splits 60/20/20 **by graph** (seed 42): no graph is in two splits. Metric:
``webqsp`` (Hit: some gold answer occurs in the normalised prediction).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ...graph import TextualGraph
from ...model import graphqa_prompt
from ..registry import SPLITS, RawExample, Task, register_task, seeded_split
from .facts import STYLES, FactStore, add_type_noise, make_world
from .questions import KINDS, make_questions

GRAPHS_FILE, QUESTIONS_FILE, SCENES_DIR = "graphs.jsonl", "questions.jsonl", "scenes"
FAMILIES = ("world", "kg-store", "scene")
SHARES = (0.7, 0.15, 0.15)
PER_KIND = {"1-hop": 3, "2-hop": 2, "which": 1, "closed-loop": 1, "comparison": 1}
STYLE_P = (0.45, 0.4, 0.15)  # natural / freebase / mixed


def _style(rng: np.random.Generator) -> str:
    return STYLES[int(rng.choice(len(STYLES), p=STYLE_P))]


def _world_records(n: int, rng: np.random.Generator, start: int) -> tuple[list[dict], list[dict]]:
    graphs, questions = [], []
    for i in range(n):
        gid = f"w{start + i:05d}"
        fs = make_world(rng, size=int(rng.integers(1, 3)))
        style = _style(rng)
        qs = make_questions(fs, rng, PER_KIND)
        if style != "natural":
            add_type_noise(fs, rng)
        order = rng.permutation(len(fs.facts))
        fs = FactStore([fs.facts[j] for j in order], fs.types)
        graphs.append({"id": gid, "family": "world", "style": style, "triples": fs.triples(style, rng)})
        questions += [{"graph": gid, "question": q.question, "answers": q.answers, "kind": q.kind,
                       "family": "world", "support": q.support} for q in qs]
    return graphs, questions


def _store_records(n: int, rng: np.random.Generator, seed: int, start: int) -> tuple[list[dict], list[dict]]:
    """``n`` k-hop cuts of one generated KG store, questions anchored at each cut's seed."""
    from ...kg import KGStore, generate_kg
    from ...kg.generate import REL

    graphs: list[dict] = []
    questions: list[dict] = []
    if n <= 0:
        return graphs, questions
    with tempfile.TemporaryDirectory() as tmp:
        n_ent = max(50, 6 * n)
        csv = generate_kg(Path(tmp) / "kg.csv", n_entities=n_ent, n_triples=2 * n_ent, n_relations=len(REL), seed=seed)
        with KGStore.create(Path(tmp) / "kg.duckdb", [csv]) as store:
            total = store.counts()["entities"]
            tries = 0
            while len(graphs) < n and tries < 20 * n:
                tries += 1
                seed_id = int(rng.integers(total))
                nb = store.subgraph([seed_id], hops=2, max_nodes=60)
                if nb.hops_done < 1 or nb.graph.num_edges < 3:
                    continue
                g = nb.graph
                name = g.node_text[nb.seeds[0]]
                fs = FactStore()
                for (a, b), r in zip(g.edge_index.T.tolist(), g.edge_text):
                    fs.add(g.node_text[a], r, g.node_text[b])
                per_kind = {k: v for k, v in PER_KIND.items() if k != "comparison"}
                if nb.hops_done < 2:
                    per_kind = {"1-hop": 3}
                qs = make_questions(fs, rng, per_kind, anchors=[name])
                if not qs:
                    continue
                gid = f"k{start + len(graphs):05d}"
                style = STYLES[int(rng.integers(2))]
                graphs.append({"id": gid, "family": "kg-store", "style": style, "triples": fs.triples(style, rng)})
                questions += [{"graph": gid, "question": q.question, "answers": q.answers, "kind": q.kind,
                               "family": "kg-store", "support": q.support} for q in qs]
    return graphs, questions


def write_dataset(out_dir: str | os.PathLike, n: int, seed: int = 0) -> dict[str, Any]:
    """Write ``n`` graphs (:data:`SHARES` of worlds, store cuts and scenes) with their questions to
    ``out_dir`` (written in a temporary folder next to it, then renamed: never half-written).
    Identical for identical ``(n, seed)``. Returns the statistics also written to ``stats.json``."""
    from ..scenes import write_dataset as write_scenes

    if n < 3:
        raise ValueError(f"--n must be >= 3 (one graph per family), got {n}")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out}: exists and is not empty; choose a new --out folder")
    rng = np.random.default_rng(seed)
    n_world = max(1, round(SHARES[0] * n))
    n_store = max(1, round(SHARES[1] * n))
    n_scene = max(1, n - n_world - n_store)
    graphs, questions = _world_records(n_world, rng, 0)
    g2, q2 = _store_records(n_store, rng, seed, 0)
    graphs, questions = graphs + g2, questions + q2
    tmp = out.parent / f".{out.name}.{uuid.uuid4().hex}.tmp"
    try:
        tmp.mkdir(parents=True)
        scene_stats = write_scenes(tmp / SCENES_DIR, n=n_scene, seed=seed)
        with open(tmp / GRAPHS_FILE, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(g, ensure_ascii=False) + "\n" for g in graphs)
        with open(tmp / QUESTIONS_FILE, "w", encoding="utf-8") as fh:
            for i, q in enumerate(questions):
                fh.write(json.dumps({"id": f"g{seed}-{i:06d}", **q}, ensure_ascii=False) + "\n")
        stats = {"graphs": {"world": n_world, "kg-store": len(g2), "scene": n_scene},
                 "questions": {k: sum(q["kind"] == k for q in questions) for k in KINDS},
                 "scene_questions": scene_stats["questions"], "seed": seed,
                 "styles": {s: sum(g["style"] == s for g in graphs) for s in STYLES}}
        (tmp / "stats.json").write_text(json.dumps(stats, indent=1))
        if out.exists():
            out.rmdir()
        out.parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return stats


# ----------------------------------------------------------------------------- loading
def _read_jsonl(path: Path, need: tuple[str, ...]) -> list[dict]:
    from ...graph import GraphFormatError

    rows = []
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise GraphFormatError(f"not JSON ({e.msg})", file=str(path), line=line_no) from None
            if not isinstance(row, dict):
                raise GraphFormatError("expected a JSON object", file=str(path), line=line_no)
            for k in need:
                if k not in row:
                    raise GraphFormatError("missing", file=str(path), line=line_no, field=k)
            rows.append(row)
    return rows


def general_dir(data_dir: str | os.PathLike | None) -> Path:
    """``data_dir``, else ``$TOPORAG_GENERAL_DIR``, else a generated default set (n 300, seed 0) written
    once under the cache folder."""
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get("TOPORAG_GENERAL_DIR")
    if env:
        return Path(env)
    from ...embed import default_cache_dir

    final = default_cache_dir() / "general" / "default-n300-s0"
    if not (final / QUESTIONS_FILE).is_file():
        try:
            write_dataset(final, n=300, seed=0)
        except (ValueError, OSError):  # another process wrote it first
            if not (final / QUESTIONS_FILE).is_file():
                raise
    return final


def load_general(data_dir: Path | None = None) -> dict[str, list[RawExample]]:
    """Registry loader: ``{"train", "val", "test"}``, split 60/20/20 by graph (seed 42)."""
    from ...io.gqa import read_gqa

    root = general_dir(data_dir)
    if not (root / QUESTIONS_FILE).is_file():
        raise FileNotFoundError(f"{root}: no {QUESTIONS_FILE} (write one with `toporag data general --out DIR`)")
    graphs = {g["id"]: g for g in _read_jsonl(root / GRAPHS_FILE, ("id", "triples"))}
    by_graph: dict[str, list[RawExample]] = {}
    rows = _read_jsonl(root / QUESTIONS_FILE, ("id", "graph", "question", "answers"))
    built: dict[str, TextualGraph] = {}
    for r in rows:
        gid = str(r["graph"])
        if gid not in graphs:
            from ...graph import GraphFormatError

            raise GraphFormatError(f"unknown graph {gid!r}", file=str(root / QUESTIONS_FILE), field="graph")
        if gid not in built:
            g = graphs[gid]
            built[gid] = TextualGraph.from_triples(g["triples"], name=gid, meta={"family": g.get("family"),
                                                                      "style": g.get("style")})
        answers = [str(a) for a in r["answers"]]
        by_graph.setdefault(gid, []).append(RawExample(
            id=str(r["id"]), graph=built[gid], question=graphqa_prompt(r["question"]), label=answers,
            answer=", ".join(answers[:3]), query=str(r["question"]), qtype=r.get("kind")))
    if (root / SCENES_DIR).is_dir():
        for e in read_gqa(root / SCENES_DIR):
            if e.answer.strip().lower() in ("yes", "no"):
                continue  # open answers only
            by_graph.setdefault(f"scene:{e.image_id}", []).append(RawExample(
                id=f"scene-{e.q_id}", graph=e.graph, question=graphqa_prompt(e.question), label=[e.answer],
                answer=e.answer, query=e.question, qtype=f"scene {e.type}" if e.type else "scene"))
    keys = sorted(by_graph)
    return {s: [x for i in idx for x in by_graph[keys[i]]] for s, idx in zip(SPLITS, seeded_split(len(keys), 42))}


register_task(Task("general", load_general, metric="webqsp", label="General open questions (any textual graph)",
                   prompt="graphqa"))
