"""The CW-network encoder: two-stage cellular message passing over a subcomplex, mean-pooled.

TopoRAG's multi-dimensional topological reasoning (eqs. 16-20), read top to bottom:

1. **Input projections.** One ``Linear(in_dim, hidden)`` per rank (0-, 1-, 2-cells), as CWN
   embeds each dimension separately.
2. **Stage 1** (eqs. 16-17), ``layers_stage1`` layers between 0- and 1-cells only:
   a node hears its cofaces (the 1-cells it bounds), a 1-cell hears its faces (its two
   nodes). 2-cells are not touched in this stage.
3. **Stage 2** (eqs. 18-19), ``layers_stage2`` layers over all ranks: every cell hears its
   faces and its cofaces *and* its upper-adjacent cells through the shared coface (nodes
   through a shared 1-cell, 1-cells through a shared 2-cell). 2-cells have no cofaces in a
   2-complex, so they hear their boundary 1-cells only. Within a stage-2 layer the ranks are
   updated **top-down**, as eq. 19 reads the coface state of layer ``l + 1``:

       h2' = U2(h2, {h1 of its boundary})                         (faces: layer-l states)
       h1' = U1(h1, {h0 faces}, {h2' cofaces}, {(h1 nb, h2' shared)})
       h0' = U0(h0, {h1' cofaces}, {(h0 nb, h1' shared)})

   so at the default depth (one stage-2 layer) a node state already depends on the 2-cells
   (2-cell -> 1-cell -> 0-cell in one layer). Stage 1 stays synchronous (both ranks read
   layer-``l`` states).
4. **Readout** (eq. 20): the mean of the final states of *all* cells of a subcomplex (one
   mean over the union of ranks, not a mean per rank); a subcomplex with no cells gives zeros.

Where the paper is silent we follow the CW network of Bodnar et al. (CWN, NeurIPS 2021,
``SparseCINConv``):

* **Sum aggregation** of messages (injective on multisets, GIN-style).
* Face / coface messages are the sender's state unchanged; an upper-adjacency message is
  ``ReLU(Linear([h_neighbour, h_shared_coface]))`` so it knows *which* coface links the two.
* **One update MLP per message kind**: ``u_k = MLP_k((1 + eps_k) h + sum of kind-k messages)``
  with a (trainable when ``eps_trainable``) ``eps_k`` initialised at 0, then
  ``h' = ReLU(Linear(concat_k u_k))`` combines the kinds; every rank has its own weights.
* The update MLP is ``Linear, LayerNorm, ReLU, Linear, ReLU``: CWN uses BatchNorm, we use
  LayerNorm because the training batches are small (8) with very different cell counts, and
  LayerNorm keeps every subcomplex's output independent of the rest of its batch.
* No residual connections (CWN has none); dropout after every layer.

Ablations: ``use_cells2=False`` ignores 2-cells entirely (the paper's "w/o CRL": no 2-cell
states, no coboundary messages to 1-cells, no upper adjacency of 1-cells, 2-cells left
out of the mean); the GCN of :mod:`.gcn` replaces this encoder for "w/o MTR".
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .cell_batch import CellBatch


@dataclass
class CWNConfig:
    """Encoder size and ablation switches (also read by :class:`~.gcn.GCNEncoder`)."""

    in_dim: int = 384
    hidden: int = 256
    layers_stage1: int = 2
    layers_stage2: int = 1
    dropout: float = 0.0
    use_cells2: bool = True
    eps_trainable: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CWNConfig":
        """Build from a JSON dict; unknown keys raise ``ValueError``."""
        known = {f.name for f in fields(cls)}
        extra = set(d) - known
        if extra:
            raise ValueError(f"CWNConfig: unknown keys {sorted(extra)}")
        return cls(**d)


def sum_into(values: Tensor, index: Tensor, size: int) -> Tensor:
    """``(size, h)``: rows of ``values (K, h)`` summed at ``index (K,)`` (zeros where none arrive).

    One ``scatter_add_``, as PyG's ``scatter(reduce="sum")`` does, without importing PyG (seconds per process)."""
    return values.new_zeros((size,) + tuple(values.shape[1:])).scatter_add_(
        0, index.view(-1, *([1] * (values.dim() - 1))).expand_as(values), values)


def mean_into(values: Tensor, index: Tensor, size: int) -> Tensor:
    """``(size, h)``: the mean of the rows of ``values (K, h)`` at each ``index`` (zeros where none arrive):
    :func:`sum_into` over the count clamped at 1, as PyG's ``scatter(reduce="mean")``."""
    count = values.new_zeros(size).scatter_add_(0, index, values.new_ones(index.numel())).clamp(min=1)
    return sum_into(values, index, size) / count.view(-1, *([1] * (values.dim() - 1)))


class UpdateMLP(nn.Sequential):
    """CWN's update network with LayerNorm in place of BatchNorm: ``(K, h) -> (K, h)``."""

    def __init__(self, hidden: int) -> None:
        super().__init__(nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU())


class RankUpdate(nn.Module):
    """Updates the cells of one rank from several message kinds (``boundary``, ``coboundary``, ``up``).

    ``forward(h (K, h), messages {kind: (K, h) summed messages}) -> (K, h)``.
    """

    def __init__(self, hidden: int, kinds: tuple[str, ...], eps_trainable: bool) -> None:
        super().__init__()
        self.kinds = kinds
        self.update = nn.ModuleDict({k: UpdateMLP(hidden) for k in kinds})
        eps = {k: torch.zeros(1) for k in kinds}
        if eps_trainable:
            self.eps = nn.ParameterDict({k: nn.Parameter(v) for k, v in eps.items()})
        else:
            for k, v in eps.items():
                self.register_buffer(f"eps_{k}", v)
            self.eps = None
        # message of an upper neighbour: its state together with the coface it shares with us
        self.up_message = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU()) if "up" in kinds else None
        self.combine = nn.Linear(len(kinds) * hidden, hidden)

    def _eps(self, kind: str) -> Tensor:
        return self.eps[kind] if self.eps is not None else getattr(self, f"eps_{kind}")

    def up_messages(self, h_neighbour: Tensor, h_coface: Tensor, receiver: Tensor, size: int) -> Tensor:
        """Sum of ``ReLU(Linear([h_neighbour, h_coface]))`` at ``receiver``: ``(size, h)``."""
        return sum_into(self.up_message(torch.cat([h_neighbour, h_coface], dim=-1)), receiver, size)

    def forward(self, h: Tensor, messages: dict[str, Tensor]) -> Tensor:
        outs = [self.update[k]((1 + self._eps(k)) * h + messages[k]) for k in self.kinds]
        return F.relu(self.combine(torch.cat(outs, dim=-1)))


class CellularLayer(nn.Module):
    """One message-passing layer; ``stage`` 1 (ranks 0-1, faces/cofaces, synchronous) or 2 (all ranks,
    plus upper adjacency, updated top-down: 2-cells, then 1-cells from the new 2-cell states, then
    0-cells from the new 1-cell states).

    ``forward([h0 (N,h), h1 (M,h), h2 (F,h) or None], batch) -> same shapes``.
    """

    def __init__(self, hidden: int, stage: int, use_cells2: bool, eps_trainable: bool) -> None:
        super().__init__()
        if stage == 1:
            kinds = {0: ("coboundary",), 1: ("boundary",)}
        elif stage == 2:
            kinds = {0: ("coboundary", "up"),
                     1: ("boundary", "coboundary", "up") if use_cells2 else ("boundary",)}
            if use_cells2:
                kinds[2] = ("boundary",)
        else:
            raise ValueError(f"stage must be 1 or 2, got {stage}")
        self.stage = stage
        self.ranks = nn.ModuleDict({str(r): RankUpdate(hidden, k, eps_trainable) for r, k in kinds.items()})

    def forward(self, h: list[Tensor | None], b: CellBatch) -> list[Tensor | None]:
        h0, h1, h2 = h
        n, m = h0.shape[0], h1.shape[0]
        node, edge = b.node_edge  # (2M,) each: node <-> 1-cell incidence
        top_down = self.stage == 2  # cofaces are read at their *new* state (eq. 19)
        # rank 2: faces are its boundary 1-cells (no cofaces in a 2-complex)
        new2 = h2
        if "2" in self.ranks:
            e_of, c_of = b.edge_cell
            new2 = self.ranks["2"](h2, {"boundary": sum_into(h1[e_of], c_of, h2.shape[0])})
        cof2 = new2 if top_down else h2
        # rank 1: faces are its two nodes; cofaces the 2-cells it bounds; upper neighbours share a 2-cell
        r1 = self.ranks["1"]
        msg1 = {"boundary": sum_into(h0[node], edge, m)}
        if "coboundary" in r1.kinds:
            e_of, c_of = b.edge_cell
            msg1["coboundary"] = sum_into(cof2[c_of], e_of, m)
        if "up" in r1.kinds:
            recv, nb, shared = b.edge_up
            msg1["up"] = r1.up_messages(h1[nb], cof2[shared], recv, m)
        new1 = r1(h1, msg1)
        cof1 = new1 if top_down else h1
        # rank 0: cofaces are the incident 1-cells; upper neighbours share a 1-cell
        r0 = self.ranks["0"]
        msg0 = {"coboundary": sum_into(cof1[edge], node, n)}
        if "up" in r0.kinds:
            recv, nb, shared = b.node_up
            msg0["up"] = r0.up_messages(h0[nb], cof1[shared], recv, n)
        new0 = r0(h0, msg0)
        return [new0, new1, new2]


class CWEncoder(nn.Module):
    """Two-stage CW network: ``forward(batch: CellBatch) -> (num_graphs, hidden)``."""

    def __init__(self, config: CWNConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or CWNConfig()
        self.out_dim = cfg.hidden
        ranks = 3 if cfg.use_cells2 else 2
        self.embed = nn.ModuleList([nn.Linear(cfg.in_dim, cfg.hidden) for _ in range(ranks)])
        self.layers = nn.ModuleList(
            [CellularLayer(cfg.hidden, 1, cfg.use_cells2, cfg.eps_trainable) for _ in range(cfg.layers_stage1)]
            + [CellularLayer(cfg.hidden, 2, cfg.use_cells2, cfg.eps_trainable) for _ in range(cfg.layers_stage2)])

    def cell_states(self, batch: CellBatch) -> list[Tensor | None]:
        """Final per-cell states ``[h0 (N, hidden), h1 (M, hidden), h2 (F, hidden) or None]``."""
        cfg = self.config
        if batch.x0.shape[1] != cfg.in_dim:
            raise ValueError(f"CWEncoder expects {cfg.in_dim}-d cell features, got {batch.x0.shape[1]}-d")
        dtype = self.embed[0].weight.dtype
        h: list[Tensor | None] = [self.embed[0](batch.x0.to(dtype)), self.embed[1](batch.x1.to(dtype)), None]
        if cfg.use_cells2:
            h[2] = self.embed[2](batch.x2.to(dtype))
        for layer in self.layers:
            h = layer(h, batch)
            h = [None if t is None else F.dropout(t, cfg.dropout, self.training) for t in h]
        return h

    def forward(self, batch: CellBatch) -> Tensor:
        cfg = self.config
        h = self.cell_states(batch)
        # eq. 20: one mean over every cell of each subcomplex (empty subcomplex -> zeros)
        states = [h[0], h[1]] + ([h[2]] if cfg.use_cells2 else [])
        owners = [batch.batch0, batch.batch1] + ([batch.batch2] if cfg.use_cells2 else [])
        return mean_into(torch.cat(states), torch.cat(owners), batch.num_graphs)
