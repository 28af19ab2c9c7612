"""Subcomplexes as tensors, and batches of many of them (offsets like PyG's ``Batch``).

* :class:`SubcomplexTensors` is one retrieved subcomplex with *local* cell ids: what the
  preprocessing cache stores (plain tensors, so a safetensors file holds it, no pickle).
* :func:`subcomplex_tensors` cuts it out of the parent complex's embeddings.
* :func:`collate` concatenates many of them into a :class:`CellBatch` and precomputes
  every relation the CW encoder passes messages along, as index tensors.

Relations (``N`` nodes, ``M`` 1-cells, ``F`` 2-cells, ``L`` 2-cell boundary entries in the batch):

* ``node_edge (2, 2M)``: ``[node, 1-cell]`` incidence. Read ``node -> 1-cell`` it is the
  boundary of a 1-cell; read ``1-cell -> node`` it is the coboundary of a node.
* ``edge_cell (2, L)``: ``[1-cell, 2-cell]`` incidence (boundary / coboundary of rank 1-2).
* ``node_up (3, 2M)``: ``[receiver node, neighbour node, shared 1-cell]``, both directions.
* ``edge_up (3, K)``: ``[receiver 1-cell, neighbour 1-cell, shared 2-cell]`` for every ordered
  pair of distinct 1-cells on one 2-cell's boundary (``K = sum_f L_f (L_f - 1)``).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import Tensor

_KEYS = ("x0", "x1", "x2", "edge_nodes", "cell_edges", "cell_index")


@dataclass
class SubcomplexTensors:
    """One subcomplex with local cell ids (``n`` nodes, ``m`` 1-cells, ``f`` 2-cells, ``L`` entries).

    Attributes:
        x0: ``(n, d)`` float32 node features.
        x1: ``(m, d)`` float32 1-cell features.
        x2: ``(f, d)`` float32 2-cell features.
        edge_nodes: ``(m, 2)`` int64, local node ids of each 1-cell.
        cell_edges: ``(L,)`` int64, local 1-cell ids of all 2-cell boundaries, concatenated.
        cell_index: ``(L,)`` int64, the local 2-cell each ``cell_edges`` entry belongs to.
    """

    x0: Tensor
    x1: Tensor
    x2: Tensor
    edge_nodes: Tensor
    cell_edges: Tensor
    cell_index: Tensor

    @property
    def shape(self) -> tuple[int, int, int]:
        """Cells per rank, ``(n, m, f)``."""
        return int(self.x0.shape[0]), int(self.x1.shape[0]), int(self.x2.shape[0])

    @property
    def dim(self) -> int:
        return int(self.x0.shape[1])

    @classmethod
    def empty(cls, dim: int) -> "SubcomplexTensors":
        """A subcomplex with no cells at all (its pooled vector is zeros)."""
        z = torch.zeros((0, dim), dtype=torch.float32)
        e = torch.zeros(0, dtype=torch.long)
        return cls(z, z.clone(), z.clone(), torch.zeros((0, 2), dtype=torch.long), e, e.clone())

    def validate(self) -> "SubcomplexTensors":
        """Raise ``ValueError`` naming the field when shapes, dtypes or ids are inconsistent."""
        n, m, f = self.shape
        for name in ("x0", "x1", "x2"):
            t = getattr(self, name)
            if t.dim() != 2 or t.shape[1] != self.x0.shape[1]:
                raise ValueError(f"SubcomplexTensors.{name}: expected (rows, {self.x0.shape[1]}), got {tuple(t.shape)}")
            if not t.is_floating_point():
                raise ValueError(f"SubcomplexTensors.{name}: expected a float tensor, got {t.dtype}")
        if tuple(self.edge_nodes.shape) != (m, 2):
            raise ValueError(f"SubcomplexTensors.edge_nodes: expected ({m}, 2), got {tuple(self.edge_nodes.shape)}")
        if self.cell_edges.shape != self.cell_index.shape or self.cell_edges.dim() != 1:
            raise ValueError("SubcomplexTensors.cell_edges / cell_index: expected two (L,) tensors of one length, "
                             f"got {tuple(self.cell_edges.shape)} and {tuple(self.cell_index.shape)}")
        for name, t, hi in (("edge_nodes", self.edge_nodes, n), ("cell_edges", self.cell_edges, m),
                            ("cell_index", self.cell_index, f)):
            if t.is_floating_point():
                raise ValueError(f"SubcomplexTensors.{name}: expected an integer tensor, got {t.dtype}")
            if t.numel() and (int(t.min()) < 0 or int(t.max()) >= hi):
                raise ValueError(f"SubcomplexTensors.{name}: ids must lie in [0, {hi}), "
                                 f"got [{int(t.min())}, {int(t.max())}]")
        return self

    def to_dict(self, prefix: str = "") -> dict[str, Tensor]:
        """Plain contiguous tensors keyed ``prefix + field`` (many examples fit one safetensors file)."""
        return {prefix + k: getattr(self, k).contiguous() for k in _KEYS}

    @classmethod
    def from_dict(cls, d: dict[str, Tensor], prefix: str = "") -> "SubcomplexTensors":
        """Inverse of :meth:`to_dict`; raises ``ValueError`` on a missing key or bad shapes."""
        missing = [prefix + k for k in _KEYS if prefix + k not in d]
        if missing:
            raise ValueError(f"SubcomplexTensors.from_dict: missing keys {missing}")
        item = cls(**{k: d[prefix + k] for k in _KEYS})
        item.x0, item.x1, item.x2 = (t.float() for t in (item.x0, item.x1, item.x2))
        item.edge_nodes, item.cell_edges, item.cell_index = (
            t.long() for t in (item.edge_nodes, item.cell_edges, item.cell_index))
        return item.validate()


def _local_ids(sorted_ids: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    """Positions of ``ids`` in ``sorted_ids``; every id must be present (the subcomplex is closed)."""
    pos = np.searchsorted(sorted_ids, ids)
    ok = pos < sorted_ids.size
    ok[ok] = sorted_ids[pos[ok]] == ids[ok]
    if not ok.all():
        raise ValueError(f"subcomplex is not closed under boundaries: {what} {ids[~ok][:5].tolist()} "
                         "are on a selected cell's boundary but not selected")
    return pos.astype(np.int64)


def subcomplex_tensors(sub, emb, use_cells2: bool = True) -> SubcomplexTensors:
    """Cut a retrieved subcomplex out of its parent complex's cell embeddings.

    Args:
        sub: a :class:`~toporag_core.retrieval.Subcomplex` (sorted ids into ``sub.complex``).
        emb: the parent complex's :class:`~toporag_core.embed.CellEmbeddings`.
        use_cells2: ``False`` drops the 2-cells (the paper's "w/o CRL" ablation).

    Returns:
        the subcomplex with local ids; 0 nodes gives an empty (but valid) one.
    """
    cx = sub.complex
    nodes = np.unique(np.asarray(sub.nodes, np.int64))
    edges = np.unique(np.asarray(sub.edges, np.int64))
    cells2 = np.unique(np.asarray(sub.cells2, np.int64)) if use_cells2 else np.zeros(0, np.int64)
    if emb.x0.shape[0] != cx.num_nodes or emb.x1.shape[0] != cx.num_edges or emb.x2.shape[0] != cx.num_cells2:
        raise ValueError(f"embeddings {emb.x0.shape[0], emb.x1.shape[0], emb.x2.shape[0]} do not match "
                         f"the complex {cx.shape}")
    edge_nodes = _local_ids(nodes, cx.edges[edges].reshape(-1), "nodes").reshape(-1, 2)
    if cells2.size:
        owner = cx.cell2_index()
        mask = np.isin(owner, cells2)
        cell_index = np.searchsorted(cells2, owner[mask]).astype(np.int64)
        cell_edges = _local_ids(edges, cx.cell_edges[mask], "1-cells")
    else:
        cell_index = cell_edges = np.zeros(0, np.int64)

    def rows(x: np.ndarray, ids: np.ndarray) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(x[ids], dtype=np.float32).reshape(ids.size, emb.dim))

    return SubcomplexTensors(
        x0=rows(emb.x0, nodes), x1=rows(emb.x1, edges), x2=rows(emb.x2, cells2),
        edge_nodes=torch.from_numpy(edge_nodes), cell_edges=torch.from_numpy(cell_edges),
        cell_index=torch.from_numpy(cell_index),
    )


@dataclass
class CellBatch:
    """Many subcomplexes concatenated (``B`` graphs; ``N``, ``M``, ``F`` cells per rank in total).

    Attributes:
        x0, x1, x2: ``(N, d)``, ``(M, d)``, ``(F, d)`` features.
        batch0, batch1, batch2: ``(N,)``, ``(M,)``, ``(F,)`` graph id of every cell.
        ptr0, ptr1, ptr2: ``(B + 1,)`` offsets of each graph's cells.
        edge_nodes: ``(M, 2)`` global node ids of each 1-cell.
        cell_edges, cell_index: ``(L,)`` global 1-cell / 2-cell ids of all boundary entries.
        node_edge, edge_cell, node_up, edge_up: the relations (see the module docstring).
        num_graphs: ``B``.
    """

    x0: Tensor
    x1: Tensor
    x2: Tensor
    batch0: Tensor
    batch1: Tensor
    batch2: Tensor
    ptr0: Tensor
    ptr1: Tensor
    ptr2: Tensor
    edge_nodes: Tensor
    cell_edges: Tensor
    cell_index: Tensor
    node_edge: Tensor
    edge_cell: Tensor
    node_up: Tensor
    edge_up: Tensor
    num_graphs: int

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> "CellBatch":
        """A copy on ``device``; ``dtype`` (if given) applies to the features only."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Tensor):
                v = v.to(device=device, dtype=dtype if (dtype is not None and v.is_floating_point()) else None)
            out[f.name] = v
        return CellBatch(**out)


def _offsets(sizes: list[int]) -> Tensor:
    """``(B + 1,)`` running sum starting at 0."""
    return torch.cumsum(torch.tensor([0] + sizes, dtype=torch.long), 0)


def _graph_ids(sizes: list[int]) -> Tensor:
    return torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes, dtype=torch.long))


def upper_pairs(members: Tensor, owner: Tensor, num_owners: int) -> Tensor:
    """All ordered pairs of distinct members sharing an owner, vectorised.

    Args:
        members: ``(L,)`` member id of every entry (e.g. a 1-cell on a boundary).
        owner: ``(L,)`` owner id of every entry (e.g. the 2-cell).
        num_owners: number of owners.

    Returns:
        ``(3, K)`` rows ``[receiver, neighbour, shared owner]``.
    """
    if members.numel() == 0:
        return torch.zeros((3, 0), dtype=torch.long)
    order = torch.argsort(owner, stable=True)  # group the entries by owner
    members, owner = members[order], owner[order]
    counts = torch.bincount(owner, minlength=num_owners)
    start = torch.cumsum(counts, 0) - counts
    group = counts[owner]  # (L,) size of each entry's group
    src = torch.repeat_interleave(torch.arange(members.numel()), group)
    # position of each pair inside its source's run of `group` partners
    run_start = torch.repeat_interleave(torch.cumsum(group, 0) - group, group)
    dst = start[owner[src]] + (torch.arange(src.numel()) - run_start)
    keep = members[src] != members[dst]
    return torch.stack([members[src][keep], members[dst][keep], owner[src][keep]])


def collate(items: list[SubcomplexTensors]) -> CellBatch:
    """Concatenate subcomplexes, shift their local ids by per-graph offsets, build the relations."""
    if not items:
        raise ValueError("collate: need at least one subcomplex")
    dims = {it.dim for it in items}
    if len(dims) != 1:
        raise ValueError(f"collate: subcomplexes have different feature sizes {sorted(dims)}")
    for it in items:
        it.validate()
    n = [it.shape[0] for it in items]
    m = [it.shape[1] for it in items]
    f = [it.shape[2] for it in items]
    ptr0, ptr1, ptr2 = _offsets(n), _offsets(m), _offsets(f)
    lens = torch.tensor([it.cell_edges.numel() for it in items], dtype=torch.long)
    edge_nodes = (torch.cat([it.edge_nodes for it in items])
                  + torch.repeat_interleave(ptr0[:-1], torch.tensor(m))[:, None])
    cell_edges = torch.cat([it.cell_edges for it in items]) + torch.repeat_interleave(ptr1[:-1], lens)
    cell_index = torch.cat([it.cell_index for it in items]) + torch.repeat_interleave(ptr2[:-1], lens)
    num_edges, num_cells2 = int(ptr1[-1]), int(ptr2[-1])
    e_ids = torch.arange(num_edges)
    u, v = edge_nodes[:, 0], edge_nodes[:, 1]
    return CellBatch(
        x0=torch.cat([it.x0 for it in items]).float(),
        x1=torch.cat([it.x1 for it in items]).float(),
        x2=torch.cat([it.x2 for it in items]).float(),
        batch0=_graph_ids(n), batch1=_graph_ids(m), batch2=_graph_ids(f),
        ptr0=ptr0, ptr1=ptr1, ptr2=ptr2,
        edge_nodes=edge_nodes, cell_edges=cell_edges, cell_index=cell_index,
        node_edge=torch.stack([torch.cat([u, v]), torch.cat([e_ids, e_ids])]),
        edge_cell=torch.stack([cell_edges, cell_index]),
        node_up=torch.stack([torch.cat([u, v]), torch.cat([v, u]), torch.cat([e_ids, e_ids])]),
        edge_up=upper_pairs(cell_edges, cell_index, num_cells2),
        num_graphs=len(items),
    )
