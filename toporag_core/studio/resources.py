"""Shared, cached resources of the Streamlit app: the encoder, lifted and embedded complexes.

* One sentence encoder per server process (``st.cache_resource``), wrapped in a
  :class:`~toporag_core.embed.CachedEncoder`, so a question typed twice is encoded once.
* One lifted complex and one embedded complex per ``(graph fingerprint, tree method,
  seed, encoder)``: a slider never re-lifts or re-encodes; only the retrieval runs again.

``TOPORAG_ENCODER`` picks the encoder, as everywhere (:func:`toporag_core.embed.get_encoder`,
the one factory): unset = the packaged all-MiniLM-L6-v2; ``hashing`` = the model-free
:class:`~toporag_core.embed.HashingEncoder` (fast tests); anything else = a local
SentenceTransformer folder or model name.
"""
from __future__ import annotations

import streamlit as st

from ..complex import CellComplex
from ..embed import CachedEncoder, CellEmbeddings, embed_complex, encoder_spec
from ..embed import get_encoder as make_encoder
from ..graph import TextualGraph
from ..lift import lift
from ..retrieval import EmbeddedComplex


def encoder_choice() -> str:
    """The encoder name in force (``$TOPORAG_ENCODER`` or ``default``): part of every cache key."""
    return encoder_spec()


@st.cache_resource(show_spinner="Loading the sentence encoder ...")
def get_encoder(choice: str) -> CachedEncoder:
    """The text encoder for ``choice`` (see module docstring), created once per server."""
    return make_encoder(choice)


@st.cache_resource(max_entries=16, show_spinner="Lifting the graph into a cell complex ...")
def get_complex(graph_key: str, tree: str, seed: int, _graph: TextualGraph) -> CellComplex:
    """The lifted complex of the graph with fingerprint ``graph_key`` (``_graph`` is not hashed)."""
    return lift(_graph, tree=tree, seed=seed)


@st.cache_resource(max_entries=8, show_spinner="Embedding every cell (once per graph) ...")
def _get_embeddings(graph_key: str, tree: str, seed: int, choice: str, _cx: CellComplex) -> CellEmbeddings:
    return embed_complex(_cx, get_encoder(choice), show_progress=False)


def get_embedded(graph_key: str, tree: str, seed: int, graph: TextualGraph) -> EmbeddedComplex:
    """Lifted + embedded complex; built once per (graph, tree, seed, encoder), then reused."""
    choice = encoder_choice()
    cx = get_complex(graph_key, tree, seed, graph)
    return EmbeddedComplex(cx, _get_embeddings(graph_key, tree, seed, choice, cx), get_encoder(choice))


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
