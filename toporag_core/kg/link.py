"""Entity linking: which stored entities a question mentions.

* **exact** (always tried first): the normalised name (lower case, punctuation removed,
  single spaces; :func:`~toporag_core.kg.store.normalize_name`) equals a word n-gram of the
  normalised question (n <= ``max_words``). Longer matches win: an n-gram inside a longer
  matched one is dropped ("marie curie" hides "curie").
* **fuzzy** (``mode="fuzzy"``, or ``"auto"`` when exact found nothing): entities sharing at
  least one word of 3+ letters with the question (the ``tokens`` table) whose name has a
  Jaro-Winkler similarity >= ``threshold`` (default 0.92) with a question n-gram of the same
  number of words; best score per n-gram, at most ``max_fuzzy`` entities.
"""
from __future__ import annotations

from dataclasses import dataclass

from .store import KGStore, normalize_name

LINK_MODES = ("auto", "exact", "fuzzy")


@dataclass(frozen=True)
class Link:
    """One linked entity: id, stored name, the question n-gram it matched, how, and the score."""

    id: int
    name: str
    mention: str
    how: str
    score: float


def ngrams(text: str, max_words: int = 6) -> list[str]:
    words = normalize_name(text).split()
    return [" ".join(words[i:i + n]) for n in range(min(max_words, len(words)), 0, -1)
            for i in range(len(words) - n + 1)]


def link_entities(store: KGStore, question: str, mode: str = "auto", threshold: float = 0.92,
                  max_words: int = 6, max_fuzzy: int = 5) -> list[Link]:
    """Entities mentioned in ``question`` (see the module docstring)."""
    if mode not in LINK_MODES:
        raise ValueError(f"link mode must be one of {', '.join(LINK_MODES)}, got {mode!r}")
    grams = ngrams(question, max_words)
    links: list[Link] = []
    if mode in ("auto", "exact") and grams:
        rows = store.con.execute("SELECT id, name, norm FROM entities WHERE norm IN (SELECT unnest(?)) ORDER BY id",
                                 [grams]).fetchall()
        by_norm: dict[str, list[tuple[int, str]]] = {}
        for i, name, norm in rows:
            by_norm.setdefault(norm, []).append((int(i), name))
        taken: list[str] = []
        for g in grams:  # longest first
            if g in by_norm and not any(f" {g} " in f" {t} " for t in taken):
                taken.append(g)
                links += [Link(i, name, g, "exact", 1.0) for i, name in by_norm[g]]
    if mode == "fuzzy" or (mode == "auto" and not links):
        words = sorted({w for w in normalize_name(question).split() if len(w) >= 3})
        if words and grams:
            rows = store.con.execute("""
                WITH q AS (SELECT unnest(?) AS gram), cand AS (
                    SELECT DISTINCT e.id, e.name, e.norm FROM tokens tk JOIN entities e ON e.id = tk.id
                    WHERE tk.token IN (SELECT unnest(?)))
                SELECT id, name, gram, jaro_winkler_similarity(norm, gram) AS s FROM cand, q
                WHERE len(string_split(norm, ' ')) = len(string_split(gram, ' '))
                  AND jaro_winkler_similarity(norm, gram) >= ?
                ORDER BY s DESC, id LIMIT ?""", [grams, words, float(threshold), int(max_fuzzy) * 4]).fetchall()
            seen = {lk.id for lk in links}
            for i, name, gram, s in rows:
                if int(i) not in seen and len(seen) < len(links) + max_fuzzy:
                    seen.add(int(i))
                    links.append(Link(int(i), name, gram, "fuzzy", round(float(s), 4)))
    return links
