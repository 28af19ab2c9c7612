"""Mediator nodes: the unnamed nodes of a knowledge graph that join the parts of one fact.

Freebase writes an n-ary fact as a *compound value* (CVT) node with a machine id and no name:
"James K. Polk held the office of Governor of Tennessee from 1839 to 1841" is

    James K. Polk -government_positions_held-> m.04j60kc -office_position_or_title-> Governor of Tennessee
                                               m.04j60kc -from-> 1839, ...

so the answer is two edges from the topic entity but one fact away. WebQSP, CWQ and GrailQA graphs are full
of them (a third to three quarters of the nodes of the shared WebQSP subgraphs). Question answering over
Freebase therefore walks *through* a mediator as if its two edges were one relation. The seeded retrieval
(:mod:`.seeded`) does the same: a hop may pass one mediator, and pays the hop cost once.

A node is a mediator when its text is a machine id (:data:`MACHINE_ID`: ``m.0abc`` / ``g.11x...``); such a
node is never an answer's name either (:mod:`.candidates`). Graphs without machine ids (every generated
task, a user's CSV) have no mediators, and their retrieval is unchanged.
"""
from __future__ import annotations

import re

import numpy as np

MACHINE_ID = re.compile(r"^[mg]\.[0-9a-z_]{3,}$")


def is_machine_id(text: str) -> bool:
    """True for a Freebase machine id (``m.04j60kc``, ``g.11b60wv0n4``), the name of no entity."""
    return bool(MACHINE_ID.match(str(text).strip().lower()))


def mediator_mask(node_text) -> np.ndarray:
    """``(N,)`` bool: the nodes whose text is a machine id."""
    return np.fromiter((is_machine_id(t) for t in node_text), bool, count=len(node_text))
