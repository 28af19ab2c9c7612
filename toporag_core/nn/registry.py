"""The graph-encoder registry: which ``TopoRAGConfig.encoder`` / ``toporag train --encoder`` name builds
which module, read by the CLI's choices, the model config's validation and model building.

:data:`ENCODERS` maps a name to a :class:`GraphEncoder`; adding an encoder is a module in ``nn/`` and one
:func:`register_encoder` call. An encoder is built from the :class:`~.cwn.CWNConfig` (``in_dim``,
``hidden``, depths, ``use_cells2``) and has ``forward(CellBatch) -> (B, out_dim)`` and ``out_dim``; one
with ``cell_states=True`` also has ``cell_states(CellBatch) -> [h0 (N, out_dim), h1 (M, out_dim),
h2 (F, out_dim) or None]``, which ``graph_path="cells"`` (one graph token per retrieved cell) needs.

Built-in: ``"cwn"`` (TopoRAG's CW network; ``use_cells2=False`` is "w/o CRL") and ``"gcn"`` (a GCN on the
1-skeleton, "w/o MTR"; 2-cells are never used).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from torch import nn

from .cwn import CWEncoder, CWNConfig
from .gcn import GCNEncoder


@dataclass(frozen=True)
class GraphEncoder:
    """One registered graph encoder: ``build(cfg) -> nn.Module``; ``cell_states``: the module has
    per-cell states (``graph_path="cells"``)."""

    name: str
    build: Callable[[CWNConfig], nn.Module]
    cell_states: bool = False


ENCODERS: dict[str, GraphEncoder] = {}


def register_encoder(encoder: GraphEncoder | None = None, **fields: Any) -> GraphEncoder:
    """Register a graph encoder (a :class:`GraphEncoder`, or its fields as keywords); a second
    registration under the same name replaces the first. Returns the encoder."""
    e = encoder if encoder is not None else GraphEncoder(**fields)
    ENCODERS[e.name] = e
    return e


def unregister_encoder(name: str) -> None:
    """Remove a graph encoder (tests and plug-ins that register temporary ones)."""
    ENCODERS.pop(name, None)


def get_graph_encoder(name: str) -> GraphEncoder:
    """The registered encoder ``name``; ``ValueError`` listing the choices otherwise."""
    try:
        return ENCODERS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown encoder {name!r}; choose one of {tuple(ENCODERS)}") from None


def encoder_names(cell_states: bool | None = None) -> list[str]:
    """Registered names in registration order; ``cell_states=True``: those with per-cell states only."""
    return [n for n, e in ENCODERS.items() if cell_states is None or e.cell_states == cell_states]


def build_encoder(kind: str, cfg: CWNConfig | None = None) -> nn.Module:
    """The module of the registered encoder ``kind`` (``"cwn"``: TopoRAG, ``cfg.use_cells2=False`` is
    "w/o CRL"; ``"gcn"``: "w/o MTR"), built from ``cfg`` (default :class:`CWNConfig()`).

    Every encoder returns a module with ``forward(CellBatch) -> (B, out_dim)`` and ``out_dim``.
    """
    return get_graph_encoder(kind).build(cfg or CWNConfig())


register_encoder(name="cwn", build=CWEncoder, cell_states=True)
register_encoder(name="gcn", build=lambda cfg: GCNEncoder(replace(cfg, use_cells2=False)))
