"""A multi-hop QA generator in HotpotQA's distractor format, with a fact table.

HotpotQA's evidence cannot be installed here, so questions are made from a **fact table**
of fictional entities with typed attributes:

* city: ``country``, ``river``, ``founded`` (year), ``population``;
* person: ``born_in`` (city), ``birth_year``, ``occupation``, ``employer`` (organisation);
* organisation: ``founded`` (year), ``founder`` (person), ``hq`` (city), ``industry``.

Every entity has one article (title -> two sections -> one paragraph each -> sentences),
written once per entity from several phrasings per relation; later sentences often name
the subject by a pronoun or a description, as encyclopedia prose does. Questions:

* **bridge** (two hops through a bridge entity): e.g. "Which country is the birthplace of
  X located in?" needs X's article (born in C) and C's article (C is in country K);
* **comparison**: "Who was born first, X or Y?", "Which was founded earlier, A or B?",
  "Which city has more inhabitants, C or D?".

Answers and supporting sentences are computed from the fact table, never from a
retriever. Each record has 2 gold and 8 distractor articles of the gold articles' types,
shuffled. Record layout (HotpotQA distractor plus one optional key)::

    {"_id", "question", "answer", "type": "bridge"|"comparison", "level": "medium",
     "supporting_facts": [[title, sentence index], ...],
     "context": [[title, [sentence, ...]], ...],
     "sections": {title: [[heading, [sentences per paragraph, ...]], ...]}}   # our extension

Reading these files back (:func:`~toporag_core.docgraph.records.load_records`, a record's articles and gold
titles) is the system's part, :mod:`toporag_core.docgraph.records`.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..docgraph.records import DATA_FILE, record_node_count

COUNTRIES = ("Veridia", "Kalmoria", "Ostrava Minor", "Teluria", "Brennick", "Sarnovia", "Quellmark", "Ildris",
             "Pellavia", "Corvandy", "Maresh", "Zantor")
RIVERS = ("Ambel", "Sorrow", "Kesh", "Velna", "Tiber Minor", "Orrin", "Lask", "Dunmere", "Pale", "Ysolde",
          "Grend", "Halloway", "Mirth", "Castle", "Nerrow")
OCCUPATIONS = ("architect", "botanist", "composer", "cartographer", "engineer", "novelist", "physician",
               "sculptor", "astronomer", "economist", "chemist", "painter")
INDUSTRIES = ("shipbuilding", "textiles", "publishing", "mining", "glassmaking", "brewing", "software",
              "railways", "pharmaceuticals", "insurance", "ceramics", "aviation")
ORG_KINDS = ("Works", "Company", "Foundry", "Group", "Industries", "Press", "Mills", "Guild")
_SYL = ("ka", "ve", "lor", "min", "dra", "sel", "tor", "vin", "mar", "qua", "bel", "ris", "nor", "tha", "zen",
        "lis", "gor", "pra", "ul", "eth", "dun", "cal", "ost", "fen", "rhy", "ska", "mo", "lin", "gar", "sa")

# relation -> phrasings; {s} is the subject (name, pronoun or description)
PHRASES = {
    "born_in": ("{s} was born in {v}.", "{s} was born in the city of {v}.", "{v} is where {s} was born."),
    "birth_year": ("{s} was born in {v}.", "The year of {s_poss} birth was {v}.", "{s} came into the world in {v}."),
    "occupation": ("{s} worked as a {v}.", "{s} is best known as a {v}.", "By profession {s_low} was a {v}."),
    "employer": ("{s} was employed by {v}.", "For most of a long career {s_low} worked for {v}.",
                 "{s} joined {v} and stayed there for decades."),
    "country": ("{s} is a city in {v}.", "{s} lies in the country of {v}.", "{s} belongs to {v}."),
    "river": ("{s} stands on the {v} river.", "The {v} river flows through {s_low}.", "{s} was built along the {v}."),
    "founded": ("{s} was founded in {v}.", "{s} dates back to {v}.", "The founding of {s_low} took place in {v}."),
    "population": ("{s} has a population of {v}.", "About {v} people live in {s_low}.",
                   "{s} is home to {v} inhabitants."),
    "founder": ("{s} was founded by {v}.", "{v} established {s_low}.", "The founder of {s_low} was {v}."),
    "hq": ("{s} has its headquarters in {v}.", "{s} is based in {v}.", "The head office of {s_low} is in {v}."),
    "industry": ("{s} is active in {v}.", "{s} makes its money in {v}.", "The main business of {s_low} is {v}."),
}
# a section's two relations in one sentence (used with probability COMBINE_P)
COMBINED = {
    ("born_in", "birth_year"): ("{s} was born in {born_in} in {birth_year}.",
                                "{s} was born in {birth_year} in the city of {born_in}."),
    ("occupation", "employer"): ("{s} worked as a {occupation} at {employer}.",
                                 "A {occupation} by training, {s_low} spent a career at {employer}."),
    ("country", "river"): ("{s} is a city in {country} on the {river} river.",
                           "Lying on the {river}, {s_low} is part of {country}."),
    ("founded", "population"): ("{s} was founded in {founded} and now has {population} inhabitants.",
                                "Founded in {founded}, {s_low} today counts {population} residents."),
    ("founded", "founder"): ("{s} was founded in {founded} by {founder}.", "{founder} set up {s_low} in {founded}."),
    ("hq", "industry"): ("{s} is a {industry} business based in {hq}.",
                         "From its base in {hq}, {s_low} works in {industry}."),
}
COMBINE_P, FILLER_P = 0.75, 0.15
SECTIONS = {
    "person": (("Early life", ("born_in", "birth_year")), ("Career", ("occupation", "employer"))),
    "city": (("Geography", ("country", "river")), ("History", ("founded", "population"))),
    "org": (("History", ("founded", "founder")), ("Operations", ("hq", "industry"))),
}
FILLERS = {
    "person": ("{s} wrote letters to friends throughout life.", "{s} travelled widely in later years."),
    "city": ("{s} holds a market every week.", "Visitors to {s_low} often mention its old bridges."),
    "org": ("{s} publishes an annual report.", "{s} has changed its logo several times."),
}
DESCRIPTIONS = {"person": ("This {occupation}", "The {occupation}"), "city": ("The city", "The town"),
                "org": ("The company", "The firm")}
FACTS_FILE = "facts.json"


def _names(rng: np.random.Generator, n: int, parts: int, used: set[str]) -> list[str]:
    out = []
    while len(out) < n:
        words = ["".join(rng.choice(_SYL, size=rng.integers(2, 4))).capitalize() for _ in range(parts)]
        name = " ".join(words)
        if name not in used and all(len(w) > 3 for w in words):
            used.add(name)
            out.append(name)
    return out


def make_world(n_cities: int = 40, n_persons: int = 90, n_orgs: int = 40, seed: int = 0) -> dict[str, list[dict]]:
    """The fact table: ``{"cities": [...], "persons": [...], "orgs": [...]}`` with unique names and
    unique years / populations inside each comparable attribute (no ties in comparisons)."""
    rng = np.random.default_rng(seed)
    used: set[str] = set()
    cities = [{"name": nm, "type": "city", "country": str(rng.choice(COUNTRIES)), "river": str(rng.choice(RIVERS)),
               "founded": int(y), "population": int(pop)}
              for nm, y, pop in zip(_names(rng, n_cities, 1, used), rng.choice(np.arange(800, 1900), n_cities, False),
                                    rng.choice(np.arange(12, 900), n_cities, False) * 1000 + 500)]
    orgs_names = [f"{nm} {rng.choice(ORG_KINDS)}" for nm in _names(rng, n_orgs, 1, used)]
    org_years = rng.choice(np.arange(1780, 2000), n_orgs, False)
    persons = [{"name": nm, "type": "person", "gender": str(rng.choice(("f", "m"))),
                "born_in": cities[int(rng.integers(n_cities))]["name"],
                "birth_year": int(y), "occupation": str(rng.choice(OCCUPATIONS)),
                "employer": orgs_names[int(rng.integers(n_orgs))]}
               for nm, y in zip(_names(rng, n_persons, 2, used), rng.choice(np.arange(1800, 1990), n_persons, False))]
    orgs = [{"name": nm, "type": "org", "founded": int(y), "founder": persons[int(rng.integers(n_persons))]["name"],
             "hq": cities[int(rng.integers(n_cities))]["name"], "industry": str(rng.choice(INDUSTRIES))}
            for nm, y in zip(orgs_names, org_years)]
    return {"cities": cities, "persons": persons, "orgs": orgs}


def _value(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and v >= 10_000 else str(v)


def write_article(entity: dict, rng: np.random.Generator) -> tuple[list[tuple[str, list[list[str]]]], dict[str, int]]:
    """``(sections, relation -> sentence index)``: the article text and where each fact is stated."""
    kind, name = entity["type"], entity["name"]
    secs, where, idx = [], {}, 0
    for s_no, (heading, rels) in enumerate(SECTIONS[kind]):
        para = []
        combine = rng.random() < COMBINE_P
        for r_no, rel in enumerate(rels[:1] if combine else rels):
            first = s_no == 0 and r_no == 0
            if first or rng.random() < 0.5:
                subj = name
            elif kind == "person":
                subj = "She" if entity["gender"] == "f" else "He"
            else:
                subj = str(rng.choice(DESCRIPTIONS[kind]))
            subj = subj.format(occupation=entity.get("occupation", ""))
            low = subj if subj == name else subj[0].lower() + subj[1:]
            poss = f"{subj}'s" if subj == name else {"He": "his", "She": "her"}.get(subj, f"{low}'s")
            tpl = str(rng.choice(COMBINED[tuple(rels)] if combine else PHRASES[rel]))
            vals = {r: _value(entity[r]) for r in rels}
            sent = tpl.format(s=subj, s_low=low, s_poss=poss, v=_value(entity[rel]), **vals)
            sent = re.sub(r"\b([Aa]) ([aeiouAEIOU])", r"\1n \2", sent)
            para.append(sent[0].upper() + sent[1:])
            for r in (rels if combine else (rel,)):
                where[r] = idx
            idx += 1
        if rng.random() < FILLER_P:
            para.append(str(rng.choice(FILLERS[kind])).format(s=name, s_low=name))
            idx += 1
        secs.append((heading, [para]))
    return secs, where


def _pick(rng, items: list[dict], k: int, exclude: set[str]) -> list[dict]:
    pool = [e for e in items if e["name"] not in exclude]
    return [pool[i] for i in rng.choice(len(pool), size=min(k, len(pool)), replace=False)]


# The bridge forms: which list a form's first entity comes from (its second is that entity's link).
BRIDGE_HEADS = ("persons", "persons", "orgs", "orgs", "persons")
# Comparison forms per entity kind: (the compared field, min or max wins)
COMPARED = {"person": ("birth_year", min), "org": ("founded", min), "city": ("population", max)}


def bridge_question(form: int, head: dict, by_name: dict[str, dict]):
    """``(gold, facts, question, answer)`` of bridge form ``form`` (0-4) asked about ``head`` (an entity of
    ``BRIDGE_HEADS[form]``); ``facts`` are ``(entity, field)`` pairs, the supporting sentences."""
    if form in (0, 1):
        p, c = head, by_name[head["born_in"]]
        q = (f"Which country is the birthplace of {p['name']} located in?" if form == 0 else
             f"In which year was the city where the {p['occupation']} {p['name']} was born founded?")
        return [p, c], [(p, "born_in"), (c, "country" if form == 0 else "founded")], q, \
            (c["country"] if form == 0 else str(c["founded"]))
    if form in (2, 3):
        o, f = head, by_name[head["founder"]]
        q = (f"In what year was the founder of {o['name']} born?" if form == 2 else
             f"In which city was the person who founded {o['name']} born?")
        return [o, f], [(o, "founder"), (f, "birth_year" if form == 2 else "born_in")], q, \
            (str(f["birth_year"]) if form == 2 else f["born_in"])
    p, o = head, by_name[head["employer"]]
    return [p, o], [(p, "employer"), (o, "industry")], f"Which industry is the employer of {p['name']} active in?", \
        o["industry"]


def comparison_question(kind: str, a: dict, b: dict):
    """``(gold, facts, question, answer)`` comparing two entities of ``kind`` on their ``COMPARED`` field."""
    rel, best = COMPARED[kind]
    q = {"person": f"Who was born first, {a['name']} or {b['name']}?",
         "org": f"Which was founded earlier, {a['name']} or {b['name']}?",
         "city": f"Which city has more inhabitants, {a['name']} or {b['name']}?"}[kind]
    return [a, b], [(a, rel), (b, rel)], q, best(a, b, key=lambda e: e[rel])["name"]


def hotpot_record(qid: str, question: str, answer: str, qtype: str, gold: list[dict], facts, ents: list[dict],
                  articles: dict[str, tuple]) -> dict[str, Any]:
    """One HotpotQA distractor record over the articles of ``ents`` (in that order), gold titles kept."""
    context = [[e["name"], [s for _, paras in articles[e["name"]][0] for para in paras for s in para]] for e in ents]
    sections = {e["name"]: [[h, [len(p) for p in paras]] for h, paras in articles[e["name"]][0]] for e in ents}
    sup = [[e["name"], articles[e["name"]][1][rel]] for e, rel in facts]
    return {"_id": qid, "question": question, "answer": answer, "type": qtype, "level": "medium",
            "supporting_facts": sup, "context": context, "sections": sections,
            "gold_titles": [e["name"] for e in gold]}


def generate(n: int = 200, seed: int = 0, distractors: int = 8) -> tuple[list[dict], dict[str, list[dict]]]:
    """``(records, fact table)``: ``n`` questions, half bridge and half comparison."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if distractors < 0:
        raise ValueError(f"distractors must be >= 0, got {distractors}")
    rng = np.random.default_rng(seed)
    world = make_world(seed=seed)
    by_name = {e["name"]: e for lst in world.values() for e in lst}
    art_rng = np.random.default_rng(seed + 1)
    articles = {nm: write_article(e, art_rng) for nm, e in by_name.items()}
    kinds = {"city": world["cities"], "person": world["persons"], "org": world["orgs"]}
    records = []
    for qi in range(n):
        if qi % 2 == 0:
            form = int(rng.integers(5))
            gold, facts, q, ans = bridge_question(form, _pick(rng, world[BRIDGE_HEADS[form]], 1, set())[0], by_name)
            qtype = "bridge"
        else:
            kind = ("person", "org", "city")[int(rng.integers(3))]
            gold, facts, q, ans = comparison_question(kind, *_pick(rng, kinds[kind], 2, set()))
            qtype = "comparison"
        exclude = {e["name"] for e in gold}
        dis = []
        for i in range(distractors):
            kind = gold[i % 2]["type"]
            dis += _pick(rng, kinds[kind], 1, exclude | {d["name"] for d in dis})
        ents = gold + dis
        ents = [ents[i] for i in rng.permutation(len(ents))]
        records.append(hotpot_record(f"gen-{seed}-{qi:05d}", q, ans, qtype, gold, facts, ents, articles))
    return records, world


def write_dataset(out: str | os.PathLike, n: int = 200, seed: int = 0, distractors: int = 8) -> dict[str, Any]:
    """Write ``hotpot_dev_distractor.json`` and ``facts.json`` into ``out`` (atomic renames);
    returns a summary."""
    records, world = generate(n, seed, distractors)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, obj in ((DATA_FILE, records), (FACTS_FILE, world)):
        tmp = out / f".{name}.tmp"
        tmp.write_text(json.dumps(obj, ensure_ascii=False))
        os.replace(tmp, out / name)
    nodes = [record_node_count(r) for r in records]
    return {"questions": len(records), "bridge": sum(r["type"] == "bridge" for r in records),
            "comparison": sum(r["type"] == "comparison" for r in records), "mean_nodes": float(np.mean(nodes)),
            "entities": sum(len(v) for v in world.values()), "path": str(out)}
