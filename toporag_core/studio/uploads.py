"""Uploads on the Home page: one graph file in any registered format, with a record picker for
multi-record files and an optional GQA ``questions.csv``, G-Retriever's ``nodes.csv`` + ``edges.csv``
pair, or pasted text; all through the ordinary loaders. The format registry the uploaders list from
(:func:`format_names`, :func:`format_label`, :func:`upload_extensions`) is read on every call, so a
format registered after import is offered."""
from __future__ import annotations

from ..graph import TextualGraph
from ..io import FORMATS, list_records, load_csv_pair_from_bytes, load_graph_from_bytes, load_graph_from_text
from ..io import format_names as _format_names
from ..io import upload_extensions as _upload_extensions
from ..io.gqa import attach_questions, scene_questions_from_text
from ..io.text import Limits, decode


def format_names() -> list[str]:
    """The registered graph formats' names, in detection order (the format selectors list these)."""
    return _format_names()


def format_label(name: str) -> str:
    """The label of a registered graph format (what the uploader's caption names)."""
    return FORMATS[name].label


def upload_extensions() -> list[str]:
    """Every file extension some registered format accepts, sorted (the uploader's types)."""
    return _upload_extensions()


def load_pasted(text: str, format: str = "auto", name: str = "pasted text") -> TextualGraph:
    """Pasted text in ``format`` (``auto``: detected) -> graph; ``name`` names it in error messages."""
    return load_graph_from_text(text, format=format, name=name)


def load_csv_pair(nodes: bytes, edges: bytes, nodes_name: str = "nodes.csv", edges_name: str = "edges.csv"
                  ) -> TextualGraph:
    """G-Retriever's uploaded pair: ``nodes.csv`` (node_id,node_attr) and ``edges.csv`` (src,edge_attr,dst)."""
    return load_csv_pair_from_bytes(nodes, edges, nodes_name, edges_name)


def upload_records(data: bytes, filename: str, format: str = "auto") -> list[str]:
    """Record labels of a multi-record upload (``[]`` for one graph, or when the file cannot be read:
    loading it then reports the error)."""
    try:
        return list_records(data, filename, format)[1]
    except Exception:  # noqa: BLE001 - the load button reports the real error with file/line/field
        return []


def load_upload(data: bytes, filename: str, format: str = "auto", record: int | str | None = None,
                questions: tuple[bytes, str] | None = None, question: int | None = None) -> TextualGraph:
    """An uploaded graph file; ``questions = (bytes, name)`` of a GQA ``questions.csv`` adds the
    picked image's questions to ``graph.meta``; ``question`` picks which of them becomes the
    graph's ``question`` / ``answer`` (default the first)."""
    g = load_graph_from_bytes(data, filename, format=format, record=record)
    if questions is not None and "image_id" in g.meta:
        qdata, qname = questions
        rows = scene_questions_from_text(decode(qdata, qname, Limits()), qname, str(g.meta["image_id"]))
        attach_questions(g, rows)
        if question is not None:
            if not 0 <= int(question) < len(rows):
                raise ValueError(f"{qname}: image {g.meta['image_id']} has {len(rows)} question(s), no question "
                                 f"{question}")
            g.meta["question"], g.meta["answer"] = rows[int(question)]["question"], rows[int(question)]["answer"]
    return g


def upload_questions(data: bytes, filename: str, format: str = "auto", record: int | str | None = None,
                     questions: tuple[bytes, str] | None = None) -> list[str]:
    """The questions of the picked image in an uploaded ``questions.csv`` (``[]`` when there are
    none or the files cannot be read: loading them then reports the error)."""
    if questions is None:
        return []
    try:
        g = load_upload(data, filename, format, record, questions)
    except Exception:  # noqa: BLE001 - the load button reports the real error with file/line/field
        return []
    return [str(r.get("question", "")) for r in g.meta.get("questions") or []]
