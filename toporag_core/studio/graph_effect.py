"""What the graph tokens did for one answer: three arms side by side, and which cells mattered.

The model reads ``[graph tokens G ; textualized subcomplex ; question]`` with
``G = proj(CWN(cells)) (1, T, d)``. For one answered question this module re-scores the answer
with three soft prompts (the same text, the same question), like ``toporag eval --graph-tokens``
does over a whole run (:mod:`toporag_core.arms`), but for one question at a time:

==========  ========================================================================================
arm         the soft prompt
==========  ========================================================================================
own         ``G = proj(CWN(cells))``, what the answer was given with
zeroed      ``0`` (the text alone, the graph slots present)
permuted    ``proj(CWN(cells_sigma))``: the same cells and boundaries, each rank's features moved
            by a seeded derangement ``sigma`` (:func:`~toporag_core.arms.derangement`; no cell keeps
            its own features, a rank with one cell keeps it): the subcomplex's words are all
            there, no longer where they were. Self-contained (no other graph needed) and
            deterministic; an encoder that reads which text sits on which cell moves here, a
            bag-of-features encoder does not (then only ``zeroed`` tells)
==========  ========================================================================================

What is compared: for a **closed answer set** (support / counter, yes / no) the label probabilities
``softmax_c s_c`` over the candidates' log-likelihoods ``s_c`` (what the pipeline reports as
``probability``); for an **open answer** the answer's log-probability under teacher forcing,
``log p(answer + eos | prompt)`` (:meth:`~toporag_core.model.TopoRAGModel.score_choices` with one
candidate), and the answer each arm generates greedily.

**Per-cell attribution** (leave one cell out): for each retrieved cell ``c`` (0-, 1- and 2-cells,
the ``cap`` highest-prize ones), ``drop(c) = log p_own(answer) - log p_{-c}(answer)``, where
``p_{-c}`` reads the graph tokens of the subcomplex **without** ``c``: the cell is removed from the
encoder's input with everything on it, so the boundary structure stays valid (removing a node
removes its incident 1-cells and the 2-cells on those; removing a 1-cell removes the 2-cells on
it), :func:`drop_cells`. The text the LLM reads is unchanged, so the drop is what the cell did
*through the graph tokens*. All ``K`` leave-one-out subcomplexes go through the encoder as one
batch (``K + 1`` graphs), and the LLM scores them in batches of ``chunk`` rows.

A model without graph tokens (the frozen LLM, ``use_graph`` off) gets
:attr:`GraphTokenEffect.has_graph` ``False`` and a line saying so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..arms import derangement
from ..model import QABatch, evidence_target
from ..nn import SubcomplexTensors, collate, subcomplex_tensors

ARMS = ("own", "zeroed", "permuted")
MATTERS = 0.05  # a shift of the answer's probability (closed) at least this big: the graph path mattered
MATTERS_NATS = 0.5  # the same for an open answer's log-probability (nats)
NO_GRAPH = ("This model has no graph tokens (the frozen LLM alone, or a checkpoint without the graph path): "
            "its answers come from the text only.")


@dataclass
class CellEffect:
    """One retrieved cell's leave-one-out effect: ``drop`` = ``log p_own - log p_without`` (nats)."""

    dim: int
    cell: int  # id in the parent complex
    text: str
    prize: float
    drop: float
    removed: tuple[int, int, int] = (1, 0, 0)  # cells per rank that went with it (itself + cofaces)


@dataclass
class GraphTokenEffect:
    """The three arms of one answer (see the module docstring) and, on demand, its cell attribution.

    ``probs[arm]``: ``{label: probability}`` for a closed set, ``{answer: p(answer)}`` for an open
    one; ``logp[arm]``: log-probability of the answer given with the own tokens; ``answers[arm]``: what
    the arm answers (top label, or the greedy answer)."""

    has_graph: bool
    answer: str
    closed: bool = False
    labels: tuple[str, ...] = ()
    probs: dict[str, dict[str, float]] = field(default_factory=dict)
    logp: dict[str, float] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    cells: list[CellEffect] | None = None  # None: not computed (see :func:`attribute`)
    seed: int = 0

    @property
    def changed(self) -> bool:
        """Whether the graph tokens changed the answer: zeroed or permuted answers otherwise."""
        return self.has_graph and any(self.answers.get(a) != self.answers.get("own") for a in ARMS[1:])

    @property
    def shift(self) -> float:
        """How far the other arms moved the answer: ``max |P_arm - P_own|`` of the answer given (closed),
        ``max |log p_arm - log p_own|`` in nats (open)."""
        if not self.has_graph:
            return 0.0
        if self.closed:
            p = {a: self.probs[a].get(self.answer, 0.0) for a in ARMS}
            return max(abs(p[a] - p["own"]) for a in ARMS[1:])
        return max(abs(self.logp[a] - self.logp["own"]) for a in ARMS[1:])

    @property
    def mattered(self) -> bool:
        return self.changed or self.shift >= (MATTERS if self.closed else MATTERS_NATS)

    def verdict(self) -> str:
        """One line for the page."""
        if not self.has_graph:
            return NO_GRAPH
        if self.closed:
            moved = f"The graph tokens moved P({self.answer}) by {100 * self.shift:.1f}%"
        else:
            moved = f"The graph tokens moved log P(answer) by {self.shift:.2f} nats"
        if self.changed:
            other = [f"{a}: {self.answers[a]}" for a in ARMS[1:] if self.answers[a] != self.answers["own"]]
            return f"{moved} and changed the answer ({'; '.join(other)}): the graph path mattered."
        return moved + (": the graph path mattered." if self.mattered else ": this answer comes from the text.")

    def table(self) -> list[dict[str, object]]:
        """Rows for the page: one per label (closed) or the answer (open), a column per arm."""
        if not self.has_graph:
            return []
        if self.closed:
            return [{"label": c, **{f"P ({a})": self.probs[a][c] for a in ARMS}} for c in self.labels]
        return [{"answer": f"{a} tokens", "generated": self.answers[a], "log P(own answer)": self.logp[a],
                 "P(own answer)": float(np.exp(self.logp[a]))} for a in ARMS]


# ----------------------------------------------------------------------------- cells
def drop_cells(st: SubcomplexTensors, dim: int, index: int) -> tuple[SubcomplexTensors, tuple[int, int, int]]:
    """``st`` without local cell ``index`` of rank ``dim`` and every cell on it (a node's 1-cells and
    the 2-cells on those; a 1-cell's 2-cells), renumbered; and how many cells per rank went."""
    n, m, f = st.shape
    keep0 = torch.ones(n, dtype=torch.bool)
    keep1 = torch.ones(m, dtype=torch.bool)
    keep2 = torch.ones(f, dtype=torch.bool)
    (keep0, keep1, keep2)[dim][index] = False
    if m:
        keep1 &= keep0[st.edge_nodes].all(1)
    if st.cell_index.numel():  # a 2-cell goes when any 1-cell of its boundary went
        lost = torch.zeros(f, dtype=torch.long).index_add_(0, st.cell_index, (~keep1[st.cell_edges]).long())
        keep2 &= lost == 0
    new0, new1, new2 = (torch.cumsum(k.long(), 0) - 1 for k in (keep0, keep1, keep2))
    entries = keep2[st.cell_index]
    out = SubcomplexTensors(x0=st.x0[keep0], x1=st.x1[keep1], x2=st.x2[keep2],
                            edge_nodes=new0[st.edge_nodes[keep1]].reshape(-1, 2),
                            cell_edges=new1[st.cell_edges[entries]], cell_index=new2[st.cell_index[entries]])
    gone = (n - int(keep0.sum()), m - int(keep1.sum()), f - int(keep2.sum()))
    return out, gone


def permuted_cells(st: SubcomplexTensors, seed: int = 0) -> SubcomplexTensors:
    """The same cells and boundaries, each rank's features moved by a seeded derangement (a rank with
    fewer than 2 cells is kept as it is)."""
    def move(x: Tensor, salt: int) -> Tensor:
        if x.shape[0] < 2:
            return x
        return x[torch.from_numpy(derangement(int(x.shape[0]), seed + salt))]

    return SubcomplexTensors(x0=move(st.x0, 0), x1=move(st.x1, 1), x2=move(st.x2, 2), edge_nodes=st.edge_nodes,
                             cell_edges=st.cell_edges, cell_index=st.cell_index)


def cell_rows(sub, use_cells2: bool, cap: int = 40) -> list[tuple[int, int, int, str, float]]:
    """``(dim, local index, parent id, text, prize)`` of the retrieved cells (the local index is the
    cell's row in :func:`~toporag_core.nn.subcomplex_tensors`: sorted ids), the ``cap`` highest
    prizes first (ties: lower rank, then lower id)."""
    cx = sub.complex
    names = cx.graph.node_text
    rows = []
    ranks = [(0, sub.nodes), (1, sub.edges)] + ([(2, sub.cells2)] if use_cells2 else [])
    for dim, ids in ranks:
        prize = sub.prizes[dim]
        for local, c in enumerate(np.unique(np.asarray(ids, np.int64)).tolist()):
            if dim == 0:
                text = names[c]
            elif dim == 1:
                text = "; ".join(" ".join(t) for t in cx.edge_relations(c))
            else:
                text = " - ".join(names[i] for i in cx.cell2_nodes(c).tolist())
            p = float(prize[c]) if prize.size > c else 0.0
            rows.append((dim, local, c, text, p))
    rows.sort(key=lambda r: (-r[4], r[0], r[2]))
    return rows[:cap]


# ----------------------------------------------------------------------------- scoring
def arm_tokens(model, st: SubcomplexTensors, seed: int = 0) -> dict[str, Tensor]:
    """``{arm: (1, T, d)}`` soft prompts for the three arms, the encoder run once over two graphs."""
    cells = collate([st, permuted_cells(st, seed)]).to(model.device)
    g = model.graph_tokens(cells)
    return {"own": g[:1], "zeroed": torch.zeros_like(g[:1]), "permuted": g[1:2]}


def qa_rows(question: str, context: str, n: int) -> QABatch:
    """``n`` rows of one question and context, without cells (the soft prompt comes as ``soft``)."""
    return QABatch(cells=None, questions=[question] * n, contexts=[context] * n)


def _targets(effect: GraphTokenEffect, evidence: str | None) -> list[str]:
    """What is scored: the candidates (after the answer's evidence, for an evidence-first answer), or
    the open answer."""
    if not effect.closed:
        return [effect.answer]
    return [evidence_target(evidence, c) for c in effect.labels] if evidence is not None else list(effect.labels)


def _answer_logp(model, question: str, context: str, soft: Tensor, effect: GraphTokenEffect,
                 evidence: str | None, chunk: int = 8) -> Tensor:
    """``(R,)`` log-probability of ``effect.answer`` for each of ``R`` soft prompts ``(R, T, d)``:
    among the candidates (closed: log-softmax of the scores), or under teacher forcing (open)."""
    targets = _targets(effect, evidence)
    out = []
    for i in range(0, soft.shape[0], chunk):
        part = soft[i:i + chunk]
        sc = model.score_choices(qa_rows(question, context, part.shape[0]), targets, soft=part,
                                 truncate=evidence is None).double()
        out.append(sc.log_softmax(-1)[:, effect.labels.index(effect.answer)] if effect.closed else sc[:, 0])
    return torch.cat(out)


def _closed_arms(model, question, context, tokens, effect: GraphTokenEffect, evidence: str | None) -> None:
    sc = torch.stack([model.score_choices(qa_rows(question, context, 1), _targets(effect, evidence),
                                          soft=tokens[a], truncate=evidence is None)[0].double() for a in ARMS])
    prob = sc.softmax(-1)
    j = effect.labels.index(effect.answer)
    for k, a in enumerate(ARMS):
        effect.probs[a] = dict(zip(effect.labels, prob[k].tolist()))
        effect.logp[a] = float(prob[k, j].log())
        effect.answers[a] = effect.labels[int(sc[k].argmax())]


def _open_arms(model, question, context, tokens, effect: GraphTokenEffect, max_new_tokens: int | None) -> None:
    soft = torch.cat([tokens[a] for a in ARMS])
    lp = _answer_logp(model, question, context, soft, effect, None)
    rows = model.answer(qa_rows(question, context, len(ARMS)), choices=[None] * len(ARMS), soft=soft,
                        max_new_tokens=max_new_tokens)
    for k, a in enumerate(ARMS):
        effect.logp[a] = float(lp[k])
        effect.probs[a] = {effect.answer: math.exp(float(lp[k]))}
        effect.answers[a] = rows[k]["answer"]
    effect.answers["own"] = effect.answer  # what the page showed (the own arm regenerates the same text)


def graph_token_effect(pipe, ecx, sub, question: str, context: str, answer: str,
                       choices: tuple[str, ...] | None = None, evidence: str | None = None, seed: int = 0,
                       max_new_tokens: int | None = None) -> GraphTokenEffect:
    """The three arms for one answer (no attribution: :func:`attribute` adds it).

    Args:
        pipe: the :class:`~toporag_core.pipeline.TopoRAGPipeline` that answered.
        ecx, sub: the embedded graph and the retrieved :class:`~toporag_core.retrieval.Subcomplex`.
        question: the question as asked (put in the checkpoint's prompt form here, as answering does).
        context: the textualized subcomplex the LLM read (the answer's ``context``).
        answer: the answer given; ``choices``: its closed answer set (``None``: an open answer).
        evidence: what an evidence-first answer wrote before its label (labels are scored after it).
    """
    model = pipe.model
    if not model.config.use_graph:
        return GraphTokenEffect(has_graph=False, answer=answer)
    closed = bool(choices) and answer in tuple(choices)
    effect = GraphTokenEffect(has_graph=True, answer=answer, closed=closed,
                              labels=tuple(choices) if closed else (answer,), seed=seed)
    question = pipe.prompt_for(question)
    st = subcomplex_tensors(sub, ecx.emb, use_cells2=pipe.use_cells2)
    with pipe.lock, torch.no_grad():
        tokens = arm_tokens(model, st, seed)
        if closed:
            _closed_arms(model, question, context, tokens, effect, evidence)
        else:
            _open_arms(model, question, context, tokens, effect, max_new_tokens)
    return effect


def attribute(pipe, ecx, sub, question: str, context: str, effect: GraphTokenEffect, evidence: str | None = None,
              cap: int = 40, chunk: int = 8) -> list[CellEffect]:
    """Leave-one-cell-out drops of the answer's log-probability (module docstring), largest first;
    also stored as ``effect.cells``. ``[]`` for a model without graph tokens."""
    if not effect.has_graph:
        effect.cells = []
        return []
    model = pipe.model
    question = pipe.prompt_for(question)
    st = subcomplex_tensors(sub, ecx.emb, use_cells2=pipe.use_cells2)
    rows = cell_rows(sub, pipe.use_cells2, cap)
    cut = [drop_cells(st, dim, local) for dim, local, *_ in rows]
    with pipe.lock, torch.no_grad():
        soft = model.graph_tokens(collate([st] + [c for c, _ in cut]).to(model.device))
        lp = _answer_logp(model, question, context, soft, effect, evidence, chunk)
    drop = (lp[0] - lp[1:]).tolist()
    cells = [CellEffect(dim=dim, cell=c, text=text, prize=prize, drop=float(d), removed=gone)
             for (dim, _, c, text, prize), d, (_, gone) in zip(rows, drop, cut)]
    cells.sort(key=lambda c: -c.drop)
    effect.cells = cells
    return cells


def cells_table(cells: list[CellEffect], top: int = 10) -> list[dict[str, object]]:
    """Rows for the page: the ``top`` cells by drop."""
    return [{"dim": c.dim, "cell": c.cell, "text": c.text, "drop in log P": float(c.drop),
             "removed with it (0/1/2-cells)": "/".join(map(str, c.removed))} for c in cells[:top]]
