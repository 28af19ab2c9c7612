"""The HTTP JSON API of the core (FastAPI): health, info, uploads, retrieve, answer.

=======  ==========================  ===========================================================
GET      ``/v1/health``              ``{"status": "ok", "core"}``; needs no token (liveness probe)
GET      ``/v1/info``                model, checkpoint, device, dtype, encoder, registered methods
                                     with their parameters, batching, cache and upload statistics
POST     ``/v1/graphs``              ``{graph, tree, seed}``: 200 with the lift summary ``{graph_id,
                                     nodes, edges, cells2, cached: true}`` when the core holds the
                                     graph, else 202 with an embedding job ``{job_id, graph_id,
                                     status, progress}`` (lift + embed run off the request)
GET      ``/v1/jobs/{job_id}``       the job: ``status`` queued | running | done | failed,
                                     ``progress`` ``{done, total, seconds_left}``, ``summary`` when
                                     done, ``error`` when failed; 404 for an unknown job
GET      ``/v1/graphs/{graph_id}``   the summary when the core holds that graph, else 404
POST     ``/v1/retrieve``            ``{graph_id | graph, question, method, params, k, tree, seed}``
                                     -> the subcomplex (ids, roles, prizes) and its text, or the
                                     node list of a node method
POST     ``/v1/answer``              as retrieve, plus ``query``, ``max_new_tokens`` -> ``answer``,
                                     subcomplex, context, prompt layout, timings, ``batch_size``,
                                     and which ``core`` / ``device`` answered
=======  ==========================  ===========================================================

Methods and parameters are exactly those of :data:`~toporag_core.retrieval.METHODS`, validated by
:class:`~toporag_core.retrieval.RetrievalSetting`; every other value by the rules the CLI uses
(:mod:`toporag_core.cells.checks`: texts non-empty, whole numbers strictly ``int``, liftings
``bfs | dfs | random | rings``, seeds ``>= 0``). Every error is ``{"error": {"code", "message"}}``
naming the field, with a 4xx status for the caller's mistakes (400 malformed JSON, 401 token, 404
unknown graph or job, 408 body too slow, 413 too large, 422 invalid value) and 503 when the core
is overloaded (queue full, waited too long). No internal exception text reaches a client: anything
unexpected is a 500 ``internal`` with a request id, its traceback in the server's log.

Safe by default: the server binds 127.0.0.1 (``toporag serve --host``); the token and body limits
are checked by :class:`~.guard.Guard` before the body is read; JSON only, no pickle.
"""
from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..cells.checks import InputError, check_int, check_lifting, check_optional_int, check_seed, check_text
from ..retrieval import RetrievalSetting, get_method
from .batching import QueueFull
from .engine import CoreEngine
from .guard import Guard
from .protocol import Limits, RequestError, graph_from_json, graph_id

log = logging.getLogger("toporag.serve")


# ----------------------------------------------------------------------------- request bodies
class GraphBody(BaseModel):
    """Strict types: ``"3"`` or ``true`` is no whole number, ``1`` is no string."""

    model_config = ConfigDict(extra="forbid", strict=True)
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
    """The error reply; a lone surrogate a client sent is escaped, never a failure to encode."""
    safe = str(message).encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"error": {"code": code, "message": safe}}, status_code=status, headers=headers)


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


def install_error_handlers(app: FastAPI, request_timeout_s: float) -> None:
    """Every failure as ``{"error": {"code", "message"}}``; nothing internal in a message."""

    @app.exception_handler(InputError)
    async def on_input(request: Request, exc: InputError):
        return error(exc.status, "too_large" if exc.status == 413 else "invalid_value", str(exc))

    @app.exception_handler(RequestError)
    async def on_request_error(request: Request, exc: RequestError):
        return error(exc.status, exc.code, exc.message)

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
        rid = uuid.uuid4().hex[:12]
        log.error("request %s %s %s failed", rid, request.method, request.url.path, exc_info=exc)
        return error(500, "internal", f"internal error (request id {rid}; see the core's log)",
                     {"X-Request-Id": rid})


# ----------------------------------------------------------------------------- request values
class Requests:
    """Turns validated bodies into what the engine takes (graphs, settings, questions)."""

    def __init__(self, engine: CoreEngine, limits: Limits, request_timeout_s: float) -> None:
        self.engine, self.limits, self.timeout = engine, limits, request_timeout_s

    def graph_of(self, body: GraphBody):
        """``(graph_id, TextualGraph)`` of a body's inline graph, its id checked against ``graph_id``."""
        graph = graph_from_json(body.graph, self.limits)
        gid = graph_id(graph)
        if body.graph_id is not None and body.graph_id != gid:
            raise InputError("graph_id", f"{body.graph_id} does not match the graph's content hash {gid}")
        return gid, graph

    def resolve(self, body: GraphBody):
        """``(graph_id, embedded complex, cached)``: the inline graph (embedded now) or a cached one."""
        tree, seed = check_lifting(body.tree), check_seed(body.seed)
        if body.graph is not None:
            gid, graph = self.graph_of(body)
            try:
                ecx, cached = self.engine.add_graph(gid, graph, tree, seed, timeout=self.timeout)
            except (RequestError, InputError):
                raise
            except ValueError as e:  # the lifting refused the graph (rings on a too dense graph)
                raise InputError("graph", str(e)) from None
            return gid, ecx, cached
        if body.graph_id is None:
            raise RequestError("give graph_id (a graph sent before) or graph", 422, "invalid_request")
        return body.graph_id, self.engine.graph(body.graph_id, tree, seed), True

    def text(self, value: str | None, field: str) -> str:
        if isinstance(value, str) and len(value) > self.limits.max_question_chars:
            raise InputError(field, f"{len(value)} characters, the limit is {self.limits.max_question_chars}", 413)
        return check_text(value, field)

    def setting(self, body: RetrieveBody) -> RetrievalSetting:
        k = check_optional_int(body.k, "k", 0)
        pipe = self.engine.pipe
        if body.method is None and not body.params and k is None:
            return pipe.default_setting()
        try:
            spec = get_method(body.method or pipe.default_setting().method)
        except ValueError as e:
            raise InputError("method", str(e)) from None
        unknown = sorted(set(body.params) - set(spec.param_names))
        if unknown:
            raise InputError(f"params.{unknown[0]}", f"method {spec.name!r} has no such parameter; its "
                                                     f"parameters: {', '.join(spec.param_names) or '(none)'}")
        for p in spec.params:  # whole numbers are ints, as everywhere else
            if p.type is int and body.params.get(p.name) is not None:
                check_int(body.params[p.name], f"params.{p.name}")
        trained = pipe.meta.get("retrieval")
        base = trained if (trained or {}).get("method", "toporag") == spec.name else None
        params = dict(body.params)
        own_k = params.pop("k", None)  # a method's own "k" parameter, not the single k of the k rule
        try:
            setting = RetrievalSetting.from_dict(base, method=spec.name, k=k, **params)
            return setting.replace(k=own_k) if own_k is not None else setting
        except ValueError as e:
            raise InputError("params", str(e)) from None


# ----------------------------------------------------------------------------- routes
def install_routes(app: FastAPI, engine: CoreEngine, req: Requests) -> None:
    @app.get("/v1/health")
    def health():
        return {"status": "ok", "core": engine.name}

    @app.get("/v1/info")
    def info():
        return JSONResponse(engine.describe())

    @app.post("/v1/graphs")
    def add_graph(body: GraphBody):
        if body.graph is None:
            raise InputError("graph", "required")
        gid, graph = req.graph_of(body)
        job, cached = engine.start_upload(gid, graph, check_lifting(body.tree), check_seed(body.seed))
        if job is None:
            return engine.summary(gid, engine.graph(gid, body.tree, body.seed), cached)
        return JSONResponse({**job.to_json(), "cached": False}, status_code=202)

    @app.get("/v1/jobs/{job_id}")
    def job_status(job_id: str):
        job = engine.jobs.get(job_id)
        if job is None:
            raise RequestError(f"unknown job {job_id[:64]!r} (finished jobs are kept for a while only)", 404,
                               "unknown_job")
        return JSONResponse(job.to_json())

    @app.get("/v1/graphs/{gid}")
    def has_graph(gid: str, tree: str = "bfs", seed: int = 0):
        return engine.summary(gid, engine.graph(gid, tree, seed), True)

    @app.post("/v1/retrieve")
    def do_retrieve(body: RetrieveBody):
        setting = req.setting(body)
        question = req.text(body.question, "question") if body.question is not None or \
            setting.spec.dimension == "cells" else None
        gid, ecx, cached = req.resolve(body)
        try:
            out = engine.retrieve(ecx, question, setting)
        except (RequestError, InputError):
            raise
        except ValueError as e:
            raise InputError("params", str(e)) from None
        return JSONResponse({**out, "graph_id": gid, "cached": cached, **engine.core_tag()})

    @app.post("/v1/answer")
    def do_answer(body: AnswerBody):
        question = req.text(body.question, "question")
        query = req.text(body.query, "query") if body.query is not None else None
        max_new = check_optional_int(body.max_new_tokens, "max_new_tokens", 0, req.limits.max_new_tokens)
        setting = req.setting(body)
        gid, ecx, cached = req.resolve(body)
        try:
            out = engine.answer(ecx, question, setting, query=query, max_new_tokens=max_new, timeout=req.timeout)
        except (RequestError, InputError):
            raise
        except ValueError as e:
            raise InputError("params", str(e)) from None
        return JSONResponse({**out, "graph_id": gid, "cached": cached})


def create_app(engine: CoreEngine, limits: Limits | None = None, token: str | None = None,
               request_timeout_s: float = 120.0, body_timeout_s: float = 60.0) -> FastAPI:
    """The FastAPI application around ``engine`` (see the module docstring for the routes), behind
    :class:`~.guard.Guard` (token, body limit and body deadline before any route runs)."""
    limits = limits or Limits()
    app = FastAPI(title="TopoRAG core", version="1", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(Guard, token=token, max_body_bytes=limits.max_body_bytes, body_timeout_s=body_timeout_s)
    install_error_handlers(app, request_timeout_s)
    install_routes(app, engine, Requests(engine, limits, request_timeout_s))
    app.state.engine = engine
    app.state.limits = limits
    return app
