"""Page-state helpers (``st.session_state``): which graph is loaded, and loading a new one without losing it.

They work on any ``MutableMapping`` (``st.session_state`` in the app, a plain dict in
tests), so the rule "a failed upload keeps the previously loaded graph" is library code
with its own unit test, not page logic. So is the rule "a table read without a header does not
silently replace a loaded graph": :func:`try_load` holds such a read under ``state["pending_load"]``
with a warning naming the file and its first line, and the loaded graph stays until
:func:`confirm_pending` ("Use it anyway") or :func:`discard_pending`.

The question typed in one page's question box is carried to the others: a box that calls
:func:`share_question` when edited publishes its text (numbered, with the graph it was asked about)
under ``state["shared_question"]``; a box drawn after :func:`question_box` takes a question published
since it last took one (for the same graph), and otherwise keeps its own edits. A graph that comes
without a question gets :func:`suggested_question`, so the lab shows a retrieval at once.
"""
from __future__ import annotations

import hashlib
from typing import Callable, MutableMapping

import numpy as np

from ..graph import GraphFormatError, TextualGraph

GRAPH, GRAPH_KEY, ERROR, TREE, SEED, MESSAGE = "graph", "graph_key", "load_error", "tree", "tree_seed", "load_message"
RESET = "reset_note"
WARNINGS = "load_warnings"
PENDING = "pending_load"
LOST = "graph_lost"
QUESTION, QUESTION_SEEN = "shared_question", "shared_question_seen"
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
    state[LOST] = False
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
        state[PENDING] = None
        if graph.meta.get("headerless") and state.get(GRAPH) is not None:
            state[PENDING] = {"graph": graph, "label": label, "text": headerless_warning(graph, label, state[GRAPH])}
            state[ERROR] = state[MESSAGE] = None
            return None
        set_graph(state, graph, label)
        return None
    state[ERROR] = msg
    state[MESSAGE] = None
    state[PENDING] = None
    return msg


def headerless_warning(graph: TextualGraph, label: str | None, current: TextualGraph) -> str:
    """Why a read without a header waits for confirmation: the file, its first line (now the first
    triple), how it would be read, and which graph stays loaded meanwhile (Markdown, user text escaped)."""
    from .errors.display import escape_markdown

    first = ",".join((graph.node_text[int(graph.edge_index[0, 0])], graph.edge_text[0],
                      graph.node_text[int(graph.edge_index[1, 0])])) if graph.num_edges else ""
    return (f"{escape_markdown(label or graph.name or 'the file')}: its first line ({escape_markdown(first)}) is not a "
            "header this reader knows (head,relation,tail, or an alias such as subject,predicate,object), so the "
            f"file would be read as {graph.num_edges} headerless triple(s), that line included. "
            f"{escape_markdown(current.name or 'The loaded graph')} stays loaded unless you use it anyway.")


def confirm_pending(state: MutableMapping) -> None:
    """Load the graph held by :func:`try_load` (the "Use it anyway" button)."""
    pending = state.get(PENDING)
    if pending:
        state[PENDING] = None
        set_graph(state, pending["graph"], pending["label"])


def discard_pending(state: MutableMapping) -> None:
    """Drop the held graph; the loaded one stays."""
    pending = state.get(PENDING)
    state[PENDING] = None
    if pending and state.get(GRAPH) is not None:
        state[MESSAGE] = (f"Kept {state[GRAPH].name or 'the loaded graph'}; {pending['label'] or 'the file'} "
                          "was not loaded.")


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


def restore_graph(source: str) -> TextualGraph:
    """The graph an address names: ``upload:<fingerprint>`` from the kept uploads
    (:mod:`.graph_store`, checked against its fingerprint), anything else by
    :func:`.samples.graph_from_source`. ``LookupError`` when a kept upload is gone, ``ValueError`` /
    ``OSError`` when another source cannot be found."""
    from . import graph_store
    from ..io.samples import graph_from_source

    kind, _, ident = str(source).partition(":")
    if kind != graph_store.KIND:
        return graph_from_source(source)
    try:
        graph = graph_store.load(ident)
    except ValueError as e:  # not a fingerprint at all
        raise LookupError(str(e)) from None
    if graph_fingerprint(graph) != ident:
        raise LookupError(f"the kept graph {ident} does not match its fingerprint")
    return graph


def current_graph(state: MutableMapping, source: str | None = None) -> TextualGraph:
    """The loaded graph. A new visit (a reload) first tries ``source`` (the page address names
    built-in and benchmark graphs, see :func:`.samples.graph_from_source`, and kept uploads,
    ``upload:<fingerprint>``, see :mod:`.graph_store`), else starts on the scene sample and records in
    ``state["reset_note"]`` why, so the page can say so; ``state["graph_lost"]`` is true when the
    address named an upload that is no longer kept (the page says so as a warning)."""
    if state.get(GRAPH) is None:
        from ..io.samples import load_sample

        lost = False
        note = ("New visit: started on the scene sample. Built-in, benchmark and uploaded graphs survive a "
                "page reload (through the address, `?graph=`).")
        if source:
            try:
                set_graph(state, restore_graph(source))
                state[MESSAGE] = None
                state[RESET] = f"Restored {state[GRAPH].name or source} from the page address ({source})."
                return state[GRAPH]
            except LookupError as e:
                lost = True
                note = (f"The uploaded graph named in the page address ({source}) was lost: {e} (the cache was "
                        "cleared, or the graph was evicted or too big to keep). Showing the scene sample "
                        f"({load_sample(DEFAULT_SAMPLE).name}) instead; load the file again on Home.")
            except (ValueError, OSError) as e:
                note = f"Could not restore {source!r} from the page address ({e}); started on the scene sample."
        set_graph(state, load_sample(DEFAULT_SAMPLE))
        state[MESSAGE] = None
        state[RESET], state[LOST] = note, lost
    return state[GRAPH]


def suggested_question(graph: TextualGraph) -> str:
    """A question for a graph that comes without one: about its best-connected node (most 1-cell ends,
    the first such node on a tie), so retrieval has something to show before anything is typed."""
    if graph.num_nodes == 0:
        return ""
    degree = np.bincount(np.asarray(graph.edge_index, dtype=np.int64).ravel(), minlength=graph.num_nodes)
    return f"What is {graph.node_text[int(np.argmax(degree))]} connected to?"


def share_question(state: MutableMapping, box_key: str) -> None:
    """Publish the text of question box ``box_key`` (its ``on_change``): other pages' boxes take it
    (:func:`question_box`), this box counts it as taken."""
    n = int((state.get(QUESTION) or {}).get("n", 0)) + 1
    state[QUESTION] = {"text": str(state.get(box_key) or ""), "n": n, "graph": state.get(GRAPH_KEY)}
    state[QUESTION_SEEN] = {**(state.get(QUESTION_SEEN) or {}), box_key: n}


def question_box(state: MutableMapping, box_key: str, default: str = "", graph_key: str | None = None) -> None:
    """Set question box ``box_key``'s value before the page draws it (the widget then takes no
    ``value=``): the question published by another box since this one last took one; else the box's
    own text; else the last published question (this box's own edit, forgotten while another page
    ran); else ``default``. With ``graph_key``, only a question asked about that graph is taken."""
    shared = state.get(QUESTION)
    if shared and graph_key is not None and shared.get("graph") != graph_key:
        shared = None
    seen = dict(state.get(QUESTION_SEEN) or {})
    if shared and seen.get(box_key, 0) < shared["n"]:
        state[box_key] = shared["text"]
        state[QUESTION_SEEN] = {**seen, box_key: shared["n"]}
    elif box_key not in state:
        state[box_key] = shared["text"] if shared else default


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
