"""Which nodes of a graph a question names: the seeds of question-seeded retrieval.

A question about a knowledge graph names its topic entity ("Which films did **Tom Hanks** act
in?"); the answer is one or two relations away from it and does not resemble the question. So the
seeded retrieval (:mod:`.seeded`) starts from the named nodes. Linking is exact on normalised names
(lower case, punctuation removed, single spaces: :func:`norm`), over every word n-gram of the
question up to the longest node name, longest first:

* an n-gram inside a longer matched one is dropped ("marie curie" hides "curie");
* an n-gram made only of :data:`STOP_WORDS` (question words, articles, pronouns, common nouns of
  questions: "what", "film", "the story", "s") never links on its own, unless nothing else links and
  it is longer than one word: a film titled *What?* is not the topic of every "what" question;
* so does an n-gram made only of stop words and words of the graph's own relation names
  (:func:`relation_words`): in "who was vice president after kennedy died" the words *vice president*
  name what is asked (Freebase's ``vice_president``), not the topic, though an entity *Vice President*
  exists; likewise *President*, *Government*;
* names of one or two letters link only when nothing longer does;
* a span in square brackets names the topic outright, as MetaQA's question files mark it ("which films
  share the same actor of [Mister Lonely]"): when a bracketed span is a name, those spans are the only
  links (:func:`marked_spans`).

The same rules serve the DuckDB store's linker (:mod:`toporag_core.kg.link`), so a question links the
same entities in a store and in the subgraph cut from it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# Words that carry no entity on their own: question words, auxiliaries, pronouns, articles,
# prepositions, and the nouns that questions use for types and relations.
STOP_WORDS = frozenset("""
a an the of in on at to for from by with about into over after before under between and or not no nor
what which who whom whose where when why how is are was were be been being do does did done has have had
can could would should will shall may might must this that these those it its they them their there here
i me my we our you your he him his she her s t also than then so as if but all any some each every
other same many much more most one ones film films movie movies book books person people year years
name names story title play writer writers director directors actor actors genre language languages
song songs type types place places thing things kind city country born died written directed starred
release released share shares shared together fall go made make work works did
""".split())


def norm(text: str) -> str:
    """Lower case, every run of other characters than letters and digits to one space."""
    return " ".join(re.findall(r"[a-z0-9]+", str(text).lower()))


def is_stop(gram: str, relation_words: frozenset[str] = frozenset()) -> bool:
    """True when every word of the normalised n-gram is a stop word, one or two characters long, or one of
    ``relation_words``."""
    return all(w in STOP_WORDS or len(w) <= 2 or w in relation_words for w in gram.split())


def relation_words(relations) -> frozenset[str]:
    """The words of a graph's relation names (:func:`norm` of each, underscores and dots as spaces):
    ``"government.us_president.vice_president"`` -> government, us, president, vice."""
    return frozenset(w for r in set(relations) for w in norm(str(r).replace("_", " ")).split())


def ngrams(text: str, max_words: int) -> list[str]:
    """Every word n-gram of the normalised ``text`` with ``n <= max_words``, longest first, left to right."""
    words = norm(text).split()
    return [" ".join(words[i:i + n]) for n in range(min(max_words, len(words)), 0, -1)
            for i in range(len(words) - n + 1)]


_MARKED = re.compile(r"\[([^\[\]]+)\]")


def marked_spans(text: str) -> list[str]:
    """The normalised spans of ``text`` in square brackets, in order (MetaQA's topic markers)."""
    return list(dict.fromkeys(g for g in (norm(m) for m in _MARKED.findall(str(text))) if g))


@dataclass(frozen=True)
class Mention:
    """One linked span: the normalised n-gram and whether it passed the stop-word rule (``weak`` if not)."""

    gram: str
    weak: bool


def pick_mentions(grams: list[str], known, relation_words: frozenset[str] = frozenset()) -> list[Mention]:
    """The n-grams of ``grams`` (longest first) that are names in ``known`` (a container of normalised
    names), after the rules of the module docstring: contained matches dropped, matches made only of stop
    words and ``relation_words`` kept only when nothing else matched."""
    strong: list[str] = []
    weak: list[str] = []
    for g in grams:
        if g not in known or any(f" {g} " in f" {t} " for t in strong):
            continue
        (weak if is_stop(g, relation_words) else strong).append(g)
    if strong:
        return [Mention(g, False) for g in strong]
    longer = [g for g in weak if " " in g]
    return [Mention(g, True) for g in (longer or weak)[:1]]


def name_index(node_text: list[str]) -> tuple[dict[str, np.ndarray], int]:
    """``({normalised name: node ids (ascending)}, longest name in words)`` of a graph's nodes."""
    by: dict[str, list[int]] = {}
    longest = 1
    for i, t in enumerate(node_text):
        n = norm(t)
        if n:
            by.setdefault(n, []).append(i)
            longest = max(longest, n.count(" ") + 1)
    return {k: np.asarray(v, np.int64) for k, v in by.items()}, longest


def link_nodes(node_text: list[str], question: str, index=None, relations: frozenset[str] = frozenset()
               ) -> tuple[np.ndarray, list[Mention]]:
    """``(node ids (sorted), mentions)``: the nodes whose normalised text the question names.

    ``index``: a prebuilt :func:`name_index` of ``node_text`` (the retrieval keeps one per graph);
    ``relations``: the graph's :func:`relation_words`."""
    by, longest = index if index is not None else name_index(node_text)
    marked = [Mention(g, False) for g in marked_spans(question) if g in by]
    mentions = marked or pick_mentions(ngrams(question, longest), by, relations)
    if not mentions:
        return np.zeros(0, np.int64), []
    return np.unique(np.concatenate([by[m.gram] for m in mentions])), mentions
