"""Training's key/value cache on disk: :class:`DiskKVShards`, the frozen part of every example computed once.

With ``graph_position="before_question"`` the frozen part of an example (chat prefix and context) comes before
every trainable input, so its key/value cache does not change while training. :class:`DiskKVShards` computes
it once per example (no grad) and stores it as float16 safetensors shards, ``(layers, 2, kv_heads, S_i,
head_dim)`` per example, memory-mapped when read; every epoch and every validation reuses it, so a step runs
only the few tail positions with grad. The folder's name (:func:`kv_store_key`) changes with everything the
cache depends on (LLM, prompt layout, input budget, number of graph tokens, data), so a cache is never read
for another setting. Serving's in-memory cache is :class:`~toporag_core.model.FrozenKVStore`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import torch

from ..tasks.prep import Example
from ..tasks.batching import make_batch
from ..model import TopoRAGModel


class DiskKVShards:
    """Frozen-part key/value caches of many examples, as float16 safetensors shards in ``folder``.

    ``build(model, examples)`` computes what is missing (shards of ``shard_size`` examples,
    written atomically, so an interrupted build resumes); ``get(ids)`` reads memory-mapped
    tensors ``(layers, 2, kv_heads, S_i, head_dim)``. ``folder`` must be specific to the LLM, the
    prompt layout and the data (:func:`kv_store_key` names it).
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._where: dict[str, Path] = {}
        self._handles: dict[Path, Any] = {}
        self._scan()

    def _scan(self) -> None:
        from safetensors import safe_open

        for f in sorted(self.folder.glob("shard_*.safetensors")):
            if f not in self._handles:
                self._handles[f] = safe_open(str(f), framework="pt")
                for k in self._handles[f].keys():  # noqa: SIM118 (a safetensors handle)
                    self._where[k] = f

    def __contains__(self, key: str) -> bool:
        return str(key) in self._where

    def __len__(self) -> int:
        return len(self._where)

    def build(self, model: TopoRAGModel, examples: list[Example], batch_size: int = 8, shard_size: int = 64,
              show_progress: bool = True) -> DiskKVShards:
        from tqdm.auto import tqdm

        # longest-first by text length: rows of one forward pass have similar lengths (little padding)
        todo = sorted((e for e in examples if str(e.id) not in self._where),
                      key=lambda e: -(len(e.context) + len(e.question)))
        self.check_space(model, todo)
        was = model.training
        model.eval()
        for s0 in tqdm(range(0, len(todo), shard_size), disable=not show_progress, desc="kv cache"):
            shard = {}
            for b0 in range(s0, min(s0 + shard_size, len(todo)), batch_size):
                chunk = todo[b0:min(b0 + batch_size, s0 + shard_size, len(todo))]
                kvs = model.context_kv(make_batch(chunk, with_answers=False, use_graph=False))
                shard.update({str(e.id): t.to(torch.float16).cpu().contiguous() for e, t in zip(chunk, kvs)})
            self._write(shard)
        model.train(was)
        return self

    def check_space(self, model: TopoRAGModel, examples: list[Example], margin: float = 1.1) -> int:
        """Refuse, before the first forward pass, a build the disk cannot hold; returns the estimated bytes
        the not yet cached ``examples`` will take.

        A cached example holds ``layers x 2 x kv_heads x S x head_dim`` float16 values (SmolLM2-135M:
        30 x 2 x 3 x 64 x 2 B = 23 KB per context token, ~11 MB for a 480-token scene context), so a
        3,600-example scene run needs ~40 GB. ``S`` is estimated from the tokenized context and question
        (the chat prefix adds a few tokens, covered by ``margin``). Finished shards stay: after freeing
        space the same command resumes."""
        import shutil

        todo = [e for e in examples if str(e.id) not in self._where]
        if not todo:
            return 0
        cfg = model.llm.config
        heads = int(getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads)
        per_token = int(cfg.num_hidden_layers) * 2 * heads * head_dim * 2
        texts = [f"{e.context}\n{e.question}" for e in todo]
        tokens = sum(len(ids) for ids in model.tokenizer(texts, add_special_tokens=False)["input_ids"])
        need = int(tokens * per_token * margin)
        free = shutil.disk_usage(self.folder).free
        if need > free:
            raise OSError(f"kv cache {self.folder}: about {need / 1e9:.1f} GB needed for {len(todo)} examples, "
                          f"{free / 1e9:.1f} GB free; free disk space or set TOPORAG_CACHE to a larger disk "
                          f"({len(self)} examples already cached stay, and the same command resumes)")
        return need

    def _write(self, shard: dict[str, torch.Tensor]) -> None:
        """One more shard file, written atomically (an interrupted build or cut resumes)."""
        from safetensors.torch import save_file

        path = self.folder / f"shard_{len(list(self.folder.glob('shard_*.safetensors'))):05d}.safetensors"
        tmp = path.with_name(path.name + ".tmp")
        save_file(shard, str(tmp))
        os.replace(tmp, path)
        self._scan()

    def get(self, ids: list[str]) -> list[torch.Tensor]:
        missing = [i for i in ids if str(i) not in self._where]
        if missing:
            raise KeyError(f"DiskKVShards {self.folder}: no cache for examples {missing[:5]}")
        return [self._handles[self._where[str(i)]].get_tensor(str(i)) for i in ids]


def kv_data_key(dataset: str, setting_key: str, data_dir: str | os.PathLike | None) -> str:
    """The data part of a KV store's name: the dataset, the preprocessing key and where the data came
    from, as one folder name (``shared`` for the default data; else the folder's name and a hash of its
    resolved path, so ``--data-dir /a/b`` never nests folders and two folders of one name stay apart)."""
    import hashlib

    if data_dir is None:
        return f"{dataset}-{setting_key}-shared"
    where = Path(data_dir).expanduser().resolve()
    return f"{dataset}-{setting_key}-{where.name}-{hashlib.sha1(str(where).encode()).hexdigest()[:8]}"


def kv_store_key(model: TopoRAGModel, data_key: str, graph_position: str | None = None) -> str:
    """A folder name that changes with the LLM, the prompt layout, the input budget, the number of graph
    tokens (they take part of that budget, so the context is cut at another length: a text-only twin and its
    graph-token model never share a cache) and the data (``graph_position``: the key of another cacheable
    layout of the same model)."""
    import hashlib

    pos = graph_position or model.config.graph_position
    lay = model.prompt_layout_ids()
    key = [model.config.llm, lay, model.config.max_input_tokens, str(model.dtype), data_key,
           f"soft={model.num_soft_tokens()}", pos]
    if model.config.question_first:
        key.append("question_first")
    h = hashlib.sha1(json.dumps(key).encode()).hexdigest()[:12]
    return f"{data_key}-{h}"


def open_kv_store(model: TopoRAGModel, data_key: str, root: str | os.PathLike,
                  examples: Sequence[Example] = ()) -> DiskKVShards:
    """``model``'s key/value store for ``data_key`` under ``root`` (``examples`` is not used)."""
    return DiskKVShards(Path(root) / kv_store_key(model, data_key))
