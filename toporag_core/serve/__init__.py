"""The core as a service: the pipeline loaded once behind an HTTP JSON API (FastAPI + uvicorn).

* :mod:`.protocol` - the wire format (graphs by content hash, subcomplexes by cell ids), limits;
* :mod:`.batching` - dynamic batching of concurrent answer requests;
* :mod:`.engine` - :class:`CoreEngine`: pipeline + LRU of embedded graphs + batcher;
* :mod:`.guard` - token, body limit and read deadlines before any work (ASGI + h11 protocol);
* :mod:`.jobs` - embedding jobs: uploads lifted and embedded off the request path;
* :mod:`.app` - the FastAPI routes, errors as 4xx JSON naming the field;
* :mod:`.server` - :class:`ServeConfig`, ``serve`` (uvicorn) and a background server for tests;
* :mod:`.client` - :class:`CoreClient` with timeouts and clear errors (the studio's remote core).

FastAPI and uvicorn are imported only by :mod:`.app`, :mod:`.guard` and :mod:`.server` (``pip install
toporag-studio[serve]``); the client needs ``httpx`` alone.
"""
from .batching import BatchConfig, DynamicBatcher, QueueFull
from .protocol import Limits, RequestError, graph_from_json, graph_id, graph_to_json, subcomplex_from_json

__all__ = ["BatchConfig", "DynamicBatcher", "QueueFull", "Limits", "RequestError", "graph_from_json", "graph_id",
           "graph_to_json", "subcomplex_from_json"]
