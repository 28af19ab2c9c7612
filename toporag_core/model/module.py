"""TopoRAG's generator (eqs. 21-23): a frozen causal LM prompted by a cell-complex encoder.

* ``graph_tokens``: ``(B, T, H)`` soft prompt tokens in the LLM's embedding space (``T =
  num_graph_tokens``), placed where the layout says (:mod:`~toporag_core.model.prompt`). Two paths
  (``config.graph_path``): ``"cells"``, one token per retrieved cell from the CW encoder's cell states
  plus a whole-subcomplex slot (:mod:`~toporag_core.model.graph_tokens`), and ``"pooled"``, the
  encoder's mean-pooled ``(B, hidden)`` through G-Retriever's MLP projector (the older checkpoints);
* ``forward(batch) -> loss``: mean cross-entropy over the answer tokens and the closing EOS (labels are
  ``-100`` everywhere else); in the cacheable layout the frozen part comes from its key/value cache
  (:mod:`~toporag_core.model.frozen_kv`) and only the tail runs with grad;
* decoding: :meth:`TopoRAGModel.answer` (:mod:`~toporag_core.model.dispatch`) over the decoders of
  :mod:`~toporag_core.model.decode`; ``save`` / ``load``: :mod:`~toporag_core.model.checkpoint`.

Modes: ``"soft_prompt"`` (graph tokens only, the paper's frozen setting) and ``"lora"`` (plus peft LoRA,
r=8, alpha=16, dropout 0.05 on ``q_proj``/``v_proj`` by default, the paper's "w/ LoRA" row; injected
*into the given LLM instance*, so do not share one LLM object between a LoRA model and another model).
LoRA weights are kept in float32 whatever the LLM's precision.

Why not ``torch_geometric.llm.models.LLM`` / ``GRetriever``: its constructor loads the model itself by
name (hub metadata query, slow tokenizer), so it cannot take our offline-converted or already-loaded
LLM; in its chat-template path it does not truncate the context at all; it places the soft tokens before
the whole chat prompt; and its GNN interface is ``(x, edge_index, batch)``, not a cell complex. We keep
its conventions (``-100`` labels, left padding with the pad token's embedding, soft tokens right after
the opening tokens, the ``[INST]`` fallback) and write the rest ourselves.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..nn import CellBatch, build_encoder
from . import checkpoint, decode, dispatch, frozen_kv
from .qa_batch import QABatch
from .config import CACHEABLE_POSITIONS, TopoRAGConfig
from .graph_tokens import CellTokens, embedding_rms
from .prompt import Prompter
from .styles import get_style

IGNORE_INDEX = -100  # label value the LM loss skips (same as PyG / HF)


class TopoRAGModel(nn.Module):
    """Cell-complex encoder + projector + frozen LLM (optionally LoRA)."""

    def __init__(self, config: TopoRAGConfig, llm: nn.Module, tokenizer) -> None:
        super().__init__()
        self.config = config
        self.llm = llm
        self.tokenizer = tokenizer
        for p in self.llm.parameters():  # the LLM never trains (adapters below are added after)
            p.requires_grad_(False)
        self.llm.eval()
        hidden = int(llm.get_input_embeddings().weight.shape[1])
        self.llm_hidden = hidden
        self.encoder, self.projector = None, None
        if config.use_graph:
            self.encoder = build_encoder(config.encoder, config.cwn)
            if config.graph_path == "cells":
                self.projector = CellTokens(config.cwn.in_dim, self.encoder.out_dim, config.projector_hidden,
                                            hidden, config.num_graph_tokens, embedding_rms(llm),
                                            cell_order=config.cell_order, per_cell=config.tokens_per_cell)
            else:
                self.projector = nn.Sequential(  # G-Retriever's projector shape
                    nn.Linear(self.encoder.out_dim, config.projector_hidden), nn.Sigmoid(),
                    nn.Linear(config.projector_hidden, config.num_graph_tokens * hidden))
        if config.mode == "lora":
            from peft import LoraConfig, inject_adapter_in_model

            lcfg = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                              target_modules=list(config.lora_targets), bias="none")
            inject_adapter_in_model(lcfg, self.llm)  # base weights stay frozen; lora_A/B train
            for n, p in self.llm.named_parameters():  # adapters train in float32 whatever the LLM's dtype
                if "lora_" in n:
                    p.data = p.data.float()
        self.prompter = Prompter(config, tokenizer)
        self._stops: decode.StopTokens | None = None
        self.lookup_tokens: int | None = None  # prompt-lookup drafts of generate (None: by answer_style)
        self.to(self.device)

    # -- properties ---------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.llm.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.llm.get_input_embeddings().weight.dtype

    @property
    def cacheable(self) -> bool:
        """A frozen part before the soft tokens (``"before_question"``): its key/value cache does not
        depend on anything trainable and can be precomputed."""
        return self.config.graph_position in CACHEABLE_POSITIONS

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

    @property
    def stops(self) -> decode.StopTokens:
        """What ends a generated row (built on first use: it decodes the whole vocabulary)."""
        if self._stops is None:
            self._stops = decode.StopTokens(self.llm, self.tokenizer, self.prompter.pieces["eos"], self.device)
        return self._stops

    def train(self, mode: bool = True) -> TopoRAGModel:
        super().train(mode)
        if self.config.mode != "lora":
            self.llm.eval()  # frozen: no dropout inside the LLM (LoRA keeps its own dropout)
        return self

    # -- prompt (model/prompt.py) ---------------------------------------------------
    def answer_ids(self, answer: str) -> list[int]:
        """The label tokens of one answer: its ids cut at ``max_new_tokens``, then EOS (the positions
        that carry the training loss; ``len`` of it is what the distributed loss weighting counts)."""
        return self.prompter.answer_ids(answer)

    def prompt_layout_ids(self) -> dict[str, list[int]]:
        """Token ids of the fixed text before and after the user content, and of the answer's end."""
        return self.prompter.pieces

    def num_soft_tokens(self) -> int:
        return self.prompter.num_soft_tokens()

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the context is tokenised (no special tokens; memoised)."""
        return len(self.prompter.ids(text))

    def context_budget(self, question: str) -> int:
        return self.prompter.context_budget(question)

    def context_ids(self, context: str, question: str) -> tuple[list[int], list[int]]:
        return self.prompter.context_ids(context, question)

    def prompt_layout(self, context: str, question: str) -> dict[str, Any]:
        """What the LLM actually reads for one example (for the app's prompt view)."""
        return self.prompter.layout(context, question)

    def frozen_ids(self, context: str, question: str) -> list[int]:
        return self.prompter.frozen_ids(context, question)

    # -- the model ----------------------------------------------------------------
    def context_kv(self, batch: QABatch) -> list[Tensor]:
        """The frozen part's key/value cache per example (:func:`~toporag_core.model.frozen_kv.context_kv`)."""
        return frozen_kv.context_kv(self, batch)

    def pooled(self, cells: CellBatch) -> Tensor:
        """``(B, d_enc)`` float32: the encoder's mean-pooled subcomplex."""
        return self.encoder(cells).float()

    def graph_tokens(self, cells: CellBatch) -> Tensor:
        """``(B, T, H)`` soft prompt tokens from a batch of subcomplexes."""
        if self.config.graph_path == "cells":
            return self.projector(self.encoder.cell_states(cells), cells).float()
        pooled = self.pooled(cells)
        return self.projector(pooled).view(pooled.shape[0], self.config.num_graph_tokens, self.llm_hidden)

    def _embed(self, ids: list[int]) -> Tensor:
        return self.llm.get_input_embeddings()(torch.tensor(ids, dtype=torch.long, device=self.device))

    def _inputs(self, batch: QABatch, with_answers: bool, soft: Tensor | None = None):
        """``(past, attention_mask (B, P + T), position_ids (B, T), tail embeds (B, T, H), labels (B, T) | None)``.

        ``past`` is the frozen part's cache (``None`` in the prefix layout, ``P = 0``): taken from
        ``batch.kv`` when precomputed, else computed here without grad. The tail is left-padded.
        """
        dev = self.device
        if self.config.use_graph:
            soft = (self.graph_tokens(batch.cells) if soft is None else soft).to(self.dtype)
        else:
            soft = None
        rows = [self.prompter.row(ctx, q) for ctx, q in zip(batch.contexts, batch.questions)]
        past, fmask = None, torch.zeros((len(batch), 0), dtype=torch.long, device=dev)
        if self.cacheable:
            past, fmask = frozen_kv.frozen_cache(self, batch, [r[0] for r in rows])
        seqs, labels = [], []
        for i, (_, before, after) in enumerate(rows):
            ans = self.answer_ids(batch.answers[i]) if with_answers else []
            parts = ([self._embed(before)] if before else []) + ([soft[i]] if soft is not None else [])
            seq = torch.cat(parts + [self._embed(after + ans)], dim=0)
            seqs.append(seq)
            labels.append([IGNORE_INDEX] * (seq.shape[0] - len(ans)) + ans)
        length = max(s.shape[0] for s in seqs)
        pad_e = self._embed([self.pad_id])
        embeds = torch.stack([torch.cat([pad_e.expand(length - s.shape[0], -1), s]) for s in seqs])
        tmask = torch.tensor([[0] * (length - s.shape[0]) + [1] * s.shape[0] for s in seqs], device=dev)
        mask = torch.cat([fmask, tmask], dim=1)
        # Positions count real tokens only, so a padded row sees the same positions as alone.
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, fmask.shape[1]:]
        lab = None
        if with_answers:
            lab = torch.tensor([[IGNORE_INDEX] * (length - len(x)) + x for x in labels], device=dev)
        return past, mask, pos, embeds, lab

    def build_inputs(self, batch: QABatch, with_answers: bool,
                     soft: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Prefix layout only: left-padded ``inputs_embeds (B, S, H)``, ``attention_mask (B, S)``,
        ``position_ids (B, S)`` and ``labels (B, S)`` (``None`` unless ``with_answers``)."""
        if self.cacheable:
            raise ValueError("build_inputs() is the prefix layout; the cacheable layout has a frozen part")
        _, mask, pos, embeds, lab = self._inputs(batch, with_answers, soft)
        return embeds, mask, pos, lab

    def forward(self, batch: QABatch) -> Tensor:
        """Mean cross-entropy over the answer tokens (+ EOS) of the batch."""
        return self.answer_token_nll(batch)[0].mean()

    def answer_nll(self, batch: QABatch, soft: Tensor | None = None) -> Tensor:
        """``(B,)`` each row's mean cross-entropy over its answer tokens (+ EOS), with ``soft`` (``(B, T, H)``)
        in place of the batch's own graph tokens when given (the ablation arms' and readback's measure)."""
        ce, row, _ = self.answer_token_nll(batch, soft)
        n = len(batch)
        total = torch.zeros(n, dtype=ce.dtype, device=ce.device).index_add_(0, row, ce)
        return total / torch.bincount(row, minlength=n).clamp(min=1)

    def answer_token_nll(self, batch: QABatch, soft: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """``(K,)`` cross-entropy of every answer token of the batch (+ EOS), ``(K,)`` the row it belongs to and
        ``(K,)`` its token id, rows in order (which tokens a graph path helps: experiments/bench_readback_tokens.py);
        ``soft`` as in :meth:`answer_nll`."""
        if batch.answers is None:
            raise ValueError("forward() needs batch.answers (training targets); use answer() otherwise")
        past, mask, pos, embeds, labels = self._inputs(batch, with_answers=True, soft=soft)
        body, head = self.llm.get_decoder(), self.llm.get_output_embeddings()
        hidden = body(inputs_embeds=embeds, attention_mask=mask, position_ids=pos, past_key_values=past,
                      use_cache=past is not None).last_hidden_state
        # Next-token loss (position t predicts token t+1), with the vocabulary projection applied
        # only where there is a target: ~20% of a small LM's compute is the (S x vocab) head.
        target = labels[:, 1:]
        keep = target != IGNORE_INDEX
        logits = head(hidden[:, :-1][keep])
        ce = nn.functional.cross_entropy(logits.float(), target[keep], reduction="none")
        return ce, keep.nonzero()[:, 0], target[keep]

    def prompt_inputs(self, batch: QABatch, soft: Tensor | None = None):
        """The prompt without answers: ``(past | None, attention_mask (B, P + T), position_ids (B, T),
        tail embeds (B, T, H))`` (the frozen part's cache and the left-padded tail, as :meth:`forward`
        and :meth:`prompt_pass` read them)."""
        return self._inputs(batch, with_answers=False, soft=soft)[:4]

    def prompt_pass(self, batch: QABatch, soft: Tensor | None):
        """Run the whole prompt: ``(cache, attention_mask, last position_ids (B, 1), next-token logits (B, V))``."""
        past, mask, pos, embeds, _ = self._inputs(batch, with_answers=False, soft=soft)
        out = self.llm(inputs_embeds=embeds, attention_mask=mask, position_ids=pos, past_key_values=past,
                       use_cache=True, logits_to_keep=1)
        return out.past_key_values, mask, pos[:, -1:], out.logits[:, -1].float()

    # -- decoding (model/decode.py, model/dispatch.py) -------------------------------
    def generate(self, batch: QABatch, max_new_tokens: int | None = None, soft: Tensor | None = None,
                 stop_at_newline: bool = True, prompt: tuple | None = None, lookup: int | None = None) -> list[str]:
        """Greedy decoding (:func:`~toporag_core.model.decode.generate`)."""
        return decode.generate(self, batch, max_new_tokens=max_new_tokens, soft=soft,
                               stop_at_newline=stop_at_newline, prompt=prompt, lookup=lookup)

    def score_choices(self, batch: QABatch, choices, soft: Tensor | None = None,
                      prompt: tuple | None = None, truncate: bool = True) -> Tensor:
        """``(B, C)`` log-likelihood of each candidate (:func:`~toporag_core.model.decode.score_choices`)."""
        return decode.score_choices(self, batch, choices, soft=soft, prompt=prompt, truncate=truncate)

    def answer(self, batch: QABatch, choices=None, soft: Tensor | None = None,
               max_new_tokens: int | None = None, names=None, list_ratio: float = 0.5, priors=None,
               path_weight: float = 0.0) -> list[dict[str, Any]]:
        """Task decoding, one dict per row (:func:`~toporag_core.model.dispatch.answer`; ``names``: candidate
        names per row for open rows read from the graph's entities)."""
        return dispatch.answer(self, batch, choices=choices, soft=soft, max_new_tokens=max_new_tokens,
                                names=names, list_ratio=list_ratio, priors=priors, path_weight=path_weight)

    def uses_evidence(self, choices: tuple[str, ...] | None) -> bool:
        """Whether rows with this closed answer set are decoded evidence first (a yes/no set under an
        evidence-first answer style: :meth:`~toporag_core.model.styles.AnswerStyle.evidence_first`)."""
        return get_style(self.config.answer_style).evidence_first(choices)

    # -- checkpoints (model/checkpoint.py) ---------------------------------------------
    def trainable_state_dict(self) -> dict[str, Tensor]:
        """Only the parameters that train (encoder, projector, LoRA); the LLM is not saved."""
        return checkpoint.trainable_state_dict(self)

    def num_trainable(self) -> int:
        return checkpoint.num_trainable(self)

    def save(self, folder: str | os.PathLike, extra: dict[str, Any] | None = None,
             dtype: torch.dtype = torch.float32) -> Path:
        return checkpoint.save(self, folder, extra=extra, dtype=dtype)

    def load_trainable(self, state: dict[str, Tensor], where: str = "checkpoint") -> None:
        checkpoint.load_trainable(self, state, where=where)

    @classmethod
    def load(cls, folder: str | os.PathLike, llm: nn.Module | None = None, tokenizer=None,
             device: str | torch.device = "auto") -> TopoRAGModel:
        """Rebuild from ``folder`` (``config.json`` + ``model.safetensors``); loads the LLM named in
        the config unless one is given."""
        return checkpoint.load(cls, folder, llm=llm, tokenizer=tokenizer, device=device)
