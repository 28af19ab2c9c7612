"""A generated corpus with HotpotQA-format multi-hop questions over it (benchmarks and tests).

:mod:`.docgraph` makes one small world (170 entities, unique years) whose questions each bring
their own 10 paragraphs. Here the world is as large as the corpus asked for (one article per
entity: ``n_articles`` articles, each two sections of one paragraph, so ``2 n_articles``
paragraphs), its articles are the corpus, and the questions (the same bridge and comparison
forms, answers computed from the fact table; comparison pairs with equal values are skipped, as
years repeat in a large world) are asked against the *whole* corpus. Each record also carries
its 2 gold and 8 distractor articles (the distractor layout), so the file is a valid HotpotQA
distractor file too.

Corpus documents are ``{"id", "title", "text"}`` with Markdown sections (``## Early life`` ...),
ready for a JSONL corpus file.
"""
from __future__ import annotations

import numpy as np

from .docgraph import (BRIDGE_HEADS, COMPARED, COUNTRIES, INDUSTRIES, OCCUPATIONS, ORG_KINDS, RIVERS, _SYL,
                       bridge_question, comparison_question, hotpot_record, write_article)


def _unique_names(rng: np.random.Generator, n: int, parts: int, used: set[str]) -> list[str]:
    out = []
    while len(out) < n:
        words = ["".join(rng.choice(_SYL, size=rng.integers(2, 5 if parts == 1 else 4))).capitalize()
                 for _ in range(parts)]
        name = " ".join(words)
        if name not in used and all(len(w) > 3 for w in words):
            used.add(name)
            out.append(name)
    return out


def make_large_world(n_articles: int, seed: int = 0) -> dict[str, list[dict]]:
    """About 1/8 cities, 3/4 persons, 1/8 organisations; values drawn with replacement."""
    if n_articles < 8:
        raise ValueError(f"n_articles must be >= 8, got {n_articles}")
    rng = np.random.default_rng(seed)
    nc, no = max(2, n_articles // 8), max(2, n_articles // 8)
    npers = n_articles - nc - no
    used: set[str] = set()
    cities = [{"name": nm, "type": "city", "country": str(rng.choice(COUNTRIES)), "river": str(rng.choice(RIVERS)),
               "founded": int(rng.integers(800, 1900)), "population": int(rng.integers(12, 900)) * 1000 + 500}
              for nm in _unique_names(rng, nc, 1, used)]
    org_names = [f"{nm} {rng.choice(ORG_KINDS)}" for nm in _unique_names(rng, no, 1, used)]
    persons = [{"name": nm, "type": "person", "gender": str(rng.choice(("f", "m"))),
                "born_in": cities[int(rng.integers(nc))]["name"], "birth_year": int(rng.integers(1750, 1995)),
                "occupation": str(rng.choice(OCCUPATIONS)), "employer": org_names[int(rng.integers(no))]}
               for nm in _unique_names(rng, npers, 2, used)]
    orgs = [{"name": nm, "type": "org", "founded": int(rng.integers(1750, 2000)),
             "founder": persons[int(rng.integers(npers))]["name"], "hq": cities[int(rng.integers(nc))]["name"],
             "industry": str(rng.choice(INDUSTRIES))} for nm in org_names]
    return {"cities": cities, "persons": persons, "orgs": orgs}


def _markdown(title: str, sections: list[tuple[str, list[list[str]]]]) -> str:
    return "\n\n".join(f"## {h}\n\n" + "\n\n".join(" ".join(p) for p in paras) for h, paras in sections)


def generate_corpus(n_articles: int = 1000, n_questions: int = 100, seed: int = 0,
                    distractors: int = 8) -> tuple[list[dict], list[dict]]:
    """``(records, documents)``: HotpotQA-format questions (half bridge, half comparison) and the corpus."""
    if n_questions < 0:
        raise ValueError(f"n_questions must be >= 0, got {n_questions}")
    world = make_large_world(n_articles, seed)
    rng = np.random.default_rng(seed + 7)
    by_name = {e["name"]: e for lst in world.values() for e in lst}
    art_rng = np.random.default_rng(seed + 1)
    articles = {nm: write_article(e, art_rng) for nm, e in by_name.items()}
    docs = [{"id": nm, "title": nm, "text": _markdown(nm, secs)} for nm, (secs, _) in articles.items()]
    kinds = {"city": world["cities"], "person": world["persons"], "org": world["orgs"]}
    records: list[dict] = []
    while len(records) < n_questions:
        qi = len(records)
        if qi % 2 == 0:
            form = int(rng.integers(5))
            heads = world[BRIDGE_HEADS[form]]
            gold, facts, q, ans = bridge_question(form, heads[int(rng.integers(len(heads)))], by_name)
            qtype = "bridge"
        else:
            kind = ("person", "org", "city")[int(rng.integers(3))]
            pool = kinds[kind]
            i, j = rng.choice(len(pool), 2, replace=False)
            a, b = pool[int(i)], pool[int(j)]
            if a[COMPARED[kind][0]] == b[COMPARED[kind][0]]:
                continue
            gold, facts, q, ans = comparison_question(kind, a, b)
            qtype = "comparison"
        names = {e["name"] for e in gold}
        dis: list[dict] = []
        for k in range(distractors):  # of the gold articles' types, else of any type when those run out
            for pool in (kinds[gold[k % 2]["type"]], kinds[gold[1 - k % 2]["type"]], list(by_name.values())):
                left = [e for e in pool if e["name"] not in names] if len(pool) <= 4 * distractors else None
                if left == []:
                    continue
                while left is None:  # a large pool: draw until a new one (few tries)
                    e = pool[int(rng.integers(len(pool)))]
                    left = [e] if e["name"] not in names else None
                e = left[int(rng.integers(len(left)))]
                names.add(e["name"])
                dis.append(e)
                break
        ents = [(gold + dis)[k] for k in rng.permutation(len(gold) + len(dis))]
        records.append(hotpot_record(f"corpus-{seed}-{qi:05d}", q, ans, qtype, gold, facts, ents, articles))
    return records, docs
