"""Entity linking: which stored entities a question mentions.

* **marked**: a span of the question in square brackets that is a stored name (MetaQA's question files
  mark the topic so: "which films share the same actor of [Mister Lonely]") is linked alone, without the
  n-gram search (:func:`~toporag_core.retrieval.seeds.marked_spans`, the same rule inside one graph).
* **exact** (otherwise tried first): the normalised name (lower case, punctuation removed,
  single spaces; :func:`~toporag_core.kg.store.normalize_name`) equals a word n-gram of the
  normalised question (n up to the longest stored name, :meth:`KGStore.longest_name`). The rules of
  :func:`~toporag_core.retrieval.seeds.pick_mentions` decide, the same as inside one graph: longer
  matches win (an n-gram inside a longer matched one is dropped: "marie curie" hides "curie"), and an
  n-gram of stop words only ("what", "film", "the story", "s"), or of stop words and words of the
  store's relation names ("vice president"), links only when nothing else does (its links are then
  marked ``weak``). Several entities of one name are all linked (``ambiguous``).
* **fuzzy** (``mode="fuzzy"``, or ``"auto"`` when exact found nothing): entities sharing at
  least one word of 3+ letters with the question (the ``tokens`` table), or a word that begins with the
  first :data:`PREFIX` letters of a longer question word (a demonym or a plural: "jamaican" reaches
  *Jamaica*, "egyptian" *Egypt*), whose name has a Jaro-Winkler similarity >= ``threshold`` (default
  0.92) with a question n-gram of the same number of words; best score per n-gram, at most
  ``max_fuzzy`` entities.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

from ..retrieval.seeds import is_stop, marked_spans, pick_mentions
from ..retrieval.seeds import ngrams as question_ngrams
from .store import KGStore, normalize_name

LINK_MODES = ("auto", "exact", "fuzzy")
PREFIX = 5  # a question word longer than this also reaches stored words that begin with its first PREFIX letters


@dataclass(frozen=True)
class Link:
    """One linked entity: id, stored name, the question n-gram it matched, how, and the score."""

    id: int
    name: str
    mention: str
    how: str
    score: float
    weak: bool = False  # the mention is stop words only (linked because nothing else was)
    ambiguous: bool = False  # other entities share this mention


def link_quality(links: list[Link]) -> str | None:
    """A hint when linking is weak (nothing, stop words only, or one mention naming many entities), else None."""
    if not links:
        return "no entity is named in the question: name one with --entity NAME"
    if all(lk.weak for lk in links):
        return (f"only a common word linked ({links[0].mention!r}): check the seed, or name the entity with "
                "--entity NAME")
    if any(lk.how == "fuzzy" for lk in links):
        return "linked by fuzzy match only: check the seeds, or name the entity with --entity NAME"
    if sum(lk.ambiguous for lk in links) > 3:
        return "the question's mention names several entities: name the one you mean with --entity NAME"
    return None


def link_entities(store: KGStore, question: str, mode: str = "auto", threshold: float = 0.92,
                  max_words: int = 6, max_fuzzy: int = 5) -> list[Link]:
    """Entities mentioned in ``question`` (see the module docstring)."""
    if mode not in LINK_MODES:
        raise ValueError(f"link mode must be one of {', '.join(LINK_MODES)}, got {mode!r}")
    marked = marked_spans(question)
    if marked:
        rows = store.con.execute("SELECT id, name, norm FROM entities WHERE norm IN (SELECT unnest(?)) ORDER BY id",
                                 [marked]).fetchall()
        if rows:
            many = Counter(g for _, _, g in rows)
            return [Link(int(i), name, g, "marked", 1.0, False, many[g] > 1) for i, name, g in rows]
    grams = question_ngrams(question, max(max_words, store.longest_name()))
    links: list[Link] = []
    if mode in ("auto", "exact") and grams:
        rows = store.con.execute("SELECT id, name, norm FROM entities WHERE norm IN (SELECT unnest(?)) ORDER BY id",
                                 [grams]).fetchall()
        by_norm: dict[str, list[tuple[int, str]]] = {}
        for i, name, norm in rows:
            by_norm.setdefault(norm, []).append((int(i), name))
        for m in pick_mentions(grams, by_norm, store.relation_words()):
            many = len(by_norm[m.gram]) > 1
            links += [Link(i, name, m.gram, "exact", 1.0, m.weak, many) for i, name in by_norm[m.gram]]
    if mode == "fuzzy" or (mode == "auto" and not links):
        words = sorted({w for w in normalize_name(question).split() if len(w) >= 3 and not is_stop(w)})
        stems = sorted({w[:PREFIX] for w in words if len(w) > PREFIX})
        if words and grams:
            rows = store.con.execute(f"""
                WITH q AS (SELECT unnest(?) AS gram), cand AS (
                    SELECT DISTINCT e.id, e.name, e.norm FROM tokens tk JOIN entities e ON e.id = tk.id
                    WHERE tk.token IN (SELECT unnest(?)) OR left(tk.token, {PREFIX}) IN (SELECT unnest(?)))
                SELECT id, name, gram, jaro_winkler_similarity(norm, gram) AS s FROM cand, q
                WHERE len(string_split(norm, ' ')) = len(string_split(gram, ' '))
                  AND jaro_winkler_similarity(norm, gram) >= ?
                ORDER BY s DESC, id LIMIT ?""", [grams, words, stems, float(threshold), int(max_fuzzy) * 4]).fetchall()
            seen = {lk.id for lk in links}
            for i, name, gram, s in rows:
                if int(i) not in seen and len(seen) < len(links) + max_fuzzy:
                    seen.add(int(i))
                    links.append(Link(int(i), name, gram, "fuzzy", round(float(s), 4)))
    return links


def with_seeds(setting, links: Sequence[Link]):
    """``setting`` seeded with the linked entities' names when its method takes ``seeds`` and none are set."""
    if "seeds" in setting.spec.param_names and not setting.params.get("seeds") and links:
        return setting.replace(seeds="|".join(dict.fromkeys(lk.name for lk in links)))
    return setting
