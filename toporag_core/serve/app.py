"""The HTTP JSON API of the core (FastAPI): health, info, lift, retrieve, answer.

=======  ==========================  ===========================================================
GET      ``/v1/health``              ``{"status": "ok", "core"}``; needs no token (liveness probe)
GET      ``/v1/info``                model, checkpoint, device, dtype, encoder, registered methods
                                     with their parameters, batching and cache statistics
POST     ``/v1/graphs``              ``{graph, tree, seed}``: lift + embed once -> ``{graph_id, nodes,
                                     edges, cells2, cached}`` (the lift summary)
GET      ``/v1/graphs/{graph_id}``   the same summary when the core holds that graph, else 404
POST     ``/v1/retrieve``            ``{graph_id | graph, question, method, params, k, tree, seed}``
                                     -> the subcomplex (ids, roles, prizes) and its text, or the
                                     node list of a node method
POST     ``/v1/answer``              as retrieve, plus ``query``, ``max_new_tokens`` -> ``answer``,
                                     subcomplex, context, prompt layout, timings, ``batch_size``,
                                     and which ``core`` / ``device`` answered
=======  ==========================  ===========================================================

Methods and parameters are exactly those of :data:`~toporag_core.retrieval.METHODS`, validated by
:class:`~toporag_core.retrieval.RetrievalSetting` (an unknown method or parameter is a 422 naming
it). Every error is ``{"error": {"code", "message"}}`` with a 4xx status for the caller's
mistakes (400 malformed JSON, 401 token, 404 unknown graph, 413 too large, 422 invalid value) and
503 when the core is overloaded (queue full, waited too long); the service keeps serving.

Safe by default: the server binds 127.0.0.1 (``toporag serve --host``); with a token every route
but ``/v1/health`` needs ``Authorization: Bearer <token>`` (compared in constant time); the body is
read at most ``max_body_bytes`` far; JSON only, no pickle.
"""
from __future__ import annotations

import hmac
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..retrieval import RetrievalSetting, get_method
from .batching import QueueFull
from .engine import CoreEngine
from .protocol import Limits, RequestError, graph_from_json, graph_id


# ----------------------------------------------------------------------------- request bodies
class GraphBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    graph_id: str | None = Field(None, max_length=64)
    graph: dict[str, Any] | None = None
    tree: str = "bfs"
    seed: int = 0


class RetrieveBody(GraphBody):
    question: str | None = None
    method: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    k: int | None = None


class AnswerBody(RetrieveBody):
    query: str | None = None
    max_new_tokens: int | None = None


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


class BodyLimit:
    """ASGI middleware: read the request body at most ``max_bytes`` far, 413 beyond (chunked
    bodies included), then hand the buffered body on."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_big = error(413, "too_large", f"request body over the limit of {self.max_bytes} bytes")
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await too_big(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await too_big(scope, receive, send)
            chunks.append(chunk)
            more = msg.get("more_body", False)
        body, sent = b"".join(chunks), False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


def validation_message(exc: RequestValidationError) -> tuple[int, str, str]:
    errs = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errs):
        e = next(e for e in errs if e.get("type") == "json_invalid")
        return 400, "malformed_json", f"the body is not valid JSON ({e.get('ctx', {}).get('error', e.get('msg'))})"
    parts = []
    for e in errs[:3]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {e.get('msg')}")
    return 422, "invalid_request", "; ".join(parts)


def create_app(engine: CoreEngine, limits: Limits | None = None, token: str | None = None,
               request_timeout_s: float = 120.0) -> FastAPI:
    """The FastAPI application around ``engine`` (see the module docstring for the routes)."""
    limits = limits or Limits()
    app = FastAPI(title="TopoRAG core", version="1", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)

    @app.exception_handler(RequestError)
    async def on_request_error(request: Request, exc: RequestError):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error(exc.status, exc.code, exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError):
        return error(*validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error(exc.status_code, code, f"{request.method} {request.url.path}: {exc.detail}")

    @app.exception_handler(QueueFull)
    async def on_full(request: Request, exc: QueueFull):
        return error(503, "overloaded", f"the core is overloaded: {exc}", {"Retry-After": "1"})

    @app.exception_handler(TimeoutError)
    async def on_timeout(request: Request, exc: TimeoutError):
        return error(503, "timeout", f"the core did not finish within {request_timeout_s:g} s")

    @app.exception_handler(Exception)
    async def on_other(request: Request, exc: Exception):
        return error(500, "internal", f"{type(exc).__name__}: {exc}")

    def authorize(request: Request) -> None:
        if token is None:
            return
        got = request.headers.get("authorization", "")
        scheme, _, value = got.partition(" ")
        if scheme.lower() != "bearer" or not value:
            raise RequestError("missing bearer token (Authorization: Bearer <token>)", 401, "unauthorized")
        if not hmac.compare_digest(value.strip().encode(), token.encode()):
            raise RequestError("wrong bearer token", 401, "unauthorized")

    auth = [Depends(authorize)]

    def resolve_graph(body: GraphBody):
        if body.graph is not None:
            gid = graph_id(body.graph) if isinstance(body.graph.get("nodes"), list) else None
            graph = graph_from_json(body.graph, limits)
            gid = gid or graph_id(graph)
            if body.graph_id is not None and body.graph_id != gid:
                raise RequestError(f"graph_id {body.graph_id} does not match the graph's content hash {gid}",
                                   422, "invalid_value")
            ecx, cached = engine.add_graph(gid, graph, body.tree, body.seed)
            return gid, ecx, cached
        if body.graph_id is None:
            raise RequestError("give graph_id (a graph sent before) or graph", 422, "invalid_request")
        return body.graph_id, engine.graph(body.graph_id, body.tree, body.seed), True

    def question_of(text: str | None, field: str = "question") -> str:
        if not isinstance(text, str) or not text.strip():
            raise RequestError(f"{field} must be a non-empty string", 422, "invalid_value")
        if len(text) > limits.max_question_chars:
            raise RequestError(f"{field}: {len(text)} characters, the limit is {limits.max_question_chars}",
                               413, "too_large")
        return text

    def setting_of(body: RetrieveBody) -> RetrievalSetting:
        try:
            if body.method is None and not body.params and body.k is None:
                return engine.pipe.default_setting()
            spec = get_method(body.method or engine.pipe.default_setting().method)
            unknown = sorted(set(body.params) - set(spec.param_names))
            if unknown:
                raise ValueError(f"method {spec.name!r} has no parameter {unknown[0]!r}; "
                                 f"its parameters: {', '.join(spec.param_names) or '(none)'}")
            trained = engine.pipe.meta.get("retrieval")
            base = trained if (trained or {}).get("method", "toporag") == spec.name else None
            params = dict(body.params)
            own_k = params.pop("k", None)  # a method's own "k" parameter, not the single k of the k rule
            setting = RetrievalSetting.from_dict(base, method=spec.name, k=body.k, **params)
            return setting.replace(k=own_k) if own_k is not None else setting
        except ValueError as e:
            raise RequestError(str(e), 422, "invalid_value") from None

    @app.get("/v1/health")
    def health():
        return {"status": "ok", "core": engine.name}

    @app.get("/v1/info", dependencies=auth)
    def info():
        return JSONResponse(engine.describe())

    @app.post("/v1/graphs", dependencies=auth)
    def add_graph(body: GraphBody):
        if body.graph is None:
            raise RequestError("graph is required", 422, "invalid_request")
        gid, ecx, cached = resolve_graph(body)
        return engine.summary(gid, ecx, cached)

    @app.get("/v1/graphs/{gid}", dependencies=auth)
    def has_graph(gid: str, tree: str = "bfs", seed: int = 0):
        return engine.summary(gid, engine.graph(gid, tree, seed), True)

    @app.post("/v1/retrieve", dependencies=auth)
    def do_retrieve(body: RetrieveBody):
        setting = setting_of(body)
        question = question_of(body.question) if body.question is not None or \
            setting.spec.dimension == "cells" else None
        gid, ecx, cached = resolve_graph(body)
        try:
            out = engine.retrieve(ecx, question, setting)
        except ValueError as e:
            raise RequestError(str(e), 422, "invalid_value") from None
        return JSONResponse({**out, "graph_id": gid, "cached": cached, **engine.core_tag()})

    @app.post("/v1/answer", dependencies=auth)
    def do_answer(body: AnswerBody):
        question = question_of(body.question)
        query = question_of(body.query, "query") if body.query is not None else None
        if body.max_new_tokens is not None and not 0 <= body.max_new_tokens <= limits.max_new_tokens:
            raise RequestError(f"max_new_tokens must be in 0..{limits.max_new_tokens}", 422, "invalid_value")
        setting = setting_of(body)
        gid, ecx, cached = resolve_graph(body)
        try:
            out = engine.answer(ecx, question, setting, query=query, max_new_tokens=body.max_new_tokens,
                                timeout=request_timeout_s)
        except ValueError as e:
            if isinstance(e, RequestError):
                raise
            raise RequestError(str(e), 422, "invalid_value") from None
        return JSONResponse({**out, "graph_id": gid, "cached": cached})

    app.state.engine = engine
    app.state.limits = limits
    return app
