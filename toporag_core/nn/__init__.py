"""Neural encoders of retrieved subcomplexes (CW network, GCN ablation), their registry and their batching.

* :mod:`.batch`: one retrieved subcomplex as tensors and a batch of them (:func:`collate`).
* :mod:`.cwn` / :mod:`.gcn`: the CW-network encoder and the GCN ablation.
* :mod:`.registry`: :data:`ENCODERS` (name -> :class:`GraphEncoder`; :func:`register_encoder` adds one),
  what ``--encoder``, ``TopoRAGConfig.encoder``'s validation and :func:`build_encoder` read.
"""
from __future__ import annotations

from .cell_batch import CellBatch, SubcomplexTensors, collate, subcomplex_tensors, upper_pairs
from .cwn import CWEncoder, CWNConfig
from .gcn import GCNEncoder
from .registry import (ENCODERS, GraphEncoder, build_encoder, encoder_names, get_graph_encoder, register_encoder,
                       unregister_encoder)

__all__ = ["CellBatch", "SubcomplexTensors", "collate", "subcomplex_tensors", "upper_pairs",
           "CWEncoder", "CWNConfig", "GCNEncoder", "build_encoder", "ENCODERS", "GraphEncoder",
           "encoder_names", "get_graph_encoder", "register_encoder", "unregister_encoder"]
