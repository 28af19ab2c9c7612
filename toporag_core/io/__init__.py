"""Graph loaders: files, uploads and pasted text -> :class:`~toporag_core.graph.TextualGraph`.

Formats are a registry (:mod:`.formats`): ``csv-pair`` (G-Retriever's nodes.csv + edges.csv),
``triples`` (TSV/CSV/JSON), ``explagraphs`` (``(h; r; t)`` strings and ExplaGraphs TSV rows),
``webqsp`` (WebQSP JSON records) and ``gqa`` (GQA scene graphs with GraphQA questions), one
module each. Add a format with :func:`register_format`; ``load_graph(path, format="auto")``,
the CLI's ``--format`` and the app's uploader pick it up.

Decisions: empty (or all-space) node text **and empty relation text are errors** (a 1-cell
with no text embeds to nothing useful). **A graph with no node is an error in every format**
(``load.EMPTY_GRAPH``; a graph of nodes without edges is fine). **One text-length limit** for
every format, ``Limits.max_text_chars`` (= ``graph.MAX_TEXT_CHARS``, 100,000 characters); texts
must be valid Unicode (no lone surrogate, no NUL). CSV/TSV is read strictly and streamed, with the
limits checked at every record (see :mod:`.text`); a headerless triples table loads with a warning
in ``graph.meta["warnings"]``, a misspelt header is an error that names the near match.
Parallel edges and self-loops are kept as given;
:func:`toporag_core.cells.lift.lift` decides how they enter the complex. Every failure is a
:class:`~toporag_core.graph.GraphFormatError` naming the file, the line (1-based, the header
being line 1) or record (0-based list/row index), and the field.
"""
from .formats import FORMATS, GraphFormat, Source, format_names, get_format, register_format, unregister_format, \
    upload_extensions
from .text import Limits
from . import csv_pair, explagraphs, gqa, triples, webqsp  # noqa: F401,E402  (register the built-in formats)
from .csv_pair import load_csv_pair_from_bytes, parse_csv_pair
from .explagraphs import parse_explagraphs_graph
from .load import detect_format, list_records, load_graph, load_graph_from_bytes, load_graph_from_text

__all__ = ["load_graph", "load_graph_from_text", "load_graph_from_bytes", "load_csv_pair_from_bytes", "list_records",
           "detect_format", "parse_csv_pair", "parse_explagraphs_graph", "Limits", "FORMATS", "GraphFormat", "Source",
           "register_format", "unregister_format", "get_format", "format_names", "upload_extensions"]
