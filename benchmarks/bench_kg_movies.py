"""`kg import` -> `kg eval` on a MetaQA-shaped movie graph: 1-hop and 2-hop questions in MetaQA's phrasing.

The generated ``general`` task writes its own question templates over its own relations; a user's knowledge
graph is shaped differently. This benchmark builds a second, independent shape, the one of the MetaQA movie
knowledge base (movie rows ``movie | relation | value`` over ``directed_by``, ``written_by``,
``starred_actors``, ``release_year``, ``in_language``, ``has_genre``, ``has_tags``, ``has_imdb_votes``; a
few popular people, one-word titles such as *What?*), asks MetaQA's question forms ("which films share the
same actor of X", "the films starred by X were released in which years", "who are the writers of the films
directed by X"), without the topic entity (so it is linked from the text), and runs the whole command-line
path: ``toporag kg import`` then ``toporag kg eval --json --out`` once per arm. Arms are extra ``kg eval``
flags (``--arm NAME='--lexical 0'``); the first is the reference. It prints Hit, Hit@1 and answer coverage
per question form and arm, and a paired exact McNemar test of each arm against the reference.

Names are random word titles and first / last name pairs, so the reader cannot tell a film from a person by
its name, as it could on real titles.

    python benchmarks/bench_kg_movies.py --per-hop 150 --arm 'off=--lexical 0' --arm 'shipped='
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from _common import ROOT
from toporag_core.metrics import mcnemar_exact

WORDS = ("silent river night broken golden last lost city dream winter summer dark blue secret road home stranger "
         "fire heart wild little house garden star ocean king queen shadow rain morning glass iron paper moon").split()
ONE_WORD = ["What?", "Together", "Fall", "Home", "Run", "Gone", "Babel", "Crash", "Heat", "Rush", "Frozen", "Signs"]
FIRST = ("John Mary Peter Anna James Laura Robert Emma David Sofia Michael Julia Thomas Clara Daniel Nina Paul "
         "Elena Mark Irene Henry Alice Victor Rosa Oscar Lena Felix Marta Hugo Ingrid").split()
LAST = ("Walsh Moreau Kowalski Berg Lindqvist Tanaka Okafor Ruiz Novak Fischer Duval Hale Brennan Costa Varga "
        "Sato Olsen Petrov Keller Marsh Quinn Ibarra Holt Lange Reyes Dunn Ferrari Nagy Wolfe Carver").split()
GENRES = ("Drama Comedy Thriller Horror Romance Action Western Documentary Animation Mystery Crime War Musical "
          "Adventure Fantasy").split()
LANGUAGES = "English French German Spanish Italian Japanese Swedish Russian Korean Hindi".split()
TAGS = ["nudity", "bd-r", "based on a book", "remake", "atmospheric", "surreal", "dystopia", "heist", "biography"]
ONE_HOP = [  # (form, topic pool, direction, relation)
    ("what movies did {} direct", "directors", "rev", "directed_by"),
    ("who directed {}", "movies", "fwd", "directed_by"),
    ("who wrote {}", "movies", "fwd", "written_by"),
    ("what films did {} write", "writers", "rev", "written_by"),
    ("who acted in {}", "movies", "fwd", "starred_actors"),
    ("what films did {} act in", "actors", "rev", "starred_actors"),
    ("when was {} released", "movies", "fwd", "release_year"),
    ("what genre is {}", "movies", "fwd", "has_genre"),
    ("what language is {} in", "movies", "fwd", "in_language"),
]
TWO_HOP = [  # (form, topic pool, first step, second step)
    ("who directed the movies starred by {}", "actors", ("rev", "starred_actors"), ("fwd", "directed_by")),
    ("the films starred by {} were released in which years", "actors", ("rev", "starred_actors"),
     ("fwd", "release_year")),
    ("which films share the same actor of {}", "movies", ("fwd", "starred_actors"), ("rev", "starred_actors")),
    ("which movies have the same director of {}", "movies", ("fwd", "directed_by"), ("rev", "directed_by")),
    ("who are the writers of the films directed by {}", "directors", ("rev", "directed_by"), ("fwd", "written_by")),
    ("what genres are the movies written by {} in", "writers", ("rev", "written_by"), ("fwd", "has_genre")),
    ("who acted in the movies directed by {}", "directors", ("rev", "directed_by"), ("fwd", "starred_actors")),
    ("what languages are the films directed by {} in", "directors", ("rev", "directed_by"), ("fwd", "in_language")),
]

# Other wordings of the same questions, in the vocabulary MetaQA's paraphrased templates use ("starred in",
# "appeared in", "screenwriter", "release dates", "types", "primary languages", "what words describe").
# Written together, before either was run; set a was looked at while designing, set b is only measured.
PARAPHRASE_A = ([
    ("who is the director of {}", "movies", "fwd", "directed_by"),
    ("which movies were directed by {}", "directors", "rev", "directed_by"),
    ("who is the screenwriter of {}", "movies", "fwd", "written_by"),
    ("{} wrote which films", "writers", "rev", "written_by"),
    ("who starred in {}", "movies", "fwd", "starred_actors"),
    ("what movies was {} an actor in", "actors", "rev", "starred_actors"),
    ("what year was {} released", "movies", "fwd", "release_year"),
    ("what type of film is {}", "movies", "fwd", "has_genre"),
    ("what is the language spoken in {}", "movies", "fwd", "in_language"),
    ("what words describe {}", "movies", "fwd", "has_tags"),
], [
    ("who are the directors of the films acted by {}", "actors", ("rev", "starred_actors"), ("fwd", "directed_by")),
    ("when did the movies starred by {} release", "actors", ("rev", "starred_actors"), ("fwd", "release_year")),
    ("what films did the actors of {} also appear in", "movies", ("fwd", "starred_actors"),
     ("rev", "starred_actors")),
    ("what other movies did the director of {} make", "movies", ("fwd", "directed_by"), ("rev", "directed_by")),
    ("who wrote the films directed by {}", "directors", ("rev", "directed_by"), ("fwd", "written_by")),
    ("what types are the films written by {}", "writers", ("rev", "written_by"), ("fwd", "has_genre")),
    ("who starred in the films directed by {}", "directors", ("rev", "directed_by"), ("fwd", "starred_actors")),
    ("what are the primary languages in the films directed by {}", "directors", ("rev", "directed_by"),
     ("fwd", "in_language")),
])
PARAPHRASE_B = ([
    ("{} was directed by who", "movies", "fwd", "directed_by"),
    ("{} directed which movies", "directors", "rev", "directed_by"),
    ("who was {} written by", "movies", "fwd", "written_by"),
    ("what films was {} the writer of", "writers", "rev", "written_by"),
    ("who appeared in {}", "movies", "fwd", "starred_actors"),
    ("{} appeared in which movies", "actors", "rev", "starred_actors"),
    ("when did {} come out", "movies", "fwd", "release_year"),
    ("what kind of movie is {}", "movies", "fwd", "has_genre"),
    ("which language was {} in", "movies", "fwd", "in_language"),
    ("what is {} about", "movies", "fwd", "has_tags"),
], [
    ("the films starred by {} were directed by who", "actors", ("rev", "starred_actors"), ("fwd", "directed_by")),
    ("what years were the movies acted by {} released", "actors", ("rev", "starred_actors"),
     ("fwd", "release_year")),
    ("which movies share actors with {}", "movies", ("fwd", "starred_actors"), ("rev", "starred_actors")),
    ("the director of {} also directed which films", "movies", ("fwd", "directed_by"), ("rev", "directed_by")),
    ("the films directed by {} were written by who", "directors", ("rev", "directed_by"), ("fwd", "written_by")),
    ("the movies written by {} are of which genres", "writers", ("rev", "written_by"), ("fwd", "has_genre")),
    ("who appeared in the movies directed by {}", "directors", ("rev", "directed_by"), ("fwd", "starred_actors")),
    ("which languages are the movies directed by {} in", "directors", ("rev", "directed_by"),
     ("fwd", "in_language")),
])
# A third set, written after the synonym groups of retrieval/lexicon.py and before it was run once.
PARAPHRASE_C = ([
    ("which person directed {}", "movies", "fwd", "directed_by"),
    ("what are the films that {} has directed", "directors", "rev", "directed_by"),
    ("who wrote the screenplay for {}", "movies", "fwd", "written_by"),
    ("which movies did {} write the story for", "writers", "rev", "written_by"),
    ("who are the actors in {}", "movies", "fwd", "starred_actors"),
    ("what does {} star in", "actors", "rev", "starred_actors"),
    ("what was the release date of {}", "movies", "fwd", "release_year"),
    ("what sort of film is {}", "movies", "fwd", "has_genre"),
    ("what is the primary language of {}", "movies", "fwd", "in_language"),
    ("what topics is {} about", "movies", "fwd", "has_tags"),
], [
    ("who directed the films that {} acted in", "actors", ("rev", "starred_actors"), ("fwd", "directed_by")),
    ("in which years were the films starring {} released", "actors", ("rev", "starred_actors"),
     ("fwd", "release_year")),
    ("which movies feature the same actors as {}", "movies", ("fwd", "starred_actors"), ("rev", "starred_actors")),
    ("what else was directed by the director of {}", "movies", ("fwd", "directed_by"), ("rev", "directed_by")),
    ("who was the screenwriter on films directed by {}", "directors", ("rev", "directed_by"),
     ("fwd", "written_by")),
    ("what kinds of films has {} written", "writers", ("rev", "written_by"), ("fwd", "has_genre")),
    ("which actors appear in films directed by {}", "directors", ("rev", "directed_by"), ("fwd", "starred_actors")),
    ("in what languages are films by director {} made", "directors", ("rev", "directed_by"),
     ("fwd", "in_language")),
])
FORMS = {"metaqa": (ONE_HOP, TWO_HOP), "paraphrase-a": PARAPHRASE_A, "paraphrase-b": PARAPHRASE_B,
         "paraphrase-c": PARAPHRASE_C}


def movie_kg(seed: int, n_movies: int = 500):
    """``(triples, pools)``: the movie rows and the entity pools questions draw their topics from (people:
    first / last name pairs, with a middle initial beyond 900 of them, about 1.8 per film)."""
    rng = random.Random(seed)
    movies = set()
    while len(movies) < n_movies:
        t = " ".join(rng.choice(WORDS) for _ in range(rng.choice([1, 2, 2, 3]))).title()
        movies.add("The " + t if rng.random() < 0.3 else t)
    movies = sorted(movies) + ONE_WORD
    pairs = [f"{a} {b}" for a in FIRST for b in LAST]
    n_people = max(900, int(1.8 * n_movies))
    people = sorted(pairs + [f"{p.split()[0]} {chr(65 + i % 26)}. {p.split()[1]}"
                             for i, p in enumerate(pairs * (n_people // len(pairs)))][:n_people - len(pairs)])
    rng.shuffle(people)
    a, d = 5 * n_people // 9, 31 * n_people // 45
    actors, directors, writers = people[:a], people[a - n_people // 18:d], people[d - n_people // 45:]

    def popular(pool):  # a few people in many films
        return pool[int(len(pool) * rng.random() ** 2)]

    rows = []
    for m in movies:
        rows += [(m, "directed_by", d) for d in sorted({popular(directors) for _ in range(rng.choice([1, 1, 2]))})]
        rows += [(m, "written_by", w) for w in sorted({popular(writers) for _ in range(rng.choice([1, 2]))})]
        rows += [(m, "starred_actors", a) for a in sorted({popular(actors) for _ in range(rng.choice([2, 3, 4]))})]
        rows += [(m, "release_year", str(rng.randint(1950, 2015))), (m, "in_language", rng.choice(LANGUAGES))]
        rows += [(m, "has_genre", g) for g in sorted({rng.choice(GENRES) for _ in range(rng.choice([1, 2]))})]
        if rng.random() < 0.5:
            rows.append((m, "has_tags", rng.choice(TAGS)))
        if rng.random() < 0.4:
            rows.append((m, "has_imdb_votes", rng.choice(["famous", "popular"])))
    return rows, {"movies": movies, "actors": actors, "directors": directors, "writers": writers}


def movie_questions(rows, pools, per_hop: int, seed: int, wording: str = "metaqa") -> list[dict]:
    """``per_hop`` 1-hop and 2-hop questions (at most 20 / 30 answers each) in the wordings of
    ``FORMS[wording]``, with their form."""
    rng = random.Random(seed + 1)
    step_of = defaultdict(set)
    for h, r, t in rows:
        step_of["fwd", r, h].add(t)
        step_of["rev", r, t].add(h)

    def step(ents, d, r):
        return set().union(*(step_of[d, r, e] for e in ents)) if ents else set()

    out = []
    for hop, forms, most in ((1, FORMS[wording][0], 20), (2, FORMS[wording][1], 30)):
        got = 0
        while got < per_hop:
            form, pool, *steps = rng.choice(forms)
            topic = rng.choice(pools[pool])
            ans = {topic}
            for s in (steps if hop == 2 else [tuple(steps)]):
                ans = step(ans, *s)
            ans -= {topic}
            if ans and len(ans) <= most:
                out.append({"id": f"{hop}h-{len(out)}", "question": form.format(topic), "answers": sorted(ans),
                            "form": form.format("X"), "hops": hop})
                got += 1
    return out


def recorded_arm(path: Path, qs: list[dict]) -> tuple[dict, dict]:
    """``(records by id, kg eval's summary)`` of a predictions file written by an earlier run of this benchmark
    (``--arm NAME=@FILE``); its questions must be this run's."""
    recs = {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}
    if {r["id"]: r["question"] for r in recs.values()} != {q["id"]: q["question"] for q in qs}:
        sys.exit(f"{path}: its questions are not this run's (same --seed, --movies, --per-hop and --forms?)")
    r = list(recs.values())
    method = r[0]["method"]
    cov = {m: float(np.mean([bool(x["coverage"].get(m)) for x in r])) for m in r[0]["coverage"]}
    return recs, {"hit": float(np.mean([x["hit"] for x in r])), "hit1": float(np.mean([x["hit1"] for x in r])),
                  "coverage": cov, "method": method, "p50_s": float(np.median([x["seconds"] for x in r]))}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-hop", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--movies", type=int, default=500, help="films in the graph (500: about 5,200 triples)")
    ap.add_argument("--forms", choices=sorted(FORMS), default="metaqa",
                    help="question wordings: MetaQA's (default) or one of three paraphrase sets")
    ap.add_argument("--arm", action="append", default=[], help="NAME=KG-EVAL-FLAGS (repeatable; first: reference), "
                    "or NAME=@PREDS.jsonl: the predictions of an earlier run with the same questions")
    ap.add_argument("--out", default=None, help="keep the store, questions and predictions here")
    args = ap.parse_args(argv)
    arms = [a.split("=", 1) for a in (args.arm or ["off=--lexical 0", "shipped="])]
    work = Path(args.out or tempfile.mkdtemp(prefix="kg-movies-"))
    work.mkdir(parents=True, exist_ok=True)
    rows, pools = movie_kg(args.seed, args.movies)
    with open(work / "movies.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["head", "relation", "tail"])
        w.writerows(rows)
    qs = movie_questions(rows, pools, args.per_hop, args.seed, args.forms)
    with open(work / "questions.jsonl", "w") as f:
        for q in qs:
            f.write(json.dumps({k: q[k] for k in ("id", "question", "answers")}) + "\n")
    cli = [sys.executable, "-m", "toporag_core.cli"]
    subprocess.run([*cli, "kg", "import", str(work / "movies.duckdb"), str(work / "movies.csv"), "--overwrite"],
                   check=True, cwd=ROOT)
    recs, summary = {}, {}
    for name, flags in arms:
        if flags.startswith("@"):  # a predictions file of an earlier run (same seed, size and wordings)
            recs[name], summary[name] = recorded_arm(Path(flags[1:]), qs)
            continue
        out = work / f"preds-{name}.jsonl"
        res = subprocess.run([*cli, "kg", "eval", str(work / "movies.duckdb"), str(work / "questions.jsonl"),
                              "--out", str(out), "--json", *shlex.split(flags)], cwd=ROOT,
                             capture_output=True, text=True)
        if res.returncode:
            sys.exit(f"arm {name} (`kg eval {flags}`) failed:\n{res.stderr.strip()}")
        summary[name] = json.loads(res.stdout.strip().splitlines()[-1])
        recs[name] = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    form_of = {q["id"]: (q["hops"], q["form"]) for q in qs}
    print(f"{len(rows):,} triples; wordings {args.forms}; {args.per_hop} 1-hop and {args.per_hop} 2-hop questions; arms: "
          + ", ".join(f"{n} = `kg eval {f}`".rstrip() for n, f in arms))
    print("\n| hops | question form | n | " + " | ".join(f"{n}: Hit (Hit@1), coverage" for n, _ in arms) + " |")
    print("|---|---|---|" + "---|" * len(arms))
    groups = defaultdict(list)
    for qid, key in form_of.items():
        groups[key].append(qid)
        groups[(key[0], "all")].append(qid)
    for key in sorted(groups, key=lambda k: (k[0], k[1] != "all", k[1])):
        ids = groups[key]
        cells = []
        for name, _ in arms:
            r = [recs[name][i] for i in ids]
            cells.append(f"{sum(x['hit'] for x in r) / len(r):.2f} ({sum(x['hit1'] for x in r) / len(r):.2f}), "
                         f"{sum(bool(x['coverage'].get(summary[name]['method'])) for x in r) / len(r):.2f}")
        label = f"**all {key[0]}-hop**" if key[1] == "all" else key[1]
        print(f"| {key[0]} | {label} | {len(ids)} | " + " | ".join(cells) + " |")
    ref = arms[0][0]
    ids = list(form_of)
    print("\n| arm | Hit | Hit@1 | coverage (paper TopoRAG, G-Retriever) | flagged low: wrong (right) answers | p50 s "
          "| Hit vs "
          f"{ref} (only it / only {ref}, p) | Hit@1 vs {ref} |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in arms:
        s = summary[name]
        cov = s["coverage"]
        r = list(recs[name].values())
        wrong, right = [x for x in r if not x["hit"]], [x for x in r if x["hit"]]
        flag = (f"{sum(bool(x['low_confidence']) for x in wrong) / max(len(wrong), 1):.2f} "
                f"({sum(bool(x['low_confidence']) for x in right) / max(len(right), 1):.2f})")
        pair = []
        for key in ("hit", "hit1"):
            b, c, p = mcnemar_exact([recs[name][i][key] for i in ids], [recs[ref][i][key] for i in ids])
            pair.append(f"{b} / {c}, p = {p:.2g}" if name != ref else "reference")
        print(f"| {name} | {s['hit']:.3f} | {s['hit1']:.3f} | {cov[s['method']]:.2f} ({cov.get('toporag', 0):.2f}, "
              f"{cov.get('g-retriever', 0):.2f}) | {flag} | {s['p50_s']:.2f} | "
              + " | ".join(pair) + " |")


if __name__ == "__main__":
    main()
