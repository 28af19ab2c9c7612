"""Cells: a textual graph lifted into a regular cell complex, and the checks on what users give.

* :mod:`.complex` - :class:`CellComplex`: 0-cells (nodes), 1-cells (edges), 2-cells glued onto
  cycles, with the boundary maps ``B1`` (``n0 x n1``) and ``B2`` (``n1 x n2``).
* :mod:`.lift` - the liftings registry (:data:`LIFTING_SPECS`): spanning-tree cycle bases
  (``bfs`` / ``dfs`` / ``random``) and chordless ``rings``.
* :mod:`.checks` - request checks shared by the CLI and the service (texts, whole numbers,
  liftings, seeds, record indices), each failure an :class:`InputError` naming its field.

Layer: above ``graph`` and ``io``, below embeddings and retrieval.
"""
from .complex import CellComplex
from .lift import LIFTING_SPECS, LIFTINGS, lift

__all__ = ["CellComplex", "LIFTING_SPECS", "LIFTINGS", "lift"]
