"""Answers from a knowledge-graph store: link -> k-hop subgraph -> retrieval -> answer.

``toporag kg ask`` and ``toporag kg eval`` (and the app's store source) go through :func:`ask_store`:

1. **link** the question's entities in the store (:func:`~.link.link_entities`; or the ``entities``
   given by name, e.g. a question file's ``topic``), with a hint when linking is weak
   (:func:`~.link.link_quality`);
2. cut the ``hops``-hop **subgraph** around them (:meth:`~.store.KGStore.subgraph`: nodes in the order a
   CSV export of it reads back, so the same subgraph answers alike in-process and from ``kg subgraph
   --out``);
3. **retrieve** with the pipeline's setting; a seeded method (a ``seeds`` parameter) starts from the linked
   entities themselves rather than from a re-linking of the question inside the subgraph;
4. **answer** with the pipeline (:meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.answer`: the name reader of
   the general checkpoint scores the subcomplex's entity names).

Question files (``toporag kg eval``) are read, answered and scored by :mod:`toporag_core.evaluation.kg_questions`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from . import question_subgraph
from .link import Link, link_quality, with_seeds
from .store import KGStore


@dataclass
class StoreAnswer:
    """One question answered on a store: the pipeline's answer (``reply``, an
    :class:`~toporag_core.answering.answer.Answer`), the entities linked (``links``), a hint when the
    linking was weak (else ``None``), the cut subgraph (``neighbourhood``) and its embedded complex
    (``ecx``), and ``kg_timings`` in seconds (``extract``, ``lift_embed``, ``answer``)."""

    reply: Any
    links: list[Link]
    hint: str | None
    neighbourhood: Any
    ecx: Any
    kg_timings: dict[str, float]


def ask_store(store: KGStore, pipe, question: str, setting=None, entities: Sequence[str] | None = None,
              link: str = "auto", hops: int = 2, max_nodes: int | None = 50_000, max_new_tokens: int | None = None
              ) -> StoreAnswer:
    """Link, cut, retrieve and answer (the module docstring)."""
    t0 = time.perf_counter()
    links, nb = question_subgraph(store, question, hops, link, list(entities or []) or None, max_nodes)
    t1 = time.perf_counter()
    ecx = pipe.prepare(nb.graph)
    t2 = time.perf_counter()
    setting = with_seeds(setting or pipe.default_setting(), links)
    reply = pipe.answer(ecx, question, setting, max_new_tokens=max_new_tokens)
    return StoreAnswer(reply, list(links), None if entities else link_quality(links), nb, ecx,
                       {"extract": t1 - t0, "lift_embed": t2 - t1, "answer": time.perf_counter() - t2})


def links_json(links: Sequence[Link]) -> list[dict[str, Any]]:
    """Linked entities as JSON objects (``id, name, mention, how, score, weak, ambiguous``)."""
    return [{"id": lk.id, "name": lk.name, "mention": lk.mention, "how": lk.how, "score": lk.score,
             "weak": lk.weak, "ambiguous": lk.ambiguous} for lk in links]


def links_line(links: Sequence[Link]) -> str:
    """``linked: Tom Hanks (exact); Fall (exact, common word only); 3 entities named 'paris' (ambiguous)``."""
    parts: list[str] = []
    by_mention: dict[str, list[Link]] = {}
    for lk in links:
        by_mention.setdefault(lk.mention, []).append(lk)
    for mention, group in by_mention.items():
        lk = group[0]
        notes = [lk.how] + (["common word only"] if lk.weak else [])
        if len(group) > 1:
            parts.append(f"{len(group)} entities named {mention!r} ({', '.join(notes)}, ambiguous: "
                         + ", ".join(g.name for g in group[:4]) + (" ..." if len(group) > 4 else "") + ")")
        else:
            parts.append(f"{lk.name} ({', '.join(notes)})")
    return "linked: " + "; ".join(parts)
