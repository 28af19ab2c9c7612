"""Hybrid text-and-table retrieval (Topo-RAG's cell-aware late interaction).

Data flow, one module per step::

    text --router--> blocks (SDS, tau) --tables--> grids --documents--> units
    units --index--> CALI cell index (+ reduction) --search--> route A + route B -> fusion (-> rerank)
    any corpus (TAT-QA, documents, JSONL/BEIR) --corpus--> units; + BM25 (lexical) + dense --fusion--> ranking
    --answer--> frozen LLM;  dataset: the generated corpus's files (the generator is toporag_core.datagen.hybrid);
    evaluate: nDCG/Recall vs baselines
"""
from .documents import (DocumentError, ParsedDocument, Unit, decode_document, load_folder, parse_document,
                        read_document, read_upload)
from .dataset import HybridDataset, load_dataset, write_dataset
from .index import CellIndex, ReductionConfig, cell_text, query_terms
from .router import Block, RouterConfig, Routing, route_lines, route_text
from .corpus import HybridCorpus, read_hybrid_corpus
from .fusion import FusionWeights, QueryRouter
from .search import HybridIndex, SearchConfig, minmax, open_index
from .tatqa import TatqaCorpus, TatqaError, load_tatqa
from .tables import FORMATS, Table, TableError, parse_table

__all__ = ["Block", "CellIndex", "DocumentError", "FORMATS", "FusionWeights", "HybridCorpus",
           "HybridDataset", "HybridIndex", "QueryRouter", "TatqaCorpus", "TatqaError", "load_tatqa", "open_index",
           "read_hybrid_corpus",
           "ParsedDocument", "ReductionConfig", "RouterConfig", "Routing", "SearchConfig", "Table", "TableError",
           "Unit", "cell_text", "decode_document", "load_dataset", "load_folder",
           "minmax", "parse_document", "parse_table", "query_terms", "read_document", "read_upload", "route_lines",
           "route_text",
           "write_dataset"]
