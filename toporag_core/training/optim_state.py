"""AdamW's state on disk, as safetensors (no pickle): what a resumed run reads back from ``last/``.

:func:`save_optimizer` writes every moment of every parameter under the key ``{parameter name}::{state key}``
(``exp_avg``, ``exp_avg_sq``, ``step``), atomically (a temporary file, then ``os.replace``);
:func:`load_optimizer` reads them into a fresh optimiser over the same named parameters. The loop's counters
(epoch, step, best validation, patience) go beside it as ``trainer.json``
(:class:`~toporag_core.training.loop.TrainingRun`).
"""
from __future__ import annotations

import os
from pathlib import Path

import torch


def save_optimizer(opt: torch.optim.Optimizer, names: dict[int, str], path: Path) -> None:
    """AdamW moments as ``{param name}::{key}`` safetensors (atomic write; no pickle)."""
    from safetensors.torch import save_file

    flat = {f"{names[id(p)]}::{k}": (v if torch.is_tensor(v) else torch.tensor(float(v))).detach().cpu().contiguous()
            for p, st in opt.state.items() for k, v in st.items()}
    tmp = path.with_name(path.name + ".tmp")
    save_file(flat, str(tmp))
    os.replace(tmp, path)


def load_optimizer(opt: torch.optim.Optimizer, params: dict[str, torch.nn.Parameter], path: Path) -> None:
    """Read :func:`save_optimizer`'s file into ``opt`` (an unknown parameter name is an error naming it)."""
    from safetensors.torch import load_file

    for key, v in load_file(str(path)).items():
        name, k = key.split("::", 1)
        if name not in params:
            raise ValueError(f"{path}: optimiser state for unknown parameter {name}")
        opt.state[params[name]][k] = v.to(params[name].device) if k != "step" else v

