"""TopoRAG's generator: a frozen causal LM prompted by a cell-complex encoder (eqs. 21-23).

Read top to bottom:

1. :class:`TopoRAGConfig` - everything that defines a model (saved as JSON next to the weights).
2. :class:`QABatch` - what the model eats: collated subcomplexes + texts (+ answers for training).
3. :class:`TopoRAGModel` -
   * ``graph_tokens``: CW encoder -> pooled ``(B, hidden)`` -> MLP projector ->
     ``(B, T, H)`` soft prompt tokens in the LLM's embedding space (``T = num_graph_tokens``);
   * the input layout, one of three ``graph_position`` values::

         "prefix" (the paper's):  [chat prefix] [prompt-tuning] [graph tokens] context \n question
                                  [chat suffix] (answer <eos>)
         "suffix" (cacheable):    [chat prefix] context \n question | [prompt-tuning] [graph tokens]
                                  [chat suffix] (answer <eos>)
         "before_question"        [chat prefix] context \n | [prompt-tuning] [graph tokens] question
           (cacheable):           [chat suffix] (answer <eos>)

     ``question_first=True`` (beyond the paper, any layout) puts the question once more in front
     of the context: ``[chat prefix] question \n context \n ...``. A causal LM's context states
     cannot see a question that comes after them; read after the question, they are
     question-aware ("query-aware contextualization", Liu et al. 2024, *Lost in the Middle*, where
     it lifts synthetic key-value look-up to near perfect; SceneGraphs attribute questions here:
     0.553 -> 0.735, the checkpoint's README). In the cacheable layouts this is free while
     training: the frozen part is cached per example anyway, so it simply starts with the
     question; the context budget shrinks by the question's tokens.

     The chat prefix/suffix come from the tokenizer's chat template, or G-Retriever's
     ``<s>[INST] ... [/INST]`` layout when it has none. The context (the textualized subcomplex)
     must fit ``context_budget(question) = max_input_tokens - (fixed + soft + question tokens)``;
     the question is never cut. The answering pipeline fits it by prize first
     (:func:`~toporag_core.retrieval.budget.fit_context`: 2-cells and the highest-prize cells are
     kept, what was dropped is reported); :meth:`TopoRAGModel.context_ids`' prefix cut is only
     the last-resort safety net for contexts that come in unfitted (prepared datasets).
     In the two cacheable layouts everything left of ``|`` (the *frozen part*) is read by the
     plain frozen LLM - LoRA adapters are switched off there and no soft token precedes it -
     so its key/value cache does not depend on anything trainable: training computes it once
     per example (:meth:`TopoRAGModel.context_kv`, no grad) and reuses it every epoch; only the
     *tail* runs with grad, and LoRA adapts the tail's computation only. ``"suffix"``: the
     tail is the soft tokens, chat suffix and answer (~5-10 positions); the question is read by
     the frozen LLM, so LoRA can only re-weigh what frozen layers made of it.
     ``"before_question"``: the question moves into the tail, after the graph tokens (as in
     the paper, the text that matters is read *after* the soft prompt): LoRA re-reads the
     question (ExplaGraphs: both arguments, ~60 tokens) at every layer, with the graph tokens
     in view, while the context stays cached - a step costs ``~(T + |question| + |answer|)``
     positions with grad instead of ``~(T + |answer|)`` (measured: 4.5x a suffix step, 2.25x
     less than prefix + LoRA; ``benchmarks/bench_neural.py``). Labels are ``-100`` everywhere
     but on the answer tokens and the closing EOS (loss on answer tokens only);
   * ``forward(batch) -> loss``;
   * decoding for the task (:meth:`answer`): a **closed answer set** (ExplaGraphs
     ``support``/``counter``, yes/no) is scored, as lm-evaluation-harness scores multiple
     choice, by the log-likelihood of each candidate continuation,
     ``score(c) = sum_t log p(c_t | prompt, c_<t) + log p(<eos> | prompt, c)``, i.e. the log
     probability of answering exactly ``c`` and stopping - the sequence training fits; no
     length normalisation (the candidates of one set are compared with each other). The label
     is the arg max; its probability is ``softmax(scores)`` over the candidates. **Open
     questions**: greedy decoding with a KV cache, at most ``max_new_tokens``, stopping at EOS
     or at the end of the first line, stripped to a short phrase (:func:`short_answer`);
     :func:`is_clean` flags an answer that dumps the context or repeats the question.
     **Evidence first** (``answer_style="evidence"``, beyond the paper): polar questions are
     trained on ``"<evidence>. Answer: <label>"`` (the dataset's full answer with its yes/no
     removed: ``"The metal cup is orange. Answer: no"``), so a yes/no becomes "read the
     attribute, then compare", the reading that open questions already do well; at answer time
     the evidence is generated greedily and the labels are scored after it (one prompt pass
     shared by both steps: its cache is copied for generation); ``answer_style="cited"`` adds
     **cited open answers**: an open question is trained on the context lines its answer rests
     on, copied verbatim with their node ids, then the label (``"cabinet [5]: yellow, wooden;
     cabinet [5] in front of clock [9]. Answer: clock"``: find the anchor, follow its relation),
     and its answer is read after the generated ``Answer:`` (:func:`split_evidence`);
   * ``save`` / ``load``: only the trainable parameters (encoder, projector, prompt / LoRA) as
     safetensors plus ``config.json``; no pickle anywhere.

Modes: ``"soft_prompt"`` (graph tokens only, the paper's frozen setting), ``"prompt_tuning"``
(plus peft's :class:`PromptEmbedding`, 10 virtual tokens), ``"lora"`` (plus peft LoRA, r=8,
alpha=16, dropout 0.05 on ``q_proj``/``v_proj`` by default, the paper's "w/ LoRA" row;
injected *into the given LLM instance*, so do not share one LLM object between a LoRA model
and another model). LoRA weights are kept in float32 whatever the LLM's precision.

Why not ``torch_geometric.llm.models.LLM`` / ``GRetriever``: its constructor loads the model
itself by name (hub metadata query, slow tokenizer), so it cannot take our offline-converted or
already-loaded LLM; in its chat-template path it does not truncate the context at all; it
places the soft tokens before the whole chat prompt; and its GNN interface is ``(x,
edge_index, batch)``, not a cell complex. We keep its conventions (``-100`` labels, left
padding with the pad token's embedding, soft tokens right after the opening tokens, the
``[INST]`` fallback) and write the rest ourselves.
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from .nn import CellBatch, CWNConfig, build_encoder
from .retrieval.citations import EVIDENCE_CUE, CitationGrammar

IGNORE_INDEX = -100  # label value the LM loss skips (same as PyG / HF)
MODES = ("soft_prompt", "prompt_tuning", "lora")
GRAPH_POSITIONS = ("prefix", "suffix", "before_question")
CACHEABLE_POSITIONS = ("suffix", "before_question")  # layouts with a frozen, cacheable part
ANSWER_STYLES = ("label", "evidence", "cited", "cited-loops")
CITED_STYLES = ("cited", "cited-loops")  # open answers are cited context lines


def graphqa_prompt(question: str) -> str:
    """GraphQA's prompt form, ``"Question: <question>\nAnswer:"`` (scene and WebQSP examples); a question
    already in that form is returned unchanged (idempotent, so training data and a user's question agree)."""
    return question if str(question).lstrip().startswith("Question:") else f"Question: {question}\nAnswer:"


# How a checkpoint's training examples phrased a question (``TopoRAGConfig.question_form``): applied to a
# user's question at answer time, so the LLM reads the form it was trained on (a scene checkpoint answered a
# bare "What is behind the stone table?" with "no" and its trained form with "dresser"). Tasks name theirs
# in the task registry (``register_task(prompt=...)``); training copies it into the config.
QUESTION_FORMS: dict[str, Callable[[str], str]] = {"plain": lambda q: q, "graphqa": graphqa_prompt}
_SPLIT = "\x00TOPORAG_USER\x00"  # placeholder to cut the chat template around the user content


# ----------------------------------------------------------------------------- config
@dataclass
class TopoRAGConfig:
    """Everything that defines a TopoRAG model (``to_dict``/``from_dict`` for ``config.json``)."""

    encoder: str = "cwn"  # "cwn" | "gcn" ("w/o MTR"); cwn.use_cells2=False is "w/o CRL"
    cwn: CWNConfig = field(default_factory=CWNConfig)
    use_graph: bool = True  # False: no encoder / soft prompt at all (the frozen-LLM baseline)
    num_graph_tokens: int = 1
    projector_hidden: int = 1024  # G-Retriever: Linear(d, 2048) -> Sigmoid -> Linear(2048, H) for 7B
    llm: str = "smollm2-135m-instruct"
    mode: str = "soft_prompt"
    num_virtual_tokens: int = 10
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    max_input_tokens: int = 512
    max_new_tokens: int = 32
    system_prompt: str | None = None  # None: the chat template's own default
    graph_position: str = "prefix"  # "prefix" (paper) | "suffix" | "before_question" (cached frozen part)
    question_first: bool = False  # the question also before the context (query-aware context; beyond the paper)
    answer_set: tuple[str, ...] = ()  # closed answer set trained on (answer() scores these); () = open answers
    graph_norm: bool = False  # standardise the pooled graph per feature (ActNorm, set from training data)
    graph_label_weight: float = 0.0  # > 0 (needs answer_set): auxiliary CE of a linear label head on the pooled graph
    answer_style: str = "label"  # "label" | "evidence": polar questions trained as "<evidence>. Answer: <label>"
    #                              | "cited": that, and open questions as "<cited context lines>. Answer: <label>"
    #                              | "cited-loops": that, closed-loop questions (yes/no too) citing their loop's
    #                                2-cell line and the asked objects' node lines
    question_form: str = "plain"  # a QUESTION_FORMS name: how training phrased questions (applied to users')

    def __post_init__(self) -> None:
        if isinstance(self.cwn, dict):
            self.cwn = CWNConfig.from_dict(self.cwn)
        self.lora_targets = tuple(self.lora_targets)
        self.answer_set = tuple(str(a) for a in self.answer_set)
        if self.mode not in MODES:
            raise ValueError(f"TopoRAGConfig.mode: unknown {self.mode!r}; choose one of {MODES}")
        if self.graph_position not in GRAPH_POSITIONS:
            raise ValueError(f"TopoRAGConfig.graph_position: unknown {self.graph_position!r}; "
                             f"choose one of {GRAPH_POSITIONS}")
        if self.num_graph_tokens < 1:
            raise ValueError(f"TopoRAGConfig.num_graph_tokens: must be >= 1, got {self.num_graph_tokens}")
        if self.max_new_tokens < 1:
            raise ValueError(f"TopoRAGConfig.max_new_tokens: must be >= 1, got {self.max_new_tokens}")
        if self.answer_style not in ANSWER_STYLES:
            raise ValueError(f"TopoRAGConfig.answer_style: unknown {self.answer_style!r}; "
                             f"choose one of {ANSWER_STYLES}")
        if self.question_form not in QUESTION_FORMS:
            raise ValueError(f"TopoRAGConfig.question_form: unknown {self.question_form!r}; "
                             f"choose one of {sorted(QUESTION_FORMS)}")
        if len(set(self.answer_set)) != len(self.answer_set) or any(not a.strip() for a in self.answer_set):
            raise ValueError(f"TopoRAGConfig.answer_set: needs distinct non-empty answers, got {self.answer_set}")
        if self.graph_label_weight < 0 or (self.graph_label_weight > 0 and not (self.answer_set and self.use_graph)):
            raise ValueError("TopoRAGConfig.graph_label_weight: must be >= 0, and > 0 only with an answer_set and "
                             f"use_graph, got {self.graph_label_weight}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cwn"] = self.cwn.to_dict()
        d["lora_targets"] = list(self.lora_targets)
        d["answer_set"] = list(self.answer_set)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopoRAGConfig:
        known = {f.name for f in fields(cls)}
        extra = set(d) - known
        if extra:
            raise ValueError(f"TopoRAGConfig: unknown keys {sorted(extra)}")
        return cls(**d)


# ----------------------------------------------------------------------------- batch
@dataclass
class QABatch:
    """``B`` examples: collated subcomplexes (``None`` when the model uses no graph) and texts."""

    cells: CellBatch | None
    questions: list[str]
    contexts: list[str]
    answers: list[str] | None = None
    kv: list[Tensor] | None = None  # precomputed frozen-part caches (cacheable layouts), one per row

    def __len__(self) -> int:
        return len(self.questions)

    def to(self, device: torch.device | str) -> QABatch:
        return QABatch(self.cells.to(device) if self.cells is not None else None,
                       self.questions, self.contexts, self.answers,
                       [t.to(device) for t in self.kv] if self.kv is not None else None)


# ----------------------------------------------------------------------------- model
class ActNorm(nn.Module):
    """Per-feature affine standardisation ``y = (x - shift) * exp(log_scale)``, ``(B, d) -> (B, d)``,
    with shift and scale set once from data (mean and std of the training set's pooled graphs,
    as Glow's ActNorm) and trained afterwards. Why: mean pooling over ReLU cell states gives
    vectors that differ across subcomplexes by ~1% of their size (measured on ExplaGraphs: std
    0.004 across examples around a mean of 0.014), so the projector's sigmoid sees nearly the same
    input for every example and the graph tokens hardly vary. Unlike BatchNorm the output of one
    example never depends on the rest of its batch."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.shift = nn.Parameter(torch.zeros(dim))
        self.log_scale = nn.Parameter(torch.zeros(dim))

    @torch.no_grad()
    def initialize(self, x: Tensor) -> None:
        std = x.std(0)
        self.shift.copy_(x.mean(0))
        # a feature that never varies in the sample (e.g. a dead ReLU) keeps scale 1: dividing by
        # its ~0 std would blow it up the moment it starts to vary
        self.log_scale.copy_(torch.where(std > 1e-4, -torch.log(std.clamp_min(1e-4)), torch.zeros_like(std)))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.shift) * self.log_scale.exp()


class TopoRAGModel(nn.Module):
    """Cell-complex encoder + projector + frozen LLM (optionally prompt tuning / LoRA)."""

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
        if config.use_graph:
            self.encoder = build_encoder(config.encoder, config.cwn)
            self.projector = nn.Sequential(  # G-Retriever's projector shape
                nn.Linear(self.encoder.out_dim, config.projector_hidden), nn.Sigmoid(),
                nn.Linear(config.projector_hidden, config.num_graph_tokens * hidden))
        else:
            self.encoder, self.projector = None, None
        self.graph_norm = ActNorm(self.encoder.out_dim) if (config.use_graph and config.graph_norm) else None
        # Beyond the paper: an auxiliary label head on the pooled graph (training signal only; the LLM answers).
        self.graph_head = (nn.Linear(self.encoder.out_dim, len(config.answer_set))
                           if config.graph_label_weight > 0 else None)
        self.prompt = None
        if config.mode == "prompt_tuning":
            from peft import PromptTuningConfig, PromptTuningInit, TaskType
            from peft.tuners.prompt_tuning import PromptEmbedding

            pcfg = PromptTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=config.num_virtual_tokens,
                                      token_dim=hidden, num_transformer_submodules=1,
                                      prompt_tuning_init=PromptTuningInit.SAMPLE_VOCAB)
            # Sampled-vocabulary init (Lester et al.): starts at the scale of real token embeddings.
            self.prompt = PromptEmbedding(pcfg, llm.get_input_embeddings()).float()
        elif config.mode == "lora":
            from peft import LoraConfig, inject_adapter_in_model

            lcfg = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                              target_modules=list(config.lora_targets), bias="none")
            inject_adapter_in_model(lcfg, self.llm)  # base weights stay frozen; lora_A/B train
            for n, p in self.llm.named_parameters():  # adapters train in float32 whatever the LLM's dtype
                if "lora_" in n:
                    p.data = p.data.float()
        self._tok_cache: dict[str, tuple[int, ...]] = {}
        self._vocab_flags: tuple[Tensor, Tensor] | None = None
        self._stop_lists: tuple[frozenset[int], list[bool], list[bool]] | None = None  # see _stop_tables
        self.lookup_tokens: int | None = None  # prompt-lookup drafts of generate (None: by answer_style)
        self.constrain_citations = False  # citation-constrained generate by default (benchmarks switch it)
        self._layout = self.prompt_layout_ids()
        self.to(self.device)

    # -- helpers ------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.llm.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.llm.get_input_embeddings().weight.dtype

    @property
    def cacheable(self) -> bool:
        """A frozen part before the soft tokens (``"suffix"``, ``"before_question"``): its
        key/value cache does not depend on anything trainable and can be precomputed."""
        return self.config.graph_position in CACHEABLE_POSITIONS

    def train(self, mode: bool = True) -> TopoRAGModel:
        super().train(mode)
        if self.config.mode != "lora":
            self.llm.eval()  # frozen: no dropout inside the LLM (LoRA keeps its own dropout)
        return self

    def answer_ids(self, answer: str) -> list[int]:
        """The label tokens of one answer: its ids cut at ``max_new_tokens``, then EOS (the positions
        that carry the training loss; ``len`` of it is what the distributed loss weighting counts)."""
        return list(self._ids(answer)[: self.config.max_new_tokens]) + list(self._layout["eos"])

    def _ids(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens), memoised: epochs re-read the same texts."""
        if not text:
            return []
        ids = self._tok_cache.get(text)
        if ids is None:
            ids = tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            if len(self._tok_cache) < 200_000:
                self._tok_cache[text] = ids
        return list(ids)

    def prompt_layout_ids(self) -> dict[str, list[int]]:
        """Token ids of the fixed text before and after the user content, and of the answer's end."""
        tok = self.tokenizer
        eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
        if getattr(tok, "chat_template", None):
            msgs = [{"role": "user", "content": _SPLIT}]
            if self.config.system_prompt is not None:
                msgs.insert(0, {"role": "system", "content": self.config.system_prompt})
            text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            pre, post = text.split(_SPLIT)
            # The template writes BOS as text when it has one; tokenising it gives the special id.
            return {"pre": self._ids(pre), "post": self._ids(post), "sep": self._ids("\n"), "eos": eos}
        bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
        return {"pre": bos + self._ids("[INST]"), "post": self._ids("[/INST]"), "sep": self._ids("\n"), "eos": eos}

    def num_soft_tokens(self) -> int:
        """Soft (non-text) input positions per example: prompt-tuning + graph tokens."""
        n = self.config.num_virtual_tokens if self.prompt is not None else 0
        return n + (self.config.num_graph_tokens if self.config.use_graph else 0)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the context is tokenised (no special tokens; memoised)."""
        return len(self._ids(text))

    def context_budget(self, question: str) -> int:
        """Context tokens that fit beside ``question``: ``max_input_tokens`` minus the chat prefix,
        soft tokens, separator, question (twice, with its separator, when ``question_first``) and
        chat suffix (never negative)."""
        lay = self._layout
        n_q = self.count_tokens(question)
        fixed = len(lay["pre"]) + self.num_soft_tokens() + len(lay["sep"]) + n_q + len(lay["post"])
        if self.config.question_first:  # read twice: before the context and at its usual place
            fixed += n_q + len(lay["sep"])
        return max(0, self.config.max_input_tokens - fixed)

    def context_ids(self, context: str, question: str) -> tuple[list[int], list[int]]:
        """``(context ids, question ids)``; the question is never cut. A context longer than
        :meth:`context_budget` is cut by prefix here - the last-resort safety net: the answering
        pipeline fits contexts by prize first (``retrieval.budget.fit_context``)."""
        return self._ids(context)[:self.context_budget(question)], self._ids(question)

    def prompt_layout(self, context: str, question: str) -> dict[str, Any]:
        """What the LLM actually reads for one example (for the app's prompt view)."""
        c, _ = self.context_ids(context, question)
        lay = self._layout
        graph = self.config.num_graph_tokens if self.config.use_graph else 0
        return {"soft_tokens": self.num_soft_tokens(), "graph_tokens": graph,
                "prompt_tuning_tokens": self.num_soft_tokens() - graph,
                "graph_position": self.config.graph_position, "question_first": self.config.question_first,
                "prefix": self.tokenizer.decode(lay["pre"]), "context": self.tokenizer.decode(c),
                "context_truncated": len(c) < len(self._ids(context)), "question": question,
                "suffix": self.tokenizer.decode(lay["post"]),
                "input_tokens": sum(map(len, self._row(context, question))) + self.num_soft_tokens()}

    def _row(self, context: str, question: str,
             graph_position: str | None = None) -> tuple[list[int], list[int], list[int]]:
        """``(frozen ids, tail ids before the soft tokens, tail ids after them)`` of one example in
        this model's layout, or in ``graph_position``'s (same tokenizer and budget)."""
        lay, pos = self._layout, graph_position or self.config.graph_position
        c, q = self.context_ids(context, question)
        if self.config.question_first:  # the context is read knowing the question
            c = q + lay["sep"] + c
        if pos == "suffix":
            return lay["pre"] + c + lay["sep"] + q, [], lay["post"]
        if pos == "before_question":
            return lay["pre"] + c + lay["sep"], [], q + lay["post"]
        return [], lay["pre"], c + lay["sep"] + q + lay["post"]

    def _rows(self, batch: QABatch) -> list[tuple[list[int], list[int], list[int]]]:
        return [self._row(ctx, question) for ctx, question in zip(batch.contexts, batch.questions)]

    def frozen_ids(self, context: str, question: str, graph_position: str | None = None) -> list[int]:
        """Token ids of the frozen part (what :meth:`context_kv` caches) of one example, in this
        model's layout or in another cacheable ``graph_position``: ``KVStore.cut_from`` uses the
        second to check that one layout's frozen part is a token prefix of another's."""
        pos = graph_position or self.config.graph_position
        if pos not in CACHEABLE_POSITIONS:
            raise ValueError(f"frozen_ids: graph_position {pos!r} has no frozen part "
                             f"(cacheable layouts: {', '.join(CACHEABLE_POSITIONS)})")
        return self._row(context, question, pos)[0]

    @contextlib.contextmanager
    def _adapters_off(self):
        """LoRA switched off (the frozen part is read by the plain LLM), back on afterwards."""
        if self.config.mode != "lora":
            yield
            return
        from peft.tuners.tuners_utils import BaseTunerLayer

        layers = [m for m in self.llm.modules() if isinstance(m, BaseTunerLayer)]
        for m in layers:
            m.enable_adapters(False)
        try:
            yield
        finally:
            for m in layers:
                m.enable_adapters(True)

    def _left_pad(self, rows: list[list[int]]) -> tuple[Tensor, Tensor]:
        """``(ids (B, S), mask (B, S))`` left-padded with the pad id."""
        length = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.tensor([[pad] * (length - len(r)) + r for r in rows], dtype=torch.long, device=self.device)
        mask = torch.tensor([[0] * (length - len(r)) + [1] * len(r) for r in rows], dtype=torch.long,
                            device=self.device)
        return ids, mask

    @torch.no_grad()
    def context_kv(self, batch: QABatch) -> list[Tensor]:
        """The frozen part's key/value cache per example, ``(layers, 2, kv_heads, S_i, head_dim)``.

        Only for the cacheable layouts: the frozen part (chat prefix, context, and for
        ``"suffix"`` the question) is read with adapters off and no soft token, so this does not
        change while training.
        """
        if not self.cacheable:
            raise ValueError("context_kv() needs graph_position 'suffix' or 'before_question' "
                             "(the prefix layout has no frozen part)")
        rows = [r[0] for r in self._rows(batch)]
        ids, mask = self._left_pad(rows)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        with self._adapters_off():
            out = self.llm.get_decoder()(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        layers = out.past_key_values.layers
        return [torch.stack([torch.stack([lay.keys[i, :, -len(r):], lay.values[i, :, -len(r):]]) for lay in layers])
                for i, r in enumerate(rows)]

    def _cache_from_kv(self, kvs: list[Tensor]):
        """A left-padded ``DynamicCache`` from per-example caches, and its attention mask ``(B, S)``."""
        from transformers import DynamicCache

        n = [int(t.shape[3]) for t in kvs]
        length, (layers, two, heads, _, hd) = max(n), kvs[0].shape
        kv = kvs[0].new_zeros((len(kvs), layers, two, heads, length, hd), dtype=self.dtype)
        for i, t in enumerate(kvs):
            kv[i, :, :, :, length - n[i]:] = t.to(self.dtype)
        mask = torch.tensor([[0] * (length - k) + [1] * k for k in n], dtype=torch.long, device=self.device)
        cache = DynamicCache(ddp_cache_data=[(kv[:, j, 0], kv[:, j, 1]) for j in range(layers)],
                             config=self.llm.config)
        return cache, mask

    def _inputs(self, batch: QABatch, with_answers: bool, soft: Tensor | None = None):
        """``(past, attention_mask (B, P + T), position_ids (B, T), tail embeds (B, T, H), labels (B, T) | None)``.

        ``past`` is the frozen part's cache (``None`` in the prefix layout, ``P = 0``): taken from
        ``batch.kv`` when precomputed, else computed here without grad. The tail is left-padded.
        """
        emb_layer = self.llm.get_input_embeddings()
        dev, dt = self.device, self.dtype
        if self.config.use_graph:
            soft = (self.graph_tokens(batch.cells) if soft is None else soft).to(dt)
        else:
            soft = None
        virt = self.prompt.embedding.weight.to(dt) if self.prompt is not None else None
        rows = self._rows(batch)
        past, fmask = None, torch.zeros((len(batch), 0), dtype=torch.long, device=dev)
        if self.cacheable:
            if batch.kv is not None:
                bad = [i for i, (t, r) in enumerate(zip(batch.kv, rows)) if int(t.shape[3]) != len(r[0])]
                if bad:  # a cache built for another prompt layout / input budget would silently mislead
                    raise ValueError(f"cached key/value of batch row {bad[0]} "
                                     f"has {int(batch.kv[bad[0]].shape[3])} positions, its frozen part "
                                     f"{len(rows[bad[0]][0])} tokens: rebuild the KV cache")
                past, fmask = self._cache_from_kv(batch.kv)
            else:
                past, fmask = self._cache_from_kv(self.context_kv(batch))
        seqs, labels = [], []
        for i, (_, before, after) in enumerate(rows):
            ans = []
            if with_answers:
                ans = self.answer_ids(batch.answers[i])
            parts = [emb_layer(torch.tensor(before, dtype=torch.long, device=dev))] if before else []
            parts += ([virt] if virt is not None else []) + ([soft[i]] if soft is not None else [])
            parts.append(emb_layer(torch.tensor(after + ans, dtype=torch.long, device=dev)))
            seq = torch.cat(parts, dim=0)
            seqs.append(seq)
            labels.append([IGNORE_INDEX] * (seq.shape[0] - len(ans)) + ans)
        length = max(s.shape[0] for s in seqs)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        pad_e = emb_layer(torch.tensor([pad_id], device=dev))
        embeds = torch.stack([torch.cat([pad_e.expand(length - s.shape[0], -1), s]) for s in seqs])
        tmask = torch.tensor([[0] * (length - s.shape[0]) + [1] * s.shape[0] for s in seqs], device=dev)
        mask = torch.cat([fmask, tmask], dim=1)
        # Positions count real tokens only, so a padded row sees the same positions as alone.
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, fmask.shape[1]:]
        lab = None
        if with_answers:
            lab = torch.tensor([[IGNORE_INDEX] * (length - len(x)) + x for x in labels], device=dev)
        return past, mask, pos, embeds, lab

    # -- the model ----------------------------------------------------------------
    def pooled(self, cells: CellBatch) -> Tensor:
        """``(B, d_enc)`` float32: the encoder's mean-pooled subcomplex, standardised when ``graph_norm``."""
        pooled = self.encoder(cells).float()
        return self.graph_norm(pooled) if self.graph_norm is not None else pooled

    def graph_tokens(self, cells: CellBatch) -> Tensor:
        """``(B, T, H)`` soft prompt tokens from a batch of subcomplexes."""
        return self.tokens_from_pooled(self.pooled(cells))

    def label_targets(self, answers: list[str]) -> Tensor:
        """``(B,)`` index of each answer in ``config.answer_set`` (-100 = not in it: ignored by the label loss)."""
        aset = self.config.answer_set
        return torch.tensor([aset.index(a.strip()) if a.strip() in aset else -100 for a in answers],
                            device=self.device)

    def tokens_from_pooled(self, pooled: Tensor) -> Tensor:
        """``(B, d_enc) -> (B, T, H)``: the projector, reshaped into ``T`` soft tokens."""
        return self.projector(pooled).view(pooled.shape[0], self.config.num_graph_tokens, self.llm_hidden)

    @torch.no_grad()
    def init_graph_norm(self, batches: list[CellBatch]) -> None:
        """Set :class:`ActNorm`'s shift and scale from the pooled graphs of ``batches`` (training data)."""
        if self.graph_norm is None:
            return
        was = self.training
        self.eval()
        pooled = torch.cat([self.encoder(b.to(self.device)).float() for b in batches])
        self.graph_norm.initialize(pooled)
        self.train(was)

    def build_inputs(self, batch: QABatch, with_answers: bool,
                     soft: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Prefix layout only: left-padded ``inputs_embeds (B, S, H)``, ``attention_mask (B, S)``,
        ``position_ids (B, S)`` and ``labels (B, S)`` (``None`` unless ``with_answers``)."""
        if self.cacheable:
            raise ValueError("build_inputs() is the prefix layout; the cacheable layouts have a frozen part")
        _, mask, pos, embeds, lab = self._inputs(batch, with_answers, soft)
        return embeds, mask, pos, lab

    def forward(self, batch: QABatch) -> Tensor:
        """Mean cross-entropy over the answer tokens (+ EOS) of the batch."""
        if batch.answers is None:
            raise ValueError("forward() needs batch.answers (training targets); use answer() otherwise")
        soft, aux = None, None
        if self.graph_head is not None:
            pooled = self.pooled(batch.cells)  # (B, d_enc), shared by the soft prompt and the label head
            soft = self.tokens_from_pooled(pooled)
            aux = nn.functional.cross_entropy(self.graph_head(pooled), self.label_targets(batch.answers),
                                              ignore_index=-100)
        past, mask, pos, embeds, labels = self._inputs(batch, with_answers=True, soft=soft)
        body, head = self.llm.get_decoder(), self.llm.get_output_embeddings()
        hidden = body(inputs_embeds=embeds, attention_mask=mask, position_ids=pos, past_key_values=past,
                      use_cache=past is not None).last_hidden_state
        # Next-token loss (position t predicts token t+1), with the vocabulary projection applied
        # only where there is a target: ~20% of a small LM's compute is the (S x vocab) head.
        target = labels[:, 1:]
        keep = target != IGNORE_INDEX
        logits = head(hidden[:, :-1][keep])
        loss = nn.functional.cross_entropy(logits.float(), target[keep])
        return loss if aux is None else loss + self.config.graph_label_weight * aux

    def _prompt_pass(self, batch: QABatch, soft: Tensor | None):
        """Run the whole prompt: ``(cache, attention_mask, last position_ids (B, 1), next-token logits (B, V))``."""
        past, mask, pos, embeds, _ = self._inputs(batch, with_answers=False, soft=soft)
        out = self.llm(inputs_embeds=embeds, attention_mask=mask, position_ids=pos, past_key_values=past,
                       use_cache=True, logits_to_keep=1)
        return out.past_key_values, mask, pos[:, -1:], out.logits[:, -1].float()

    def _stop_ids(self) -> Tensor:
        stop = set(self._layout["eos"])
        gen_eos = getattr(getattr(self.llm, "generation_config", None), "eos_token_id", None)
        stop |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else [])
        return torch.tensor(sorted(stop) or [-1], device=self.device)

    def _newline_flags(self) -> tuple[Tensor, Tensor]:
        """Per vocabulary id: ``(decodes to text containing a newline, decodes to non-space text)``."""
        if self._vocab_flags is None:
            vocab = int(self.llm.get_output_embeddings().weight.shape[0])
            texts = self.tokenizer.batch_decode([[i] for i in range(vocab)])
            self._vocab_flags = (torch.tensor(["\n" in t for t in texts], device=self.device),
                                 torch.tensor([bool(t.strip()) for t in texts], device=self.device))
        return self._vocab_flags

    @torch.no_grad()
    def generate(self, batch: QABatch, max_new_tokens: int | None = None, soft: Tensor | None = None,
                 stop_at_newline: bool = True, prompt: tuple | None = None, lookup: int | None = None,
                 constrain: bool | None = None) -> list[str]:
        """Greedy decoding with a KV cache. A row stops at EOS, after ``max_new_tokens``, or (when
        ``stop_at_newline``) at a token holding a newline once the row has produced some non-space
        text; the returned text is cut at that newline and stripped. ``soft``: precomputed
        ``graph_tokens`` (the pipeline times encoding and generation separately); ``prompt``: a
        :meth:`_prompt_pass` result to start from (its cache is extended in place).

        ``lookup``: draft tokens per step for **prompt-lookup decoding** (one row only; ``None``: the
        model's ``lookup_tokens`` attribute when set (benchmarks switch it), else
        :data:`LOOKUP_TOKENS` for a cited model (``CITED_STYLES``), whose open answers copy context
        lines, else 0 = off; :meth:`answer` turns it off for yes/no evidence except under
        ``"cited-loops"``, whose loop answers cite lines too: a sentence of the model's own would
        mostly reject its drafts). The draft is what followed the first
        occurrence, in the row's context, of the longest suffix (up to 3 tokens) of the text so far
        (:func:`lookup_draft`); one forward pass
        checks all drafts, the longest prefix that greedy decoding would have produced is kept and
        the cache is cropped to it. The output is greedy decoding's (up to float rounding between
        one-token and many-token passes), in fewer passes when the model copies.

        ``constrain``: **citation-constrained decoding** (``None``: the model's ``constrain_citations``
        attribute, off by default): each row's text stays one its :class:`CitationGrammar` allows, so a
        cited line is always a whole line of that row's context (or the answer is a bare label); a row
        where greedy cites real lines is unchanged. At a step whose arg-max the grammar refuses, the
        most likely allowed token of the top :data:`CONSTRAIN_TOP_K` is taken (none: the arg-max, and
        the row runs unconstrained on). Off by default because it was measured not to change accuracy
        (``benchmarks/bench_constrained.py``: 0.712 either way on the scene test's 354 open questions,
        11 / 11 discordant) while it hides the best warning sign there is: greedy answers citing a line
        the context does not have are right 0.47 of the time, against 0.84 for real citations, and the
        error analysis and the Ask page flag them; constrained, those answers cite real lines."""
        max_new = self.config.max_new_tokens if max_new_tokens is None else max_new_tokens
        if lookup is None:
            lookup = self.lookup_tokens
        if lookup is None:
            lookup = LOOKUP_TOKENS if self.config.answer_style in CITED_STYLES else 0
        if constrain is None:
            constrain = bool(self.constrain_citations)
        grammars = [CitationGrammar(c) for c in batch.contexts] if constrain else None
        stop_t = self._stop_ids()
        newline, nonspace = self._newline_flags()
        past, mask, pos, logits = prompt if prompt is not None else self._prompt_pass(batch, soft)
        if lookup > 0 and len(batch) == 1 and max_new > 0:
            return [self._generate_lookup(batch, (past, mask, pos, logits), max_new, stop_at_newline, lookup,
                                          grammars[0] if grammars else None)]
        tokens = []
        done = torch.zeros(len(batch), dtype=torch.bool, device=self.device)
        has_text = torch.zeros_like(done)
        so_far: list[list[int]] = [[] for _ in range(len(batch))]
        nxt = self._constrained(logits, logits.argmax(-1), so_far, grammars, done, has_text, stop_at_newline)
        for _ in range(max_new):
            tokens.append(torch.where(done, -1, nxt))
            for r, t in enumerate(tokens[-1].tolist() if grammars else ()):
                if t >= 0:
                    so_far[r].append(t)
            done |= torch.isin(nxt, stop_t)
            if stop_at_newline:
                done |= newline[nxt] & (has_text | nonspace[nxt])
            has_text |= nonspace[nxt]
            if bool(done.all()) or len(tokens) == max_new:
                break
            mask = torch.cat([mask, mask.new_ones(len(batch), 1)], dim=1)
            pos = pos + 1
            out = self.llm(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos,
                           past_key_values=past, use_cache=True)
            past, last = out.past_key_values, out.logits[:, -1]
            nxt = self._constrained(last, last.argmax(-1), so_far, grammars, done, has_text, stop_at_newline)
        stop = set(stop_t.tolist())
        texts = []
        for row in (torch.stack(tokens, 1).tolist() if tokens else [[] for _ in range(len(batch))]):
            ids = [t for t in row if t >= 0 and t not in stop]
            text = self.tokenizer.decode(ids, skip_special_tokens=True).strip()
            texts.append(text.split("\n")[0].strip() if stop_at_newline else text)
        return texts

    def _stop_tables(self) -> tuple[frozenset[int], list[bool], list[bool]]:
        """Stop ids, newline flags and non-space flags per vocabulary id as Python containers, built once
        (the per-token tests of the prompt-lookup and constrained paths)."""
        if self._stop_lists is None:
            self._stop_lists = (frozenset(self._stop_ids().tolist()),
                                *(f.tolist() for f in self._newline_flags()))
        return self._stop_lists

    def _is_stop(self, t: int, has_text: bool, stop_at_newline: bool) -> bool:
        """Whether token ``t`` ends a row (EOS, or a newline once the row has text), as :meth:`generate` stops
        (one token, on Python lists: the per-token test of the prompt-lookup and constrained paths)."""
        stop, newline, nonspace = self._stop_tables()
        return t in stop or (stop_at_newline and newline[t] and (has_text or nonspace[t]))

    def _allowed_choice(self, logits: Tensor, ids: list[int], grammar: CitationGrammar, has_text: bool,
                        stop_at_newline: bool) -> int | None:
        """The most likely of the top :data:`CONSTRAIN_TOP_K` tokens after ``ids`` that ``grammar``
        allows (a stopping token only where the text may stop); ``None`` when there is none."""
        def text(extra: list[int]) -> str:
            return self.tokenizer.decode(ids + extra, skip_special_tokens=True)

        for t in torch.topk(logits.float(), min(CONSTRAIN_TOP_K, logits.shape[-1])).indices.tolist():
            if self._is_stop(t, has_text, stop_at_newline):
                if grammar.may_stop(text([]).split("\n")[0]):
                    return t
            elif grammar.allows(text([t])):
                return t
        return None

    def _constrained(self, logits: Tensor, nxt: Tensor, so_far: list[list[int]],
                     grammars: list[CitationGrammar | None] | None, done: Tensor, has_text: Tensor,
                     stop_at_newline: bool) -> Tensor:
        """``nxt`` (``(B,)`` arg-max tokens) with each live row's token replaced by the grammar's choice
        where the grammar refuses the arg-max; a row with no allowed choice loses its grammar."""
        if not grammars:
            return nxt
        nxt = nxt.clone()
        for r, g in enumerate(grammars):
            if g is None or bool(done[r]):
                continue
            t = int(nxt[r])
            ok = (g.may_stop(self.tokenizer.decode(so_far[r], skip_special_tokens=True).split("\n")[0])
                  if self._is_stop(t, bool(has_text[r]), stop_at_newline)
                  else g.allows(self.tokenizer.decode(so_far[r] + [t], skip_special_tokens=True)))
            if not ok:
                c = self._allowed_choice(logits[r], so_far[r], g, bool(has_text[r]), stop_at_newline)
                if c is None:
                    grammars[r] = None
                else:
                    nxt[r] = c
        return nxt

    def _generate_lookup(self, batch: QABatch, prompt: tuple, max_new: int, stop_at_newline: bool, k: int,
                         grammar: CitationGrammar | None = None) -> str:
        """:meth:`generate` for one row with prompt-lookup drafts of up to ``k`` tokens (see there);
        with ``grammar``, the token each position keeps is the constrained choice (:meth:`_constrained`)."""
        stop, _, nonspace = self._stop_tables()
        grammars = [grammar] if grammar is not None else None

        def choice(logits_i: Tensor, ids: list[int], text_before: bool) -> int:
            live = torch.zeros(1, dtype=torch.bool, device=self.device)
            return int(self._constrained(logits_i[None], logits_i.argmax(-1)[None], [ids], grammars, live,
                                         torch.tensor([text_before], device=self.device), stop_at_newline)[0])
        source = np.asarray(self.tokenizer(batch.contexts[0] or "", add_special_tokens=False)["input_ids"],
                            dtype=np.int64)
        past, mask, pos, logits = prompt
        out_ids, has_text = [], False
        nxt = choice(logits[0], [], False)

        def take(t: int) -> bool:  # append one token; True when the row stops after it
            nonlocal has_text
            out_ids.append(t)
            end = self._is_stop(t, has_text, stop_at_newline)
            has_text = has_text or nonspace[t]
            return end or len(out_ids) >= max_new

        while not take(nxt):
            draft = lookup_draft(source, out_ids, min(k, max_new - len(out_ids) - 1))
            inp = [nxt, *draft]
            n_past = past.get_seq_length()
            mask = torch.cat([mask, mask.new_ones(1, len(inp))], dim=1)
            out = self.llm(input_ids=torch.tensor([inp], device=self.device), attention_mask=mask,
                           position_ids=pos + 1 + torch.arange(len(inp), device=self.device)[None],
                           past_key_values=past, use_cache=True)
            past = out.past_key_values
            ok, text_before = 0, has_text
            while True:  # the greedy (or constrained) token at each position, while it equals the draft
                c = choice(out.logits[0, ok], out_ids + draft[:ok], text_before)
                if ok < len(draft) and draft[ok] == c:
                    text_before = text_before or nonspace[c]
                    ok += 1
                    continue
                break
            stopped = False
            for t in draft[:ok]:
                if take(t):
                    stopped = True
                    break
            if stopped:
                break
            keep = n_past + 1 + ok  # the cache holds nxt and the accepted drafts
            if past.get_seq_length() > keep:  # a negative crop removes that many (old and new transformers)
                past.crop(keep - past.get_seq_length())
            mask, pos, nxt = mask[:, :keep], pos + 1 + ok, c
        ids = [t for t in out_ids if t not in stop]
        text = self.tokenizer.decode(ids, skip_special_tokens=True).strip()
        return text.split("\n")[0].strip() if stop_at_newline else text

    @torch.no_grad()
    def score_choices(self, batch: QABatch, choices, soft: Tensor | None = None,
                      prompt: tuple | None = None, truncate: bool = True) -> Tensor:
        """``(B, C)`` log-likelihood of answering exactly each candidate and stopping:
        ``sum_t log p(c_t | prompt, c_<t) + log p(<eos> | prompt, c)`` (no length normalisation).

        ``choices``: one candidate list for every row, or one list per row (all of length ``C``;
        the evidence path scores ``"<row's evidence>. Answer: <label>"``). The prompt runs once
        (or comes in as ``prompt``, a :meth:`_prompt_pass` result, whose cache is then used up);
        its cache is repeated for the ``C`` candidates, which run as one batch of ``B x C``
        rows. ``truncate``: cut candidates at ``max_new_tokens`` as training cuts answers.
        """
        per_row = bool(choices) and all(isinstance(c, (list, tuple)) for c in choices)
        rows = [list(c) for c in choices] if per_row else [list(choices)] * len(batch)
        if not rows or not rows[0]:
            raise ValueError("score_choices: empty candidate list")
        if len(rows) != len(batch) or len({len(r) for r in rows}) != 1:
            raise ValueError(f"score_choices: needs {len(batch)} candidate lists of one length, got "
                             f"{[len(r) for r in rows]}")
        cut = self.config.max_new_tokens if truncate else None
        cands = [[self._ids(c)[:cut] + self._layout["eos"] for c in r] for r in rows]  # B x C token lists
        if any(len(c) == len(self._layout["eos"]) for r in cands for c in r):
            raise ValueError(f"score_choices: a candidate tokenises to nothing: {rows}")
        past, mask, pos, logits = prompt if prompt is not None else self._prompt_pass(batch, soft)
        first = torch.log_softmax(logits, -1)  # (B, V)
        n_b, n_c = len(batch), len(rows[0])
        first_ids = torch.tensor([[c[0] for c in r] for r in cands], device=self.device)  # (B, C)
        scores = first.gather(1, first_ids).clone()  # (B, C)
        flat = [c for r in cands for c in r]  # B*C, row-major (row b's candidates together)
        longest = max(len(c) for c in flat)
        if longest > 1:
            past.batch_repeat_interleave(n_c)
            pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
            steps = longest - 1
            ids = torch.tensor([c[:-1] + [pad] * (steps - len(c) + 1) for c in flat], device=self.device)
            real = torch.tensor([[1] * (len(c) - 1) + [0] * (steps - len(c) + 1) for c in flat], device=self.device)
            tgt = torch.tensor([c[1:] + [0] * (steps - len(c) + 1) for c in flat], device=self.device)
            m = torch.cat([mask.repeat_interleave(n_c, 0), real], dim=1)
            p = pos.repeat_interleave(n_c, 0) + 1 + torch.arange(steps, device=self.device)
            out = self.llm(input_ids=ids, attention_mask=m, position_ids=p, past_key_values=past, use_cache=True)
            lp = torch.log_softmax(out.logits.float(), -1).gather(-1, tgt[..., None])[..., 0]  # (B*C, steps)
            scores = scores + (lp * real).sum(-1).view(n_b, n_c)
        return scores

    def question_prompt(self, question: str) -> str:
        """A user's question in the form the checkpoint's training examples used
        (``config.question_form``, a :data:`QUESTION_FORMS` entry): ``"Question: ...\nAnswer:"`` for a
        scene or WebQSP checkpoint (unchanged when already so), the question itself for ``"plain"``."""
        return QUESTION_FORMS[self.config.question_form](question)

    def choices_for(self, question: str) -> tuple[str, ...] | None:
        """The closed answer set of ``question``: the checkpoint's ``answer_set`` (ExplaGraphs:
        support/counter), else ``("yes", "no")`` for a polar question (scenes, WebQSP), else
        ``None`` (an open question: greedy generation)."""
        return tuple(self.config.answer_set) or yes_no_choices(question)

    @torch.no_grad()
    def answer(self, batch: QABatch, choices=None, soft: Tensor | None = None,
               max_new_tokens: int | None = None) -> list[dict[str, Any]]:
        """Task decoding, one dict per row: ``{"answer", "probability", "scores", "raw", "clean"}``.

        ``choices``: ``None`` (each row's :meth:`choices_for`: the config's ``answer_set``, else
        yes/no for a polar question, else open generation - the one rule ``toporag ask``, ``toporag
        eval``, the pipeline and the app share), one candidate list for every row, or a list with
        one candidate list (or ``None``: open) per row. Closed rows get the arg-max candidate and
        its softmax probability over the candidates (``scores``: candidate -> log-likelihood); open
        rows get greedy generation cut to a short phrase (``probability`` ``None``); ``clean`` is
        :func:`is_clean`. Yes/no rows of an ``answer_style="evidence"`` checkpoint
        (:meth:`uses_evidence`) first generate their evidence greedily (``raw``; ``evidence`` is
        the part before ``Answer:``), then score ``"<evidence>. Answer: yes"`` against ``"... no"``
        from the same prompt cache: the label is chosen after the model has written what it read.
        """
        n = len(batch)
        if choices is None:
            per_row = [self.choices_for(q) for q in batch.questions]
        elif len(choices) and all(isinstance(c, (list, tuple)) or c is None for c in choices):
            if len(choices) != n:
                raise ValueError(f"answer: {len(choices)} candidate lists for {n} rows")
            per_row = [tuple(c) if c else None for c in choices]
        else:
            per_row = [tuple(choices) or None] * n
        if soft is None and self.config.use_graph:
            soft = self.graph_tokens(batch.cells)
        out: list[dict[str, Any] | None] = [None] * n
        groups: dict[tuple[str, ...] | None, list[int]] = {}
        for i, c in enumerate(per_row):
            groups.setdefault(c, []).append(i)
        for cands, idx in groups.items():
            sub = _select(batch, idx)
            s_soft = soft[idx] if soft is not None else None
            if cands is None:
                cited = self.config.answer_style in CITED_STYLES
                for i, raw in zip(idx, self.generate(sub, max_new_tokens=max_new_tokens, soft=s_soft)):
                    ev, label = split_evidence(raw) if cited else (None, None)
                    ans = short_answer(label if label is not None else raw)
                    out[i] = {"answer": ans, "probability": None, "scores": None, "raw": raw,
                              "clean": is_clean(ans, batch.questions[i], batch.contexts[i]),
                              **({"evidence": ev} if cited else {})}
            elif self.uses_evidence(cands):
                prompt = self._prompt_pass(sub, s_soft)
                copied = self.config.answer_style == "cited-loops"  # loop questions cite lines: draft them
                raws = self.generate(sub, soft=s_soft, prompt=(copy.deepcopy(prompt[0]), *prompt[1:]),
                                     max_new_tokens=max_new_tokens, lookup=None if copied else 0, constrain=False)
                evid = [split_evidence(t)[0] for t in raws]
                sc = self.score_choices(sub, [[evidence_target(e, c) for c in cands] for e in evid],
                                        prompt=prompt, truncate=False)
                prob = torch.softmax(sc, -1)
                for r, i in enumerate(idx):
                    j = int(sc[r].argmax())
                    out[i] = {"answer": cands[j], "probability": float(prob[r, j]),
                              "scores": {c: float(sc[r, k]) for k, c in enumerate(cands)}, "raw": raws[r],
                              "clean": True, "evidence": evid[r]}
            else:
                sc = self.score_choices(sub, cands, soft=s_soft)
                prob = torch.softmax(sc, -1)
                for r, i in enumerate(idx):
                    j = int(sc[r].argmax())
                    out[i] = {"answer": cands[j], "probability": float(prob[r, j]),
                              "scores": {c: float(sc[r, k]) for k, c in enumerate(cands)}, "raw": cands[j],
                              "clean": True}
        return out  # type: ignore[return-value]

    def uses_evidence(self, choices: tuple[str, ...] | None) -> bool:
        """Whether rows with this closed answer set are decoded evidence first: the checkpoint was
        trained with ``answer_style="evidence"`` (or a cited style) and the set is yes/no (the polar questions whose
        training targets carried evidence; a checkpoint's own ``answer_set`` is scored directly)."""
        return self.config.answer_style in ("evidence", *CITED_STYLES) and choices is not None and \
            tuple(c.lower() for c in choices) == ("yes", "no")

    # -- checkpoints --------------------------------------------------------------
    def trainable_state_dict(self) -> dict[str, Tensor]:
        """Only the parameters that train (encoder, projector, prompt, LoRA); the LLM is not saved."""
        return {n: p.detach().float().cpu().contiguous() for n, p in self.named_parameters() if p.requires_grad}

    def num_trainable(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def save(self, folder: str | os.PathLike, extra: dict[str, Any] | None = None,
             dtype: torch.dtype = torch.float32) -> Path:
        """Write ``model.safetensors`` + ``config.json`` atomically into ``folder``; ``dtype=torch.float16``
        halves a checkpoint meant for shipping (loading casts back to the parameters' dtype)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tmp_w, tmp_c = folder / ".model.safetensors.tmp", folder / ".config.json.tmp"
        save_file({n: t.to(dtype) for n, t in self.trainable_state_dict().items()}, str(tmp_w))
        tmp_c.write_text(json.dumps({"config": self.config.to_dict(), **(extra or {})}, indent=2))
        os.replace(tmp_w, folder / "model.safetensors")
        os.replace(tmp_c, folder / "config.json")
        return folder

    def load_trainable(self, state: dict[str, Tensor], where: str = "checkpoint") -> None:
        """Copy saved trainable tensors in; every trainable parameter must be present, nothing extra."""
        own = {n: p for n, p in self.named_parameters() if p.requires_grad}
        missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or extra:
            raise ValueError(f"{where}: parameters do not match this model (missing {missing[:5]}, "
                             f"unexpected {extra[:5]})")
        with torch.no_grad():
            for n, p in own.items():
                if tuple(state[n].shape) != tuple(p.shape):
                    raise ValueError(f"{where}: {n} has shape {tuple(state[n].shape)}, expected {tuple(p.shape)}")
                p.copy_(state[n].to(p.dtype))

    @classmethod
    def load(cls, folder: str | os.PathLike, llm: nn.Module | None = None, tokenizer=None,
             device: str | torch.device = "auto") -> TopoRAGModel:
        """Rebuild from ``folder`` (``config.json`` + ``model.safetensors``); loads the LLM named in
        the config unless one is given."""
        from safetensors.torch import load_file

        folder = Path(folder)
        cfg_path = folder / "config.json"
        if not cfg_path.is_file():
            raise FileNotFoundError(f"{cfg_path} not found (not a TopoRAG checkpoint folder)")
        try:
            meta = json.loads(cfg_path.read_text())
            config = TopoRAGConfig.from_dict(meta["config"])
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{cfg_path}: not a valid TopoRAG config ({e})") from e
        if llm is None:
            from .llm import checkpoint_llm_dtype, load_llm

            llm, tokenizer = load_llm(None if config.llm == "smollm2-135m-instruct" else config.llm, device=device,
                                      trained_dtype=checkpoint_llm_dtype(meta))
        model = cls(config, llm, tokenizer)
        weights = folder / "model.safetensors"
        if model.num_trainable():
            if not weights.is_file():
                raise FileNotFoundError(f"{weights} not found")
            model.load_trainable(load_file(str(weights), device=str(model.device)), where=str(weights))
        model.eval()
        return model


# ----------------------------------------------------------------------------- decoding helpers
def _select(batch: QABatch, idx: list[int]) -> QABatch:
    """Rows ``idx`` of a batch, without cells (the caller passes their graph tokens as ``soft``)."""
    if list(idx) == list(range(len(batch))):
        return batch
    return QABatch(None, [batch.questions[i] for i in idx], [batch.contexts[i] for i in idx],
                   [batch.answers[i] for i in idx] if batch.answers is not None else None,
                   [batch.kv[i] for i in idx] if batch.kv is not None else None)


_LEAD = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:\-]?\s*", re.IGNORECASE)


def short_answer(text: str, max_words: int = 12) -> str:
    """A generated answer as a short phrase: first non-empty line, a leading ``Answer:`` /
    ``The answer is`` dropped, surrounding quotes and a final full stop stripped, at most
    ``max_words`` words."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    line = _LEAD.sub("", line).strip()
    for _ in range(2):  # '"red".' and 'red."' alike
        line = line.strip("\"'`").strip()
        if line.endswith(".") and not line.endswith(".."):
            line = line[:-1].rstrip()
    return " ".join(line.split()[:max_words])


_DUMP = re.compile(r"node_id|node_attr|edge_attr|src,|\(x,\s*y,\s*w,\s*h\)|^\s*c\d+\s*:|^\s*\d+\s*,|,\s*\d+\s*$|"
                   r"\bc\d+\b|<-\[|\]->", re.IGNORECASE | re.MULTILINE)


def is_clean(answer: str, question: str = "", context: str = "", max_words: int = 12) -> bool:
    """``False`` for an answer that is not an answer: empty, longer than ``max_words`` words, a
    piece of the textualized context (CSV rows, node ids, 2-cell ids ``c0``, cycle arrows), or
    the question repeated (>= 60% of its words, in order, or the answer contained in it with
    4+ words)."""
    from .metrics import normalize

    a = normalize(answer)
    words = a.split()
    if not words or len(words) > max_words or _DUMP.search(str(answer)):
        return False
    q = normalize(question)
    if len(words) >= 4 and a in q:
        return False
    qw = q.split()
    if qw and len(words) >= 0.6 * len(qw) and len(set(words) & set(qw)) >= 0.8 * len(set(words)):
        return False
    ctx_lines = {normalize(ln) for ln in str(context).splitlines() if len(ln.split(",")) >= 3}
    return a not in ctx_lines


_YES_NO = re.compile(r"(?:^|[:.?!\n]\s*)((?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)"
                     r"\b[^:.?!\n]*)\?\s*(?:answer\s*:?\s*)?$", re.IGNORECASE)


def yes_no_choices(question: str) -> tuple[str, str] | None:
    """``("yes", "no")`` when the question's last clause is a polar question (starts with an
    auxiliary verb, ends with ``?``, no ``or`` alternative), else ``None`` (an open question).
    A trailing ``Answer:`` prompt is allowed. For :meth:`TopoRAGModel.answer`'s per-row ``choices``."""
    m = _YES_NO.search(str(question).strip())
    if not m or re.search(r"\bor\b", m.group(1), re.IGNORECASE):
        return None
    return ("yes", "no")


LOOKUP_TOKENS = 10  # prompt-lookup draft length of a cited model's generation (TopoRAGModel.generate)


def lookup_draft(source, generated: Sequence[int], k: int, max_ngram: int = 3) -> list[int]:
    """Prompt-lookup draft: the (up to) ``k`` tokens that follow the first occurrence in ``source``
    (token ids, ``(S,)``) of the longest suffix of ``generated`` of ``max_ngram`` .. 1 tokens; ``[]``
    when no suffix occurs (or ``k <= 0``). The first occurrence: in a compact context a node's line
    (``cup [5]: white, glass``) comes before the relation lines that name it. Vectorised over
    ``source`` with one window comparison per n-gram length."""
    src = np.asarray(source, dtype=np.int64)
    if k <= 0 or not len(generated) or src.size < 2:
        return []
    for n in range(min(max_ngram, len(generated), src.size - 1), 0, -1):
        tail = np.asarray(generated[-n:], dtype=np.int64)
        win = np.lib.stride_tricks.sliding_window_view(src[:-1], n)  # windows followed by >= 1 token
        hits = np.flatnonzero((win == tail).all(axis=1))
        if hits.size:
            start = int(hits[0]) + n
            return src[start:start + k].tolist()
    return []


CONSTRAIN_TOP_K = 32  # candidates a constrained step tries, most likely first (none allowed: greedy, unconstrained)


def evidence_target(evidence: str, label: str) -> str:
    """The training target of an evidence-first answer: ``"<evidence>. Answer: <label>"``
    (``"The metal cup is orange. Answer: no"``); the evidence decoder scores each label after
    the model's own evidence in exactly this form."""
    ev = " ".join(str(evidence).split()).rstrip(" .")
    return f"{ev}. {EVIDENCE_CUE} {label}" if ev else f"{EVIDENCE_CUE} {label}"


def split_evidence(text: str) -> tuple[str, str | None]:
    """A generated evidence-first answer -> ``(evidence, label or None)``: the text before the
    last ``Answer:`` (trailing full stop dropped) and the rest of the line after it (outer
    punctuation stripped; an open answer may have several words); without the cue, the whole
    first line is the evidence and the label is ``None``."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    k = line.rfind(EVIDENCE_CUE)
    if k < 0:
        return line.rstrip(" ."), None
    rest = line[k + len(EVIDENCE_CUE):].split()
    return line[:k].rstrip(" ."), (" ".join(rest).strip(".,;:!?\"'") or None if rest else None)
