"""Ask-page support: which model to load, loading it once per server, answering, and result tables.

* :func:`checkpoint_options` - the committed checkpoints (ExplaGraphs, SceneGraphs, General) that exist,
  plus "no checkpoint" (the frozen LLM alone); ``TOPORAG_CHECKPOINT`` picks the default
  (a folder, or ``none``), ``TOPORAG_LLM`` the default LLM (a folder or hub id).
* :func:`get_pipeline` - one :class:`~toporag_core.answering.pipeline.TopoRAGPipeline` per
  ``(checkpoint, llm, encoder)`` per server process (``st.cache_resource``). The pipeline is
  thread-safe (its neural part runs under a lock), so every browser tab shares it.
* :func:`ask` - one question, one or more retrieval methods, on an already embedded graph.
* Judging an answer: :func:`gold_for` (the example's gold answer, when the loaded graph has
  one for this question), :func:`judge` (the task's own metric), :func:`answer_in_context`
  (does the answer text occur in the retrieved context), ``Answer.label_probs`` (the
  pipeline's label likelihoods for a closed answer set, when it returns them).
* Checkpoint vs graph: :func:`checkpoint_task` (the ``dataset`` a checkpoint was trained on,
  read from its ``config.json`` without loading it), :func:`task_warning`,
  :func:`default_checkpoint` (the option trained on the graph's task, else the general checkpoint);
  which model answers a
  question is :func:`~toporag_core.answering.route.route`'s decision (re-exported here), and
  :func:`check_question_kind` refuses a label-set checkpoint a question of another kind.
* What the page says about an answer: :func:`answer_confidence` (its probability against the threshold
  calibrated on validation, "low confidence" with the runner-up answers, :mod:`.confidence`),
  :func:`gold_note` (no gold answer, and why),
  :func:`occurrence_note` (open answers only), :func:`evidence_heading` (evidence is not checked).
* Context budget: the pipeline fits every context to the model's input limit by prize
  (:meth:`~toporag_core.answering.pipeline.TopoRAGPipeline.fit_context`: 2-cells and the highest-prize
  cells kept); :func:`context_cut`, :func:`cut_message` and :func:`dropped_frame` tell the user
  what a cut dropped (the same for a remote core, which sends the cut with its answer).
* What the graph tokens did (:mod:`.graph_effect`): :func:`graph_effect` re-scores an answer (and its gold
  answer, :func:`gold_target`) with its own, zeroed and permuted graph tokens; :func:`explain_cells` adds the
  leave-one-cell-out changes (each cell out of its tokens and its text lines); :func:`attribution_note` says
  whether that attribution beat a random cell for the checkpoint (:mod:`.attribution`);
  :func:`token_text_note` says what the model's text leaves to its graph tokens. The page computes these
  only when asked (they cost more than the answer).
* Tables for the page: retrieved cells, timings; the prompt layout is :mod:`.prompt_layout`'s (re-exported).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import streamlit as st

from ..answering.answer import Answer
from ..answering.choices import answer_choices, retrieval_query  # noqa: F401  (re-exported for the page)
from ..answering.pipeline import TopoRAGPipeline
from ..model.llm import DEFAULT_LLM, default_llm  # noqa: F401  (re-exported for the pages)
from ..metrics import METRICS, is_correct, normalize
from ..retrieval import EmbeddedComplex, RetrievalSetting, Subcomplex, method_label
from ..tasks import task_of_graph  # noqa: F401  (re-exported for the page)
from ..answering.confidence import ConfidenceNote, confidence_note
from .graph_effect import CellEffect, GraphTokenEffect, answer_effect, attribute, cells_table, graph_token_effect
from .prompt_layout import context_part, prompt_layout_frame, prompt_text  # noqa: F401  (re-exported for the page)
from ..answering.route import (CHECKPOINT_ROOT, ZERO_SHOT, Route, asks_for_labels, auto_checkpoint,  # noqa: F401
                    checkpoint_info, committed_checkpoints, graph_task, label_question, own_question, route)

NO_CHECKPOINT = ZERO_SHOT
PACKAGED_LLM = DEFAULT_LLM
TIMING_STAGES = ("retrieve", "encode", "generate", "total")


def checkpoint_options() -> dict[str, str]:
    """``{value: label}`` in menu order: the env default first (when set), committed
    checkpoints that exist, then the frozen LLM alone. A value is a folder path or ``"none"``."""
    out: dict[str, str] = {}
    env = os.environ.get("TOPORAG_CHECKPOINT", "").strip()
    if env and env.lower() != NO_CHECKPOINT:
        out[env] = f"{Path(env).name} (TOPORAG_CHECKPOINT)"
    for folder, label in committed_checkpoints().items():
        out.setdefault(folder, label)
    out[NO_CHECKPOINT] = "No checkpoint: the frozen LLM alone (no soft prompt)"
    if env.lower() == NO_CHECKPOINT:  # the env asks for the frozen LLM: make it the default
        out = {NO_CHECKPOINT: out.pop(NO_CHECKPOINT), **out}
    return out


def load_pipeline(checkpoint: str, llm: str, encoder=None, device: str = "auto") -> TopoRAGPipeline:
    """Load a pipeline (uncached). ``checkpoint``: a folder or ``"none"``; ``llm``: the packaged
    name, a local folder or a hub id (for a checkpoint: ``""`` or the packaged name keeps the
    checkpoint's own LLM). Raises ``FileNotFoundError`` / ``ValueError`` with a clear message."""
    from ..model.llm import load_llm
    from ..model import TopoRAGConfig, TopoRAGModel

    llm = (llm or "").strip()
    if checkpoint == NO_CHECKPOINT:
        model_llm, tok = load_llm(None if llm in ("", PACKAGED_LLM) else llm, device=device)
        return TopoRAGPipeline(TopoRAGModel(TopoRAGConfig(use_graph=False, llm=llm or PACKAGED_LLM), model_llm, tok),
                               encoder)
    folder = Path(checkpoint).expanduser()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder}: not a TopoRAG checkpoint folder (no config.json)")
    return TopoRAGPipeline.load(folder, llm=None if llm in ("", PACKAGED_LLM) else llm, device=device,
                                encoder=encoder)


@st.cache_resource(max_entries=3, show_spinner=False)
def get_pipeline(checkpoint: str, llm: str, encoder_choice: str) -> TopoRAGPipeline:
    """The pipeline for ``(checkpoint, llm)``, loaded once per server process and shared by every
    visitor; its sentence encoder is the app's (``encoder_choice``, see :mod:`.resources`), so
    the embedded graphs of the other pages are reused as they are."""
    from .resources import app_encoder

    return load_pipeline(checkpoint, llm, encoder=app_encoder(encoder_choice))


def check_compatible(pipe: TopoRAGPipeline, ecx: EmbeddedComplex) -> None:
    """``ValueError`` when the graph's cell embeddings do not have the width the checkpoint's
    cell-complex encoder was trained on (:meth:`TopoRAGPipeline.check_embeddings`)."""
    pipe.check_embeddings(ecx)


def candidate_nodes(a: Answer, top: int = 5) -> dict[int, str]:
    """The retrieved nodes named by the top candidate answers of the name reader, as ``{node id: tooltip
    "candidate answer 1, p = 0.62"}`` for the picture's highlight (``{}`` for other answers)."""
    from ..retrieval.seeds import norm

    if not a.candidates or a.label_probs:
        return {}
    text = a.subcomplex.complex.graph.node_text
    by = {norm(text[i]): int(i) for i in a.subcomplex.nodes.tolist()}
    out: dict[int, str] = {}
    for rank, c in enumerate(a.candidates[:top], 1):
        i = by.get(norm(c["name"]))
        if i is not None:
            out[i] = f"candidate answer {rank}, p = {c['probability']:.2f}"
    return out


def candidates_frame(a: Answer) -> pd.DataFrame | None:
    """The name reader's top candidates (name, probability), best first; ``None`` for other answers."""
    if not a.candidates or a.label_probs:
        return None
    return pd.DataFrame([{"candidate": c["name"], "probability": float(c["probability"])} for c in a.candidates])


def cited_nodes(a: Answer) -> dict[int, str]:
    """The nodes a cited answer (``--answer-style cited``) names, as ``{node id in the parent graph:
    tooltip}`` for the picture's highlight: each ``[k]`` in the evidence is the k-th 0-cell of the
    retrieved subcomplex (the numbering of the compact context). Ids outside the subcomplex are
    skipped (the model wrote a node that is not there); ``{}`` without evidence."""
    import re

    nodes = a.subcomplex.nodes.tolist()
    out: dict[int, str] = {}
    for k in dict.fromkeys(int(m) for m in re.findall(r"\[(\d+)\]", a.evidence or "")):
        if k < len(nodes):
            out[int(nodes[k])] = f"cited by the model as [{k}]"
    return out


def ask(pipe: TopoRAGPipeline, ecx: EmbeddedComplex, question: str, settings: Sequence[RetrievalSetting],
        max_new_tokens: int | None = None, query: str | None = None) -> dict[str, Answer]:
    """Answer ``question`` once per retrieval setting (``{method: Answer}``, in the given order);
    ``query``: retrieve with this text instead of the question."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("type a question first")
    check_compatible(pipe, ecx)
    check_question_kind(pipe, ecx.complex.graph, question)
    choices = answer_choices(pipe, ecx.complex.graph, question)
    out = {}
    for s in settings:
        if s.method not in out:
            out[s.method] = pipe.answer(ecx, question, s, max_new_tokens=max_new_tokens, query=query, choices=choices)
    return out


def confidence_markdown(note: ConfidenceNote) -> str:
    """The page's notice of ``note``: the headline (``Low confidence`` in bold when low) and, when low,
    the runner-up answers on a line of their own, their names escaped."""
    from .errors.display import escape_markdown

    head = escape_markdown(note.headline()) if note.by_evidence else note.headline()  # quotes the model's text
    claims = "" if note.by_evidence or not note.unsupported else \
        f"  \n{note.missing_what[0].upper()}{note.missing_what[1:]}: {escape_markdown(str(note.unsupported_text()))}"
    if not note.low:
        return head + claims
    head = "**Low confidence**" + head[len("Low confidence"):]
    rest = ", ".join(f"{escape_markdown(n)} (p = {p:.3g})" for n, p in note.runner_ups) if note.runner_up_text() \
        else "none (a generated answer has no scored alternatives)"
    return f"{head}.{claims}  \nRunner-up answers: {rest}"


def answer_confidence(a: Answer, top: int = 3) -> ConfidenceNote:
    """What the page says about ``a``'s confidence (:func:`~.confidence.confidence_note`): low below the
    threshold calibrated on the checkpoint's validation split, with the ``top`` runner-up answers."""
    shown = a.confidence if a.confidence is not None else a.probability  # the number the threshold judges
    return confidence_note(a.answer, shown, a.low_confidence, a.candidates, a.confidence_threshold,
                           a.answer_kind, top, a.unsupported_claims)


def _effect_inputs(pipe: TopoRAGPipeline, a: Answer) -> tuple[tuple[str, ...] | None, str | None]:
    """The closed answer set an answer was scored over (``None``: open) and the evidence its labels were
    scored after (an evidence-first answer only)."""
    choices = a.choices or (tuple(a.label_probs) if a.label_probs else None)
    evidence = a.evidence if choices and pipe.model.uses_evidence(choices) else None
    return choices, evidence


def gold_target(answer: str, gold: Any) -> str | None:
    """The one gold answer to score beside ``answer`` (:func:`gold_for`'s value: a string, or a list of golds):
    the first gold the answer contains (normalised, whole words), else the first gold; ``None`` without one."""
    golds = [str(g) for g in (gold if isinstance(gold, list) else [gold]) if g is not None and normalize(str(g))]
    if not golds:
        return None
    return next((g for g in golds if answer_in_context(g, answer)), golds[0])


def graph_effect(pipe: TopoRAGPipeline, ecx: EmbeddedComplex, question: str, a: Answer,
                 max_new_tokens: int | None = None, gold: Any = None) -> GraphTokenEffect:
    """The answer ``a`` (to ``question``) re-scored with its own, zeroed and permuted graph tokens, with the
    gold answer (:func:`gold_for`'s value, when known) scored beside it: the directions
    :meth:`~.graph_effect.GraphTokenEffect.verdict` words. Costs three LLM passes and one greedy decode
    (open answers): the page runs it only when asked."""
    choices, evidence = _effect_inputs(pipe, a)
    return graph_token_effect(pipe, ecx, a.subcomplex, question, a.context, a.answer, choices, evidence,
                              max_new_tokens=max_new_tokens, gold=gold_target(a.answer, gold))


def explain_cells(pipe: TopoRAGPipeline, ecx: EmbeddedComplex, question: str, a: Answer,
                  effect: GraphTokenEffect | None = None, cap: int = 40, text: bool = True) -> list[CellEffect]:
    """The change of the answer's log-probability when each cell leaves both its graph tokens and (``text``)
    its context lines (:func:`~.graph_effect.attribute`), the most supportive first; also ``effect.cells``
    when ``effect`` is given (else the arms are not scored at all)."""
    choices, evidence = _effect_inputs(pipe, a)
    effect = effect if effect is not None else answer_effect(pipe, a.answer, choices)
    return attribute(pipe, ecx, a.subcomplex, question, a.context, effect, evidence=evidence, cap=cap, text=text)


TOKEN_TEXT_NOTES = {
    "names": ("This checkpoint's text keeps only the name and index of the nodes that have graph tokens "
              "(`lamp [6]`): their attributes reach the LLM through those tokens only, so zeroed or another "
              "question's tokens leave it without them."),
    "relations": ("This checkpoint's text writes the relations of the 1-cells that have graph tokens as `?` "
                  "(`0,?,2`): the relations reach the LLM through those tokens only, so zeroed or another "
                  "question's tokens leave it without them."),
}


def token_text_note(pipe: TopoRAGPipeline) -> str | None:
    """What the loaded model's text leaves to its graph tokens (``TopoRAGConfig.token_text``), one sentence for
    the "What the graph tokens did" section; ``None`` for a model that reads the full text (or none loaded)."""
    model = getattr(pipe, "model", None)
    return TOKEN_TEXT_NOTES.get(getattr(getattr(model, "config", None), "token_text", "full"))


def cells_effect_table(effect: GraphTokenEffect, top: int = 10) -> list[dict[str, Any]]:
    """The ``top`` cells by leave-one-out drop, with the signed change (rows for the page; ``[]`` before
    :func:`explain_cells`)."""
    return cells_table(effect.cells or [], top)


def cells_effect_frame(effect: GraphTokenEffect, top: int = 10) -> pd.DataFrame:
    """:func:`cells_effect_table` as a table for the page."""
    return pd.DataFrame(cells_effect_table(effect, top))


def arms_frame(effect: GraphTokenEffect) -> pd.DataFrame:
    """The answer scored with its own, zeroed and permuted graph tokens (``effect.table()``), as a table."""
    return pd.DataFrame(effect.table())


def attribution_note(checkpoint: str) -> tuple[bool, str]:
    """``(show the attribution as an explanation, the line to show with it)`` for the checkpoint folder
    that answered (:func:`~.attribution.attribution_verdict`: measured against a random retrieved cell in
    docs/results/attribution.md)."""
    from .attribution import attribution_verdict

    return attribution_verdict(checkpoint)


def check_question_kind(pipe: TopoRAGPipeline, graph, question: str) -> None:
    """``ValueError`` when a label-set checkpoint (``answer_set``, e.g. support / counter) is asked a
    question of another kind: it would answer it with one of its labels whatever was asked
    (:func:`~toporag_core.answering.route.route` picks another model for such a question)."""
    labels = tuple(pipe.model.config.answer_set or ())
    if labels and not label_question(graph, question, labels):
        raise ValueError(f"this checkpoint answers only {' / '.join(labels)} and this question asks for neither: "
                         "ask it with another model")


# ----------------------------------------------------------------------------- judging an answer
class EveryAnswer(list):
    """The gold of a question in several parts (the scene sample's "what is it made of, and what is it
    next to?"): an answer is right only when it names every part (a plain list: any one of them)."""


def gold_for(graph, question: str) -> Any | None:
    """The gold answer of the loaded example for ``question``: the ExplaGraphs ``label``, the
    WebQSP ``answers``, a GQA question's ``answer`` or a built-in sample's ``gold_answers`` (an
    :class:`EveryAnswer` when ``meta["answers_needed"] == "all"``: the scene sample's two-part question) -
    only when ``question`` is the example's own question (or one of a scene's attached questions);
    ``None`` otherwise."""
    m = graph.meta
    asked = " ".join(str(question).split())
    for row in m.get("questions") or []:
        if " ".join(str(row.get("question", "")).split()) == asked:
            return row.get("answer")
    if asked != " ".join(str(m.get("question", "")).split()):
        return None
    for key in ("label", "answers", "answer", "gold_answers"):
        if m.get(key) not in (None, "", []):
            every = m.get("answers_needed") == "all" and isinstance(m[key], list)
            return EveryAnswer(m[key]) if every else m[key]
    return None


def judge(task: str | None, answer: str, gold: Any) -> bool:
    """Whether ``answer`` is right by the task's own metric (any gold answer contained, normalised,
    for a task without one); a list of golds: any one of them right, an :class:`EveryAnswer`: every one."""
    if isinstance(gold, EveryAnswer):
        return bool(gold) and all(judge(task, answer, g) for g in gold)
    if task in METRICS:
        if isinstance(gold, list) and task != "webqsp":  # the other metrics take one label
            return any(is_correct(task, answer, str(g)) for g in gold)
        return bool(is_correct(task, answer, gold))
    golds = gold if isinstance(gold, list) else [gold]
    return any(normalize(g) and normalize(g) in normalize(answer) for g in golds)


def gold_note(graph, question: str) -> str:
    """What the page says when :func:`gold_for` has no gold answer: the example's own question may
    come without one (a built-in sample), any other question never has one."""
    if own_question(graph, question):
        return "No gold answer: this example's question comes without one, so the answer is not judged."
    return "No gold answer for this question (it is not the example's own question)."


def occurrence_note(a: Answer) -> str | None:
    """Whether the answer text occurs in the retrieved context, for an open answer only: a label
    (yes / no, support / counter) is picked from a fixed set, so its absence from the context says
    nothing. ``None`` when there is nothing to say."""
    if a.closed or not a.answer.strip():
        return None
    return ("The answer text **occurs** in the retrieved context." if answer_in_context(a.answer, a.context)
            else "The answer text does **not** occur in the retrieved context.")


def evidence_heading(a: Answer, is_citation: bool) -> str:
    """The heading over what the model wrote before its answer. Cited context lines are checked against the
    context below them, and so are the claims of an evidence sentence where the context can be read
    (:func:`~toporag_core.studio.errors.citation_note`); even a sentence the context holds is no proof that the
    answer follows from it (a wrong "no" came with a sentence at 0.996), so the heading says so."""
    if is_citation:
        return ("**Context lines the model cited before its answer** (cited nodes are highlighted in the picture; "
                "the line below says how many are really in the context)")
    then = f"then picked **{a.answer}**" if a.answer.strip() else "then answered"
    from .errors.display import claim_check

    checked = ("the line below says which of its claims are facts of the retrieved context"
               if claim_check(a.evidence or "", a.context) is not None
               else "its claims could not be checked against this context")
    return (f"**Evidence the model wrote first**: it {then} after it; {checked}; the sentence is no proof of the "
            "answer")


def answer_in_context(answer: str, context: str) -> bool:
    """Whether the (normalised) answer text occurs in the (normalised) context as whole words."""
    a, c = normalize(answer), normalize(context)
    return bool(a) and f" {a} " in f" {c} "


def gold_text(gold: Any) -> str:
    if isinstance(gold, EveryAnswer):
        return " and ".join(str(g) for g in gold) + (" (the answer must name each)" if len(gold) > 1 else "")
    return " | ".join(str(g) for g in gold) if isinstance(gold, list) else str(gold)


def label_probs_frame(probs: dict[str, float]) -> pd.DataFrame:
    """``label, probability`` rows, most likely first."""
    rows = sorted(((str(k), float(v)) for k, v in probs.items()), key=lambda t: -t[1])
    return pd.DataFrame(rows, columns=["label", "probability"])


# ----------------------------------------------------------------------------- checkpoint vs graph
def checkpoint_task(checkpoint: str) -> str | None:
    """The ``dataset`` a checkpoint folder was trained on (``config.json``), ``None`` for the frozen
    LLM or an unreadable folder."""
    return checkpoint_info(checkpoint).dataset


def default_checkpoint(options: dict[str, str], graph) -> str:
    """``TOPORAG_CHECKPOINT`` when set (an explicit choice), else the first option trained on the
    graph's task, else a general checkpoint among the options, else the first option."""
    env = os.environ.get("TOPORAG_CHECKPOINT", "").strip()
    if env and env in options:
        return env
    pick = auto_checkpoint(graph, options, options_only=True)
    return pick if pick in options and pick != NO_CHECKPOINT else next(iter(options))


def task_warning(trained_on: str | None, graph) -> str | None:
    """A warning when the checkpoint was trained on another task than the loaded graph's."""
    task = task_of_graph(graph)
    if not trained_on or task is None or trained_on == task:
        return None
    return (f"This checkpoint was trained on **{trained_on}**, but the loaded graph is a **{task}** example: "
            f"its answers follow {trained_on}'s answer format (e.g. a stance label), not this question. "
            f"Pick the {task} checkpoint if there is one.")


# ----------------------------------------------------------------------------- context budget
def context_cut(a: Answer) -> dict[str, Any] | None:
    """The prize-ordered cut of ``a``'s context (``prompt["context_cut"]``, see
    :meth:`~toporag_core.retrieval.budget.ContextFit.to_dict`) when it dropped anything, else ``None``."""
    cut = a.prompt.get("context_cut")
    return cut if isinstance(cut, dict) and cut.get("truncated") else None


def cut_message(a: Answer) -> str | None:
    """What to tell the user when the context did not fit the model's input limit, else ``None``."""
    cut = context_cut(a)
    if cut is not None:
        cells2 = ", ".join(f"c{f}" for f in cut["dropped_cells2"]) or "none"
        return (f"The context ({cut['full_tokens']} tokens) did not fit the model's input limit ({cut['budget']} "
                f"tokens for the context): it was cut by prize, keeping the 2-cells and the highest-prize cells - "
                f"{cut['summary']} (2-cells dropped: {cells2}). The LLM read {cut['tokens']} tokens; the dropped "
                "cells are listed below." + (" Even the section headers exceed the limit: the model cut the rest by "
                                             "prefix." if cut["tokens"] > cut["budget"] else ""))
    if a.prompt.get("context_truncated"):  # only the model's prefix cut (e.g. an older core): no cell list
        return "The context was cut by prefix to the model's input limit (see the Prompt layout tab)."
    return None


def dropped_frame(a: Answer) -> pd.DataFrame:
    """The cells a cut dropped (rows of :func:`cells_frame`: dim, cell, text, role, prize); empty
    when nothing was."""
    cut = context_cut(a)
    df = cells_frame(a.subcomplex)
    if cut is None:
        return df.iloc[:0]
    drop = {(0, int(i)) for i in cut["dropped_nodes"]} | {(1, int(i)) for i in cut["dropped_edges"]} \
        | {(2, int(i)) for i in cut["dropped_cells2"]}
    return df[[(d, c) in drop for d, c in zip(df["dim"], df["cell"])]].reset_index(drop=True)


# ----------------------------------------------------------------------------- tables
def cells_frame(sub: Subcomplex) -> pd.DataFrame:
    """One row per retrieved cell: dimension, id, text, role, prize."""
    cx, g = sub.complex, sub.complex.graph
    p0, p1, p2 = sub.prizes
    rows = [{"dim": 0, "cell": int(i), "text": g.node_text[i], "role": r, "prize": float(p0[i])}
            for i, r in zip(sub.nodes.tolist(), sub.node_roles.tolist())]
    for e, r in zip(sub.edges.tolist(), sub.edge_roles.tolist()):
        text = "; ".join(f"{h} -[{rel}]-> {t}" for h, rel, t in cx.edge_relations(e))
        rows.append({"dim": 1, "cell": int(e), "text": text, "role": r, "prize": float(p1[e])})
    for f, cyc in zip(sub.cells2.tolist(), sub.cycles()):
        rows.append({"dim": 2, "cell": int(f), "text": " -> ".join(cyc + cyc[:1]), "role": "terminal",
                     "prize": float(p2[f]) if p2.size else 0.0})
    return pd.DataFrame(rows, columns=["dim", "cell", "text", "role", "prize"])


def timings_frame(answers: dict[str, Answer]) -> pd.DataFrame:
    """Milliseconds per stage (retrieve, encode = cell-complex encoder + projector, generate), one
    row per method."""
    return pd.DataFrame([{"method": method_label(m),
                          **{s: round(a.timings.get(s, 0.0) * 1000, 1) for s in TIMING_STAGES}}
                         for m, a in answers.items()])


def model_summary(pipe: TopoRAGPipeline) -> dict[str, str]:
    """Checkpoint, LLM, device, dtype, mode, trainable parameters: short strings for the page."""
    d = pipe.describe()
    return {"checkpoint": str(d.get("checkpoint") or "none (frozen LLM)"), "LLM": str(d.get("llm")),
            "device": f"{d.get('device')} ({d.get('dtype')})", "mode": str(d.get("mode")),
            "trainable parameters": f"{int(d.get('trainable_params') or 0):,}",
            "trained on": str(pipe.meta.get("dataset", "-"))}
