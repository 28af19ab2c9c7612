"""The "w/o MTR" ablation: a GCN on the 1-skeleton instead of the CW network.

Choices (keep the comparison with :class:`~.cwn.CWEncoder` about topology, not capacity):

* Same input size, hidden size and depth (``layers_stage1 + layers_stage2`` ``GCNConv``
  layers, ReLU and dropout after each) as the CW encoder of the same :class:`CWNConfig`.
* Nodes start from ``Linear(x0)``; the graph is the subcomplex's 1-cells, both directions,
  with GCN's self-loops and symmetric normalisation. 2-cells are never used.
* A GCN has no edge states, but the 1-cells carry the relation texts, which the CW encoder
  sees; dropping them would confound the ablation. So each 1-cell gets ``ReLU(Linear(x1))``
  (no message passing) and the readout is one mean over nodes *and* 1-cells, like the CW
  readout over cells of rank <= 1. An empty subcomplex pools to zeros.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cell_batch import CellBatch
from .cwn import CWNConfig, mean_into


class GCNEncoder(nn.Module):
    """GCN over the 1-skeleton: ``forward(batch: CellBatch) -> (num_graphs, hidden)``."""

    def __init__(self, config: CWNConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or CWNConfig()
        self.out_dim = cfg.hidden
        self.embed_nodes = nn.Linear(cfg.in_dim, cfg.hidden)
        self.embed_edges = nn.Linear(cfg.in_dim, cfg.hidden)
        depth = max(1, cfg.layers_stage1 + cfg.layers_stage2)
        from torch_geometric.nn import GCNConv  # imported here: PyG takes seconds to import, only this ablation uses it

        self.convs = nn.ModuleList([GCNConv(cfg.hidden, cfg.hidden) for _ in range(depth)])

    def forward(self, batch: CellBatch) -> Tensor:
        cfg = self.config
        if batch.x0.shape[1] != cfg.in_dim:
            raise ValueError(f"GCNEncoder expects {cfg.in_dim}-d cell features, got {batch.x0.shape[1]}-d")
        dtype = self.embed_nodes.weight.dtype
        u, v = batch.edge_nodes[:, 0], batch.edge_nodes[:, 1]
        edge_index = torch.stack([torch.cat([u, v]), torch.cat([v, u])])
        h = self.embed_nodes(batch.x0.to(dtype))
        for conv in self.convs:
            h = F.dropout(F.relu(conv(h, edge_index)), cfg.dropout, self.training)
        e = F.relu(self.embed_edges(batch.x1.to(dtype)))
        return mean_into(torch.cat([h, e]), torch.cat([batch.batch0, batch.batch1]), batch.num_graphs)
