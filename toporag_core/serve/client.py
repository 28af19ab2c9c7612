"""The client of the core service (what the studio and the benchmark use): JSON over HTTP, with
timeouts, clear errors, and graphs sent once.

>>> core = CoreClient("http://127.0.0.1:8765", token=None)
>>> core.info()["device"]                                   # which core / device answers
>>> out = core.answer(graph, "what is left of the cup?", RetrievalSetting.make("toporag", k=3))
>>> sub = core.subcomplex(out, cx)                           # a Subcomplex on the caller's own complex

Graphs: every call first names the graph by its content hash (:func:`~.protocol.graph_id`); only
when the core answers ``404 unknown_graph`` (first use, or evicted from its cache) is the graph
itself sent, and the call repeated. :attr:`CoreClient.graphs_sent` counts those uploads.

An upload is an embedding job on the core (``202`` with a job id); :meth:`CoreClient.upload`
polls ``GET /v1/jobs/{id}`` until it is done, so callers see the same summary as before.

Failures never hang and always say what happened: :class:`CoreUnavailable` when the core cannot
be reached (refused, DNS, connect timeout ``connect_timeout``) or does not answer within
``timeout`` seconds; :class:`CoreError` with the core's own ``code`` and message for an error
reply (bad request, overloaded, wrong token).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from ..graph import TextualGraph
from ..retrieval import RetrievalSetting, Subcomplex
from .protocol import graph_id, graph_to_json, subcomplex_from_json


class CoreError(RuntimeError):
    """An error reply of the core (``status``, ``code``, message) or a failure to reach it."""

    def __init__(self, message: str, status: int | None = None, code: str = "error", url: str = "") -> None:
        super().__init__(message)
        self.status, self.code, self.url = status, code, url


class CoreUnavailable(CoreError):
    """The core is down, unreachable, or too slow (timed out)."""


class CoreClient:
    """A thread-safe client of one core (``url`` like ``http://gpu-box:8765``)."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0, connect_timeout: float = 3.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"core URL must start with http:// or https://, got {url!r}")
        if not timeout > 0 or not connect_timeout > 0:
            raise ValueError("timeout and connect_timeout must be > 0")
        self.url = url.rstrip("/")
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, trust_env=False,
                                 timeout=httpx.Timeout(timeout, connect=connect_timeout))
        self.graphs_sent = 0
        self.lock = threading.Lock()

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "CoreClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------
    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                params: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            r = self.http.request(method, path, json=body, params=params)
        except httpx.TimeoutException as e:
            kind = "connect to" if isinstance(e, httpx.ConnectTimeout) else "get an answer from"
            raise CoreUnavailable(f"could not {kind} the core at {self.url} in time "
                                  f"({type(e).__name__}; timeout {self.timeout:g} s)", code="timeout",
                                  url=self.url) from None
        except httpx.TransportError as e:
            raise CoreUnavailable(f"the core at {self.url} is not reachable ({type(e).__name__}: {e})",
                                  code="unreachable", url=self.url) from None
        try:
            data = r.json()
        except ValueError:
            raise CoreError(f"the core at {self.url} answered {r.status_code} with a non-JSON body",
                            r.status_code, "bad_reply", self.url) from None
        if r.status_code >= 400:
            err = data.get("error", {}) if isinstance(data, dict) else {}
            raise CoreError(f"the core at {self.url} answered {r.status_code}: {err.get('message', data)}",
                            r.status_code, err.get("code", "error"), self.url)
        return data

    # -- routes ---------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return self.request("GET", "/v1/health")

    def info(self) -> dict[str, Any]:
        return self.request("GET", "/v1/info")

    def upload(self, graph: TextualGraph, tree: str = "bfs", seed: int = 0, on_progress=None) -> dict[str, Any]:
        """Send a graph (lift + embed on the core) and wait for its embedding job (at most ``timeout``
        seconds; ``on_progress(job)`` after each poll); returns the lift summary with ``graph_id``."""
        out = self.request("POST", "/v1/graphs", {"graph": graph_to_json(graph), "tree": tree, "seed": seed})
        with self.lock:
            self.graphs_sent += 1
        return self.wait_job(out, on_progress) if "job_id" in out else out

    def job(self, job_id: str) -> dict[str, Any]:
        """An embedding job's status (``status``, ``progress``, ``summary`` or ``error``)."""
        return self.request("GET", f"/v1/jobs/{job_id}")

    def wait_job(self, job: dict[str, Any], on_progress=None) -> dict[str, Any]:
        """Poll an embedding job until it is done (its summary) or failed (:class:`CoreError`)."""
        deadline, pause = time.monotonic() + self.timeout, 0.02
        while job["status"] not in ("done", "failed"):
            if time.monotonic() > deadline:
                raise CoreUnavailable(f"the core at {self.url} did not embed the graph within {self.timeout:g} s "
                                      f"(job {job['job_id']})", code="timeout", url=self.url)
            time.sleep(pause)
            pause = min(pause * 1.5, 0.5)
            job = self.job(job["job_id"])
            if on_progress is not None:
                on_progress(job)
        if job["status"] == "failed":
            err = job.get("error") or {}
            raise CoreError(f"the core at {self.url} could not embed the graph: {err.get('message', 'failed')}",
                            422 if err.get("code") == "invalid_value" else 500, err.get("code", "error"), self.url)
        return {**job["summary"], "job_id": job["job_id"]}

    def has_graph(self, graph: TextualGraph | str, tree: str = "bfs", seed: int = 0) -> bool:
        gid = graph if isinstance(graph, str) else graph_id(graph)
        try:
            self.request("GET", f"/v1/graphs/{gid}", params={"tree": tree, "seed": seed})
            return True
        except CoreError as e:
            if e.code == "unknown_graph":
                return False
            raise

    def with_graph(self, path: str, graph: TextualGraph, body: dict[str, Any], tree: str, seed: int) -> dict[str, Any]:
        """POST ``body`` naming the graph by hash; on ``unknown_graph`` send the graph once and repeat."""
        body = {**body, "graph_id": graph_id(graph), "tree": tree, "seed": seed}
        try:
            return self.request("POST", path, body)
        except CoreError as e:
            if e.code != "unknown_graph":
                raise
        self.upload(graph, tree, seed)
        return self.request("POST", path, body)

    @staticmethod
    def setting_body(setting: RetrievalSetting | None) -> dict[str, Any]:
        return {} if setting is None else {"method": setting.method, "params": dict(setting.params)}

    def retrieve(self, graph: TextualGraph, question: str | None, setting: RetrievalSetting | None = None,
                 tree: str = "bfs", seed: int = 0) -> dict[str, Any]:
        """The core's retrieval (``{"dimension", "subcomplex" | "result", "context", "setting", "core", ...}``)."""
        return self.with_graph("/v1/retrieve", graph, {"question": question, **self.setting_body(setting)}, tree, seed)

    def answer(self, graph: TextualGraph, question: str, setting: RetrievalSetting | None = None,
               query: str | None = None, max_new_tokens: int | None = None, tree: str = "bfs",
               seed: int = 0) -> dict[str, Any]:
        """The core's answer (``{"answer", "subcomplex", "context", "prompt", "timings", "core", "device", ...}``)."""
        body = {"question": question, "query": query, "max_new_tokens": max_new_tokens, **self.setting_body(setting)}
        return self.with_graph("/v1/answer", graph, body, tree, seed)

    @staticmethod
    def subcomplex(reply: dict[str, Any], cx) -> Subcomplex:
        """The :class:`Subcomplex` of a retrieve/answer reply, rebuilt on the caller's lifted complex ``cx``."""
        return subcomplex_from_json(reply["subcomplex"], cx)
