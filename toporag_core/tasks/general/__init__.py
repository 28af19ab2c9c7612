"""General open questions over any textual graph: a fact store, question kinds, the ``general`` task.

* :mod:`.facts`: :class:`FactStore`, the relation schema (natural and Freebase texts) and world generation.
* :mod:`.questions`: 1-hop, 2-hop, "which X ... Y", closed-loop and comparison questions, answered from the store.
* :mod:`.dataset`: ``toporag data general`` (:func:`write_dataset`) and the registry loader (registers ``general``).
"""
from .facts import RELATIONS, STYLES, FactStore, make_world, relation_text
from .questions import KINDS, Question, make_questions
from .dataset import load_general, write_dataset  # registers the task

__all__ = ["RELATIONS", "STYLES", "FactStore", "make_world", "relation_text", "KINDS", "Question", "make_questions",
           "load_general", "write_dataset"]
