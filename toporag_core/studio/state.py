"""Session-state helpers: which graph is loaded, and loading a new one without losing it.

They work on any ``MutableMapping`` (``st.session_state`` in the app, a plain dict in
tests), so the rule "a failed upload keeps the previously loaded graph" is library code
with its own unit test, not page logic.
"""
from __future__ import annotations

import hashlib
from typing import Callable, MutableMapping

import numpy as np

from ..graph import GraphFormatError, TextualGraph

GRAPH, GRAPH_KEY, ERROR, TREE, SEED, MESSAGE = "graph", "graph_key", "load_error", "tree", "tree_seed", "load_message"
RESET = "reset_note"
WARNINGS = "load_warnings"
DEFAULT_SAMPLE = "scene"


def graph_fingerprint(graph: TextualGraph) -> str:
    """Content hash of a graph (texts and edges): the cache key of everything derived from it."""
    h = hashlib.sha1()
    h.update(np.ascontiguousarray(graph.edge_index, dtype=np.int64).tobytes())
    for texts in (graph.node_text, graph.edge_text):
        h.update(str(len(texts)).encode())
        for t in texts:  # length-prefixed, so ("ab", "c") and ("a", "bc") differ
            b = t.encode("utf-8", "surrogatepass")
            h.update(len(b).to_bytes(4, "little"))
            h.update(b)
    return h.hexdigest()[:20]


def set_graph(state: MutableMapping, graph: TextualGraph, label: str | None = None) -> None:
    """Make ``graph`` the current graph (clears any previous load error)."""
    state[GRAPH] = graph
    state[GRAPH_KEY] = graph_fingerprint(graph)
    state[ERROR] = None
    state[RESET] = None
    state[WARNINGS] = list(graph.meta.get("warnings", []))
    state[MESSAGE] = f"Loaded {label or graph.name or 'graph'}: {graph.num_nodes} nodes, {graph.num_edges} edges." + \
        "".join(f" Note: {w}." for w in state[WARNINGS])


def try_load(state: MutableMapping, loader: Callable[[], TextualGraph], label: str | None = None) -> str | None:
    """Run ``loader``; on success make its graph current, on failure keep the old one.

    Returns ``None`` on success or the error message (also stored under ``state["load_error"]``).
    Any exception is caught: a bad upload must never take the app down, but a bug that is
    not a format error says so in its message instead of pretending to be bad input.
    """
    try:
        graph = loader()
        if not isinstance(graph, TextualGraph):
            raise GraphFormatError(f"loader returned {type(graph).__name__}, not a graph")
        if graph.num_nodes == 0:
            raise GraphFormatError("the graph has no nodes", file=label)
    except (GraphFormatError, ValueError, OSError, UnicodeError) as e:
        msg = str(e)
    except Exception as e:  # noqa: BLE001 - last line of defence for the UI
        msg = f"unexpected {type(e).__name__} while loading: {e}"
    else:
        set_graph(state, graph, label)
        return None
    state[ERROR] = msg
    state[MESSAGE] = None
    return msg


def progress_callback(update: Callable[[float, str], None]) -> Callable[[int, int, float], None]:
    """An embedding progress callback (``CachedEncoder.on_progress``) that calls ``update(fraction, text)``,
    e.g. ``bar = st.progress(0.0); encoder.on_progress = progress_callback(lambda f, t: bar.progress(f, text=t))``;
    ``text`` is "embedding 4,096/100,000 texts (4%), about 12 min left"."""
    from ..embed import format_progress

    def on_progress(done: int, total: int, eta: float) -> None:
        update(min(done / max(total, 1), 1.0), format_progress(done, total, eta))
    return on_progress


def result_warnings(result) -> list[str]:
    """What the user should be told about a retrieval result (e.g. G-Retriever ties made it much larger than k
    asks): ``Subcomplex.warnings``; the pages show each with ``st.warning``."""
    return list(getattr(result, "warnings", None) or [])


def current_graph(state: MutableMapping, source: str | None = None) -> TextualGraph:
    """The loaded graph. A new session (a reload) first tries ``source`` (the page address names
    built-in and benchmark graphs, see :func:`.samples.graph_from_source`), else starts on the
    scene sample and records in ``state["reset_note"]`` why, so the page can say so."""
    if state.get(GRAPH) is None:
        from .samples import graph_from_source, load_sample

        note = ("New session: started on the scene sample. Built-in and benchmark graphs survive a page "
                "reload (through the address); uploaded and pasted graphs do not.")
        if source:
            try:
                set_graph(state, graph_from_source(source))
                state[MESSAGE] = None
                state[RESET] = f"Restored {state[GRAPH].name or source} from the page address ({source})."
                return state[GRAPH]
            except (ValueError, OSError) as e:
                note = f"Could not restore {source!r} from the page address ({e}); started on the scene sample."
        set_graph(state, load_sample(DEFAULT_SAMPLE))
        state[MESSAGE] = None
        state[RESET] = note
    return state[GRAPH]


def tree_settings(state: MutableMapping) -> tuple[str, int]:
    """``(tree method, seed)`` chosen on the Home page (default ``bfs``, 0)."""
    return str(state.get(TREE) or "bfs"), int(state.get(SEED) or 0)


KEPT = "_kept_widgets"


def keep_widgets(state: MutableMapping, keys) -> None:
    """Copy the values of widgets ``keys`` to a plain (non-widget) entry that survives leaving the page.

    Streamlit forgets a widget's value when a run does not draw it (another page ran); the copy
    lets :func:`restore_widgets` put it back when the page is shown again.
    """
    kept = dict(state.get(KEPT) or {})
    for k in keys:
        if k in state:
            kept[k] = state[k]
    state[KEPT] = kept


def restore_widgets(state: MutableMapping, keys) -> None:
    """Put kept values back for widgets ``keys`` that have no value (call before drawing them)."""
    kept = state.get(KEPT) or {}
    for k in keys:
        if k not in state and k in kept:
            state[k] = kept[k]
