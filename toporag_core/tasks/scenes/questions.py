"""Questions about generated scenes, each tagged with the cell dimension it needs.

* ``0-cell`` (one object's attributes): "What colour is the mug?", "What is the wooden cup
  made of?", "Is the lamp red?". The object is named so that it is unique in the scene.
* ``1-cell`` (relations): one hop "What is on the table?", two hops "What is on the table
  that is to the left of the lamp?", and "Is the cup to the left of the plate?". Every
  referent and every answer is unique.
* ``2-cell`` (a closed loop): "The cup is on the table, the table is behind the chair, and the
  chair is in front of the cup: are the cup and the chair made of the same material?" The
  loop (3 or 4 objects, distinct names, each consecutive pair related in the graph) has
  exactly one match in the scene. Loops are preferred where the *open path* (the loop without
  its closing relation) matches several object tuples with different answers, so the answer
  really needs the whole cycle; :func:`loop_need` measures this.

Yes/no questions alternate their target answer per template, so yes and no are balanced.
Support = answer-bearing object ids (for a loop: the loop's objects in loop order).
"""
from __future__ import annotations

from collections import defaultdict
from itertools import permutations

import numpy as np

from .vocab import COLOURS, INVERSE, MATERIALS

COLUMNS = ["q_id", "image_id", "question", "answer", "full_answer", "type", "support"]
# a relation a "no" question asks instead of the true one: geometrically impossible for the pair
_CONTRADICT = {**INVERSE, "next to": "above"}


class _Scene:
    """Lookup tables over one GQA scene dict (names, colour, material, relation of each pair)."""

    def __init__(self, scene: dict) -> None:
        objs = scene["objects"]
        self.ids = list(objs)
        self.name = {o: objs[o]["name"] for o in self.ids}
        self.attrs = {o: list(objs[o]["attributes"]) for o in self.ids}
        self.colour = {o: next((a for a in self.attrs[o] if a in COLOURS), None) for o in self.ids}
        self.material = {o: next((a for a in self.attrs[o] if a in MATERIALS), None) for o in self.ids}
        self.rel: dict[tuple[str, str], str] = {}
        self.into: dict[tuple[str, str], list[str]] = defaultdict(list)  # (relation, b) -> [a: a rel b]
        for a in self.ids:
            for r in objs[a]["relations"]:
                self.rel[(a, r["object"])] = r["name"]
                self.into[(r["name"], r["object"])].append(a)
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for o in self.ids:
            self.by_name[self.name[o]].append(o)
        self.nbrs: dict[str, set[str]] = defaultdict(set)
        for a, b in self.rel:
            self.nbrs[a].add(b)
            self.nbrs[b].add(a)

    def ref(self, o: str, avoid: str | None = None) -> str | None:
        """A phrase naming ``o`` uniquely: "the cup" or "the red cup"; ``None`` if there is none.
        ``avoid`` ("colour"/"material") keeps the asked attribute out of the phrase."""
        same = self.by_name[self.name[o]]
        if len(same) == 1:
            return f"the {self.name[o]}"
        for kind in ("material", "colour"):
            word = getattr(self, kind)[o]
            if kind != avoid and word and sum(word in self.attrs[s] for s in same) == 1:
                return f"the {word} {self.name[o]}"
        return None

    def loop_matches(self, names: list[str], rels: list[str], closed: bool = True) -> list[tuple[str, ...]]:
        """All injective object tuples with these names where ``t[i] rels[i] t[i+1]`` (and the closing one)."""
        k, out = len(names), []

        def extend(prefix: list[str]) -> None:
            i = len(prefix)
            if i == k:
                if not closed or self.rel.get((prefix[-1], prefix[0])) == rels[-1]:
                    out.append(tuple(prefix))
                return
            for c in self.by_name[names[i]]:
                if c not in prefix and (i == 0 or self.rel.get((prefix[-1], c)) == rels[i - 1]):
                    extend(prefix + [c])

        extend([])
        return out

    def cycles(self, max_len: int = 4) -> list[tuple[str, ...]]:
        """Simple cycles of 3..``max_len`` objects with distinct names, each listed once."""
        pos = {o: i for i, o in enumerate(self.ids)}
        out = []
        for u in self.ids:
            stack = [(u, (u,))]
            while stack:
                v, path = stack.pop()
                for w in sorted(self.nbrs[v], key=pos.get):
                    if w == u and len(path) >= 3 and pos[path[1]] < pos[path[-1]]:
                        out.append(path)
                    elif pos[w] > pos[u] and w not in path and len(path) < max_len:
                        stack.append((w, path + (w,)))
        return [c for c in out if len({self.name[o] for o in c}) == len(c)]


def loop_need(sc: _Scene, loop: tuple[str, ...], answer_of) -> int:
    """How much the closing relation matters: 2 = the open path's matches disagree on the
    answer, 1 = the open path matches several tuples (same answer), 0 = it alone identifies the loop."""
    names = [sc.name[o] for o in loop]
    rels = [sc.rel[(loop[i], loop[(i + 1) % len(loop)])] for i in range(len(loop))]
    path = sc.loop_matches(names, rels, closed=False)
    if len(path) <= 1:
        return 0
    return 2 if len({answer_of(t) for t in path}) > 1 else 1


def _loop_text(sc: _Scene, loop: tuple[str, ...]) -> str:
    parts = [f"the {sc.name[loop[i]]} is {sc.rel[(loop[i], loop[(i + 1) % len(loop)])]} "
             f"the {sc.name[loop[(i + 1) % len(loop)]]}" for i in range(len(loop))]
    text = ", ".join(parts[:-1]) + ", and " + parts[-1]
    return text[0].upper() + text[1:]


class QuestionMaker:
    """Draws questions scene by scene; yes/no targets alternate per template across scenes."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.want_yes: dict[str, bool] = defaultdict(lambda: True)

    def _yes(self, template: str) -> bool:
        v = self.want_yes[template]
        self.want_yes[template] = not v
        return v

    def _pick(self, items: list):
        return items[int(self.rng.integers(len(items)))] if items else None

    # ---------------------------------------------------------------- 0-cells
    def cell0(self, sc: _Scene, template: str):
        if template == "colour":
            cands = [(o, sc.ref(o, "colour")) for o in sc.ids if sc.colour[o]]
            o, ref = self._pick([c for c in cands if c[1]]) or (None, None)
            return o and (f"What colour is {ref}?", sc.colour[o], f"{ref.capitalize()} is {sc.colour[o]}.", [o])
        if template == "material":
            cands = [(o, sc.ref(o, "material")) for o in sc.ids if sc.material[o]]
            o, ref = self._pick([c for c in cands if c[1]]) or (None, None)
            return o and (f"What is {ref} made of?", sc.material[o],
                          f"{ref.capitalize()} is made of {sc.material[o]}.", [o])
        cands = [(o, sc.ref(o, "colour")) for o in sc.ids if sc.colour[o]]
        o, ref = self._pick([c for c in cands if c[1]]) or (None, None)
        if o is None:
            return None
        yes = self._yes(template)
        asked = sc.colour[o] if yes else str(self.rng.choice([c for c in COLOURS if c != sc.colour[o]]))
        full = f"Yes, {ref} is {asked}." if yes else f"No, {ref} is {sc.colour[o]}."
        return f"Is {ref} {asked}?", "yes" if yes else "no", full, [o]

    # ---------------------------------------------------------------- 1-cells
    def cell1(self, sc: _Scene, template: str):
        if template == "one-hop":
            cands = [(hits[0], r, b) for (r, b), hits in sc.into.items() if len(hits) == 1 and sc.ref(b)]
            c = self._pick(sorted(cands))
            if c is None:
                return None
            a, r, b = c
            return (f"What is {r} {sc.ref(b)}?", sc.name[a],
                    f"The {sc.name[a]} is {r} {sc.ref(b)}.", [a, b])
        if template == "two-hop":
            cands = []
            for (r2, l_), ts in sc.into.items():
                if not sc.ref(l_):
                    continue
                for t in ts:
                    if sum(sc.name[s] == sc.name[t] for s in ts) != 1:
                        continue  # "the table that is left of the lamp" must be one table
                    for (r1, t2), hits in sc.into.items():
                        if t2 == t and len(hits) == 1 and hits[0] != l_:
                            cands.append((hits[0], r1, t, r2, l_))
            c = self._pick(sorted(cands))
            if c is None:
                return None
            a, r1, t, r2, l_ = c
            return (f"What is {r1} the {sc.name[t]} that is {r2} {sc.ref(l_)}?", sc.name[a],
                    f"The {sc.name[a]} is {r1} the {sc.name[t]}.", [a, t, l_])
        pairs = sorted((a, b) for (a, b) in sc.rel if sc.ref(a) and sc.ref(b))
        c = self._pick(pairs)
        if c is None:
            return None
        a, b = c
        yes = self._yes(template)
        true = sc.rel[(a, b)]
        asked = true if yes else _CONTRADICT[true]
        ra, rb = sc.ref(a), sc.ref(b)
        full = f"Yes, {ra} is {asked} {rb}." if yes else f"No, {ra} is {true} {rb}."
        return f"Is {ra} {asked} {rb}?", "yes" if yes else "no", full, [a, b]

    # ---------------------------------------------------------------- 2-cells
    def cell2(self, sc: _Scene, template: str, cycles: list[tuple[str, ...]]):
        """A closed-loop question; the loop with the highest :func:`loop_need` wins (ties: random)."""
        best, best_need = [], -1
        want = self._yes(template) if template in ("same-material", "same-colour") else None
        for loop in cycles:
            names = [sc.name[o] for o in loop]
            rels = [sc.rel[(loop[i], loop[(i + 1) % len(loop)])] for i in range(len(loop))]
            if len(sc.loop_matches(names, rels)) != 1:
                continue
            for i, j in permutations(range(len(loop)), 2):
                if template in ("colour", "material") and j != (i + 1) % len(loop):
                    continue  # open questions ask about one object: use i only, once
                attr = sc.material if template in ("same-material", "material") else sc.colour
                if attr[loop[i]] is None or attr[loop[j]] is None or (want is not None and i > j):
                    continue
                if want is not None and (attr[loop[i]] == attr[loop[j]]) != want:
                    continue
                fn = (lambda t, i=i, j=j: attr[t[i]] == attr[t[j]]) if want is not None else \
                    (lambda t, i=i: attr[t[i]])
                need = loop_need(sc, loop, fn)
                if need > best_need:
                    best, best_need = [], need
                if need == best_need:
                    best.append((loop, i, j))
        c = self._pick(best)
        if c is None:
            if want is not None:
                self.want_yes[template] = want  # not produced: keep the target for the next scene
            return None
        loop, i, j = c
        stmt = _loop_text(sc, loop)
        ni, nj = sc.name[loop[i]], sc.name[loop[j]]
        if template == "same-material":
            q = f"{stmt}: are the {ni} and the {nj} made of the same material?"
            ans = "yes" if want else "no"
            full = (f"{'Yes' if want else 'No'}, the {ni} is {sc.material[loop[i]]} "
                    f"and the {nj} is {sc.material[loop[j]]}.")
        elif template == "same-colour":
            q = f"{stmt}: are the {ni} and the {nj} the same colour?"
            ans = "yes" if want else "no"
            full = f"{'Yes' if want else 'No'}, the {ni} is {sc.colour[loop[i]]} and the {nj} is {sc.colour[loop[j]]}."
        elif template == "colour":
            q, ans = f"{stmt}: what colour is the {ni}?", sc.colour[loop[i]]
            full = f"The {ni} is {ans}."
        else:
            q, ans = f"{stmt}: what is the {ni} made of?", sc.material[loop[i]]
            full = f"The {ni} is made of {ans}."
        return q, ans, full, list(loop)


TEMPLATES = {"0-cell": ("colour", "material", "is-colour"),
             "1-cell": ("one-hop", "two-hop", "is-rel"),
             "2-cell": ("same-material", "colour", "same-colour", "material")}


def question_template(question: str, qtype: str | None) -> str | None:
    """Which template of :data:`TEMPLATES` wrote ``question`` (of type ``qtype``), read back from its
    wording; ``None`` for a question no template writes (real GQA questions). Accepts the prompt form
    ``"Question: ...\nAnswer:"`` too, so predictions files can be split per template.

    One classifier next to the templates, so per-template accuracy needs no extra column in the
    GQA-format ``questions.csv``."""
    q = question.strip()
    if q.startswith("Question:"):
        q = q[len("Question:"):].split("\nAnswer:", 1)[0].strip()
    if qtype == "0-cell":
        if q.startswith("What colour is "):
            return "colour"
        if q.startswith("What is ") and q.endswith(" made of?"):
            return "material"
        return "is-colour" if q.startswith("Is ") else None
    if qtype == "1-cell":
        if q.startswith("Is "):
            return "is-rel"
        if q.startswith("What is "):
            return "two-hop" if " that is " in q else "one-hop"
        return None
    if qtype == "2-cell":
        if ": " not in q:
            return None
        tail = q.rsplit(": ", 1)[1]
        if tail.endswith("made of the same material?"):
            return "same-material"
        if tail.endswith("the same colour?"):
            return "same-colour"
        if tail.startswith("what colour is "):
            return "colour"
        return "material" if tail.startswith("what is ") and tail.endswith(" made of?") else None
    return None


def generate_questions(scenes: dict[str, dict], seed: int = 0, per_type: int = 5) -> list[dict]:
    """Up to ``per_type`` questions of each type per scene (duplicates dropped), as CSV rows.

    Returns:
        dicts with :data:`COLUMNS`; ``support`` joins object ids with ``;``.
    """
    maker = QuestionMaker(seed)
    rows: list[dict] = []
    for image_id, scene in scenes.items():
        sc = _Scene(scene)
        cycles = sc.cycles()
        seen: set[str] = set()
        for qtype, templates in TEMPLATES.items():
            start = int(maker.rng.integers(len(templates)))  # rotate so every template gets used
            made = 0
            for k in range(3 * per_type):
                if made == per_type:
                    break
                t = templates[(start + k) % len(templates)]
                q = (maker.cell0(sc, t) if qtype == "0-cell" else maker.cell1(sc, t) if qtype == "1-cell"
                     else maker.cell2(sc, t, cycles))
                if q and q[0] in seen and q[1] in ("yes", "no"):
                    maker.want_yes[t] = q[1] == "yes"  # dropped: ask for the same answer next time
                if not q or q[0] in seen:
                    continue
                seen.add(q[0])
                made += 1
                rows.append({"q_id": str(len(rows)), "image_id": image_id, "question": q[0], "answer": q[1],
                             "full_answer": q[2], "type": qtype, "support": ";".join(q[3])})
    return rows
