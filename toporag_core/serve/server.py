"""Starting the service: :class:`ServeConfig`, :func:`load_engine`, :func:`serve` (blocking, what
``toporag serve`` runs) and :func:`start_background` (a server on a thread, for tests, the
benchmark and notebooks; ``port=0`` picks a free port).

The pipeline is loaded once: ``device="auto"`` puts it on CUDA when there is one, and
``dtype="auto"`` gives bf16 there (fp32 on CPU), as :func:`~toporag_core.model.llm.load_llm` does.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .batching import BatchConfig
from .protocol import Limits

if TYPE_CHECKING:  # the engine imports the pipeline (torch); the CLI reads ServeConfig's defaults without it
    from .engine import CoreEngine


@dataclass
class ServeConfig:
    """Where to listen and what to allow (validated; errors name the field).

    Deadlines: a connection must send its request line and headers within ``header_timeout_s`` (of
    opening, or of its previous response) and its body within ``body_timeout_s`` (408), else it is
    closed; an idle keep-alive connection is closed after ``keep_alive_s``. ``max_header_bytes``
    bounds the headers (h11), ``max_connections`` the open connections (503 beyond).
    Lingering close: a response that closes a connection before its request body was read (401 before
    the body, 413, 408) keeps reading and discarding that body for at most ``linger_s`` seconds and
    ``linger_max_bytes`` bytes (the declared length, capped), so a client that sends its whole body
    before reading sees the response instead of a reset (:mod:`.guard`).
    Uploads: ``upload_chunk`` texts per encoder call (a question waits at most one chunk),
    ``max_pending_uploads`` embedding jobs queued or running (503 beyond).
    ``torch_threads``: torch's intra-op threads on a CPU core (``None``: half the cores, at least one;
    on CUDA left as it is). torch's default, every core, made batched answers no faster than single
    ones on a busy 2-core machine: the OpenMP workers of one forward pass fought the request threads
    (and other processes) for the cores, a batch of 8 took 10.1 s instead of 0.28 s on one thread.
    ``kv_cache_mb``: megabytes of frozen-part key/value caches kept for reuse (a
    :class:`~toporag_core.model.FrozenKVStore`, checkpoints with a cacheable layout only): a context
    already read is not read again, and a batch reads each distinct context once; 0: off (every row's
    frozen part is computed in its batch)."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    limits: Limits = field(default_factory=Limits)
    batch: BatchConfig = field(default_factory=BatchConfig)
    max_graphs: int = 64
    max_cached_nodes: int = 500_000
    request_timeout_s: float = 120.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    keep_alive_s: float = 5.0
    linger_s: float = 2.0
    linger_max_bytes: int = 32 * 1024 * 1024
    max_header_bytes: int = 16_384
    max_connections: int = 1024
    upload_chunk: int = 256
    max_pending_uploads: int = 16
    torch_threads: int | None = None
    workers: int | None = None
    kv_cache_mb: int = 256
    log_level: str = "warning"

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"ServeConfig.port must be in 0..65535, got {self.port!r}")
        if self.token is not None and (not isinstance(self.token, str) or len(self.token) < 8):
            raise ValueError("ServeConfig.token must be a string of at least 8 characters")
        if self.max_graphs < 1 or self.max_cached_nodes < 1:
            raise ValueError("ServeConfig.max_graphs and max_cached_nodes must be >= 1")
        for name in ("request_timeout_s", "header_timeout_s", "body_timeout_s", "keep_alive_s", "linger_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"ServeConfig.{name} must be a number of seconds > 0, got {value!r}")
        for name in ("torch_threads", "workers"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"ServeConfig.{name} must be a whole number >= 1, got {value!r}")
        if isinstance(self.kv_cache_mb, bool) or not isinstance(self.kv_cache_mb, int) or self.kv_cache_mb < 0:
            raise ValueError(f"ServeConfig.kv_cache_mb must be a whole number >= 0, got {self.kv_cache_mb!r}")
        for name in ("max_header_bytes", "max_connections", "upload_chunk", "max_pending_uploads",
                     "linger_max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ServeConfig.{name} must be a whole number >= 1, got {value!r}")


def load_engine(cfg: ServeConfig, checkpoint: str | None = None, llm: str | None = None, device: str = "auto",
                dtype: str | None = "auto", encoder=None, pipe=None) -> CoreEngine:
    """Load the pipeline once (or take ``pipe``) and wrap it in a :class:`CoreEngine`."""
    from .engine import CoreEngine

    if pipe is None:
        from ..answering.pipeline import TopoRAGPipeline

        pipe = TopoRAGPipeline.load(checkpoint, llm=llm, device=device, encoder=encoder, dtype=dtype)
    device = pipe.describe()["device"]
    threads = set_torch_threads(cfg, device)
    return CoreEngine(pipe, cfg.batch, max_graphs=cfg.max_graphs, max_cached_nodes=cfg.max_cached_nodes,
                      upload_chunk=cfg.upload_chunk, max_pending_uploads=cfg.max_pending_uploads,
                      workers=batch_workers(cfg, threads), kv_cache_mb=cfg.kv_cache_mb)


def set_torch_threads(cfg: ServeConfig, device: str) -> int | None:
    """Apply :attr:`ServeConfig.torch_threads` for a CPU core (see there); returns the count set."""
    if not str(device).startswith("cpu"):
        return None
    import torch

    n = cfg.torch_threads or max(1, (os.cpu_count() or 1) // 2)
    torch.set_num_threads(n)
    return n


def batch_workers(cfg: ServeConfig, torch_threads: int | None) -> int:
    """:attr:`ServeConfig.workers`, or its default: ``cores // torch_threads`` on a CPU core
    (``torch_threads`` as :func:`set_torch_threads` set it), one on a GPU (``None``)."""
    if cfg.workers is not None:
        return cfg.workers
    if torch_threads is None:
        return 1
    return max(1, (os.cpu_count() or 1) // torch_threads)


def bind(host: str, port: int) -> socket.socket:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(fam, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # connections made before uvicorn runs wait in the backlog instead of being refused
    sock.set_inheritable(True)
    return sock


def make_server(engine: CoreEngine, cfg: ServeConfig):
    import uvicorn

    from .app import create_app
    from .guard import timed_protocol

    app = create_app(engine, cfg.limits, cfg.token, cfg.request_timeout_s, cfg.body_timeout_s)
    http = timed_protocol(cfg.header_timeout_s, cfg.linger_s, cfg.linger_max_bytes)
    return uvicorn.Server(uvicorn.Config(app, log_level=cfg.log_level, http=http,
                                         timeout_keep_alive=cfg.keep_alive_s, limit_concurrency=cfg.max_connections,
                                         h11_max_incomplete_event_size=cfg.max_header_bytes,
                                         access_log=cfg.log_level in ("info", "debug")))


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"


def serve(engine: CoreEngine, cfg: ServeConfig, on_ready=None) -> None:
    """Serve until interrupted (Ctrl+C); ``on_ready(url)`` is called once the socket listens."""
    sock = bind(cfg.host, cfg.port)
    if on_ready is not None:
        on_ready(url_of(sock))
    try:
        make_server(engine, cfg).run(sockets=[sock])
    finally:
        engine.close()


class BackgroundServer:
    """A running server on a thread: ``.url``, ``.stop()``; a context manager."""

    def __init__(self, engine: CoreEngine, cfg: ServeConfig) -> None:
        self.engine, self.cfg = engine, cfg
        self.sock = bind(cfg.host, cfg.port)
        self.url = url_of(self.sock)
        self.server = make_server(engine, cfg)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="toporag-serve", daemon=True)
        self.thread.start()
        t0 = time.time()
        while not self.server.started:
            if not self.thread.is_alive() or time.time() - t0 > 30:
                raise RuntimeError("the service did not start")
            time.sleep(0.01)

    def stop(self, close_engine: bool = True) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        try:
            self.sock.close()
        except OSError:
            pass
        if close_engine:
            self.engine.close()

    def __enter__(self) -> "BackgroundServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_background(engine: CoreEngine, cfg: ServeConfig | None = None) -> BackgroundServer:
    """Serve ``engine`` on a thread (default: 127.0.0.1, a free port)."""
    return BackgroundServer(engine, cfg or ServeConfig(port=0))


def token_from_env() -> str | None:
    """``$TOPORAG_CORE_TOKEN`` (the shared secret of the core and the app), or ``None``."""
    return os.environ.get("TOPORAG_CORE_TOKEN") or None
