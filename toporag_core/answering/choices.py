"""What a question on a graph is answered from, decided once for every surface.

* :func:`answer_choices` - the closed answer set to score, or ``None`` for an open answer: the
  checkpoint's own rule (:meth:`~.pipeline.TopoRAGPipeline.choices_for`: its ``answer_set``, else
  yes / no for a polar question), else the graph's task's label set when the question is the
  example's own (an ExplaGraphs row asked its benchmark question is exactly one of support /
  counter, even with the frozen LLM or an open-answer checkpoint).
* :func:`retrieval_query` - the text to retrieve with when it is not the question: an ExplaGraphs
  row asked its own question retrieves with both arguments, as its training examples were prepared.

``toporag ask``, the Ask page and the service's callers read these, so the same graph and question
are scored over the same labels everywhere.
"""
from __future__ import annotations

from ..tasks import TASKS, task_of_graph
from .route import own_question


def answer_choices(pipe, graph, question: str) -> tuple[str, ...] | None:
    """The closed answer set ``pipe`` scores for ``question`` on ``graph`` (``None``: open answer)."""
    choices = pipe.choices_for(question)
    name = task_of_graph(graph)
    if choices is None and name is not None and own_question(graph, question) and TASKS[name].answer_set:
        choices = tuple(TASKS[name].answer_set)
    return choices


def retrieval_query(graph, question: str) -> str | None:
    """The text to retrieve with, when it is not the question itself: for an ExplaGraphs row asked
    its own benchmark question, both arguments."""
    m = graph.meta
    if m.get("arg1") and m.get("arg2") and question.strip() == str(m.get("question", "")).strip():
        return f"{m['arg1']} {m['arg2']}"
    return None
