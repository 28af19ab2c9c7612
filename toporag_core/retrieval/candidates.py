"""The names an open knowledge-graph answer is chosen from: the retrieved nodes the reader can see.

An open question over a knowledge graph ("Who directed the films of Tom Hanks?") is answered with
entity names, so a reader that *scores names* (:func:`~toporag_core.model.decode.score_names`)
needs the candidates: the retrieved 0-cells whose lines reached the LLM's context (not dropped by the
token budget), best prize first, each name once (by normalised text). Left out:

* the **topic entities** (the nodes the question names: the seeds of :mod:`.seeded`, else
  :func:`~.seeds.link_nodes`), which a reader otherwise likes to repeat ("which films share the actor of
  Mister Lonely" -> "Mister Lonely"); unless the question asks to choose among them ("X or Y"), when
  the topic entities are the only candidates;
* machine identifiers (Freebase ``m.0abc`` / ``g.11x...``) and long descriptions (more than
  :data:`MAX_WORDS` words), which are never an answer's name.
"""
from __future__ import annotations

import re

import numpy as np

from .mediators import is_machine_id
from .result import Subcomplex
from .seeds import link_nodes, norm, relation_words

MAX_WORDS = 10
MAX_NAMES = 24
CHOICE = re.compile(r"\bor\b", re.I)


def topic_nodes(sub: Subcomplex, question: str) -> np.ndarray:
    """The node ids the question names: the retrieval's seeds when it had any, else linked by name."""
    seeds = sub.params.get("seeds")
    if seeds:
        return np.asarray(seeds, np.int64)
    g = sub.complex.graph
    return link_nodes(g.node_text, question, relations=relation_words(g.edge_text))[0]


def _best_per_name(sub: Subcomplex, score: np.ndarray, names: tuple[str, ...]) -> dict[str, float]:
    """The best ``score`` of the subcomplex's nodes of each normalised name."""
    text = sub.complex.graph.node_text
    best: dict[str, float] = {}
    for i in sub.nodes.tolist():
        k = norm(text[i])
        best[k] = max(best.get(k, -np.inf), float(score[i]))
    return best


def candidate_match(sub: Subcomplex, names: tuple[str, ...]) -> tuple[float, ...] | None:
    """Each candidate's relation-path match (:attr:`~.result.Subcomplex.path_match`, :mod:`.path_match`: the
    cosine of the question with the relations that lead to it; -1 when none does), or ``None`` when the
    method computes none."""
    if sub.path_match is None or not names:
        return None
    best = _best_per_name(sub, sub.path_match, names)
    return tuple(max(best.get(norm(n), -1.0), -1.0) for n in names)


def candidate_priors(sub: Subcomplex, names: tuple[str, ...], match_weight: float = 0.0
                     ) -> tuple[float, ...] | None:
    """Each candidate's retrieval score, or ``None`` when the method scores no nodes: its node score
    (:attr:`~.result.Subcomplex.node_scores`: the seeded method's relation-path score, a log-weight <= 0;
    the best node of that name) plus ``match_weight x`` its :func:`candidate_match`. The name reader adds
    ``path_weight x`` this to the model's log-likelihoods: a name the question's relations lead to is more
    likely the answer, and the match term lets the end of a two-relation path beat the bridge entity on
    its way (docs/results/kg.md)."""
    if sub.node_scores is None or not names:
        return None
    best = _best_per_name(sub, sub.node_scores, names)
    floor = min((v for v in best.values() if v > -1e8), default=0.0) - 1.0  # unreachable: below every reached one
    out = np.asarray([max(best.get(norm(n), floor), floor) for n in names])
    match = candidate_match(sub, names) if match_weight else None
    if match is not None:
        out = out + match_weight * np.asarray(match)
    return tuple(float(x) for x in out)


def answer_candidates(sub: Subcomplex, question: str, dropped_nodes=(), max_names: int = MAX_NAMES
                      ) -> tuple[str, ...]:
    """Candidate answer names of ``sub`` for ``question`` (the module docstring), best prize first."""
    text = sub.complex.graph.node_text
    nodes = np.setdiff1d(sub.nodes, np.asarray(list(dropped_nodes), np.int64))
    topic = topic_nodes(sub, question)
    if topic.size >= 2 and CHOICE.search(question):
        nodes = np.intersect1d(nodes, topic)
    else:
        nodes = np.setdiff1d(nodes, topic)
    if nodes.size == 0:
        return ()
    prize = sub.prizes[0][nodes]
    order = nodes[np.lexsort((nodes, -prize))]
    out: list[str] = []
    seen: set[str] = set()
    for i in order.tolist():
        name = str(text[i]).strip()
        key = norm(name)
        if not key or key in seen or is_machine_id(name) or len(key.split()) > MAX_WORDS:
            continue
        seen.add(key)
        out.append(name)
        if len(out) >= max_names:
            break
    return tuple(out)
