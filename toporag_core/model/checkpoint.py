"""Checkpoints: only the trainable parameters (encoder, projector, LoRA) as safetensors plus
``config.json`` (``{"config": TopoRAGConfig.to_dict(), ...training metadata}``); the frozen LLM is not
saved, and there is no pickle anywhere."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from .config import TopoRAGConfig


def trainable_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """Only the parameters that train (encoder, projector, LoRA), float32 on the CPU."""
    return {n: p.detach().float().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}


def num_trainable(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def save(model, folder: str | os.PathLike, extra: dict[str, Any] | None = None,
         dtype: torch.dtype = torch.float32) -> Path:
    """Write ``model.safetensors`` + ``config.json`` atomically into ``folder``; ``dtype=torch.float16``
    halves a checkpoint meant for shipping (loading casts back to the parameters' dtype)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp_w, tmp_c = folder / ".model.safetensors.tmp", folder / ".config.json.tmp"
    save_file({n: t.to(dtype) for n, t in trainable_state_dict(model).items()}, str(tmp_w))
    tmp_c.write_text(json.dumps({"config": model.config.to_dict(), **(extra or {})}, indent=2))
    os.replace(tmp_w, folder / "model.safetensors")
    os.replace(tmp_c, folder / "config.json")
    return folder


def load_trainable(model: nn.Module, state: dict[str, Tensor], where: str = "checkpoint") -> None:
    """Copy saved trainable tensors in; every trainable parameter must be present, nothing extra."""
    own = {n: p for n, p in model.named_parameters() if p.requires_grad}
    missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or extra:
        hint = ""
        if any(n.startswith("projector.") for n in missing + extra):
            hint = (f"; its graph tokens come from another path than this config's graph_path="
                    f"{getattr(getattr(model, 'config', None), 'graph_path', '?')!r} (a config.json without "
                    f"graph_path is an older checkpoint: 'pooled'); retrain it with `toporag train --recipe ...` "
                    f"or fix graph_path in its config.json")
        raise ValueError(f"{where}: parameters do not match this model (missing {missing[:5]}, "
                         f"unexpected {extra[:5]}){hint}")
    with torch.no_grad():
        for n, p in own.items():
            if tuple(state[n].shape) != tuple(p.shape):
                raise ValueError(f"{where}: {n} has shape {tuple(state[n].shape)}, expected {tuple(p.shape)}")
            p.copy_(state[n].to(p.dtype))


def warm_start(model: nn.Module, folder: str | os.PathLike) -> dict[str, int]:
    """Copy into ``model`` every trainable tensor of checkpoint ``folder`` whose name and shape match
    (``toporag train --init-from``: e.g. a text-trained LoRA under a new graph path); the rest keep their
    initialisation. Returns ``{"loaded", "skipped", "new"}`` tensor counts; ``ValueError`` when nothing
    matches (another LLM or layout: starting from it would silently be starting from scratch)."""
    from safetensors.torch import load_file

    weights = Path(folder) / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"--init-from: {weights} not found (not a TopoRAG checkpoint folder)")
    state = load_file(str(weights))
    own = {n: p for n, p in model.named_parameters() if p.requires_grad}
    match = [n for n, t in state.items() if n in own and tuple(t.shape) == tuple(own[n].shape)]
    if not match:
        raise ValueError(f"--init-from {folder}: none of its {len(state)} tensors fits this model (another LLM, "
                         f"LoRA setting or encoder width?)")
    with torch.no_grad():
        for n in match:
            own[n].copy_(state[n].to(own[n].dtype))
    return {"loaded": len(match), "skipped": len(state) - len(match), "new": len(own) - len(match)}


def read_config(folder: str | os.PathLike) -> tuple[TopoRAGConfig, dict[str, Any]]:
    """``(config, the whole config.json)`` of a checkpoint folder; ``ValueError`` naming the file for a
    malformed one (or one holding a retired option), ``FileNotFoundError`` without one."""
    cfg_path = Path(folder) / "config.json"
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path} not found (not a TopoRAG checkpoint folder)")
    try:
        meta = json.loads(cfg_path.read_text())
        return TopoRAGConfig.from_dict(meta["config"]), meta
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{cfg_path}: not a valid TopoRAG config ({e})") from e
    except ValueError as e:
        raise ValueError(f"{cfg_path}: {e}") from e


def load(cls, folder: str | os.PathLike, llm: nn.Module | None = None, tokenizer=None,
         device: str | torch.device = "auto"):
    """A ``cls`` (:class:`~toporag_core.model.TopoRAGModel`) rebuilt from ``folder`` (``config.json`` +
    ``model.safetensors``) in eval mode; loads the LLM named in the config unless one is given."""
    from safetensors.torch import load_file

    folder = Path(folder)
    config, meta = read_config(folder)
    if llm is None:
        from .llm import checkpoint_llm_dtype, load_llm

        llm, tokenizer = load_llm(None if config.llm == "smollm2-135m-instruct" else config.llm, device=device,
                                  trained_dtype=checkpoint_llm_dtype(meta))
    model = cls(config, llm, tokenizer)
    weights = folder / "model.safetensors"
    if num_trainable(model):
        if not weights.is_file():
            raise FileNotFoundError(f"{weights} not found")
        load_trainable(model, load_file(str(weights), device=str(model.device)), where=str(weights))
    model.eval()
    return model
