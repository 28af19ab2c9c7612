"""Uploads on the Home page: one graph file in any registered format, with a record picker for
multi-record files and an optional GQA ``questions.csv``; all through the ordinary loaders."""
from __future__ import annotations

from ..graph import TextualGraph
from ..io import list_records, load_graph_from_bytes
from ..io.gqa import attach_questions, scene_questions_from_text
from ..io.text import Limits, decode


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
