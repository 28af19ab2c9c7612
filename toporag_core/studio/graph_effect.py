"""What the graph tokens did for one answer: three arms side by side, and which cells mattered.

The model reads ``[graph tokens G ; textualized subcomplex ; question]`` with
``G = proj(CWN(cells)) (1, T, d)``. For one answered question this module re-scores the answer
with three soft prompts (the same text, the same question), like ``toporag eval --graph-tokens``
does over a whole run (:mod:`toporag_core.evaluation.arms`), but for one question at a time:

==========  ========================================================================================
arm         the soft prompt
==========  ========================================================================================
own         ``G = proj(CWN(cells))``, what the answer was given with
zeroed      ``0`` (the text alone, the graph slots present)
permuted    ``proj(CWN(cells_sigma))``: the same cells and boundaries, each rank's features moved
            by a seeded derangement ``sigma`` (:func:`~toporag_core.evaluation.arms.derangement`; no cell keeps
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

**Direction** (:meth:`GraphTokenEffect.verdict`): for the answer given, and for the gold answer when the
page knows it, the own arm's probability against each other arm's: "your graph tokens made 'X' **less**
likely than zeroed tokens (P 0.12 vs 0.31)". ``P`` is the label probability (closed) or
``exp log p(answer + eos)`` (open). A difference below :data:`NEUTRAL_P` (closed) or
:data:`NEUTRAL_NATS` in log-probability (open) reads "about as likely as". Nothing is praised: raising
the answer is not "mattering" when the answer is wrong; only the gold answer's direction says whether
the tokens helped.

**Changed the answer** (:func:`answers_differ`): two answers differ when their normalised strings
(:func:`~toporag_core.metrics.normalize`: lower case, no punctuation, no articles) differ **and**
neither contains the other as whole words. "flower is yellow" and "yellow" are the same answer;
"yellow" and "yellowish" or "red" are not.

**Per-cell attribution** (leave one cell out): for each retrieved cell ``c`` (0-, 1- and 2-cells,
the ``cap`` highest-prize ones), ``change(c) = log p_{-c}(answer) - log p_own(answer)`` (nats; stored
as ``drop = -change``): what removing ``c`` does to the answer. ``p_{-c}`` reads the subcomplex
**without** ``c`` in both channels: the graph tokens (the cell is removed from the encoder's input with
everything on it, so the boundary structure stays valid: removing a node removes its incident 1-cells
and the 2-cells on those; removing a 1-cell removes the 2-cells on it, :func:`drop_cells`) **and** the
text (the same cells' lines leave the context the LLM reads,
:func:`~toporag_core.retrieval.textualize.drop_cell_lines`; a node takes its self-loop lines with it),
because the text carries most of the answer. A negative change: the cell supported the answer;
positive: it worked against it. ``text=False`` leaves the text as it is (what the cell did *through the
graph tokens* alone). All ``K`` leave-one-out subcomplexes go through the encoder as one batch
(``K + 1`` graphs), and the LLM scores the ``K + 1`` rows (each with its own context) in batches of
``chunk`` rows. Whether this attribution points at the answer more often than a random retrieved cell
is measured per shipped checkpoint in docs/results/attribution.md (:mod:`.attribution`).

A model without graph tokens (the frozen LLM, ``use_graph`` off) gets
:attr:`GraphTokenEffect.has_graph` ``False`` and a line saying so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..evaluation.arms import derangement
from ..metrics import normalize
from ..model import QABatch, evidence_target, with_context_kv
from ..nn import SubcomplexTensors, collate, subcomplex_tensors
from ..retrieval.textualize import drop_cell_lines

ARMS = ("own", "zeroed", "permuted")
NEUTRAL_P = 0.01  # closed: |P_own - P_arm| below this reads "about as likely as"
NEUTRAL_NATS = 0.05  # open: |log p_own - log p_arm| below this reads "about as likely as"
NO_EFFECT_NATS = 0.01  # a cell whose removal moves log P(answer) less than this: "no effect"
NO_GRAPH = ("This model has no graph tokens (the frozen LLM alone, or a checkpoint without the graph path): "
            "its answers come from the text only.")


def answers_differ(a: str, b: str) -> bool:
    """Whether two answers are different answers (module docstring): normalised, they differ and neither
    contains the other as whole words (``"flower is yellow"`` / ``"yellow"``: the same answer)."""
    x, y = normalize(a), normalize(b)
    return x != y and not (x and y and (f" {x} " in f" {y} " or f" {y} " in f" {x} "))


def p_text(p: float) -> str:
    """A probability for a sentence: two decimals, or two significant digits below 0.01."""
    return f"{p:.2f}" if p >= 0.01 else f"{p:.1e}"


@dataclass
class CellEffect:
    """One retrieved cell's leave-one-out effect: ``drop`` = ``log p_own - log p_without`` (nats);
    :attr:`change` = ``-drop``, what removing it does to the answer's log-probability."""

    dim: int
    cell: int  # id in the parent complex
    text: str
    prize: float
    drop: float
    removed: tuple[int, int, int] = (1, 0, 0)  # cells per rank that went with it (itself + cofaces)
    lines: int = 0  # context lines that went with it (0: the text was left as it was)

    @property
    def change(self) -> float:
        return -self.drop

    @property
    def reads(self) -> str:
        """The sign in words: the cell supported the answer (removing it lowers it), worked against it, or
        neither (below :data:`NO_EFFECT_NATS`)."""
        if abs(self.drop) < NO_EFFECT_NATS:
            return "no effect"
        return "supports the answer" if self.drop > 0 else "works against the answer"


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
    gold: str | None = None  # the gold answer scored beside the answer (None: not known)
    gold_logp: dict[str, float] = field(default_factory=dict)  # log P(gold) per arm

    @property
    def changed(self) -> bool:
        """Whether the graph tokens changed the answer: a zeroed or permuted arm answers a different answer
        (:func:`answers_differ`: normalised, and neither contains the other as whole words)."""
        return self.has_graph and any(answers_differ(self.answers.get(a, ""), self.answers.get("own", ""))
                                      for a in ARMS[1:])

    def p(self, arm: str, gold: bool = False) -> float:
        """``P`` of the answer (or the gold answer) under ``arm``: label probability (closed), else
        ``exp log p(answer + eos)``."""
        return math.exp((self.gold_logp if gold else self.logp)[arm])

    def direction(self, arm: str, gold: bool = False) -> int:
        """``+1``: the own tokens made the answer (or the gold answer) more likely than ``arm``'s; ``-1``: less
        likely; ``0``: about as likely (below :data:`NEUTRAL_P` / :data:`NEUTRAL_NATS`)."""
        lp = self.gold_logp if gold else self.logp
        d = (self.p("own", gold) - self.p(arm, gold)) if self.closed else lp["own"] - lp[arm]
        return 0 if abs(d) < (NEUTRAL_P if self.closed else NEUTRAL_NATS) else (1 if d > 0 else -1)

    def direction_sentence(self, gold: bool = False) -> str:
        """One sentence: ``Your graph tokens made the answer 'X' less likely than zeroed tokens (P 0.12 vs 0.31)
        and more likely than permuted tokens (P 0.12 vs 0.05).``"""
        words = {1: "more likely than", -1: "less likely than", 0: "about as likely as"}
        parts = [f"{words[self.direction(a, gold)]} {a} tokens (P {p_text(self.p('own', gold))} vs "
                 f"{p_text(self.p(a, gold))})" for a in ARMS[1:]]
        what = f"the gold answer '{self.gold}'" if gold else f"the answer '{self.answer}'"
        return f"Your graph tokens made {what} {' and '.join(parts)}."

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

    def verdict(self) -> str:
        """What the page says, one paragraph per point (blank-line separated): the answer's direction against
        each other arm, the gold answer's (when known, and a different answer), whether another arm changes
        the answer, and one summary that never praises a shift that lowered the answer."""
        if not self.has_graph:
            return NO_GRAPH
        out = [self.direction_sentence()]
        gold = self.gold is not None and bool(self.gold_logp)
        if gold and answers_differ(self.gold, self.answer):
            out.append(self.direction_sentence(gold=True))
        elif gold:
            out.append(f"The answer is the gold answer '{self.gold}'.")
        if self.changed:
            other = [f"{a} tokens answer '{self.answers[a]}'" for a in ARMS[1:]
                     if answers_differ(self.answers[a], self.answers["own"])]
            out.append(f"The graph tokens changed the answer: {' and '.join(other)} instead.")
        else:
            worded = [f"{a}: '{self.answers[a]}'" for a in ARMS[1:] if self.answers.get(a) != self.answers["own"]]
            out.append("Zeroed and permuted tokens give the same answer" +
                       (f" (worded differently: {'; '.join(worded)})." if worded else "."))
        signs = [self.direction(a, g) for g in ((False, True) if gold else (False,)) for a in ARMS[1:]]
        if gold:
            gs = signs[len(ARMS) - 1:]
            if all(s > 0 for s in gs):
                out.append("Against both other arms, the graph tokens helped the gold answer.")
            elif all(s < 0 for s in gs):
                out.append("Against both other arms, the graph tokens worked against the gold answer.")
        if not any(signs) and not self.changed:
            out.append("The graph tokens hardly move it: this answer comes from the text.")
        return "\n\n".join(out)

    def table(self) -> list[dict[str, object]]:
        """Rows for the page: one per label (closed) or the answer (open), a column per arm."""
        if not self.has_graph:
            return []
        if self.closed:
            return [{"label": c + (" (gold)" if self.gold == c else ""), **{f"P ({a})": self.probs[a][c] for a in ARMS}}
                    for c in self.labels]
        gold = {"P(gold answer)": None} if self.gold is not None and self.gold_logp else {}
        return [{"answer": f"{a} tokens", "generated": self.answers[a], "log P(own answer)": self.logp[a],
                 "P(own answer)": float(np.exp(self.logp[a])),
                 **{k: self.p(a, gold=True) for k in gold}} for a in ARMS]


# ----------------------------------------------------------------------------- cells
def keep_masks(st: SubcomplexTensors, dim: int, index: int) -> tuple[Tensor, Tensor, Tensor]:
    """``(keep0 (n,), keep1 (m,), keep2 (f,))`` bool: the cells of ``st`` left when local cell ``index`` of rank
    ``dim`` goes with every cell on it (a node's 1-cells and the 2-cells on those; a 1-cell's 2-cells)."""
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
    return keep0, keep1, keep2


def drop_cells(st: SubcomplexTensors, dim: int, index: int) -> tuple[SubcomplexTensors, tuple[int, int, int]]:
    """``st`` without local cell ``index`` of rank ``dim`` and every cell on it (:func:`keep_masks`),
    renumbered; and how many cells per rank went."""
    n, m, f = st.shape
    keep0, keep1, keep2 = keep_masks(st, dim, index)
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


def removed_owners(sub, use_cells2: bool, masks: tuple[Tensor, Tensor, Tensor]) -> set[tuple[str, int]]:
    """The text-line owners (``("n", node)``, ``("e", 1-cell)``, ``("f", 2-cell)``, ids in the parent complex) of
    the cells :func:`keep_masks` removed; local index ``i`` of a rank is its ``i``-th sorted id, as in
    :func:`~toporag_core.nn.subcomplex_tensors`."""
    ids = (sub.nodes, sub.edges, sub.cells2 if use_cells2 else sub.cells2[:0])
    out: set[tuple[str, int]] = set()
    for tag, keep, cells in zip("nef", masks, ids):
        gone = np.unique(np.asarray(cells, np.int64))[~keep.numpy()]
        out.update((tag, int(c)) for c in gone.tolist())
    return out


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


def qa_rows(question: str, context: str | list[str], n: int) -> QABatch:
    """``n`` rows of one question and context (or one context per row), without cells (the soft prompt comes
    as ``soft``)."""
    contexts = list(context) if isinstance(context, list) else [context] * n
    return QABatch(cells=None, questions=[question] * n, contexts=contexts)


def _targets(effect: GraphTokenEffect, evidence: str | None) -> list[str]:
    """What is scored: the candidates (after the answer's evidence, for an evidence-first answer), or
    the open answer."""
    if not effect.closed:
        return [effect.answer]
    return [evidence_target(evidence, c) for c in effect.labels] if evidence is not None else list(effect.labels)


def _answer_logp(model, question: str, context: str | list[str], soft: Tensor, effect: GraphTokenEffect,
                 evidence: str | None, chunk: int = 8) -> Tensor:
    """``(R,)`` log-probability of ``effect.answer`` for each of ``R`` soft prompts ``(R, T, d)`` (with one
    context, or ``R`` contexts): among the candidates (closed: log-softmax of the scores), or under teacher
    forcing (open)."""
    targets = _targets(effect, evidence)
    out = []
    for i in range(0, soft.shape[0], chunk):
        part = soft[i:i + chunk]
        ctx = context[i:i + chunk] if isinstance(context, list) else context
        sc = model.score_choices(qa_rows(question, ctx, part.shape[0]), targets, soft=part,
                                 truncate=evidence is None).double()
        out.append(sc.log_softmax(-1)[:, effect.labels.index(effect.answer)] if effect.closed else sc[:, 0])
    return torch.cat(out)


def _closed_arms(model, question, context, tokens, effect: GraphTokenEffect, evidence: str | None) -> None:
    rows = with_context_kv(model, qa_rows(question, context, 1))  # the arms share the frozen part's cache
    sc = torch.stack([model.score_choices(rows, _targets(effect, evidence), soft=tokens[a],
                                          truncate=evidence is None)[0].double() for a in ARMS])
    prob = sc.softmax(-1)
    j = effect.labels.index(effect.answer)
    g = effect.labels.index(effect.gold) if effect.gold in effect.labels else None
    for k, a in enumerate(ARMS):
        effect.probs[a] = dict(zip(effect.labels, prob[k].tolist()))
        effect.logp[a] = float(prob[k, j].log())
        effect.answers[a] = effect.labels[int(sc[k].argmax())]
        if g is not None:
            effect.gold_logp[a] = float(prob[k, g].log())


def _open_arms(model, question, context, tokens, effect: GraphTokenEffect, max_new_tokens: int | None) -> None:
    """Open answer: ``log p(answer + eos)`` (and the gold answer's, in the same pass) per arm, and each arm's
    greedy answer."""
    soft = torch.cat([tokens[a] for a in ARMS])
    targets = [effect.answer] + ([effect.gold] if effect.gold is not None else [])
    batch = with_context_kv(model, qa_rows(question, context, len(ARMS)))  # one frozen-part pass for every arm
    lp = model.score_choices(batch, targets, soft=soft).double()
    rows = model.answer(batch, choices=[None] * len(ARMS), soft=soft, max_new_tokens=max_new_tokens)
    for k, a in enumerate(ARMS):
        effect.logp[a] = float(lp[k, 0])
        effect.probs[a] = {effect.answer: math.exp(float(lp[k, 0]))}
        effect.answers[a] = rows[k]["answer"]
        if effect.gold is not None:
            effect.gold_logp[a] = float(lp[k, 1])
    effect.answers["own"] = effect.answer  # what the page showed (the own arm regenerates the same text)


def graph_token_effect(pipe, ecx, sub, question: str, context: str, answer: str,
                       choices: tuple[str, ...] | None = None, evidence: str | None = None, seed: int = 0,
                       max_new_tokens: int | None = None, gold: str | None = None) -> GraphTokenEffect:
    """The three arms for one answer (no attribution: :func:`attribute` adds it).

    Args:
        pipe: the :class:`~toporag_core.answering.pipeline.TopoRAGPipeline` that answered.
        ecx, sub: the embedded graph and the retrieved :class:`~toporag_core.retrieval.Subcomplex`.
        question: the question as asked (put in the checkpoint's prompt form here, as answering does).
        context: the textualized subcomplex the LLM read (the answer's ``context``).
        answer: the answer given; ``choices``: its closed answer set (``None``: an open answer).
        evidence: what an evidence-first answer wrote before its label (labels are scored after it).
        gold: the gold answer, when known: scored beside the answer (closed: one of ``choices``, matched
            normalised; another gold of a closed set is ignored; open: ``log p(gold + eos)`` per arm).
    """
    model = pipe.model
    if not model.config.use_graph:
        return GraphTokenEffect(has_graph=False, answer=answer)
    closed = bool(choices) and answer in tuple(choices)
    if gold is not None and closed:
        gold = next((c for c in choices if normalize(c) == normalize(gold)), None)
    elif gold is not None and not normalize(gold):
        gold = None
    effect = GraphTokenEffect(has_graph=True, answer=answer, closed=closed,
                              labels=tuple(choices) if closed else (answer,), seed=seed, gold=gold)
    question = pipe.prompt_for(question)
    st = subcomplex_tensors(sub, ecx.emb, use_cells2=pipe.use_cells2)
    with pipe.lock, torch.no_grad():
        tokens = arm_tokens(model, st, seed)
        if closed:
            _closed_arms(model, question, context, tokens, effect, evidence)
        else:
            _open_arms(model, question, context, tokens, effect, max_new_tokens)
    return effect


def leave_one_out_contexts(pipe, sub, context: str, st: SubcomplexTensors, rows) -> list[str]:
    """For each cell row of :func:`cell_rows`, ``context`` without the lines of the cells that leave with it
    (:func:`keep_masks`, :func:`removed_owners`, :func:`~toporag_core.retrieval.textualize.drop_cell_lines`)."""
    return [drop_cell_lines(context, sub, removed_owners(sub, pipe.use_cells2, keep_masks(st, dim, local)),
                            include_cells2=pipe.use_cells2, fmt=pipe.text_format) for dim, local, *_ in rows]


def answer_effect(pipe, answer: str, choices: tuple[str, ...] | None = None) -> GraphTokenEffect:
    """The effect record of an answer before any arm is scored: what :func:`attribute` needs (the answer, its
    closed answer set) without the three arms' cost."""
    closed = bool(choices) and answer in tuple(choices)
    return GraphTokenEffect(has_graph=bool(pipe.model.config.use_graph), answer=answer, closed=closed,
                            labels=tuple(choices) if closed else (answer,))


def attribute(pipe, ecx, sub, question: str, context: str, effect: GraphTokenEffect, evidence: str | None = None,
              cap: int = 40, chunk: int = 8, text: bool = True) -> list[CellEffect]:
    """Leave-one-cell-out drops of the answer's log-probability (module docstring): each cell out of the graph
    tokens and (``text``) out of the context; the cells that supported the answer most first. Also stored as
    ``effect.cells``. ``[]`` for a model without graph tokens."""
    if not effect.has_graph:
        effect.cells = []
        return []
    model = pipe.model
    question = pipe.prompt_for(question)
    st = subcomplex_tensors(sub, ecx.emb, use_cells2=pipe.use_cells2)
    rows = cell_rows(sub, pipe.use_cells2, cap)
    cut = [drop_cells(st, dim, local) for dim, local, *_ in rows]
    contexts = leave_one_out_contexts(pipe, sub, context, st, rows) if text else [context] * len(rows)
    lines = [context.count("\n") - c.count("\n") for c in contexts]
    with pipe.lock, torch.no_grad():
        soft = model.graph_tokens(collate([st] + [c for c, _ in cut]).to(model.device))
        lp = _answer_logp(model, question, [context] + contexts, soft, effect, evidence, chunk)
    drop = (lp[0] - lp[1:]).tolist()
    cells = [CellEffect(dim=dim, cell=c, text=text, prize=prize, drop=float(d), removed=gone, lines=n)
             for (dim, _, c, text, prize), d, (_, gone), n in zip(rows, drop, cut, lines)]
    cells.sort(key=lambda c: -c.drop)
    effect.cells = cells
    return cells


def cells_table(cells: list[CellEffect], top: int = 10) -> list[dict[str, object]]:
    """Rows for the page: the ``top`` cells by drop (the most supportive first), the signed change of
    ``log P(answer)`` when the cell is removed and what the sign says."""
    return [{"dim": c.dim, "cell": c.cell, "text": c.text, "change in log P(answer) without it": float(c.change),
             "reads": c.reads, "removed with it (0/1/2-cells)": "/".join(map(str, c.removed)),
             "context lines removed": c.lines} for c in cells[:top]]
