"""The ``toporag`` command line. Each sub-command lives in ``toporag_core.commands.<name>``
and exposes ``register(subparsers)``; a module that is missing is simply not offered."""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("lift", "retrieve", "ask", "train", "eval", "compare", "data", "hybrid", "kg", "serve", "docgraph")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every sub-command, or only ``only`` (``main`` passes the command being run, so
    ``toporag hybrid search`` does not import the modules of the other commands: torch among them)."""
    from .commands._common import OneLineParser

    parser = OneLineParser(prog="toporag", description="TopoRAG: cell-complex retrieval over textual graphs")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS if only not in COMMANDS else (only,):
        try:
            mod = importlib.import_module(f"toporag_core.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"toporag_core.commands.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # e.g. `toporag retrieve ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("toporag: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # one line, non-zero: the contract other tools rely on
        from .graph import GraphFormatError, safe_text

        kind = "bad input" if isinstance(e, (GraphFormatError, ValueError, FileNotFoundError)) else type(e).__name__
        print(f"toporag: {kind}: {safe_text(str(e), keep_newlines=False)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
