"""Graph-token ablation arms for evaluation: does the answer depend on *this* question's graph tokens?

The model reads ``[graph tokens ; textualized subcomplex ; question]``. An arm changes only what the
LLM receives, with the checkpoint loaded exactly as for a normal run, so that a paired test
(``toporag compare``) on the per-question answers tells how much each part carries:

============  ========================================================================================
arm           what the model reads
============  ========================================================================================
normal        its own graph tokens ``G_i = proj(CWN(subcomplex_i))`` (``(T, d)``) and its own text
zero          ``0`` in place of ``G_i`` (the text alone, with the graph slots present)
permute       ``G_sigma(i)``: the graph tokens of another question of the same run, ``sigma`` a fixed
              seeded derangement (``sigma(i) != i``); an encoder that carries information loses accuracy
mean          ``mean_j G_j`` over the run: the constant that an inert encoder would learn
only          its own ``G_i`` and the question, no textualized context: what the graph path and the
              question carry together
only_permute  ``G_sigma(i)`` and the question, no textualized context: what the question carries with
              graph tokens in place; ``only`` minus ``only_permute`` is what the question's own tokens
              add (an ExplaGraphs question holds both arguments, so ``only`` is not the graph's share)
============  ========================================================================================

``sigma`` is drawn over the examples handed to :func:`~toporag_core.evaluation.evaluate.evaluate` (a resumed run
keeps it; a sharded run deranges within each shard). If ``normal`` and ``permute`` give the same
answers, the graph tokens act as a learned bias and the answers come from the text.

**Readback** (:func:`readback`) asks the step before: can the LLM read a question's cells back from its
graph tokens at all? Each example becomes a row with no context, the question :data:`READBACK_QUESTION`
and as target the first block of its textualized subcomplex (the node lines, e.g. ``lamp [6]: brown,
glass, small``), cut like every answer at the model's ``max_new_tokens`` (32-40 tokens in the shipped
checkpoints: the first three or four node lines). Its per-token negative log-likelihood ``L(G)``
(:meth:`TopoRAGModel.answer_nll`) is measured with the example's own tokens ``G_i`` and with
``G_sigma(i)``; tokens that carry the cells give ``L(G_i) < L(G_sigma(i))`` on most rows (a paired sign
test), tokens that carry the format only give equal losses. It needs no generation: 64 rows take about
20 seconds on a CPU.

Readback of the node lines can pass on names alone: after the SceneGraphs alignment stage and joint stage
the own-against-another gap sat in the name and index tokens (2.3 and 1.1 nats per token) and hardly in the
attributes (0.07), which are what most scene questions ask for. ``target="attributes"`` reads back one node's
attributes with its name in the question (``What are the attributes of the lamp?`` -> ``brown, glass,
small``), so only what the tokens carry about that node can lower the loss.
"""
from __future__ import annotations

import dataclasses
import zlib
from typing import Any, Sequence

import numpy as np

from ..retrieval.textualize import NODE_LINE, relation_block, relation_words

ARMS = ("normal", "zero", "permute", "mean", "only", "only_permute")
NO_TEXT_ARMS = ("only", "only_permute")  # arms that remove the textualized context


READBACK_QUESTION = "Question: List the nodes of the graph.\nAnswer:"
ATTRIBUTE_QUESTION = "Question: What are the attributes of the {name}?\nAnswer:"
RELATIONS_QUESTION = "Question: List the relations of the graph.\nAnswer:"
READBACK_TARGETS = ("nodes", "attributes", "relations")


def node_words(block: str) -> list[list[str]]:
    """The words of each node line of a compact textualized block, name first (``lamp [6]: brown, glass, small``
    -> ``["lamp", "brown", "glass", "small"]``; ``cup [2]`` -> ``["cup"]``), in text order; other lines are
    skipped."""
    out = []
    for m in map(NODE_LINE.match, block.splitlines()):
        if m:
            out.append([m["name"]] + [a.strip() for a in (m["attrs"] or "").split(",") if a.strip()])
    return out


def slot_words(config, block: str) -> list[list[str]]:
    """The words each cell of the rank that fills a model's slots first carries, in text order, from a readback
    row's answer ``block`` (:func:`readback_target`): each node line's (:func:`node_words`), or under
    ``token_text = "relations"`` each 1-cell's relation (:func:`~toporag_core.retrieval.textualize.relation_words`)."""
    return relation_words(block) if config.token_rank == 1 else node_words(block)


def readback_target(config) -> str:
    """What a model's alignment reads back: ``"relations"`` when its relations left the text
    (``token_text = "relations"``), else ``"nodes"``."""
    return "relations" if config.token_rank == 1 else "nodes"


def readback_rows(examples: Sequence[Any], target: str = "nodes", lines: int | None = None) -> list[Any]:
    """The readback rows of the examples that have a context (no context; ids unchanged):

    * ``"nodes"``: :data:`READBACK_QUESTION` and the first block of the context (up to its first blank line)
      as the answer;
    * ``"relations"`` (CSV text): :data:`RELATIONS_QUESTION` and the relation block (from its header
      ``src,edge_attr,dst`` to the next blank line) as the answer; examples without one give no row;
    * ``"attributes"`` (compact text, ``text = "compact"``): :data:`ATTRIBUTE_QUESTION` about one node of the
      first block whose name occurs once there, among its first ``lines`` node lines (the cells that have a
      graph token when nodes come first), and that node's attributes as the answer (``lamp [6]: brown, glass,
      small`` -> ``brown, glass, small``).
      The node is picked by a hash of the example's id, so every run asks the same. Examples without such a
      node (no attributed node lines, e.g. ExplaGraphs) give no row. The name is in the question, so the
      answer can only come from the graph tokens: what the nodes readback carries mostly as names.
    """
    if target not in READBACK_TARGETS:
        raise ValueError(f"readback target: one of {', '.join(READBACK_TARGETS)}, got {target!r}")
    rows = []
    for e in examples:
        block = e.context.strip().split("\n\n")[0] if e.context.strip() else ""
        if not block:
            continue
        if target == "nodes":
            rows.append(dataclasses.replace(e, context="", question=READBACK_QUESTION, answer=block))
            continue
        if target == "relations":
            relations = relation_block(e.context)
            if relations:
                rows.append(dataclasses.replace(e, context="", question=RELATIONS_QUESTION, answer=relations))
            continue
        found = [m for m in map(NODE_LINE.match, block.splitlines()) if m and m["attrs"]]
        counts: dict[str, int] = {}
        for m in found:
            counts[m["name"]] = counts.get(m["name"], 0) + 1
        pick = [m for m in found[:lines] if counts[m["name"]] == 1]
        if pick:
            m = pick[zlib.crc32(str(e.id).encode()) % len(pick)]
            rows.append(dataclasses.replace(e, context="", question=ATTRIBUTE_QUESTION.format(name=m["name"]),
                                            answer=m["attrs"].strip()))
    return rows


def readback(model, examples: Sequence[Any], batch_size: int = 8, seed: int = 0,
             target: str = "nodes") -> dict[str, Any]:
    """Own against another example's graph tokens on :func:`readback_rows` (see the module docstring):
    ``{"n", "nll_own", "nll_other"`` (mean per-token NLL), ``"own_lower", "other_lower", "p_value"}`` (exact
    two-sided sign test on the rows' paired losses). ``target``: :data:`READBACK_TARGETS`; ``"attributes"``
    asks about the nodes among the first ``num_graph_tokens - 1`` node lines."""
    import torch

    from ..metrics import mcnemar_exact
    from ..tasks.batching import make_batch

    rows = readback_rows(examples, target, token_lines(model))
    if len(rows) < 2:
        need = {"attributes": " and a tokened node line with attributes and a name of its own",
                "relations": " with a CSV relation block (retrieval text 'csv')"}.get(target, "")
        raise ValueError(f"readback ({target}) pairs each example with another one's graph tokens: it needs at "
                         f"least 2 examples with a textualized context{need}, got {len(rows)} of {len(examples)}")
    sigma = derangement(len(rows), seed)
    own, other = [], []
    with torch.no_grad():
        for i in range(0, len(rows), batch_size):
            chunk = rows[i:i + batch_size]
            batch = make_batch(chunk).to(model.device)
            partners = make_batch([rows[int(j)] for j in sigma[i:i + batch_size]], with_answers=False)
            own += model.answer_nll(batch).tolist()
            other += model.answer_nll(batch, soft=model.graph_tokens(partners.to(model.device).cells)).tolist()
    lower, higher, p = mcnemar_exact([a < b for a, b in zip(own, other)], [b < a for a, b in zip(own, other)])
    return {"n": len(rows), "nll_own": float(np.mean(own)), "nll_other": float(np.mean(other)),
            "own_lower": lower, "other_lower": higher, "p_value": p}


def token_lines(model) -> int:
    """How many of a subcomplex's first node lines can have a graph token of their own:
    :attr:`~toporag_core.model.TopoRAGConfig.cell_slots`."""
    return model.config.cell_slots


def derangement(n: int, seed: int = 0) -> np.ndarray:
    """A seeded permutation ``sigma`` of ``range(n)`` with no fixed point (``n >= 2``): a random order
    ``p`` with each ``p[j]`` sent to ``p[j + 1 mod n]`` (one cycle through all of them)."""
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 examples, got {n}")
    p = np.random.default_rng(seed).permutation(n)
    sigma = np.empty(n, dtype=np.int64)
    sigma[p] = np.roll(p, -1)
    return sigma


def known_arm(arm: str) -> str:
    """``arm`` if it is one of :data:`ARMS`; one clear ValueError otherwise."""
    if arm not in ARMS:
        raise ValueError(f"graph_tokens: unknown arm {arm!r}; choose one of {', '.join(ARMS)}")
    return arm


def check_arm(arm: str, use_graph: bool) -> str:
    """``arm`` if it is known and makes sense for the model; one clear ValueError otherwise."""
    known_arm(arm)
    if arm != "normal" and not use_graph:
        raise ValueError(f"graph_tokens: arm {arm!r} needs a checkpoint with graph tokens (this one has none)")
    return arm


@dataclasses.dataclass
class GraphTokenArm:
    """One arm prepared for a run over ``examples`` (the list the evaluator was given).

    ``inputs(chunk)`` gives the examples as the model should read them (``only``: no context);
    ``tokens(model, batch, chunk)`` the soft prompt ``(B, T, d)`` to pass as ``soft=`` (``None``: the
    model computes its own, i.e. ``normal``)."""

    arm: str
    examples: Sequence[Any]
    seed: int = 0
    batch_size: int = 8
    _index: dict[str, int] = dataclasses.field(init=False, default_factory=dict)
    _sigma: np.ndarray | None = dataclasses.field(init=False, default=None)
    _mean: Any = dataclasses.field(init=False, default=None)

    def __post_init__(self) -> None:
        known_arm(self.arm)
        self._index = {str(e.id): i for i, e in enumerate(self.examples)}
        if self.arm in ("permute", "only_permute"):
            self._sigma = derangement(len(self.examples), self.seed)

    def inputs(self, chunk: Sequence[Any]) -> list[Any]:
        if self.arm in NO_TEXT_ARMS:
            return [dataclasses.replace(e, context="") for e in chunk]
        return list(chunk)

    def partner(self, example: Any) -> Any:
        """The example whose graph tokens ``example`` reads under ``permute`` / ``only_permute``."""
        return self.examples[int(self._sigma[self._index[str(example.id)]])]

    def tokens(self, model, batch, chunk: Sequence[Any]):
        """The soft prompt for ``batch`` (built from ``chunk``) under this arm; ``None`` for ``normal``."""
        if self.arm in ("normal", "only") or not model.config.use_graph:
            return None
        if self.arm == "zero":
            return model.graph_tokens(batch.cells).mul(0)
        if self.arm == "mean":
            if self._mean is None:
                self._mean = self._run_mean(model)
            return self._mean.expand(len(chunk), -1, -1)
        return model.graph_tokens(self._cells(model, [self.partner(e) for e in chunk]))

    def _cells(self, model, examples: Sequence[Any]):
        from ..tasks.batching import make_batch

        return make_batch(list(examples), with_answers=False, use_graph=True).to(model.device).cells

    def _run_mean(self, model):
        """``mean_j G_j`` over every example of the run, ``(1, T, d)``."""
        total, n, dtype = None, 0, None
        for i in range(0, len(self.examples), self.batch_size):
            part = self.examples[i:i + self.batch_size]
            g = model.graph_tokens(self._cells(model, part))
            dtype = g.dtype
            g = g.float().sum(0, keepdim=True)
            total = g if total is None else total + g
            n += len(part)
        return (total / n).to(dtype)
