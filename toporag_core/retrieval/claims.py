"""Grounded evidence: whether each claim an evidence-first answer wrote is a fact of the context it read.

An evidence-first checkpoint (``answer_style="evidence"`` / ``"cited"``) writes a sentence before its
yes / no and scores the labels after it: ``"The leather chair is orange. Answer: yes"``. The sentence
is the model's own reading of the retrieved subcomplex, and when the context does not hold it, the
label that follows rests on nothing. On the scene checkpoint's first 300 validation questions, 24 of
the 31 wrong yes / no answers wrote such a claim, against 16 of the 83 right ones (a right answer by
luck: "Is the wooden lamp orange?" -> "The wooden lamp is pink. Answer: no" for a lamp the context
calls brown), where the label's probability separated them far less (docs/results/confidence.md).

A claim is one clause of the evidence (split at ``and`` / ``;``), read as lower-case words with the
function words :data:`FUNCTION_WORDS` left out. It is **supported** when the compact context spells it:

* **a node fact**: one node line ``chair [3]: brown, leather`` holds every word of the clause, the
  node's name among them (``"The leather chair is brown"``);
* **a relation fact**: one relation line ``table [1] behind man [5]`` whose relation's words occur in the
  clause as one run (``... is behind the ...``), with the words before the run all in the head node's line
  (its name among them) and the words after it all in the tail node's line (``"The metal table is behind
  the red man"`` when ``table [1]: blue, metal`` and ``man [5]: red, standing``). The direction counts:
  ``man [5] in front of table [1]`` does not support ``"The table is in front of the man"``.

Only compact contexts are read (a ``nodes`` section, then a ``relations`` section whose lines name both
ends). Plain-name graphs (the built-in breakfast scene, knowledge graphs: ``cup has color red`` is a triple,
not a node line) are read too: a node's attribute values are the nodes it points to that point nowhere
(:class:`ContextFacts`). Any other context (the CSV format), or an answer with no evidence, gets ``None``:
nothing to check, never a flag; there the Ask page decides whether to show the model's sentence by the
looser rule of :func:`loosely_backed` (each content word in a retrieved fact with another of the sentence's
words).

**A generated answer the context does not state** (:func:`ungrounded_answer`). An open answer the model
generated ("What is the mug made of?" -> "plastic") is **grounded** when the compact context states it beside
a word of the question: a node line holds the answer's words and names a question word (``mug [3]: orange,
ceramic`` grounds "orange" for "What colour is the mug?"), or a relation line the question names (its content
words, or all its words when it has none, are question words: "to the left of", "on") joins a node that holds
the answer to a node the question names (``cabinet [2] to the left of shelf [0]`` grounds "cabinet" for "What
is to the left of the shelf?"), in either direction. "plastic" is not grounded when only the box next to the
mug is plastic. On the general checkpoint's generated (scene) validation answers, 36 of 74 wrong answers and 1
of 55 right ones were not grounded (docs/results/confidence.md). A count ("how many ...") or a context without
node lines is not checked (``None``). Pure string code, no torch, as :mod:`.citations`.
"""
from __future__ import annotations

import re

from .textualize import NODE_LINE

FUNCTION_WORDS = frozenset({"the", "a", "an", "is", "are", "was", "were", "of", "made", "and"})
STOP_WORDS = frozenset(  # the looser rule's and the yes / no claim terms' (studio/claim.py) stop words
    "a an the is are was were be been being am do does did done has have had having can could will would shall "
    "should may might must of in on at to for from by with as and or nor but not no yes any some there this that "
    "these those it its it's they them their he she his her him we you your i me my what which who whom whose "
    "where when why how than then so if into onto over under about also both either neither each every other "
    "another same such very more most less least one ones thing things kind sort".split())
_WORD = re.compile(r"[a-z0-9]+")
_CLAUSE_SEP = re.compile(r"\s*(?:;|\band\b)\s*", re.IGNORECASE)
_RELATION_LINE = re.compile(r"^(?P<head>.+?) \[(?P<h>\d+)\] (?P<rest>.+) \[(?P<t>\d+)\]$")


def words(text: str) -> list[str]:
    """Lower-case letter / digit runs of ``text``, in order."""
    return _WORD.findall(str(text).lower())


def _content(ws: list[str]) -> set[str]:
    return {w for w in ws if w not in FUNCTION_WORDS}


class ContextFacts:
    """The facts of one compact context: per node key its name words and all its words (name and details),
    and the relation lines as ``(head key, relation words, tail key)``.

    A node is keyed by its local index when its line has one (``cup [2]: red, metal``), else by its name
    (plain-name graphs: ``cup``); a plain relation line ``cup has color red`` is split at the longest node
    names that begin and end it. In a plain-name graph an attribute is a triple of its own, so a node's words
    also take in the names of the nodes it points to that point nowhere themselves (the values *red*,
    *ceramic* of ``cup has color red``, ``cup made of ceramic``): "The red cup is on the table" then reads as
    in a scene graph."""

    def __init__(self, context: str | None) -> None:
        self.names: dict[str, set[str]] = {}
        self.node_words: dict[str, set[str]] = {}
        self.relations: list[tuple[str, list[str], str]] = []
        spelled: dict[str, str] = {}  # node key -> its name's words, as a relation line ends with them
        plain: list[str] = []  # the plain node names, longest first (for splitting plain relation lines)
        section = None
        rows: list[str] = []
        for ln in (x.strip() for x in str(context or "").splitlines()):
            if ln in ("nodes", "relations") or ln.startswith("2-cells"):
                section = ln.split()[0]
                continue
            if not ln:
                continue
            m = NODE_LINE.match(ln) if section == "nodes" else None
            if m:
                key, name, attrs = m.group("index")[1:-1], m.group("name"), m.group("attrs") or ""
            elif section == "nodes":
                key, name, attrs = ln, ln, ""
                plain.append(ln)
            else:
                if section == "relations":
                    rows.append(ln)
                continue
            spelled[key] = " " + " ".join(words(name))
            self.names[key] = _content(words(name))
            self.node_words[key] = self.names[key] | _content(words(attrs))
        plain.sort(key=len, reverse=True)
        for ln in rows:
            fact = self._indexed(ln, spelled) or self._plain(ln, plain)
            if fact is not None:
                self.relations.append(fact)
        heads, plain_keys = {h for h, _, _ in self.relations}, set(plain)
        for h, _, t in self.relations:  # plain-name graphs: values (nodes that point nowhere) describe their head
            if h in plain_keys and t in plain_keys and t not in heads:
                self.node_words[h] = self.node_words[h] | self.names[t]

    def _indexed(self, ln: str, spelled: dict[str, str]) -> tuple[str, list[str], str] | None:
        m = _RELATION_LINE.match(ln)
        if not m or m.group("h") not in self.names or m.group("t") not in self.names:
            return None
        rest, tail = " " + " ".join(words(m.group("rest"))), spelled[m.group("t")]
        if not rest.endswith(tail) or not rest[: -len(tail)].strip():
            return None  # the line does not end with its tail node's name: not a line of this format
        return m.group("h"), rest[: -len(tail)].split(), m.group("t")

    @staticmethod
    def _plain(ln: str, plain: list[str]) -> tuple[str, list[str], str] | None:
        head = next((n for n in plain if ln.startswith(n + " ")), None)
        if head is None:
            return None
        rest = ln[len(head) + 1:]
        tail = next((n for n in plain if rest.endswith(" " + n) and len(rest) > len(n) + 1), None)
        if tail is None:
            return None
        rel = words(rest[: -len(tail) - 1])
        return (head, rel, tail) if rel else None

    @property
    def readable(self) -> bool:
        """Whether the context has compact node lines (indexed or plain names) to check claims against."""
        return bool(self.names)

    def _names_node(self, part: set[str], i: str) -> bool:
        return bool(part) and self.names[i] <= part <= self.node_words[i]

    def supports(self, claim: str) -> bool:
        """Whether one clause is a node fact or a relation fact of the context (module docstring)."""
        ws = words(claim)
        content = _content(ws)
        if any(self._names_node(content, i) for i in self.names):
            return True
        for h, rel, t in self.relations:
            n = len(rel)
            for k in range(1, len(ws) - n):
                if ws[k:k + n] == rel and self._names_node(_content(ws[:k]), h) \
                        and self._names_node(_content(ws[k + n:]), t):
                    return True
        return False


def content_words(text: str) -> list[str]:
    """Content words of ``text`` in order, lower-cased, punctuation dropped, a plural ``-s`` folded."""
    out = []
    for w in words(text):
        if w in STOP_WORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        out.append(w)
    return out


def loosely_backed(sentence: str, facts: list[str]) -> bool:
    """The looser rule for plain-name graphs: each content word of ``sentence``
    (:func:`content_words`: stop words out, plurals folded) occurs in one of ``facts``
    together with another of its words (a one-word sentence: in any fact). No content word: not backed."""
    ws = list(dict.fromkeys(content_words(sentence)))
    fact_words = [set(content_words(f)) for f in facts]
    if not ws:
        return False
    if len(ws) == 1:
        return any(ws[0] in fw for fw in fact_words)
    return all(any(w in fw and len(fw & set(ws)) >= 2 for fw in fact_words) for w in ws)


def claims(evidence: str | None) -> list[str]:
    """The clauses of an evidence sentence (split at ``and`` / ``;``, trailing full stop dropped)."""
    text = str(evidence or "").strip().rstrip(".").strip()
    return [c.strip() for c in _CLAUSE_SEP.split(text) if c.strip()] if text else []


def unsupported_claims(evidence: str | None, context: str | None) -> list[str] | None:
    """The claims of ``evidence`` that ``context`` does not spell (:meth:`ContextFacts.supports`): ``[]``
    when every claim is a fact of it; ``None`` when there is nothing to check (no evidence, or a context
    without compact node lines)."""
    parts = claims(evidence)
    if not parts:
        return None
    facts = ContextFacts(context)
    if not facts.readable:
        return None
    return [c for c in parts if not facts.supports(c)]


_COUNT = re.compile(r"^\s*how\s+(many|much)\b", re.IGNORECASE)


def ungrounded_answer(question: str, answer: str | None, context: str | None) -> list[str] | None:
    """``[answer]`` when ``context`` does not state the generated ``answer`` beside a word of ``question``
    (the module docstring's *grounded*), ``[]`` when it does; ``None`` when there is nothing to check: no
    answer words, no question words besides the answer's, a count, or a context without compact node lines."""
    text = str(answer or "").strip()
    a = _content(words(text)) - STOP_WORDS
    qw = words(question)
    q = {w for w in qw if w not in STOP_WORDS} - a
    if not a or not q or _COUNT.match(str(question)):
        return None
    facts = ContextFacts(context)
    if not facts.readable:
        return None
    if any(a <= facts.node_words[i] and facts.names[i] & q for i in facts.names):
        return []
    asked = set(qw)
    for h, rel, t in facts.relations:
        named = [w for w in rel if w not in STOP_WORDS] or rel
        if not set(named) <= asked:
            continue
        if (a <= facts.node_words[h] and facts.names[t] & q) or (a <= facts.node_words[t] and facts.names[h] & q):
            return []
    return [text]
