"""Alignment stage: teach the LLM to read a subcomplex's cells from its graph tokens, before the joint stage.

Why: trained jointly with the text in view, nothing requires the LLM to read a cell from its token, and the
graph tokens can settle into whatever helps every question alike (the format);
:func:`~toporag_core.evaluation.arms.readback` measures whether a question's own tokens make its node lines
likelier than another question's. LLaVA's first stage teaches the reading with the LLM frozen; here the target
is the textualized subcomplex itself.

Rows (:func:`~toporag_core.evaluation.arms.readback_rows`): no context, the question "List the nodes of the graph.",
as target ``y_i`` the first block of example ``i``'s textualized subcomplex (its node lines, cut at
``max_new_tokens``). For a batch of ``B`` rows with graph tokens ``G (B, T, H)`` and ``G'`` the same
tokens rolled by one row (``G'_i = G_{i-1}``: another subcomplex's)::

    L_own_i   = NLL(y_i | G_i, q)          L_other_i = NLL(y_i | G'_i, q)     (per-token means, (B,))
    loss      = mean_i L_own_i + w * mean_i max(0, m + L_own_i - L_other_i)

The first term is the plain readback loss; on its own it is lowered by the format, which any graph's tokens
give. The hinge (margin ``m`` nats per token, weight ``w``) is zero for tokens that say nothing a
question's own cells do not share with another's, so its gradient goes only into what distinguishes them.

Only the graph encoder and the projector train (the LLM and its LoRA adapters stay frozen, so the joint
stage starts from the LLM it was trained with). Every ``eval_every`` steps the first 64 validation
examples are read back (own against another example's tokens, :func:`~toporag_core.evaluation.arms.readback`) and the
state with the widest gap ``nll_other - nll_own`` is kept.

The joint stage can forget the reading when it trains on answers alone. :class:`JointReadback` keeps the same
loss as a term of the joint loss, with weight ``lambda``
(``TrainConfig.joint_align_weight``)::

    loss_step = L_answer(answer rows) + lambda * loss(B readback rows drawn for this step)

and reads back the validation examples at every evaluation of the joint stage (``log.jsonl``: ``readback_*``).

**Word targets** (``TrainConfig.align_words``, weight ``beta``): a direct target for every graph token, for
what the readback loss through the frozen LLM does not teach (a soft token is read about as one word, so a
node's attributes need tokens of their own). With ``k = tokens_per_cell`` tokens per node slot (nodes first),
:func:`word_loss` gives the ``j``-th token of node slot ``s`` as target the LLM's own input embedding
``E(w_{s,j})`` of the ``j``-th word of that node's line (name, then attributes; a word of several tokens: their
mean)::

    L_words = mean_{(i, s, j)} 1 - cos(G_i[(1 + s) k + j], E(w_{i,s,j}))
    loss    = (the contrastive readback loss) + beta * L_words

``L_words`` needs no LLM forward, so ``TrainConfig.word_steps`` steps of it alone (encoder and projector only)
can come first.

**Relations** (``TopoRAGConfig.token_text = "relations"``, relations first, CSV text: ExplaGraphs, whose stance
lives in the relations). The readback rows ask for the relation block (``List the relations of the graph.`` ->
``src,edge_attr,dst`` and its lines) and the word targets aim at the 1-cell slots: token ``j`` of the ``c``-th
1-cell's slot toward the ``j``-th word of its relation (``not capable of``). Slots are where
:meth:`~toporag_core.model.graph_tokens.CellTokens.slots` says the encoder put each cell (1-cells after the
nodes that also got a slot, in text order), for nodes as for relations.

Measured results: ``docs/results/graph_tokens.md``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from ..evaluation.arms import readback, readback_rows, readback_target, slot_words
from ..tasks.batching import make_batch

VAL_EXAMPLES = 64  # validation examples read back at each alignment check


def contrastive_readback_loss(model, batch, margin: float, weight: float = 1.0,
                               soft: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(loss, L_own (B,), L_other (B,))`` of a batch of readback rows (module docstring; ``B >= 2``);
    ``soft``: the batch's graph tokens when already computed."""
    if len(batch) < 2:
        raise ValueError("the contrastive readback loss needs at least 2 rows per batch (another row's tokens)")
    soft = model.graph_tokens(batch.cells) if soft is None else soft
    own = model.answer_nll(batch, soft=soft)
    other = model.answer_nll(batch, soft=soft.roll(1, 0))
    return own.mean() + weight * torch.relu(margin + own - other).mean(), own, other


def check_word_targets(model) -> None:
    """``ValueError`` unless the model's slots are filled first by the rank that has word targets
    (``TopoRAGConfig.token_rank``: nodes, or 1-cells under ``token_text = "relations"``)."""
    cfg = model.config
    rank = cfg.token_rank
    if not cfg.use_graph or cfg.graph_path != "cells" or cfg.cell_order[0] != rank:
        first = "0 (nodes first)" if rank == 0 else "1 (relations first, token_text='relations')"
        raise ValueError(f"align_words targets {'node' if rank == 0 else '1-cell'} slots: it needs graph_path='cells' "
                         f"with cell_order starting with {first}, got graph_path={cfg.graph_path!r}, "
                         f"cell_order={list(cfg.cell_order)}")


def word_loss(model, rows: Sequence[Any], soft: Tensor, cells) -> Tensor:
    """``L_words`` (module docstring) of readback rows ``rows`` (their answer is the block that
    :func:`~toporag_core.evaluation.arms.slot_words` reads) with graph tokens ``soft (B, T k, H)`` of ``cells`` (their
    batch): the ``j``-th token of the slot of the ``c``-th cell of rank ``TopoRAGConfig.token_rank`` targets the
    ``j``-th word of the ``c``-th line (slots as :meth:`~toporag_core.model.graph_tokens.CellTokens.slots` places
    them; a line without a cell there gets no target). Zero (with a gradient path) when no row has a target."""
    cfg = model.config
    k = cfg.tokens_per_cell
    owner, slot, rank, local = model.projector.slots(cells, cfg.cwn.use_cells2)
    mine = rank == cfg.token_rank
    words = [slot_words(cfg, r.answer) for r in rows]
    row, pos, ids, offsets = [], [], [], []
    for i, s, c in zip(owner[mine].tolist(), slot[mine].tolist(), local[mine].tolist()):
        if c >= len(words[i]):
            continue
        for j, w in enumerate(words[i][c][:k]):
            piece = model.prompter.ids(" " + w)
            if piece:
                row.append(i)
                pos.append(s * k + j)
                offsets.append(len(ids))
                ids += piece
    if not row:
        return soft.sum() * 0.0
    emb = model.llm.get_input_embeddings().weight
    dev = soft.device
    target = nn.functional.embedding_bag(torch.tensor(ids, device=dev), emb, torch.tensor(offsets, device=dev),
                                         mode="mean")
    got = soft[torch.tensor(row, device=dev), torch.tensor(pos, device=dev)]
    return (1.0 - nn.functional.cosine_similarity(got.float(), target.float(), dim=-1)).mean()


def word_steps(model, rows: Sequence[Any], cfg, rng: np.random.Generator, update, log) -> None:
    """``cfg.word_steps`` steps of ``L_words`` alone on batches of ``rows`` (no LLM forward); ``update(loss)`` takes
    an optimiser step; every 50th step's loss goes to ``log`` as ``{"word_step", "words"}``."""
    bs = min(cfg.batch_size, len(rows))
    for step in range(1, cfg.word_steps + 1):
        pick = [rows[int(i)] for i in rng.choice(len(rows), size=bs, replace=False)]
        cells = make_batch(pick, with_answers=False).to(model.device).cells
        words = word_loss(model, pick, model.graph_tokens(cells), cells)
        update(cfg.align_words * words)
        if step % 50 == 0 or step == cfg.word_steps:
            log.write(json.dumps({"word_step": step, "words": round(words.item(), 5)}) + "\n")


def validation_examples(val_set: Sequence[Any]) -> list[Any]:
    """The validation examples read back at each check: the first :data:`VAL_EXAMPLES` with a context."""
    return [e for e in val_set if e.context.strip()][:VAL_EXAMPLES]


def read_back(model, val: Sequence[Any], batch_size: int) -> dict[str, Any]:
    """:func:`~toporag_core.evaluation.arms.readback` of ``val`` (of the model's
    :func:`~toporag_core.evaluation.arms.readback_target`) in eval mode; the model's mode is restored afterwards."""
    was = model.training
    model.eval()
    try:
        return readback(model, val, batch_size=batch_size, target=readback_target(model.config))
    finally:
        model.train(was)


class JointReadback:
    """The contrastive readback loss as a term of the joint stage (module docstring): ``loss(model, step)``
    is ``lambda * loss`` (plus ``beta * L_words`` with ``align_words``) of ``batch_size`` readback rows of the
    training examples, drawn without replacement from a generator seeded by ``(seed, step)`` (a resumed run
    draws the same rows); ``check(model)`` reads back the first :data:`VAL_EXAMPLES` validation examples with
    a context. ``target``: the rows' :data:`~toporag_core.evaluation.arms.READBACK_TARGETS` name (the model's
    :func:`~toporag_core.evaluation.arms.readback_target`)."""

    def __init__(self, train_set: Sequence[Any], val_set: Sequence[Any], cfg, target: str = "nodes") -> None:
        self.rows = readback_rows(train_set, target)
        self.val = validation_examples(val_set)
        self.cfg = cfg
        self.size = min(cfg.batch_size, len(self.rows))
        if self.size < 2 or len(self.val) < 2:
            raise ValueError(f"joint_align_weight needs at least 2 training rows per batch and 2 validation examples "
                             f"with a textualized context (got batches of {self.size} and {len(self.val)} examples)")

    def loss(self, model, step: int) -> tuple[Tensor, dict[str, float]]:
        """``(lambda * loss, {"readback_loss", "readback_own", "readback_other"})`` for optimiser step ``step``."""
        pick = np.random.default_rng([self.cfg.seed, step]).choice(len(self.rows), size=self.size, replace=False)
        rows = [self.rows[int(i)] for i in pick]
        batch = make_batch(rows).to(model.device)
        soft = model.graph_tokens(batch.cells)
        loss, own, other = contrastive_readback_loss(model, batch, self.cfg.align_margin, self.cfg.align_weight, soft)
        log = {"readback_loss": round(loss.item(), 5), "readback_own": round(own.mean().item(), 5),
               "readback_other": round(other.mean().item(), 5)}
        if self.cfg.align_words:
            words = word_loss(model, rows, soft, batch.cells)
            loss = loss + self.cfg.align_words * words
            log["readback_words"] = round(words.item(), 5)
        return self.cfg.joint_align_weight * loss, log

    def check(self, model) -> dict[str, Any]:
        """:func:`read_back` of the validation examples, keys prefixed ``readback_``."""
        return {f"readback_{k}": v for k, v in read_back(model, self.val, self.cfg.eval_batch_size).items()}


def graph_parameters(model) -> dict[str, list[nn.Parameter]]:
    """The parameters the alignment stage trains: ``{"projector": [...], "encoder": [...]}``."""
    return {"projector": list(model.projector.parameters()), "encoder": list(model.encoder.parameters())}


def align(model, train_set: Sequence[Any], val_set: Sequence[Any], cfg, out: str | Path) -> dict[str, Any]:
    """Run ``cfg.align_steps`` alignment steps on ``model`` in place (a :class:`~toporag_core.training.TrainConfig`:
    ``align_steps``, ``align_lr`` for the projector, ``encoder_lr`` (default ``align_lr``) for the encoder,
    ``align_margin``, ``align_weight``, ``batch_size``, ``grad_clip``, ``eval_every`` (default 100), ``seed``);
    log lines go to ``out/align_log.jsonl``. The LLM's and LoRA's ``requires_grad`` flags are restored afterwards.
    Returns ``{"align_steps", "align_best_step", "align_readback"}`` (the kept state's validation readback)."""
    if not model.config.use_graph:
        raise ValueError("the alignment stage needs a model with graph tokens (use_graph=True)")
    rows = readback_rows(train_set, readback_target(model.config))
    val = validation_examples(val_set)
    if len(rows) < 2 or len(val) < 2:
        raise ValueError("the alignment stage needs training and validation examples with a textualized context "
                         f"(got {len(rows)} and {len(val)})")
    if cfg.align_words:
        check_word_targets(model)
    if min(cfg.batch_size, len(rows)) < 2:
        raise ValueError(f"the alignment stage needs batches of at least 2 rows (another row's tokens are the "
                         f"contrast), got batch_size {cfg.batch_size}")
    groups = graph_parameters(model)
    mine = {id(p) for ps in groups.values() for p in ps}
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    for p in model.parameters():
        p.requires_grad_(id(p) in mine)
    opt = torch.optim.AdamW([{"params": groups["projector"], "lr": cfg.align_lr},
                             {"params": groups["encoder"], "lr": cfg.encoder_lr or cfg.align_lr}], weight_decay=0.0)
    rng = np.random.default_rng(cfg.seed)
    bs, every = min(cfg.batch_size, len(rows)), cfg.eval_every or 100
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    best: dict[str, Any] = {"gap": -float("inf"), "step": 0, "state": None, "readback": None}
    t0 = time.time()

    def update(loss: Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            nn.utils.clip_grad_norm_([p for ps in groups.values() for p in ps], cfg.grad_clip)
        opt.step()

    def check(step: int, log) -> None:
        res = read_back(model, val, cfg.eval_batch_size)
        gap = res["nll_other"] - res["nll_own"]
        log.write(json.dumps({"align_step": step, **res, "seconds": round(time.time() - t0, 1)}) + "\n")
        log.flush()
        if gap > best["gap"]:
            best.update(gap=gap, step=step, readback=res,
                        state={k: v.detach().clone() for k, v in model.state_dict().items()
                               if k.startswith(("encoder.", "projector."))})

    try:
        with open(out / "align_log.jsonl", "a") as log:
            check(0, log)
            model.train()
            if cfg.word_steps:
                word_steps(model, rows, cfg, rng, update, log)
                check(0, log)
            for step in range(1, cfg.align_steps + 1):
                pick = [rows[int(i)] for i in rng.choice(len(rows), size=bs, replace=False)]
                batch = make_batch(pick).to(model.device)
                soft = model.graph_tokens(batch.cells)
                loss, own, other = contrastive_readback_loss(model, batch, cfg.align_margin, cfg.align_weight, soft)
                extra = {}
                if cfg.align_words:
                    words = word_loss(model, pick, soft, batch.cells)
                    loss = loss + cfg.align_words * words
                    extra["words"] = round(words.item(), 5)
                update(loss)
                log.write(json.dumps({"align_step": step, "loss": round(loss.item(), 5),
                                      "own": round(own.mean().item(), 5), "other": round(other.mean().item(), 5),
                                      **extra}) + "\n")
                if step % every == 0 or step == cfg.align_steps:
                    check(step, log)
    finally:
        for n, p in model.named_parameters():
            p.requires_grad_(flags[n])
    model.load_state_dict(best["state"], strict=False)
    return {"align_steps": cfg.align_steps, "align_best_step": best["step"], "align_readback": best["readback"]}


def align_stage(model, train_set: Sequence[Any], val_set: Sequence[Any], cfg, out: str | Path,
                meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`align`, then the aligned model saved to ``out/aligned`` (with ``meta``, the config and the
    alignment summary: ``toporag eval --readback`` and the graph-token arms read it as any checkpoint).
    Returns the summary, which the joint stage's checkpoints record too (``toporag train`` runs this
    before :func:`~toporag_core.training.train` when ``align_steps > 0``)."""
    from dataclasses import asdict

    summary = align(model, train_set, val_set, cfg, out)
    model.save(Path(out) / "aligned", extra={"train": asdict(cfg), **(meta or {}), **summary})
    return summary
