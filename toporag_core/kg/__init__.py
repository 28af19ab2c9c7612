"""Knowledge graphs too big to lift whole: a DuckDB triple store, entity linking, k-hop extraction.

``KGStore.create(db, [files])`` imports triples; :func:`link_entities` finds the question's
entities (exact, then fuzzy); ``store.subgraph(ids, hops)`` cuts out the induced k-hop subgraph as a
:class:`~toporag_core.graph.TextualGraph`; :func:`retrieve_from_kg` does all three, then lifts,
embeds and retrieves on that subgraph. :func:`~.generate.generate_kg` writes a KG of any size.
"""
from __future__ import annotations

import time
from typing import Any

from .generate import generate_kg
from .link import LINK_MODES, Link, link_entities, with_seeds
from .store import KGStore, Neighbourhood, normalize_name


def question_subgraph(store: KGStore, question: str, hops: int = 2, link: str = "auto",
                      entities: list[str] | None = None, max_nodes: int | None = 50_000, progress=None):
    """``(links, neighbourhood)``: the linked entities (or the named ``entities``, matched exactly) and
    their ``hops``-hop induced subgraph. ``ValueError`` when nothing links. ``progress(fraction, message)``
    is called after linking and after each hop (fractions 0 .. 0.9; the induced triples are the rest)."""
    def step(frac: float, msg: str) -> None:
        if progress is not None:
            progress(frac, msg)

    step(0.0, "linking entities")
    if entities:
        ids = store.lookup(entities)
        if not ids:
            raise ValueError(f"no stored entity named {', '.join(map(repr, entities))}")
        links = [Link(i, n, n, "given", 1.0) for i, n in zip(ids, store.names(ids))]
    else:
        links = link_entities(store, question, mode=link)
        if not links:
            raise ValueError(f"no entity of the knowledge graph is mentioned in the question {question!r} "
                             f"(link mode {link!r}); name the entity explicitly "
                             "(--entity on the command line, 'Entities' in the app)")
    names = ", ".join(lk.name for lk in links[:5]) + (" ..." if len(links) > 5 else "")
    step(0.1, f"linked {len(links)} entit{'y' if len(links) == 1 else 'ies'} ({names}); expanding {hops} hop(s)")

    def hop(done: int, total: int, nodes: int) -> None:
        step(0.1 + 0.8 * done / max(total, 1), f"hop {done} of {total}: {nodes:,} entities")
    nb = store.subgraph([lk.id for lk in links], hops=hops, max_nodes=max_nodes, progress=hop)
    step(1.0, f"{nb.graph.num_nodes:,} entities, {nb.graph.num_edges:,} triples")
    return links, nb


def retrieve_from_kg(store: KGStore, question: str, encoder, hops: int = 2, link: str = "auto",
                     entities: list[str] | None = None, setting=None, max_nodes: int | None = 50_000,
                     progress=None) -> dict[str, Any]:
    """Link, extract, lift, embed and retrieve. ``progress(fraction, message)`` is called between steps
    (the app's progress bar). Returns ``links``, ``neighbourhood``, ``ecx``, ``subcomplex``, ``timings``."""
    from ..retrieval import EmbeddedComplex, retrieve

    def step(frac: float, msg: str) -> None:
        if progress is not None:
            progress(frac, msg)

    t = {"start": time.perf_counter()}
    step(0.0, "linking entities")
    links, nb = question_subgraph(store, question, hops, link, entities, max_nodes,
                                  progress=lambda f, m: step(0.3 * f, m))
    t["extract"] = time.perf_counter()
    step(0.3, f"lifting and embedding {nb.graph.num_nodes} nodes, {nb.graph.num_edges} triples")
    ecx = EmbeddedComplex.from_graph(nb.graph, encoder)
    t["embed"] = time.perf_counter()
    step(0.8, "retrieving")
    if setting is not None:
        setting = with_seeds(setting, links)  # a seeded method starts from the linked entities themselves
    sub = retrieve(ecx, question, setting=setting)
    t["retrieve"] = time.perf_counter()
    step(1.0, "done")
    timings = {"extract": t["extract"] - t["start"], "lift_embed": t["embed"] - t["extract"],
               "retrieve": t["retrieve"] - t["embed"]}
    return {"links": links, "neighbourhood": nb, "ecx": ecx, "subcomplex": sub, "timings": timings}


__all__ = ["KGStore", "Neighbourhood", "Link", "LINK_MODES", "link_entities", "normalize_name", "generate_kg",
           "question_subgraph", "retrieve_from_kg"]
