"""Tiny, download-free stand-ins for the neural parts: for tests and for the app in test mode.

* :func:`tiny_tokenizer` - a byte-level BPE tokenizer with no merges (256 byte tokens + 4
  specials), optionally with a small chat template.
* :func:`tiny_llm` - a randomly initialised 2-layer ``LlamaForCausalLM`` (hidden 32), the same
  class as SmolLM2 / Llama-2, so every code path (KV cache, ``inputs_embeds``) is the real one.
* :func:`save_tiny_llm` - that pair saved as a Hugging Face folder (``load_llm(folder)`` reads it).
* :func:`build_tiny_checkpoint` - a TopoRAG checkpoint folder in the trained format
  (``config.json`` + ``model.safetensors``) whose config names a tiny LLM folder next to it, so
  ``TopoRAGPipeline.load(folder)`` works offline in well under a second.

Everything is seeded: the same call builds bit-identical weights, and greedy decoding makes the
(gibberish) answers deterministic, which is what tests compare against.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

TINY_HIDDEN = 32


def tiny_tokenizer(chat: bool = False):
    """Byte-level tokenizer (ids 0-3: ``<pad> <s> </s> <unk>``, then the 256 byte symbols)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                  unk_token="<unk>")
    tok.padding_side = "left"
    if chat:
        tok.chat_template = ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
                             "{% if add_generation_prompt %}<s>assistant: {% endif %}")
    return tok


def tiny_llm(vocab: int, seed: int = 0):
    """A random 2-layer Llama with ``vocab`` tokens (``initializer_range=0.3``: at the usual 0.02 a
    random net all but ignores its context, and every question would get the same answer)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=TINY_HIDDEN, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False,
                      initializer_range=0.3)
    return LlamaForCausalLM(cfg).eval()


def save_tiny_llm(folder: str | os.PathLike, chat: bool = True, seed: int = 0) -> Path:
    """Write a tiny Llama + tokenizer as a Hugging Face folder; returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer(chat)
    tiny_llm(len(tok), seed).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def tiny_model(in_dim: int = 256, mode: str = "soft_prompt", chat: bool = True, tokens: int = 1, seed: int = 0,
               llm_name: str = "tiny", **config: Any):
    """An in-process :class:`~toporag_core.model.TopoRAGModel` on the tiny Llama.

    ``in_dim`` must equal the sentence encoder's dimension (256 = the default
    :class:`~toporag_core.embed.HashingEncoder`, what the app uses with ``TOPORAG_ENCODER=hashing``).
    """
    from . import TopoRAGConfig, TopoRAGModel
    from ..nn import CWNConfig

    tok = tiny_tokenizer(chat)
    llm = tiny_llm(len(tok), seed)
    torch.manual_seed(seed + 1)
    cfg = TopoRAGConfig(cwn=CWNConfig(in_dim=in_dim, hidden=16), num_graph_tokens=tokens, projector_hidden=32,
                        llm=llm_name, mode=mode, max_new_tokens=config.pop("max_new_tokens", 8), **config)
    return TopoRAGModel(cfg, llm, tok)


def build_tiny_checkpoint(folder: str | os.PathLike, in_dim: int = 256, seed: int = 0, dataset: str = "tiny",
                          retrieval: dict[str, Any] | None = None, question_form: str = "plain",
                          reader: dict[str, Any] | None = None, **config: Any) -> Path:
    """A trained-format checkpoint folder: ``config.json`` + ``model.safetensors`` + ``llm/``.

    The config's ``llm`` is the absolute path of the tiny LLM folder inside, so
    ``TopoRAGPipeline.load(folder)`` needs nothing else. ``retrieval`` is stored like
    ``toporag train`` stores it (the setting the app offers as the default); ``question_form`` as
    training copies it from the task (``"graphqa"`` for a scene or WebQSP checkpoint); ``reader``: the
    ``"reader"`` entry of ``config.json`` (``{"open": "names"}``: open answers read from entity names); ``config``:
    more :class:`~toporag_core.model.TopoRAGConfig` fields (``mode="lora"``, ``graph_position``, ...).
    """
    folder = Path(folder)
    llm_dir = save_tiny_llm(folder / "llm", chat=True, seed=seed)
    model = tiny_model(in_dim=in_dim, seed=seed, llm_name=str(llm_dir.resolve()), question_form=question_form, **config)
    setting = {"method": "toporag", "k0": 3, "k1": 3, "k2": 3, "c2": 0.5, "edge_cost": 0.5, "use_cells2": True,
               "tree": "bfs"}
    setting.update(retrieval or {})
    model.save(folder, extra={"dataset": dataset, "retrieval": setting, **({"reader": reader} if reader else {})})
    return folder
