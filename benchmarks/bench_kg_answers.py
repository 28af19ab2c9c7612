"""Answers on knowledge-graph questions: Hit and Hit@1 per question kind, per answering arm, paired.

Arms (each a retrieval setting and a reader, on one checkpoint, every question retrieved and answered in
the same run):

* ``paper+generate``: the checkpoint's own setting (the general checkpoint: the paper's ``toporag``,
  k = 3) and greedy generation, what Ask and ``toporag ask`` did before the seeded retrieval existed;
* ``seeded+generate``: ``toporag-seeded`` retrieval (the checkpoint's own setting when it was trained on
  it), greedy generation;
* ``seeded+names``: the same retrieval, the name reader (candidate entity names scored by the model,
  :func:`toporag_core.model.decode.score_names`).

Questions: the generated ``general`` split (``--split``, ``--per-kind`` per kind, scene questions
included) and the shared WebQSP sample (12 real questions). Hit: a normalised gold answer occurs in the
normalised answer; Hit@1: the answer's first name equals a gold answer. Exact McNemar of each arm against
the first. ``--records FILE`` keeps every answer with its probability, margin and candidates (what
``bench_confidence.py`` calibrates on and the list ratio is fitted on).

    OMP_NUM_THREADS=1 python benchmarks/bench_kg_answers.py --split test --per-kind 20 --threads 1 \
        --checkpoint previous=PREVIOUS_CHECKPOINT --checkpoint shipped=assets/checkpoints/general \
        --arms previous/paper+generate,previous/seeded+names,shipped/seeded+generate,shipped/seeded+names
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from _common import ROOT, SHARED
from toporag_core.metrics import mcnemar_exact
from toporag_core.evaluation.kg_questions import hit, hit1

ARMS = ("paper+generate", "seeded+generate", "seeded+names")


def items(split: str, per_kind: int, data_dir: Path):
    from toporag_core.tasks.general.dataset import load_general

    out = []
    if (data_dir / "questions.jsonl").is_file():
        seen: Counter = Counter()
        for e in load_general(data_dir)[split]:
            if seen[e.qtype] < per_kind:
                seen[e.qtype] += 1
                out.append((str(e.qtype), e.graph, e.query, list(e.label), e.id))
    else:
        print(f"skipped the general task: {data_dir} has no questions.jsonl")
    wq = SHARED / "webqsp_sample.json"
    if wq.is_file():
        from toporag_core.io.webqsp import read_webqsp, webqsp_record_to_graph

        for i, rec in enumerate(read_webqsp(wq)):
            out.append(("webqsp", webqsp_record_to_graph(rec), rec["question"], list(rec["answers"]),
                        str(rec.get("id", i))))
    return out


def list_f1(names: list[str], answers: list[str]) -> float:
    """F1 of a list answer's names against the gold answers (normalised exact matches)."""
    from toporag_core.metrics import normalize

    got, gold = {normalize(n) for n in names}, {normalize(a) for a in answers}
    tp = len(got & gold)
    return 0.0 if not tp else 2 * tp / (len(got) + len(gold))


def fit_reader(records: list[dict], arm: str, weights=(0.0, 1.0, 2.0, 3.0, 4.0, 8.0),
               ratios=(0.1, 0.3, 0.5, 0.7, 1.0), match_weights=(0.0,)) -> list[dict]:
    """Per path weight w, match weight m and list ratio r of the name reader (logit = log-likelihood +
    w x (path score + m x relation-path match); a name joins the answer when its probability is >= r x the
    best one's): mean F1, Hit and Hit@1 of ``arm``'s answers recomputed from the records' per-name scores
    (``name_paths`` / ``name_match`` when the records have them, else ``name_priors`` and no match)."""
    rows = []
    recs = [r for r in records if r["arm"] == arm and r.get("name_scores")]
    for w, m, ratio in itertools.product(weights, match_weights, ratios):
        f1s, hits, h1 = [], [], []
        for r in recs:
            z = np.asarray(r["name_scores"], float)
            paths = r.get("name_paths", r.get("name_priors"))
            if paths is not None:
                prior = np.asarray(paths, float)
                if m and r.get("name_match") is not None:
                    prior = prior + m * np.asarray(r["name_match"], float)
                z = z + w * prior
            p = np.exp(z - z.max())
            p /= p.sum()
            order = np.argsort(-p, kind="stable")
            names = [r["names"][i] for i in order if p[i] >= ratio * p[order[0]]][:5]
            f1s.append(list_f1(names, r["answers"]))
            hits.append(hit(", ".join(names), r["answers"]))
            h1.append(hit1(names[0], r["answers"]))
        rows.append({"path_weight": w, "match_weight": m, "list_ratio": ratio,
                     "F1": float(np.mean(f1s)), "Hit": float(np.mean(hits)), "Hit@1": float(np.mean(h1)),
                     "n": len(recs)})
    return rows


def name_parts(ecx, question: str, setting, out) -> dict:
    """The two parts of each candidate name's retrieval score, recomputed from the same (deterministic)
    retrieval: ``name_paths`` (the path score) and ``name_match`` (the relation-path match), so that the
    reader's weights can be fitted on the records (``--fit-list-ratio``)."""
    from toporag_core.retrieval import retrieve
    from toporag_core.retrieval.candidates import candidate_match, candidate_priors

    names = tuple(out.get("names") or ())
    if not names:
        return {}
    sub = retrieve(ecx, question, setting=setting)
    return {"name_paths": candidate_priors(sub, names), "name_match": candidate_match(sub, names)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", action="append", default=None,
                    help="ALIAS=FOLDER (repeatable; default shipped=assets/checkpoints/general); arms name it as "
                         "ALIAS/ARM")
    ap.add_argument("--split", default="test")
    ap.add_argument("--per-kind", type=int, default=20)
    ap.add_argument("--data-dir", default=str(ROOT / "data" / "general-n360-s3"))
    ap.add_argument("--arms", default=None, help="comma-separated [ALIAS/]ARM (default: every arm of the first "
                                                "checkpoint); ARM one of " + ", ".join(ARMS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--records", default=None, help="write every answer here (JSONL)")
    ap.add_argument("--fit-list-ratio", default=None, metavar="RECORDS",
                    help="only print F1 / Hit / Hit@1 per path weight and list ratio of the name-reader arm of a "
                         "records file (the validation split's), and stop")
    ap.add_argument("--fit-arm", default="new/seeded+names")
    ap.add_argument("--fit-weights", default="0,1,2,3,4,8", help="path weights to try with --fit-list-ratio")
    ap.add_argument("--fit-match", default="0", help="match weights to try with --fit-list-ratio")
    ap.add_argument("--fit-ratios", default="0.1,0.3,0.5,0.7,1.0", help="list ratios to try with --fit-list-ratio")
    args = ap.parse_args()
    if args.fit_list_ratio:
        recs = [json.loads(x) for x in Path(args.fit_list_ratio).read_text().splitlines() if x.strip()]
        print("| path weight | match weight | list ratio | F1 | Hit | Hit@1 | n |\n|---|---|---|---|---|---|---|")
        grid = dict(weights=[float(x) for x in args.fit_weights.split(",")],
                    match_weights=[float(x) for x in args.fit_match.split(",")],
                    ratios=[float(x) for x in args.fit_ratios.split(",")])
        for r in fit_reader(recs, args.fit_arm, **grid):
            print(f"| {r['path_weight']} | {r['match_weight']} | {r['list_ratio']} | {r['F1']:.3f} | {r['Hit']:.3f} | "
                  f"{r['Hit@1']:.3f} | {r['n']} |")
        return
    import torch

    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.retrieval import RetrievalSetting

    torch.set_num_threads(args.threads)
    ckpts = dict(c.split("=", 1) for c in (args.checkpoint or [f"shipped={ROOT / 'assets' / 'checkpoints' / 'general'}"]))
    first_alias = next(iter(ckpts))
    arms = [a if "/" in a else f"{first_alias}/{a}" for a in (args.arms or ",".join(ARMS)).split(",") if a]
    pipes = {alias: TopoRAGPipeline.load(folder, device="cpu") for alias, folder in ckpts.items()
             if any(a.startswith(alias + "/") for a in arms)}
    seeded = RetrievalSetting.make("toporag-seeded")

    def arm_setting(arm: str):
        alias, name = arm.split("/", 1)
        pipe = pipes[alias]
        own = pipe.default_setting()  # a checkpoint trained on the seeded retrieval answers with its own setting
        seed = own if own.method == "toporag-seeded" else seeded
        return pipe, {"paper+generate": (pipe.default_setting(method="toporag"), "generate"),
                      "seeded+generate": (seed, "generate"), "seeded+names": (seed, "names")}[name]
    qs = items(args.split, args.per_kind, Path(args.data_dir))
    ecx: dict[int, object] = {}
    res: dict[str, list[tuple[bool, bool, float]]] = defaultdict(list)
    recs = []
    for kind, graph, q, answers, qid in qs:
        if id(graph) not in ecx:
            ecx[id(graph)] = next(iter(pipes.values())).prepare(graph)  # one encoder: the cells embed once
        for arm in arms:
            pipe, (setting, reader) = arm_setting(arm)
            pipe.reader_override = reader
            t = time.perf_counter()
            out = pipe.answer(ecx[id(graph)], q, setting)
            dt = time.perf_counter() - t
            h, h1 = hit(out["answer"], answers), hit1(out["answer"], answers)
            res[arm].append((h, h1, dt))
            recs.append({"id": qid, "kind": kind, "arm": arm, "question": q, "answers": answers,
                         "answer": out["answer"], "hit": h, "hit1": h1, "probability": out["probability"],
                         "confidence": out.get("confidence"), "answer_kind": out.get("answer_kind"),
                         "unsupported_claims": out.get("unsupported_claims"),
                         "margin": out["margin"], "candidates": out["candidates"], "seconds": dt,
                         "names": out.get("names"), "name_scores": out.get("name_scores"),
                         "name_priors": out.get("name_priors"), "name_free": out.get("name_free"),
                         **name_parts(ecx[id(graph)], q, setting, out),
                         "covered": any(hit(n, answers) for n in out["cells"]["nodes"])})
    kinds = list(dict.fromkeys(k for k, *_ in qs))
    n_kind = Counter(k for k, *_ in qs)
    print(f"checkpoints {ckpts}, split {args.split}; questions: "
          + ", ".join(f"{k} {n_kind[k]}" for k in kinds))
    print("| arm | " + " | ".join(kinds) + " | all Hit | all Hit@1 | p50 s | only it / only first, p |")
    print("|" + "---|" * (len(kinds) + 5))
    first = [x[0] for x in res[arms[0]]]
    for arm in arms:
        rows = res[arm]
        cells = []
        for k in kinds:
            sel = [r for r, it in zip(rows, qs) if it[0] == k]
            cells.append(f"{np.mean([r[0] for r in sel]):.2f} ({np.mean([r[1] for r in sel]):.2f})")
        a, b, p = mcnemar_exact([r[0] for r in rows], first)
        print(f"| {arm} | " + " | ".join(cells) + f" | {np.mean([r[0] for r in rows]):.3f} | "
              f"{np.mean([r[1] for r in rows]):.3f} | {np.median([r[2] for r in rows]):.2f} | "
              + ("reference" if arm == arms[0] else f"{a} / {b}, p = {p:.2g}") + " |")
    print("(cells: Hit (Hit@1))")
    if args.records:
        Path(args.records).write_text("".join(json.dumps(r) + "\n" for r in recs))


if __name__ == "__main__":
    main()
