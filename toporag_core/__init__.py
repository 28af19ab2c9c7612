"""TopoRAG Studio core library: textual graphs -> cell complexes -> retrieval -> soft-prompted LLM."""
from .cells.complex import CellComplex
from .graph import GraphFormatError, TextualGraph
from .cells.lift import lift

__version__ = "0.1.0"
__all__ = ["TextualGraph", "GraphFormatError", "CellComplex", "lift", "__version__"]
