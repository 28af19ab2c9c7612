"""What an answer on the Ask page was asked with: the graph, the model, the question and the controls.

The page keeps its last answers with the :class:`AskInputs` they were computed from
(``session_state["ask_last"]["inputs"]``) and compares them with the current ones on every rerun:
another graph (:meth:`AskInputs.same_graph` false: graph key, spanning-tree method or seed changed)
hides the answers; another question, model or control keeps them on screen with a note that they
are out of date (the two are unequal). Measurements made later for an answer (what its graph tokens
did) use the LLM, question and token budget stored here, not the current widgets.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..retrieval import RetrievalSetting


@dataclass(frozen=True)
class AskInputs:
    """One press of **Ask**: equal inputs give the same answers."""

    graph_key: str                          # the loaded graph (``state.GRAPH_KEY``)
    tree: str                               # spanning-tree method of its lifting
    seed: int                               # and its seed
    checkpoint: str                         # the checkpoint picked (a route may answer with another)
    llm: str                                # the LLM folder / hub id typed
    question: str
    settings: tuple[RetrievalSetting, ...]  # one per method asked, in order
    max_new_tokens: int

    def same_graph(self, other: "AskInputs") -> bool:
        """Whether ``other`` was asked about the same lifted graph (graph, tree method, seed)."""
        return (self.graph_key, self.tree, self.seed) == (other.graph_key, other.tree, other.seed)
