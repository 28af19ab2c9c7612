"""``toporag ask PATH --question Q``: retrieve, encode, generate; print answer, cells and timings.

Which model answers is :func:`~toporag_core.answering.route.route`'s decision, as on the Ask page: without
``--checkpoint``, the committed checkpoint of the graph's task, else the general checkpoint, else the
zero-shot LLM (:func:`~toporag_core.answering.route.auto_checkpoint`); a chosen checkpoint that does not fit
(a label set asked an open question, another task's graph) gives way to one that does. The output says
which model answered and why (``model:`` line; ``route`` in ``--json``). ``--json`` carries the answer's
``confidence`` (its probability), ``low_confidence`` (below the threshold calibrated on the checkpoint's
validation split for its ``answer_kind``; ``null`` without one), ``candidates`` and the ``runner_ups``; the
human output adds a "Low confidence" line with the runner-up answers when it is low.
"""
from __future__ import annotations

import argparse
import time

from ._common import add_graph_args, add_method_args, check_question_args, emit, load_from_args, setting_from_args, \
    warn


def register(sub) -> None:
    p = sub.add_parser("ask", help="answer a question about a graph with a trained TopoRAG model")
    add_graph_args(p)
    p.add_argument("--question", "-q", default=None,
                   help="the question (default: the record's own question, e.g. an ExplaGraphs row's)")
    p.add_argument("--query", default=None, help="text used for retrieval (default: the question)")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint folder, or 'none' for the zero-shot LLM (default: the committed checkpoint of the "
                        "graph's task, else the general checkpoint, else the zero-shot LLM); a checkpoint that does "
                        "not fit the graph or question gives way to one that does (the output says which and why)")
    p.add_argument("--llm", default=None, help="override the LLM: local HF folder or hub id")
    p.add_argument("--device", default="auto")
    add_method_args(p, dimension="cells", default=None)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_question_args(args, "question", "query")
    from ..answering.choices import answer_choices, retrieval_query
    from ..answering.pipeline import TopoRAGPipeline
    from ..answering.route import ZERO_SHOT, auto_checkpoint, committed_checkpoints, route
    from ..answering.confidence import confidence_note

    graph = load_from_args(args)
    warn(graph.meta.get("warnings"))  # e.g. a table read without a header
    question = args.question or graph.meta.get("question")
    if not question:
        raise ValueError("--question is required (this graph carries no question of its own)")
    query = args.query if args.query is not None else retrieval_query(graph, question)  # ExplaGraphs: both arguments
    options = {**committed_checkpoints(), ZERO_SHOT: "zero-shot"}
    selected = args.checkpoint if args.checkpoint is not None else auto_checkpoint(graph, options)
    if selected != ZERO_SHOT and selected.strip().lower() == ZERO_SHOT:
        selected = ZERO_SHOT
    decision = route(selected, graph, question, options)
    if decision.checkpoint == ZERO_SHOT:
        pipe = TopoRAGPipeline.text_only(args.llm, device=args.device)
    else:
        pipe = TopoRAGPipeline.load(decision.checkpoint, llm=args.llm, device=args.device)
    setting = setting_from_args(args, pipe.meta.get("retrieval"))  # options win, then the checkpoint's setting
    t0 = time.perf_counter()
    ecx = pipe.prepare(graph, tree=args.tree)  # lift + embed, reported as "prepare"
    prepare_s = time.perf_counter() - t0
    choices = answer_choices(pipe, graph, question)
    out = pipe.answer(ecx, question, setting, query=query, max_new_tokens=args.max_new_tokens, choices=choices)
    out.timings["prepare"] = prepare_s
    out.timings["total"] += prepare_s
    note = confidence_note(out.answer, out.confidence, out.low_confidence, out.candidates,
                           out.confidence_threshold, out.answer_kind, unsupported=out.unsupported_claims)
    result = {**out.to_json(), "runner_ups": note.to_dict()["runner_ups"], "question": question,
              "params": dict(out.setting.params), "model": pipe.describe(),
              "route": {"checkpoint": decision.checkpoint, "model": decision.model, "reason": decision.reason,
                        "rerouted": decision.rerouted}}
    if "label" in graph.meta:
        result["gold"] = graph.meta["label"]
    fit = out.context_fit
    human = "\n".join([
        "model: " + decision.line().split(": ", 1)[1].replace("**", ""),
        f"answer: {out.answer}" + (f" (p = {out.probability:.2f})" if out.probability is not None else ""),
        *(note.lines() if note.low or note.unsupported else []),
        *([f"evidence: {out.evidence}"] if out.evidence is not None else []),
        f"retrieved ({out.method}): {len(out.cells['nodes'])} nodes, {len(out.cells['edges'])} edges, "
        f"{len(out.cells['cells2'])} 2-cells",
        "timings: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in out.timings.items()),
        *([f"context cut by prize to the model's input limit ({fit.budget} tokens): {fit.summary()}"]
          if fit.truncated else []),
        "", out.context])
    emit(result, args.json, human)
    return 0
