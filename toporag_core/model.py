"""TopoRAG's generator: a frozen causal LM prompted by a cell-complex encoder (eqs. 21-23).

Read top to bottom:

1. :class:`TopoRAGConfig` - everything that defines a model (saved as JSON next to the weights).
2. :class:`QABatch` - what the model eats: collated subcomplexes + texts (+ answers for training).
3. :class:`TopoRAGModel` -
   * ``graph_tokens``: CW encoder -> pooled ``(B, hidden)`` -> MLP projector ->
     ``(B, T, H)`` soft prompt tokens in the LLM's embedding space (``T = num_graph_tokens``);
   * ``build_inputs``: one sequence per example, laid out as::

         [left pad] [chat prefix] [prompt-tuning tokens] [graph tokens] context \\n question [chat suffix] (answer <eos>)

     where the chat prefix/suffix come from the tokenizer's chat template (the soft tokens
     open the user turn), or G-Retriever's ``<s>[INST] ... [/INST]`` layout when the tokenizer
     has no template. The context (the textualized subcomplex) is truncated so the input stays
     within ``max_input_tokens``; the question never is. Labels are ``-100`` everywhere but on
     the answer tokens and the closing EOS (loss on answer tokens only);
   * ``forward(batch) -> loss`` and ``generate(batch) -> list[str]`` (greedy, KV cache, stops
     per sequence at EOS, at most ``max_new_tokens``);
   * ``save`` / ``load``: only the trainable parameters (encoder, projector, prompt / LoRA) as
     safetensors plus ``config.json``; no pickle anywhere.

Modes: ``"soft_prompt"`` (graph tokens only, the paper's frozen setting), ``"prompt_tuning"``
(plus peft's :class:`PromptEmbedding`, 10 virtual tokens), ``"lora"`` (plus peft LoRA r=8,
alpha=16, dropout 0.05 on ``q_proj``/``v_proj``; injected *into the given LLM instance*, so do
not share one LLM object between a LoRA model and another model).

Why not ``torch_geometric.llm.models.LLM`` / ``GRetriever``: its constructor loads the model
itself by name (hub metadata query, slow tokenizer), so it cannot take our offline-converted or
already-loaded LLM; in its chat-template path it does not truncate the context at all; it
places the soft tokens before the whole chat prompt; and its GNN interface is ``(x,
edge_index, batch)``, not a cell complex. We keep its conventions (``-100`` labels, left
padding with the pad token's embedding, soft tokens right after the opening tokens, the
``[INST]`` fallback) and write the ~100 lines ourselves.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .nn import CellBatch, CWNConfig, build_encoder

IGNORE_INDEX = -100  # label value the LM loss skips (same as PyG / HF)
MODES = ("soft_prompt", "prompt_tuning", "lora")
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

    def __post_init__(self) -> None:
        if isinstance(self.cwn, dict):
            self.cwn = CWNConfig.from_dict(self.cwn)
        self.lora_targets = tuple(self.lora_targets)
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; choose one of {MODES}")
        if self.num_graph_tokens < 1:
            raise ValueError(f"num_graph_tokens must be >= 1, got {self.num_graph_tokens}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cwn"] = self.cwn.to_dict()
        d["lora_targets"] = list(self.lora_targets)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TopoRAGConfig":
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

    def __len__(self) -> int:
        return len(self.questions)

    def to(self, device: torch.device | str) -> "QABatch":
        return QABatch(self.cells.to(device) if self.cells is not None else None,
                       self.questions, self.contexts, self.answers)


# ----------------------------------------------------------------------------- model
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
        self._layout = self._prompt_layout_ids()
        self.to(self.device)

    # -- helpers ------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.llm.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.llm.get_input_embeddings().weight.dtype

    def train(self, mode: bool = True) -> "TopoRAGModel":
        super().train(mode)
        if self.config.mode != "lora":
            self.llm.eval()  # frozen: no dropout inside the LLM (LoRA keeps its own dropout)
        return self

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []

    def _prompt_layout_ids(self) -> dict[str, list[int]]:
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

    def context_ids(self, context: str, question: str) -> tuple[list[int], list[int]]:
        """``(context ids truncated to the budget, question ids)``; the question is never cut."""
        q = self._ids(question)
        lay = self._layout
        fixed = len(lay["pre"]) + self.num_soft_tokens() + len(lay["sep"]) + len(q) + len(lay["post"])
        budget = max(0, self.config.max_input_tokens - fixed)
        return self._ids(context)[:budget], q

    def prompt_layout(self, context: str, question: str) -> dict[str, Any]:
        """What the LLM actually reads for one example (for the app's prompt view)."""
        c, q = self.context_ids(context, question)
        lay = self._layout
        graph = self.config.num_graph_tokens if self.config.use_graph else 0
        return {"soft_tokens": self.num_soft_tokens(), "graph_tokens": graph,
                "prompt_tuning_tokens": self.num_soft_tokens() - graph,
                "prefix": self.tokenizer.decode(lay["pre"]), "context": self.tokenizer.decode(c),
                "context_truncated": len(c) < len(self._ids(context)), "question": question,
                "suffix": self.tokenizer.decode(lay["post"]),
                "input_tokens": len(lay["pre"]) + self.num_soft_tokens() + len(c) + len(lay["sep"]) + len(q)
                + len(lay["post"])}

    # -- the model ----------------------------------------------------------------
    def graph_tokens(self, cells: CellBatch) -> Tensor:
        """``(B, T, H)`` soft prompt tokens from a batch of subcomplexes."""
        pooled = self.encoder(cells)  # (B, d_enc)
        out = self.projector(pooled.float())  # (B, T * H)
        return out.view(pooled.shape[0], self.config.num_graph_tokens, self.llm_hidden)

    def build_inputs(self, batch: QABatch, with_answers: bool,
                     soft: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Left-padded ``inputs_embeds (B, S, H)``, ``attention_mask (B, S)``, ``position_ids (B, S)``
        and ``labels (B, S)`` (``None`` unless ``with_answers``). ``soft``: precomputed graph tokens."""
        emb_layer = self.llm.get_input_embeddings()
        dev, dt, lay = self.device, self.dtype, self._layout
        if self.config.use_graph:
            soft = (self.graph_tokens(batch.cells) if soft is None else soft).to(dt)
        else:
            soft = None
        virt = self.prompt.embedding.weight.to(dt) if self.prompt is not None else None
        seqs, labels = [], []
        for i in range(len(batch)):
            c, q = self.context_ids(batch.contexts[i], batch.questions[i])
            tail = c + lay["sep"] + q + lay["post"]
            ans = []
            if with_answers:
                ans = self._ids(batch.answers[i])[: self.config.max_new_tokens] + lay["eos"]
            head_e = emb_layer(torch.tensor(lay["pre"], dtype=torch.long, device=dev))
            tail_e = emb_layer(torch.tensor(tail + ans, dtype=torch.long, device=dev))
            parts = [head_e] + ([virt] if virt is not None else []) + ([soft[i]] if soft is not None else []) + [tail_e]
            seq = torch.cat(parts, dim=0)
            seqs.append(seq)
            labels.append([IGNORE_INDEX] * (seq.shape[0] - len(ans)) + ans)
        length = max(s.shape[0] for s in seqs)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        pad_e = emb_layer(torch.tensor([pad_id], device=dev))
        embeds = torch.stack([torch.cat([pad_e.expand(length - s.shape[0], -1), s]) for s in seqs])
        mask = torch.tensor([[0] * (length - s.shape[0]) + [1] * s.shape[0] for s in seqs], device=dev)
        # Positions count real tokens only, so a left-padded row sees the same positions as alone.
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        lab = None
        if with_answers:
            lab = torch.tensor([[IGNORE_INDEX] * (length - len(x)) + x for x in labels], device=dev)
        return embeds, mask, pos, lab

    def forward(self, batch: QABatch) -> Tensor:
        """Mean cross-entropy over the answer tokens (+ EOS) of the batch."""
        if batch.answers is None:
            raise ValueError("forward() needs batch.answers (training targets); use generate() otherwise")
        embeds, mask, pos, labels = self.build_inputs(batch, with_answers=True)
        body, head = self.llm.get_decoder(), self.llm.get_output_embeddings()
        hidden = body(inputs_embeds=embeds, attention_mask=mask, position_ids=pos).last_hidden_state
        # Next-token loss (position t predicts token t+1), with the vocabulary projection applied
        # only where there is a target: ~20% of a small LM's compute is the (S x vocab) head.
        target = labels[:, 1:]
        keep = target != IGNORE_INDEX
        logits = head(hidden[:, :-1][keep])
        return nn.functional.cross_entropy(logits.float(), target[keep])

    @torch.no_grad()
    def generate(self, batch: QABatch, max_new_tokens: int | None = None, soft: Tensor | None = None) -> list[str]:
        """Greedy decoding with a KV cache; each row stops at its first EOS. ``soft``: precomputed
        ``graph_tokens`` (the pipeline times encoding and generation separately)."""
        max_new = self.config.max_new_tokens if max_new_tokens is None else max_new_tokens
        embeds, mask, pos, _ = self.build_inputs(batch, with_answers=False, soft=soft)
        stop = set(self._layout["eos"])
        gen_eos = getattr(getattr(self.llm, "generation_config", None), "eos_token_id", None)
        stop |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else [])
        stop_t = torch.tensor(sorted(stop) or [-1], device=self.device)
        out = self.llm(inputs_embeds=embeds, attention_mask=mask, position_ids=pos, use_cache=True)
        past, tokens = out.past_key_values, []
        done = torch.zeros(len(batch), dtype=torch.bool, device=self.device)
        nxt = out.logits[:, -1].argmax(-1)
        for _ in range(max_new):
            tokens.append(torch.where(done, -1, nxt))
            done |= torch.isin(nxt, stop_t)
            if bool(done.all()) or len(tokens) == max_new:
                break
            mask = torch.cat([mask, mask.new_ones(len(batch), 1)], dim=1)
            pos = pos[:, -1:] + 1
            out = self.llm(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos,
                           past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1)
        texts = []
        for row in (torch.stack(tokens, 1).tolist() if tokens else [[] for _ in range(len(batch))]):
            ids = [t for t in row if t >= 0 and t not in stop]
            texts.append(self.tokenizer.decode(ids, skip_special_tokens=True).strip())
        return texts

    # -- checkpoints --------------------------------------------------------------
    def trainable_state_dict(self) -> dict[str, Tensor]:
        """Only the parameters that train (encoder, projector, prompt, LoRA); the LLM is not saved."""
        return {n: p.detach().float().cpu().contiguous() for n, p in self.named_parameters() if p.requires_grad}

    def num_trainable(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def save(self, folder: str | os.PathLike, extra: dict[str, Any] | None = None) -> Path:
        """Write ``model.safetensors`` + ``config.json`` atomically into ``folder``."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tmp_w, tmp_c = folder / ".model.safetensors.tmp", folder / ".config.json.tmp"
        save_file(self.trainable_state_dict(), str(tmp_w))
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
             device: str | torch.device = "auto") -> "TopoRAGModel":
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
            from .llm import load_llm

            llm, tokenizer = load_llm(None if config.llm == "smollm2-135m-instruct" else config.llm, device=device)
        model = cls(config, llm, tokenizer)
        weights = folder / "model.safetensors"
        if model.num_trainable():
            if not weights.is_file():
                raise FileNotFoundError(f"{weights} not found")
            model.load_trainable(load_file(str(weights), device=str(model.device)), where=str(weights))
        model.eval()
        return model
