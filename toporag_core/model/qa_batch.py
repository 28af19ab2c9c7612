"""What the model eats: :class:`QABatch` (collated subcomplexes + texts, + answers for training), its
row selection, and left padding of token rows."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..nn import CellBatch


@dataclass
class QABatch:
    """``B`` examples: collated subcomplexes (``None`` when the model uses no graph) and texts."""

    cells: CellBatch | None
    questions: list[str]
    contexts: list[str]
    answers: list[str] | None = None
    kv: list[Tensor] | None = None  # precomputed frozen-part caches (cacheable layout), one per row

    def __len__(self) -> int:
        return len(self.questions)

    def to(self, device: torch.device | str) -> QABatch:
        return QABatch(self.cells.to(device) if self.cells is not None else None,
                       self.questions, self.contexts, self.answers,
                       [t.to(device) for t in self.kv] if self.kv is not None else None)

    def select(self, idx: list[int]) -> QABatch:
        """Rows ``idx``, without cells (the caller passes their graph tokens as ``soft``); the batch
        itself when ``idx`` is every row in order."""
        if list(idx) == list(range(len(self))):
            return self
        return QABatch(None, [self.questions[i] for i in idx], [self.contexts[i] for i in idx],
                       [self.answers[i] for i in idx] if self.answers is not None else None,
                       [self.kv[i] for i in idx] if self.kv is not None else None)


def left_pad(rows: list[list[int]], pad: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """``(ids (B, S), mask (B, S))`` left-padded with ``pad``."""
    length = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (length - len(r)) + r for r in rows], dtype=torch.long, device=device)
    mask = torch.tensor([[0] * (length - len(r)) + [1] * len(r) for r in rows], dtype=torch.long, device=device)
    return ids, mask
