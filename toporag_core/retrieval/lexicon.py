"""Synonym groups: English words that name the same kind of relation in other words.

The word match (:mod:`.word_match`) counts a question word as naming a relation word when the two are forms of
one word ("acted" / "actors") or close MiniLM single-word vectors ("born" / "birth"). People ask about a
relation in words that are neither: "who *appeared* in X" for ``starred_actors``, "what *kind* of movie is X"
for ``has_genre``, "what words *describe* X" for ``has_tags``, "who is the *screenwriter* of X" for
``written_by``. MiniLM puts those pairs at 0.28-0.45, below unrelated pairs such as "films" / "actors" (0.64),
so no cosine threshold separates them (measured: docs/results/kg.md). Relation lexicons for question answering
over knowledge bases list such words per relation; this module is a small one, written for the relations
general knowledge graphs share (people, works, places, organisations), not for one graph:

    group(w) = { g : some form of a word of GROUPS[g] equals w or stem(w) }              (a bit set over groups)
             | group(t) for the tails t of a compound (>= 5 letters after >= 3: "screenwriter" -> "writer")
    same(q, w) = group(q) & group(w) != 0

Forms are compared exactly and by :func:`~.word_match.stem`, so each group lists the forms whose stems differ
("write", "wrote", "written", "writer"). A few words of the function-word list name relations here ("about",
"kind", "sort", "from": "where is X *from*" asks for a birthplace; "when" for a year or a date: "*when* was X
born" is ``date of birth``): they are question words only through this lexicon. "do" names an occupation only as
the question's last word ("what did X *do*", not "what *did* X write": :data:`FINAL_ONLY`). Words too common to
name one relation ("make", "have") are not listed; nor is "where", which asks for an employer or a school as
often as for a place ("where did X work"), measured: docs/results/kg.md.

Shapes: ``group_bits(words) -> (len(words),) int64``, at most 63 groups; the relation vocabulary's bits are
computed once per graph (:class:`~.word_match.RelationVocab`).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

GROUPS: dict[str, str] = {  # one group per kind of relation: the words that name it
    "write": "write writes wrote written writer writers writing author authors authored screenplay screenplays "
             "screenwriter screenwriters script scripts scripted penned",
    "direct": "direct directs directed director directors directing filmmaker filmmakers helmed",
    "perform": "act acts acted acting actor actors actress actresses star stars starred starring appear appears "
               "appeared appearing appearance appearances cast casts performer performers portray portrays "
               "portrayed plays played",
    "kind": "genre genres type types kind kinds sort sorts category categories style styles",
    "topic": "tag tags tagged describe describes described description about topic topics keyword keywords "
             "subject subjects theme themes",
    "release": "release releases released premiere premiered debut debuted",
    "language": "language languages spoken speak speaks tongue dialect dialects",
    "birth": "born birth birthplace hometown native origin from",
    "death": "died die dies death dead",
    "spouse": "married marry marries marriage spouse spouses wife wives husband husbands",
    "child": "child children son sons daughter daughters",
    "parent": "parent parents father fathers mother mothers",
    "sibling": "sibling siblings brother brothers sister sisters",
    "job": "profession professions occupation occupations job jobs career careers do does did",
    "nationality": "nationality nationalities citizen citizens citizenship",
    "education": "educated education school schools studied attended college colleges university universities",
    "currency": "currency currencies money",
    "invent": "invent invents invented inventor inventors invention inventions",
    "found": "founded founder founders establish established",
    "compose": "composed composer composers",
    "produce": "produced producer producers production",
    "award": "award awards won win wins prize prizes",
    "religion": "religion religions religious faith",
    "rating": "rating ratings rated",
    "located": "located location locations situated",
    "time": "when year years date dates",
}
FINAL_ONLY = frozenset({"do", "does", "did"})  # name their group only as the question's last word: "what did X do"
NAMES = tuple(GROUPS)
TAIL = 5  # letters of a compound's tail looked up on its own
HEAD = 3  # letters before that tail


@lru_cache(maxsize=4)
def _table(stem) -> dict[str, int]:
    """Every listed form and its stem -> the bit set of the groups that list it."""
    out: dict[str, int] = {}
    for g, text in enumerate(GROUPS.values()):
        for w in text.split():
            for key in (w, stem(w)):
                out[key] = out.get(key, 0) | (1 << g)
    return out


def group_bits(words, stem) -> np.ndarray:
    """``(len(words),)`` int64: the groups each word belongs to (by form, by ``stem``, or by a compound's tail);
    ``stem`` is the word match's own (passed in: this module holds data and lookups only)."""
    table = _table(stem)

    def bits(w: str) -> int:
        b = table.get(w, 0) | table.get(stem(w), 0)
        for i in range(HEAD, len(w) - TAIL + 1):
            t = w[i:]
            b |= table.get(t, 0) | table.get(stem(t), 0)
        return b

    return np.asarray([bits(str(w)) for w in words], np.int64)


def lexicon_words() -> frozenset[str]:
    """Every word the groups list."""
    return frozenset(w for text in GROUPS.values() for w in text.split())
