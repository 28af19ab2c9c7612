"""``toporag serve``: the pipeline loaded once behind an HTTP JSON API (see :mod:`toporag_core.serve`).

Safe by default: listens on 127.0.0.1; the bearer token comes from ``$TOPORAG_CORE_TOKEN`` (an
environment variable, not an option, so it does not show in ``ps``); listening on another address
without a token is refused unless ``--insecure`` says so.
"""
from __future__ import annotations

import argparse
import ipaddress
import sys


def register(sub) -> None:
    from ..serve.protocol import Limits

    d = Limits()
    p = sub.add_parser("serve", help="serve the core (retrieval + answering) as an HTTP JSON API",
                       description="Load the pipeline once (CUDA + bf16 when present) and serve health/info, "
                                   "lift, retrieve (every registered method) and answer over HTTP JSON. The app "
                                   "uses it when TOPORAG_CORE_URL is set. Token: $TOPORAG_CORE_TOKEN.")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint folder (default: assets/checkpoints/expla_graphs, else the frozen LLM)")
    p.add_argument("--llm", default=None, help="override the LLM: local HF folder or hub id in the local cache")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:1 ...")
    p.add_argument("--dtype", default="auto",
                   help="auto (bf16 on CUDA; on a CPU the checkpoint's training precision, bf16 only where "
                        "the CPU has it natively), float32, bfloat16, float16")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (0: a free one, printed)")
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback --host without a token")
    p.add_argument("--no-batching", dest="batching", action="store_false",
                   help="answer one request per forward pass (no dynamic batching)")
    p.add_argument("--max-batch", type=int, default=8, help="most answer requests per forward pass")
    p.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long a request waits for others to batch")
    p.add_argument("--max-queue", type=int, default=256, help="most waiting answer requests (503 beyond)")
    p.add_argument("--max-graphs", type=int, default=64, help="embedded graphs kept (LRU)")
    p.add_argument("--max-cached-nodes", type=int, default=500_000, help="nodes of all kept graphs together")
    p.add_argument("--max-nodes", type=int, default=d.max_nodes, help="nodes of one graph")
    p.add_argument("--max-edges", type=int, default=d.max_edges, help="edges of one graph")
    p.add_argument("--max-text-chars", type=int, default=d.max_text_chars, help="characters of one node/edge text")
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes, help="bytes of one request body")
    p.add_argument("--request-timeout", type=float, default=120.0, help="seconds an answer may wait (503 beyond)")
    from ..serve.server import ServeConfig

    c = ServeConfig()
    p.add_argument("--header-timeout", type=float, default=c.header_timeout_s,
                   help="seconds a connection has to send its request line and headers (closed beyond)")
    p.add_argument("--body-timeout", type=float, default=c.body_timeout_s,
                   help="seconds a request has to send its whole body (408 beyond)")
    p.add_argument("--max-connections", type=int, default=c.max_connections, help="open connections (503 beyond)")
    p.add_argument("--torch-threads", type=int, default=None,
                   help="torch threads on a CPU core (default: half the cores, at least 1)")
    p.add_argument("--workers", type=int, default=None,
                   help="answer batches decoded at once, each on its own model replica over shared weights "
                        "(default: on a CPU the cores divided by --torch-threads, on CUDA 1)")
    p.add_argument("--kv-cache-mb", type=int, default=c.kv_cache_mb,
                   help="megabytes of context key/value caches kept for reuse across answers "
                        "(checkpoints with a cacheable layout; 0: off)")
    p.add_argument("--upload-chunk", type=int, default=c.upload_chunk,
                   help="texts per encoder call when embedding an upload (a question waits at most one chunk)")
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))
    p.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    from ..serve import BatchConfig, Limits
    from ..serve.server import ServeConfig, load_engine, serve, token_from_env

    token = token_from_env()
    if not is_loopback(args.host) and token is None and not args.insecure:
        raise ValueError(f"--host {args.host} exposes the core beyond this machine: set TOPORAG_CORE_TOKEN "
                         "(or pass --insecure on a trusted network)")
    limits = Limits(max_body_bytes=args.max_body_bytes, max_nodes=args.max_nodes, max_edges=args.max_edges,
                    max_text_chars=args.max_text_chars)
    cfg = ServeConfig(host=args.host, port=args.port, token=token, limits=limits,
                      batch=BatchConfig(enabled=args.batching, max_batch=args.max_batch,
                                        max_wait_ms=args.batch_wait_ms, max_queue=args.max_queue),
                      max_graphs=args.max_graphs, max_cached_nodes=args.max_cached_nodes,
                      request_timeout_s=args.request_timeout, header_timeout_s=args.header_timeout,
                      body_timeout_s=args.body_timeout, max_connections=args.max_connections,
                      upload_chunk=args.upload_chunk, torch_threads=args.torch_threads,
                      workers=args.workers, kv_cache_mb=args.kv_cache_mb, log_level=args.log_level)
    engine = load_engine(cfg, checkpoint=args.checkpoint, llm=args.llm, device=args.device,
                         dtype=args.dtype)
    d = engine.pipe.describe()
    workers = engine.batcher.stats["workers"]

    def ready(url: str) -> None:
        print(f"toporag serve: {d['checkpoint'] or 'frozen LLM'} on {d['device']} ({d['dtype']}), "
              f"batching {'on' if args.batching else 'off'} ({workers} workers), "
              f"token {'required' if token else 'off'}", flush=True)
        print(f"toporag serve: listening on {url}", flush=True)

    try:
        serve(engine, cfg, on_ready=ready)
    except KeyboardInterrupt:
        pass
    print("toporag serve: stopped", file=sys.stderr)
    return 0
