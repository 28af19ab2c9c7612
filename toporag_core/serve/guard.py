"""The first thing that touches a request: token, body size and read deadlines, before any work.

:class:`Guard` is a pure ASGI middleware (no framework object, no body parsing) in front of the
routes:

1. **token first**: with a token set, every path but the open ones (``/v1/health``) needs
   ``Authorization: Bearer <token>`` (compared in constant time) and is answered 401 *before one
   byte of the body is read*, whatever the body is (16 MB of junk or malformed JSON alike);
2. **body size while streaming**: a ``Content-Length`` over the limit is 413 at once; a chunked
   body is counted as it arrives and answered 413 as soon as it passes the limit, without
   buffering the rest;
3. **body deadline**: the whole body must arrive within ``body_timeout_s`` (408 otherwise), so a
   client that sends half a body and stops holds nothing for long.

Rejections carry ``Connection: close`` so the server drops the connection instead of reading
what the client still sends. :class:`TimedH11Protocol` adds the missing deadline *before* a
request exists: a connection must complete its request line and headers within
``header_timeout_s`` of opening (or of its previous response), else it is closed (uvicorn's
``timeout_keep_alive`` only covers idle connections after a response).

**Lingering close.** Closing a socket whose receive buffer still holds unread request body makes
the kernel answer with a reset, and a client that writes its whole body before it reads (urllib,
often httpx) then sees "connection reset" instead of the 401 / 413 / 408 that was already sent. So
when a response closes a connection whose request body is not fully read, the connection
(:class:`LingeringTransport`) first half-closes (FIN after the response), then keeps reading and
discarding what the client still sends - at most the declared ``Content-Length`` capped at
``linger_max_bytes`` (the cap for a chunked body), for at most ``linger_s`` seconds - and closes when
the client stops sending (EOF), when that many bytes were discarded, or when the time is up. The
bytes are counted and dropped as they arrive; nothing is buffered or parsed.
"""
from __future__ import annotations

import asyncio
import hmac
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

LINGER_S = 2.0
LINGER_MAX_BYTES = 32 * 1024 * 1024


def auth_problem(headers: list[tuple[bytes, bytes]], token: str) -> str | None:
    """Why the request's ``Authorization`` header does not carry ``token`` (or ``None``: it does)."""
    got = b""
    for name, value in headers:
        if name == b"authorization":
            got = value
            break
    scheme, _, value = got.partition(b" ")
    if scheme.lower() != b"bearer" or not value.strip():
        return "missing bearer token (Authorization: Bearer <token>)"
    if not hmac.compare_digest(value.strip(), token.encode()):
        return "wrong bearer token"
    return None


async def reject(send, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
    """A JSON error reply (``{"error": {"code", "message"}}``) that also closes the connection."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *extra]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class Guard:
    """ASGI middleware: token, then body size and body deadline (see the module docstring)."""

    def __init__(self, app, token: str | None, max_body_bytes: int, body_timeout_s: float,
                 open_paths: tuple[str, ...] = ("/v1/health",)) -> None:
        self.app, self.token, self.max_bytes = app, token, max_body_bytes
        self.body_timeout_s, self.open_paths = body_timeout_s, open_paths

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = scope.get("headers") or []
        if self.token is not None and scope.get("path") not in self.open_paths:
            problem = auth_problem(headers, self.token)
            if problem is not None:
                return await reject(send, 401, "unauthorized", problem, {"WWW-Authenticate": "Bearer"})
        length = dict(headers).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await self.too_large(send)
        body = await self.read_body(receive, send)
        if body is None:
            return None
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    async def too_large(self, send) -> None:
        await reject(send, 413, "too_large", f"request body over the limit of {self.max_bytes} bytes")

    async def read_body(self, receive, send) -> bytes | None:
        """The whole body, or ``None`` after answering 413 / 408 (or on a disconnect)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout_s
        chunks, size, more = [], 0, True
        while more:
            try:
                msg = await asyncio.wait_for(receive(), timeout=max(deadline - loop.time(), 0.0))
            except asyncio.TimeoutError:
                await reject(send, 408, "timeout", f"the request body did not arrive within "
                                                   f"{self.body_timeout_s:g} s")
                return None
            if msg["type"] == "http.disconnect":
                return None
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self.too_large(send)
                return None
            chunks.append(chunk)
            more = msg.get("more_body", False)
        return b"".join(chunks)


class LingeringTransport:
    """The connection's transport as the HTTP protocol sees it: ``close()`` asks the protocol to
    close, which lingers while the request body is unread (module docstring); everything else is
    the real transport's."""

    def __init__(self, transport, protocol: "TimedH11Protocol") -> None:
        self.raw, self.protocol = transport, protocol

    def close(self) -> None:
        self.protocol.close_connection()

    def is_closing(self) -> bool:
        return self.protocol.lingering or self.raw.is_closing()

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for the request line and headers and a lingering
    close (see the module docstring); :func:`timed_protocol` makes one with its settings."""

    header_timeout_s: float = 10.0
    linger_s: float = LINGER_S
    linger_max_bytes: int = LINGER_MAX_BYTES

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.raw_transport = transport
        self.lingering, self.linger_left = False, 0
        self.linger_timer: asyncio.TimerHandle | None = None
        super().connection_made(LingeringTransport(transport, self))
        self.header_timer: asyncio.TimerHandle | None = None
        self.arm_header_timer()

    def body_unread(self) -> bool:
        """Whether a request's body is still on its way (its headers are in, its end is not)."""
        return self.cycle is not None and self.conn.their_state is h11.SEND_BODY

    def linger_budget(self) -> int:
        """Bytes to discard at most: the declared ``Content-Length`` capped at ``linger_max_bytes``."""
        length = dict(self.cycle.scope.get("headers") or []).get(b"content-length", b"") if self.cycle else b""
        declared = int(length) if length.isdigit() else self.linger_max_bytes
        return min(declared, self.linger_max_bytes)

    def close_connection(self) -> None:
        """Close now, or - with the request body unread - half-close and linger (module docstring)."""
        raw = self.raw_transport
        if self.lingering or raw.is_closing():
            return
        if not self.body_unread() or self.linger_s <= 0:
            raw.close()
            return
        self.lingering, self.linger_left = True, self.linger_budget()
        self.cancel_header_timer()
        if raw.can_write_eof():
            raw.write_eof()  # FIN once the response is flushed: the client reads its reply, then stops
        raw.resume_reading()
        self.linger_timer = self.loop.call_later(self.linger_s, self.end_linger)

    def end_linger(self) -> None:
        if self.linger_timer is not None:
            self.linger_timer.cancel()
            self.linger_timer = None
        if not self.raw_transport.is_closing():
            self.raw_transport.close()

    def eof_received(self) -> None:
        if self.lingering:
            self.end_linger()
        return super().eof_received()

    def arm_header_timer(self) -> None:
        self.cancel_header_timer()
        self.waiting_after = self.cycle  # the headers are in once a new cycle exists
        self.header_timer = self.loop.call_later(self.header_timeout_s, self.headers_too_slow)

    def cancel_header_timer(self) -> None:
        timer = getattr(self, "header_timer", None)
        if timer is not None:
            timer.cancel()
            self.header_timer = None

    def data_received(self, data: bytes) -> None:
        if self.lingering:  # the unread body of a request already answered: count and drop it
            self.linger_left -= len(data)
            if self.linger_left <= 0:
                self.end_linger()
            return
        super().data_received(data)
        if self.header_timer is not None and self.cycle is not self.waiting_after:
            self.cancel_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        idle = self.cycle is None or self.cycle.response_complete  # no pipelined request under way
        if idle and not self.transport.is_closing():
            self.arm_header_timer()

    def connection_lost(self, exc) -> None:
        self.cancel_header_timer()
        if self.linger_timer is not None:
            self.linger_timer.cancel()
            self.linger_timer = None
        super().connection_lost(exc)

    def headers_too_slow(self) -> None:
        self.header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def timed_protocol(header_timeout_s: float, linger_s: float = LINGER_S,
                   linger_max_bytes: int = LINGER_MAX_BYTES) -> type[TimedH11Protocol]:
    """A :class:`TimedH11Protocol` class with these settings (uvicorn's ``http=`` takes a class)."""
    return type("TimedH11Protocol", (TimedH11Protocol,), {"header_timeout_s": float(header_timeout_s),
                                                          "linger_s": float(linger_s),
                                                          "linger_max_bytes": int(linger_max_bytes)})
