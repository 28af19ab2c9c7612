"""The context of a traversal: which original nodes it shows, and their text in document order.

A selected node above paragraph level with no selected descendant (a grafted section, say) brings
its paragraphs, since a heading alone says nothing; a sentence whose paragraph is shown is not
repeated. Documents are written ``# title``, sections ``## heading`` (``## title: heading`` when
their document is not shown), paragraphs and sentences as their text (``title: text`` when neither
their document nor their section is shown).
"""
from __future__ import annotations

import numpy as np

from .build import DOCUMENT, LEVELS, PARAGRAPH, SECTION, DocGraph


def context_nodes(graph: DocGraph, selected: np.ndarray) -> np.ndarray:
    """The original nodes whose text the context shows: the selected ones, plus, under every
    selected node above paragraph level that has no selected descendant (a leaf of the
    selection, e.g. a grafted section), its paragraphs - a heading alone says nothing."""
    n = graph.num_nodes
    sel = np.zeros(n, bool)
    sel[np.asarray(selected, np.int64)] = True
    sel[0] = False
    anc = graph.ancestors()
    idx = np.flatnonzero(sel)
    above = anc[idx][np.arange(len(LEVELS))[None, :] < graph.level[idx][:, None]]
    has_desc = np.zeros(n, bool)
    has_desc[above[above >= 0]] = True
    leaf = sel & ~has_desc & (graph.level > 0) & (graph.level < PARAGRAPH)
    paras = np.flatnonzero(graph.level == PARAGRAPH)
    expand = np.zeros(paras.size, bool)
    for lv in (DOCUMENT, SECTION):
        a_lv = anc[paras, lv]
        expand |= (a_lv >= 0) & leaf[np.maximum(a_lv, 0)]
    show = sel.copy()
    show[paras[expand]] = True
    return np.flatnonzero(show)


def render_context(graph: DocGraph, selected: np.ndarray) -> str:
    """The context text of the selected original nodes (see :func:`context_nodes`), in document
    order: ``# title`` for documents, ``## heading`` for sections (``## title: heading`` when
    the document itself is not shown), paragraph / sentence text (prefixed ``title: `` when
    neither its document nor its section is shown); a sentence of a shown paragraph is not repeated."""
    n = graph.num_nodes
    show = np.zeros(n, bool)
    show[context_nodes(graph, selected)] = True
    anc = graph.ancestors()
    para = anc[:, PARAGRAPH]
    covered = (para >= 0) & (para != np.arange(n)) & show[np.maximum(para, 0)]
    doc_shown = show[np.maximum(anc[:, DOCUMENT], 0)]
    sec_shown = (anc[:, SECTION] >= 0) & show[np.maximum(anc[:, SECTION], 0)]
    lines = []
    for i in np.flatnonzero(show & ~covered):
        lv, title = int(graph.level[i]), graph.titles[int(graph.doc[i])]
        if lv == DOCUMENT:
            lines.append(f"# {graph.text[i]}")
        elif lv == SECTION:
            lines.append(f"## {graph.text[i]}" if doc_shown[i] else f"## {title}: {graph.text[i]}")
        else:
            lines.append(graph.text[i] if doc_shown[i] or sec_shown[i] else f"{title}: {graph.text[i]}")
    return "\n".join(lines)
