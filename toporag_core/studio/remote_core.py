"""In-process or remote core: which one answers the app's questions, and showing it.

With ``TOPORAG_CORE_URL`` set (e.g. ``http://gpu-box:8765``, a ``toporag serve``), the pages send
retrieval and answering to that core; otherwise they run the pipeline in this process as before.
``TOPORAG_CORE_TOKEN`` is the bearer token, ``TOPORAG_CORE_TIMEOUT`` the seconds one request may
take (default 60; connecting gives up after 3 s), so a core that is down or slow is an error
message on the page, never a hang.

The results are the in-process ones: the remote reply names the retrieved cells by id, and they
are rebuilt here (:meth:`~toporag_core.serve.client.CoreClient.subcomplex`) on the complex this
process lifted itself (:func:`.resources.get_complex`), so every view, table and colour of the
pages works unchanged.

What a page calls (see :func:`ask_via_core`, :func:`retrieve_via_core`, :func:`show_core`)::

    remote = core.remote_client()                      # None: in-process
    status = core.show_core(remote, pipe)              # caption "answered by ..." or an error
    answers = core.ask_via_core(remote, graph, cx, question, settings, tree=tree, seed=seed, ...)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import streamlit as st

from ..retrieval import RetrievalSetting, Subcomplex
from ..serve.client import CoreClient, CoreError, CoreUnavailable  # noqa: F401  (re-exported for the pages)
from ..topo import TopoRetrieval
from ..answering.answer import Answer

URL_ENV, TOKEN_ENV, TIMEOUT_ENV = "TOPORAG_CORE_URL", "TOPORAG_CORE_TOKEN", "TOPORAG_CORE_TIMEOUT"
IN_PROCESS = "in-process"


def core_url() -> str | None:
    """The remote core's URL (``$TOPORAG_CORE_URL``), or ``None`` for the in-process core."""
    url = os.environ.get(URL_ENV, "").strip()
    return url or None


def core_timeout() -> float:
    try:
        t = float(os.environ.get(TIMEOUT_ENV, "60"))
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {os.environ.get(TIMEOUT_ENV)!r}") from None
    if not t > 0:
        raise ValueError(f"{TIMEOUT_ENV} must be > 0, got {t}")
    return t


@st.cache_resource(max_entries=4, show_spinner=False)
def get_client(url: str, token: str | None, timeout: float) -> CoreClient:
    """One client (connection pool) per core per server process, shared by every visitor."""
    return CoreClient(url, token=token, timeout=timeout)


def remote_client() -> CoreClient | None:
    """The client of ``$TOPORAG_CORE_URL`` (``None``: in-process). ``ValueError`` for a bad URL."""
    url = core_url()
    if url is None:
        return None
    return get_client(url, os.environ.get(TOKEN_ENV) or None, core_timeout())


@dataclass
class CoreStatus:
    """Which core answers: ``mode`` (``in-process`` or ``remote``), where, on which device; or the error."""

    mode: str
    where: str
    device: str = "?"
    dtype: str = "?"
    checkpoint: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def caption(self) -> str:
        if not self.ok:
            return f"Core at {self.where}: {self.error}"
        who = "in-process core" if self.mode == IN_PROCESS else f"remote core {self.where}"
        return f"Answered by the {who} on {self.device} ({self.dtype})"


def core_status(client: CoreClient | None, pipe=None) -> CoreStatus:
    """The status of the remote core (asks its ``/v1/info``) or of the in-process ``pipe``."""
    if client is None:
        d = pipe.describe() if pipe is not None else {}
        return CoreStatus(IN_PROCESS, "this process", str(d.get("device", "?")), str(d.get("dtype", "?")),
                          d.get("checkpoint"))
    try:
        info = client.info()
    except CoreError as e:
        return CoreStatus("remote", client.url, error=str(e))
    return CoreStatus("remote", f"{client.url} ({info.get('core')})", str(info.get("device")),
                      str(info.get("dtype")), info.get("checkpoint"))


def show_core(client: CoreClient | None, pipe=None) -> CoreStatus:
    """Render which core (and device) answers, or an error naming the core; returns the status."""
    status = core_status(client, pipe)
    if status.ok:
        st.caption(status.caption())
    else:
        st.error(status.caption())
    return status


@dataclass
class RemoteModel:
    """What the Ask page needs of a remote core's model (from its ``/v1/info``)."""

    status: CoreStatus
    default_setting: RetrievalSetting
    max_new_tokens: int
    dataset: str | None

    def summary(self) -> dict[str, str]:
        return {"core": self.status.where, "checkpoint": str(self.status.checkpoint or "none (frozen LLM)"),
                "device": f"{self.status.device} ({self.status.dtype})", "trained on": str(self.dataset or "-")}


def remote_model(client: CoreClient) -> RemoteModel:
    """The remote core's status, trained retrieval setting and defaults; :class:`CoreError` when it is down."""
    info = client.info()
    status = CoreStatus("remote", f"{client.url} ({info.get('core')})", str(info.get("device")),
                        str(info.get("dtype")), info.get("checkpoint"))
    return RemoteModel(status, RetrievalSetting.from_dict(info.get("default_setting")),
                       int(info.get("max_new_tokens") or 32), info.get("dataset"))


def answered_by(reply: dict[str, Any], client: CoreClient) -> str:
    return f"remote core {client.url} ({reply.get('core')}) on {reply.get('device')} ({reply.get('dtype')})"


def ask_via_core(client: CoreClient, graph, cx, question: str, settings: Sequence[RetrievalSetting], tree: str = "bfs",
                 seed: int = 0, max_new_tokens: int | None = None, query: str | None = None) -> dict[str, Answer]:
    """:func:`.ask.ask` on the remote core: ``{method: Answer}`` with subcomplexes on ``cx`` (this
    process's lifted complex of ``graph``). Raises :class:`CoreError` (down, slow, bad request)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("type a question first")
    out: dict[str, Answer] = {}
    for s in settings:
        if s.method in out:
            continue
        r = client.answer(graph, question, s, query=query, max_new_tokens=max_new_tokens, tree=tree, seed=seed)
        timings = {**r["timings"], "answered_by": answered_by(r, client)}
        out[s.method] = Answer.from_json(r, client.subcomplex(r, cx), timings)  # the core's own threshold decides low
    return out


def retrieve_via_core(client: CoreClient, graph, cx, question: str | None, setting: RetrievalSetting,
                      tree: str = "bfs", seed: int = 0) -> Subcomplex | TopoRetrieval:
    """One retrieval on the remote core, as the in-process ``retrieve`` returns it (a
    :class:`Subcomplex` on ``cx`` for a cell method, a :class:`TopoRetrieval` for a node method)."""
    r = client.retrieve(graph, question, setting, tree=tree, seed=seed)
    if r["dimension"] == "cells":
        return client.subcomplex(r, cx)
    d = r["result"]
    return TopoRetrieval(target=d["target"], target_text=d["target_text"], nodes=list(d["nodes"]),
                         texts=list(d["texts"]), scores=list(d["scores"]), method=d["method"],
                         question=d.get("question"), target_score=d.get("target_score"),
                         timings=dict(d.get("timings", {})))


def answer_panel(graph, cx, question: str, settings: Sequence[RetrievalSetting], tree: str = "bfs", seed: int = 0,
                 max_new_tokens: int | None = None, pipe=None, ecx=None) -> dict[str, Answer] | None:
    """A self-contained panel (what a page can drop in, and what the AppTest drives): shows which
    core answers, asks it, and shows each method's answer in ``st.code`` inside a container keyed
    ``core_answer_<method>``; a failing core shows ``st.error`` and returns ``None`` (the page
    goes on). In-process (no ``$TOPORAG_CORE_URL``) it uses ``pipe`` and ``ecx``."""
    from .ask import ask

    try:
        client = remote_client()
    except ValueError as e:
        st.error(f"{URL_ENV}: {e}")
        return None
    status = show_core(client, pipe)
    if not status.ok:
        return None
    try:
        if client is None:
            answers = ask(pipe, ecx, question, settings, max_new_tokens=max_new_tokens)
        else:
            answers = ask_via_core(client, graph, cx, question, settings, tree=tree, seed=seed,
                                   max_new_tokens=max_new_tokens)
    except CoreError as e:
        st.error(str(e))
        return None
    except ValueError as e:
        st.warning(str(e))
        return None
    for m, a in answers.items():
        with st.container(key=f"core_answer_{m}"):
            st.code(a.answer if a.answer else "(empty answer)", language=None)
    return answers
