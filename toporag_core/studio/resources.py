"""Shared, cached resources of the Streamlit app: the encoder, lifted and embedded complexes.

* One sentence encoder per server process (``st.cache_resource``), wrapped in a
  :class:`~toporag_core.embed.CachedEncoder`, so a question typed twice is encoded once.
* One lifted complex and one embedded complex per ``(graph fingerprint, tree method,
  seed, encoder)``: a slider never re-lifts or re-encodes; only the retrieval runs again.

* The first embedding of a graph shows a real progress bar in the page (texts encoded / total
  and the time left, :func:`embed_with_progress`: the encoder's own progress mechanism,
  :meth:`~toporag_core.embed.CachedEncoder.prefetch`, in chunks of :data:`EMBED_BATCH` texts);
  embedded complexes are kept in a small process-wide LRU (:data:`EMBED_CACHE_SIZE`) rather
  than ``st.cache_resource``, whose replay of elements drawn inside a cached function would
  redraw the bar on every later hit.

``TOPORAG_ENCODER`` picks the encoder, as everywhere (:func:`toporag_core.embed.get_encoder`,
the one factory): unset = the packaged all-MiniLM-L6-v2; ``hashing`` = the model-free
:class:`~toporag_core.embed.HashingEncoder` (fast tests); anything else = a local
SentenceTransformer folder or model name.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import streamlit as st

from ..cells.complex import CellComplex
from ..embed import CachedEncoder, CellEmbeddings, ProgressCallback, embed_complex, encoder_spec
from ..embed import get_encoder as make_encoder
from ..graph import TextualGraph
from ..cells.lift import lift
from ..retrieval import EmbeddedComplex
from .state import progress_callback


def encoder_choice() -> str:
    """The encoder name in force (``$TOPORAG_ENCODER`` or ``default``): part of every cache key."""
    return encoder_spec()


@st.cache_resource(show_spinner="Loading the sentence encoder ...")
def app_encoder(choice: str) -> CachedEncoder:
    """The text encoder for ``choice`` (see module docstring), created once per server."""
    return make_encoder(choice)


@st.cache_resource(max_entries=16, show_spinner="Lifting the graph into a cell complex ...")
def get_complex(graph_key: str, tree: str, seed: int, _graph: TextualGraph) -> CellComplex:
    """The lifted complex of the graph with fingerprint ``graph_key`` (``_graph`` is not hashed)."""
    return lift(_graph, tree=tree, seed=seed)


EMBED_CACHE_SIZE = 8
EMBED_BATCH = 256
_EMBEDDINGS: OrderedDict = OrderedDict()
_EMBED_LOCK = threading.Lock()


def embed_with_progress(cx: CellComplex, encoder: CachedEncoder, on_progress: ProgressCallback | None = None,
                        batch: int = EMBED_BATCH) -> CellEmbeddings:
    """:func:`~toporag_core.embed.embed_complex` after the graph's distinct texts went through
    :meth:`CachedEncoder.prefetch <toporag_core.embed.CachedEncoder.prefetch>`, ``batch`` texts per
    chunk with ``on_progress(texts done, total, seconds left)`` after each (texts cached before are
    neither encoded nor counted); the vectors are those of one ``embed_complex`` call."""
    encoder.prefetch(list(cx.graph.node_text) + list(cx.graph.edge_text), on_progress, chunk_size=batch)
    return embed_complex(cx, encoder, show_progress=False)


def _progress_bar(what: str = "every cell"):
    bar = st.progress(0.0, text=f"Embedding {what} (once per graph) ...")
    return bar, progress_callback(lambda frac, text: bar.progress(frac, text=f"{text} ({what}, once per graph)"))


def prefetch_texts(texts, choice: str, what: str) -> None:
    """Encode the texts of ``texts`` the encoder ``choice`` has not cached yet, with a progress bar in
    the page while that runs (none when all are cached): node methods' text index encodes the node
    texts inside a cached function, where a bar cannot be drawn, so they are put in the encoder's
    cache here first (after the lab's cell embedding they all are, and nothing is drawn)."""
    encoder = app_encoder(choice)
    if not encoder.uncached(texts):
        return
    bar, update = _progress_bar(what)
    try:
        encoder.prefetch(list(texts), update, chunk_size=EMBED_BATCH)
    finally:
        bar.empty()


def _get_embeddings(graph_key: str, tree: str, seed: int, choice: str, cx: CellComplex) -> CellEmbeddings:
    key = (graph_key, tree, seed, choice)
    with _EMBED_LOCK:
        if key in _EMBEDDINGS:
            _EMBEDDINGS.move_to_end(key)
            return _EMBEDDINGS[key]
    bar, update = _progress_bar()
    try:
        emb = embed_with_progress(cx, app_encoder(choice), update)
    finally:
        bar.empty()
    with _EMBED_LOCK:
        _EMBEDDINGS[key] = emb
        while len(_EMBEDDINGS) > EMBED_CACHE_SIZE:
            _EMBEDDINGS.popitem(last=False)
    return emb


def get_embedded(graph_key: str, tree: str, seed: int, graph: TextualGraph) -> EmbeddedComplex:
    """Lifted + embedded complex; built once per (graph, tree, seed, encoder), then reused."""
    choice = encoder_choice()
    cx = get_complex(graph_key, tree, seed, graph)
    return EmbeddedComplex(cx, _get_embeddings(graph_key, tree, seed, choice, cx), app_encoder(choice))


def page_graph(ss, announce: bool = True) -> TextualGraph:
    """The visitor's graph (:func:`.state.current_graph`), restored from the address's ``?graph=``
    on a new visit (a reload); the address is then kept in step with the graph: built-in and benchmark graphs
    by their source, any other graph (an upload, pasted text, a knowledge-graph cut) written to the
    kept uploads (:mod:`.graph_store`) and named ``upload:<fingerprint>``, so a reload of any page
    finds it. ``announce``: on the first run of a visit, say which graph it restored, or
    that the uploaded graph was lost and which graph is shown instead (Home shows the note itself)."""
    from . import graph_store, state
    from ..io import samples

    fresh = ss.get(state.GRAPH) is None
    graph = state.current_graph(ss, st.query_params.get("graph"))
    if announce and fresh and ss.get(state.RESET):
        (st.warning if ss.get(state.LOST) else st.info)(ss[state.RESET], icon=":material/restart_alt:")
    src = samples.restorable_source(graph)
    if src is None:
        key = ss[state.GRAPH_KEY]
        kept = graph_store.is_kept(key) or graph_store.save(graph, key)
        src = graph_store.source_of(key) if kept else None
    if src and st.query_params.get("graph") != src:
        st.query_params["graph"] = src
    elif not src and "graph" in st.query_params:
        del st.query_params["graph"]
    return graph


def show_view(view) -> None:
    """Show a :class:`~toporag_core.studio.graph_view.GraphView` in an iframe of its own
    ``frame_height``, so no part of the view is ever cut off."""
    show_html(view.html, view.frame_height)


def show_html(page: str, height: int) -> None:
    """Embed a self-contained HTML page (the pyvis view) in an iframe.

    ``st.iframe`` where this Streamlit has it (``st.components.v1.html`` is deprecated there),
    else ``st.components.v1.html``. Only pages built by :mod:`.graph_view` come here: all
    user text inside them is escaped.
    """
    if hasattr(st, "iframe"):
        st.iframe(page, height=height)
    else:  # Streamlit < 1.5x
        import streamlit.components.v1 as components

        components.html(page, height=height)
