"""Graph tokens, one per retrieved cell: how the CW encoder's view of a subcomplex reaches the LLM.

The pooled path (``TopoRAGConfig.graph_tokens="pooled"``, G-Retriever's) squeezes a subcomplex into
one mean vector and an MLP spreads it over ``T`` soft tokens. Trained with LoRA on ExplaGraphs it
became a learned constant: giving each question another question's tokens changed 0 of 192 answers
(docs/results/graph_tokens.md). A mean over a handful of cells, behind a Sigmoid MLP whose output
scale nothing ties to the LLM's embeddings, gives the LLM little to attend to.

The cell path (``graph_tokens="cells"``, :class:`CellTokens`) gives the LLM one token per cell, in the
order the textualized subcomplex lists them (GraphToken, Perozzi et al. 2024; LLaGA, Chen et al. 2024):

1. **Cell states.** The encoder's final states ``h_r`` (``(N_r, d)`` for rank ``r`` = 0, 1, 2: nodes,
   1-cells, 2-cells; :meth:`~toporag_core.nn.cwn.CWEncoder.cell_states`) plus a skip projection of the
   cell's own text embedding and a rank embedding::

       z_r = h_r + W_r x_r + e_r                                   (N_r, d)

   The skip keeps each token tied to its cell's words even while the encoder's ReLU states are
   still forming; ``h_r`` adds what the cell's neighbourhood (faces, cofaces, shared cofaces) says.
2. **Projector.** ``t = g * LayerNorm(W_2 GELU(W_1 z))`` (``(., H)``): GELU does not die at LoRA
   learning rates as ReLU/Sigmoid units did, and the LayerNorm gain ``g`` starts at the RMS of the
   LLM's own input embeddings, so graph tokens enter at the scale of word tokens.
3. **Slots.** ``T = num_graph_tokens`` per subcomplex: slot 0 reads the mean of all ``z`` (the whole
   subcomplex, as the pooled path), slots ``1..T-1`` one cell each. When a subcomplex has more than
   ``T - 1`` cells, the ranks fill them in ``TopoRAGConfig.cell_order``, each rank in local order:
   by default 1-cells (relations: where ExplaGraphs' stance lives; a linear probe on mean
   1-cell embeddings reaches 0.67 test accuracy, nodes and 2-cells alone stay at the majority
   0.55) go first, then 2-cells, then 0-cells (a scene puts 0-cells, its attributes, first); the chosen cells are
   then emitted in text order (rank, local index). Unused slots hold a learned ``empty`` token.
   The output keeps the pooled path's shape ``(B, T, H)``, so the ablation arms, the attribution of
   :mod:`~toporag_core.studio.graph_effect` and every decoder take either path unchanged.
4. **Tokens per cell.** With ``k = TopoRAGConfig.tokens_per_cell > 1`` the projector's last layer
   writes ``k`` tokens per slot (``W_2`` is ``(k H, p)``, each token through the same LayerNorm), so the
   output is ``(B, T k, H)``, slot ``s`` at positions ``s k .. s k + k - 1``. Why: SmolLM2-135M reads a
   soft token about as it reads one word. A node line ``lamp [6]: brown, glass, small`` is four words;
   with one token per node the LLM reads the name back from its token (2.3 nats per name token below
   another question's tokens) and not the attributes (0.07 nats), although a linear probe decodes the
   first attribute from that token at 0.92 (docs/results/graph_tokens.md).

Everything is vectorised over the batch's index arrays: two sorts pick and order the cells.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ..nn import CellBatch

# Which cells fill the slots first when a subcomplex has more cells than slots (ranks, first first): the
# default of ``TopoRAGConfig.cell_order``.
CELL_ORDER = (1, 2, 0)  # 1-cells first, 2-cells second, 0-cells last


def local_index(owner: Tensor, num_graphs: int) -> Tensor:
    """``(K,)`` position of each row among the rows of its graph, for a sorted ``owner (K,)``."""
    counts = torch.bincount(owner, minlength=num_graphs)
    start = torch.cumsum(counts, 0) - counts
    return torch.arange(owner.numel(), device=owner.device) - start[owner]


class CellTokens(nn.Module):
    """``forward(h, cells) -> (B, T k, H)``: ``k`` graph tokens per selected cell plus a whole-subcomplex slot.

    ``h``: the encoder's ``[h0 (N, d), h1 (M, d), h2 (F, d) or None]``; ``cells``: the batch they came
    from (its ``x0/x1/x2`` feed the skip projections, ``batch0/1/2`` say which subcomplex owns a cell).
    """

    def __init__(self, in_dim: int, hidden: int, proj_hidden: int, llm_hidden: int, num_tokens: int,
                 embed_rms: float = 1.0, cell_order: tuple[int, ...] = CELL_ORDER, per_cell: int = 1) -> None:
        super().__init__()
        if sorted(cell_order) != [0, 1, 2]:
            raise ValueError(f"cell_order: the ranks 0, 1, 2 once each, got {list(cell_order)}")
        if num_tokens < 2:
            raise ValueError(f"graph_tokens='cells' needs num_graph_tokens >= 2 (a whole-subcomplex slot and "
                             f"at least one cell), got {num_tokens}")
        if per_cell < 1:
            raise ValueError(f"tokens_per_cell must be >= 1, got {per_cell}")
        self.num_tokens, self.per_cell, self.llm_hidden = num_tokens, per_cell, llm_hidden
        priority = [0, 0, 0]
        for p, r in enumerate(cell_order):
            priority[r] = p
        self.register_buffer("priority", torch.tensor(priority), persistent=False)  # rank -> fill priority
        self.skip = nn.ModuleList([nn.Linear(in_dim, hidden) for _ in range(3)])
        self.rank = nn.Embedding(4, hidden)  # ranks 0, 1, 2 and the whole-subcomplex slot (3)
        self.proj = nn.Sequential(nn.Linear(hidden, proj_hidden), nn.GELU(),
                                  nn.Linear(proj_hidden, per_cell * llm_hidden))
        self.norm = nn.LayerNorm(llm_hidden)
        with torch.no_grad():
            self.norm.weight.fill_(float(embed_rms))
        self.empty = nn.Parameter(torch.randn(llm_hidden) * float(embed_rms))

    def token(self, z: Tensor) -> Tensor:
        """``(K, d) -> (K, k, H)``: the projector (``k`` tokens per slot)."""
        return self.norm(self.proj(z).view(z.shape[0], self.per_cell, self.llm_hidden))

    def forward(self, h: list[Tensor | None], cells: CellBatch) -> Tensor:
        xs, owners = [cells.x0, cells.x1, cells.x2], [cells.batch0, cells.batch1, cells.batch2]
        zs, ranks, own, loc = [], [], [], []
        b, t, k = cells.num_graphs, self.num_tokens, self.per_cell
        for r in range(3):
            if h[r] is None or h[r].shape[0] == 0:
                continue
            zs.append(h[r] + self.skip[r](xs[r].to(h[r].dtype)) + self.rank.weight[r])
            ranks.append(torch.full_like(owners[r], r))
            own.append(owners[r])
            loc.append(local_index(owners[r], b))
        out = self.empty.expand(b, t, k, -1).clone()
        if not zs:
            return out.flatten(1, 2)
        z, rank, owner, local = torch.cat(zs), torch.cat(ranks), torch.cat(own), torch.cat(loc)
        # slot 0: the whole subcomplex (mean of its cells' z), as the pooled path sees it
        total = torch.zeros(b, z.shape[1], dtype=z.dtype, device=z.device).index_add_(0, owner, z)
        count = torch.bincount(owner, minlength=b).clamp(min=1).unsqueeze(1).to(z.dtype)
        has = torch.bincount(owner, minlength=b) > 0
        out[has, 0] = self.token(total[has] / count[has] + self.rank.weight[3]).to(out.dtype)
        text, slot = self.pick(rank, owner, local, b)
        out[owner[text], slot] = self.token(z[text]).to(out.dtype)
        return out.flatten(1, 2)  # (B, T k, H): slot s at s k .. s k + k - 1

    def pick(self, rank: Tensor, owner: Tensor, local: Tensor, num_graphs: int) -> tuple[Tensor, Tensor]:
        """``(text, slot)``: which of the cells (``rank, owner, local``: ``(K,)`` each) fill slots ``1..T-1``, and
        their slots: the first ``T - 1`` cells of each subcomplex by rank priority, emitted in text order."""
        span = int(local.max()) + 1
        order = torch.argsort(owner * (3 * span) + self.priority[rank] * span + local)
        keep = order[local_index(owner[order], num_graphs) < self.num_tokens - 1]
        text = keep[torch.argsort(owner[keep] * (3 * span) + rank[keep] * span + local[keep])]
        return text, 1 + local_index(owner[text], num_graphs)

    def slots(self, cells: CellBatch, with_cells2: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(owner, slot, rank, local)`` (``(K,)`` each) of every cell of ``cells`` that has a slot: the subcomplex,
        the slot (``1..T-1``), the cell's rank and its local index among that subcomplex's cells of its rank, as
        :meth:`forward` places them (``with_cells2=False``: an encoder without 2-cell states, whose 2-cells get no
        slot). What the word targets of :mod:`~toporag_core.training.align` aim at."""
        owners = [cells.batch0, cells.batch1] + ([cells.batch2] if with_cells2 else [])
        b = cells.num_graphs
        ranks = [torch.full_like(o, r) for r, o in enumerate(owners) if o.numel()]
        if not ranks:
            empty = cells.batch0[:0]
            return empty, empty, empty, empty
        rank = torch.cat(ranks)
        owner = torch.cat([o for o in owners if o.numel()])
        local = torch.cat([local_index(o, b) for o in owners if o.numel()])
        text, slot = self.pick(rank, owner, local, b)
        return owner[text], slot, rank[text], local[text]


def embedding_rms(llm: nn.Module) -> float:
    """RMS of one coordinate of the LLM's input embeddings (the scale graph tokens start at)."""
    w = llm.get_input_embeddings().weight.detach().float()
    return float(w.pow(2).mean().sqrt())
