"""Questions of the general task, with their answers computed from a :class:`~.facts.FactStore`.

Kinds (:data:`KINDS`), each phrased from the schema's phrases (:data:`~.facts.RELATIONS`):

* ``1-hop``: one fact, asked forward ("Where was Marie Curie born?" -> every ``t`` with
  ``(Marie Curie, born_in, t)``) or backward ("Who discovered radium?" -> every ``h`` with
  ``(h, discovered, radium)``);
* ``2-hop``: a chain through a noun phrase ("In which country is the birthplace of Marie Curie?"
  -> every ``c`` with ``(Marie Curie, born_in, b)`` and ``(b, located_in, c)``);
* ``which``: "which X ... Y" - the answers of one relation filtered by a second one ("Which element
  named after Poland did Marie Curie discover?" -> every ``a`` with ``(Marie Curie, discovered, a)`` and
  ``(a, named_after, Poland)``), asked only when the filter removes at least one candidate;
* ``closed-loop``: a ``which`` question whose two named entities are themselves joined by a fact
  (Marie Curie is a citizen of Poland), so the answer closes a loop - a 2-cell of the lifted graph;
* ``comparison``: two entities compared on a number the store holds ("Who was born first, A or B?",
  "Which city has the larger population, A or B?") -> the entity, not the number.

Every question has ``answers`` (all entities that satisfy it in the store), ``support`` (the entities
its reasoning path visits) and ``kind``; the training target names up to :data:`MAX_TARGETS` answers.
Questions whose answers are more than :data:`MAX_ANSWERS` are not asked (no one lists 40 places).
A share of questions is written the way WebQSP's are: lower case, no question mark.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .facts import RELATIONS, TYPE_NAMES, FactStore

KINDS = ("1-hop", "2-hop", "which", "closed-loop", "comparison")
MAX_ANSWERS = 4
MAX_TARGETS = 3
LOWER_SHARE = 0.3  # questions written like WebQSP's: "who was richard nixon married to"


@dataclass
class Question:
    """One generated question with its answers from the fact store."""

    question: str
    answers: list[str]
    kind: str
    support: list[str] = field(default_factory=list)

    @property
    def target(self) -> str:
        """The training target: the answers (at most :data:`MAX_TARGETS`), comma-separated."""
        return ", ".join(self.answers[:MAX_TARGETS])


def _type_word(fs: FactStore, e: str) -> str:
    return TYPE_NAMES.get(fs.types.get(e, ""), ("entity", ""))[0]


def _phrase(rng: np.random.Generator, options) -> str:
    return str(options[int(rng.integers(len(options)))])


def _finish(rng: np.random.Generator, q: str) -> str:
    q = q[0].upper() + q[1:]
    if rng.random() < LOWER_SHARE:
        return q.rstrip("?").lower()
    return q if q.endswith("?") else q + "?"


def _usable(answers: list[str]) -> bool:
    return 0 < len(answers) <= MAX_ANSWERS


class QuestionMaker:
    """Draws questions of each kind from one fact store (``None`` when the store has none of a kind)."""

    def __init__(self, fs: FactStore, rng: np.random.Generator, anchors: list[str] | None = None) -> None:
        self.fs, self.rng = fs, rng
        self.anchors = set(anchors) if anchors else None  # questions must start from one of these entities
        self.asked = [f for f in fs.facts if f[1] in RELATIONS and (RELATIONS[f[1]].ask or RELATIONS[f[1]].ask_inv)]

    def _ok(self, e: str) -> bool:
        return self.anchors is None or e in self.anchors

    def _draw(self, items: list):
        return items[int(self.rng.integers(len(items)))] if items else None

    def one_hop(self) -> Question | None:
        fs, rng = self.fs, self.rng
        cands = [(f, fwd) for f in self.asked for fwd in (True, False)
                 if (RELATIONS[f[1]].ask if fwd else RELATIONS[f[1]].ask_inv) and self._ok(f[0] if fwd else f[2])]
        for _ in range(8):
            pick = self._draw(cands)
            if pick is None:
                return None
            (h, k, t), fwd = pick
            rel = RELATIONS[k]
            answers = fs.tails(h, k) if fwd else fs.heads(k, t)
            if _usable(answers):
                q = _phrase(rng, rel.ask).format(h=h) if fwd else _phrase(rng, rel.ask_inv).format(t=t)
                return Question(_finish(rng, q), answers, "1-hop", [h if fwd else t, *answers])
        return None

    def two_hop(self) -> Question | None:
        """``noun(r1, x)`` (a unique middle entity ``b``) then ``r2`` asked about it."""
        fs, rng = self.fs, self.rng
        firsts = []
        for h, k, t in fs.facts:
            rel = RELATIONS[k]
            if rel.of and self._ok(h) and len(fs.tails(h, k)) == 1:
                firsts.append((rel.of.format(h=h), h, t))
            if rel.of_inv and self._ok(t) and len(fs.heads(k, t)) == 1:
                firsts.append((rel.of_inv.format(t=t), t, h))
        for _ in range(12):
            pick = self._draw(firsts)
            if pick is None:
                return None
            noun, x, b = pick
            seconds = [(f, True) for f in self.asked if f[0] == b and RELATIONS[f[1]].ask and f[2] != x] + \
                [(f, False) for f in self.asked if f[2] == b and RELATIONS[f[1]].ask_inv and f[0] != x]
            sec = self._draw(seconds)
            if sec is None:
                continue
            (h, k, t), fwd = sec
            rel = RELATIONS[k]
            answers = [a for a in (fs.tails(b, k) if fwd else fs.heads(k, b)) if a != x]
            if _usable(answers):
                q = _phrase(rng, rel.ask).format(h=noun) if fwd else _phrase(rng, rel.ask_inv).format(t=noun)
                return Question(_finish(rng, q), answers, "2-hop", [x, b, *answers])
        return None

    def which(self, closed: bool) -> Question | None:
        """``a`` with ``(x, r1, a)`` and ``(a, r2, y)``, some other ``(x, r1, a')`` failing the filter;
        ``closed``: ``x`` and ``y`` joined by a fact (the answer closes a loop)."""
        fs, rng = self.fs, self.rng
        out = []
        for x, k1, a in fs.facts:
            r1 = RELATIONS[k1]
            if not r1.did or not self._ok(x):
                continue
            cands = fs.tails(x, k1)
            if len(cands) < 2:
                continue
            for _, k2, y in (f for f in fs.facts if f[0] == a and f[1] != k1 and RELATIONS[f[1]].that):
                answers = [c for c in cands if fs.has(c, k2, y)]
                if y == x or not _usable(answers) or len(answers) == len(cands):
                    continue
                if fs.linked(x, y) == closed:
                    out.append((x, k1, k2, y, answers))
        pick = self._draw(out)
        if pick is None:
            return None
        x, k1, k2, y, answers = pick
        r1, r2 = RELATIONS[k1], RELATIONS[k2]
        kind = _type_word(fs, answers[0])
        if rng.random() < 0.6:
            q = f"Which {kind} {r2.that.format(t=y)} {r1.did.format(h=x)}?"
        else:
            q = f"Which {kind} {r1.did.format(h=x)} that is {r2.that.format(t=y)}?"
        return Question(_finish(rng, q), answers, "closed-loop" if closed else "which", [x, y, *answers])

    def comparison(self) -> Question | None:
        fs, rng = self.fs, self.rng
        specs = (("date_of_birth", "Who was born first, {a} or {b}?", min),
                 ("date_of_birth", "Who is younger, {a} or {b}?", max),
                 ("inception", "Which was founded earlier, {a} or {b}?", min),
                 ("population", "Which city has the larger population, {a} or {b}?", max))
        for _ in range(6):
            key, template, best = specs[int(rng.integers(len(specs)))]
            have = [(h, float(t.replace(",", ""))) for h, k, t in fs.facts if k == key and self._ok(h)]
            if len(have) < 2:
                continue
            i, j = rng.choice(len(have), size=2, replace=False).tolist()
            (a, va), (b, vb) = have[i], have[j]
            if va == vb:
                continue
            win = best((va, a), (vb, b))[1]
            return Question(_finish(rng, template.format(a=a, b=b)), [win], "comparison", [a, b])
        return None

    def make(self, kind: str) -> Question | None:
        if kind == "1-hop":
            return self.one_hop()
        if kind == "2-hop":
            return self.two_hop()
        if kind in ("which", "closed-loop"):
            return self.which(closed=kind == "closed-loop")
        if kind == "comparison":
            return self.comparison()
        raise ValueError(f"unknown question kind {kind!r}; one of {', '.join(KINDS)}")


def make_questions(fs: FactStore, rng: np.random.Generator, per_kind: dict[str, int],
                   anchors: list[str] | None = None) -> list[Question]:
    """Up to ``per_kind[kind]`` distinct questions of each kind from ``fs`` (``anchors``: questions start
    at these entities, e.g. the seed of a k-hop cut, whose neighbourhood the graph holds whole)."""
    maker = QuestionMaker(fs, rng, anchors)
    out: list[Question] = []
    seen: set[str] = set()
    for kind, n in per_kind.items():
        got = 0
        for _ in range(3 * n):
            if got >= n:
                break
            q = maker.make(kind)
            if q is None:
                break
            if q.question.lower() not in seen:
                seen.add(q.question.lower())
                out.append(q)
                got += 1
    return out
