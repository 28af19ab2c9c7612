"""Document-graph retrieval with fused Gromov-Wasserstein constraints (KURISU-G2).

Data flow: HotpotQA-format records (read by :mod:`.records`; the generator is
:mod:`toporag_core.datagen.docgraph`) or text files -> :mod:`.build` (hierarchical
:class:`DocGraph`) -> :mod:`.fgw` (dissimilarities, structure
matrix, FGW via POT) -> :mod:`.traverse` (walk, fusion prefix by binary search, grafting)
-> :mod:`.evolve` (edge existence weights across questions) -> :mod:`.evaluate` (recall,
answer-in-context, EM/F1, dense top-k sentence baseline at the same token budget).
"""
from .build import LEVELS, Article, BuildConfig, DocGraph, build_docgraph, build_from_folder, parse_text
from .fgw import FGWConfig, GraphState, fgw_between, structure_matrix
from .traverse import TraversalConfig, TraversalResult, Traverser, traverse

__all__ = [
           "LEVELS",
           "Article",
           "BuildConfig",
           "DocGraph",
           "FGWConfig",
           "GraphState",
           "TraversalConfig",
           "TraversalResult",
           "Traverser",
           "build_docgraph",
           "build_from_folder",
           "fgw_between",
           "parse_text",
           "structure_matrix",
           "traverse",
]
