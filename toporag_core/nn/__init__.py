"""Neural encoders of retrieved subcomplexes (CW network, GCN ablation) and their batching."""
from __future__ import annotations

from dataclasses import replace

from torch import nn

from .batch import CellBatch, SubcomplexTensors, collate, subcomplex_tensors, upper_pairs
from .cwn import CWEncoder, CWNConfig
from .gcn import GCNEncoder

ENCODERS = ("cwn", "gcn")


def build_encoder(kind: str, cfg: CWNConfig | None = None) -> nn.Module:
    """``"cwn"`` (TopoRAG; ``cfg.use_cells2=False`` is "w/o CRL") or ``"gcn"`` ("w/o MTR").

    Both return modules with ``forward(CellBatch) -> (B, out_dim)`` and ``out_dim``.
    """
    cfg = cfg or CWNConfig()
    if kind == "cwn":
        return CWEncoder(cfg)
    if kind == "gcn":
        return GCNEncoder(replace(cfg, use_cells2=False))
    raise ValueError(f"unknown encoder {kind!r}; choose one of {ENCODERS}")


__all__ = ["CellBatch", "SubcomplexTensors", "collate", "subcomplex_tensors", "upper_pairs",
           "CWEncoder", "CWNConfig", "GCNEncoder", "build_encoder", "ENCODERS"]
