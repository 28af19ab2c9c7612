"""Arguments and helpers shared by the commands.

* :func:`add_graph_args`: the graph file, ``--format`` (choices from the format registry),
  ``--record``, lifting options, ``--json``.
* :func:`add_method_args` / :func:`setting_from_args`: ``--method`` (choices from the retrieval
  method registry), the single ``--k`` and one option per registered method parameter
  (``--k0``, ``--c2``, ``--edge-cost``, ``--target``, ... and those of any plug-in method),
  each validated at parse time with the option's name.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

CLI_LIFTINGS = ("bfs", "dfs", "random", "rings")  # lift.LIFTINGS, spelled out so the CLI starts without scipy


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr (``toporag retrieve: error: argument --k: ...``),
    exit status 2, with no usage block: the same one-line contract as every other error of the CLI."""

    def error(self, message: str) -> NoReturn:
        from ..graph import safe_text

        self.exit(2, f"{self.prog}: error: {safe_text(message, keep_newlines=False)} (see {self.prog} --help)\n")


def int_option(minimum: int | None = None, maximum: int | None = None):
    """An argparse ``type``: a whole number in ``minimum..maximum`` (argparse prefixes the option's name)."""
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value
    convert.__name__ = "int"
    return convert


def encoder_option(text: str) -> str:
    """``--encoder``: checked at parse time (a bad ``hashing-<dim>`` names the option, not a later crash)."""
    from ..embed import check_encoder_spec

    try:
        return check_encoder_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_graph_args(p: argparse.ArgumentParser) -> None:
    from ..io import FORMATS, format_names

    names = format_names()
    p.add_argument("path", help="graph file or folder (" + "; ".join(f"{n}: {FORMATS[n].label}" for n in names) + ")")
    p.add_argument("--format", default="auto", choices=["auto", *names], help="input format (default: auto-detect)")
    p.add_argument("--record", default=None, help="row / record / image to take from a multi-record file (index or id)")
    p.add_argument("--tree", default="bfs", choices=CLI_LIFTINGS,
                   help="2-cells: the fundamental cycles of a bfs / dfs / random spanning tree (the paper), or "
                        "rings: every cycle of 3 or 4 edges (beyond the paper)")
    p.add_argument("--seed", type=int_option(0, 2**32 - 1), default=0, help="seed of the random spanning tree (>= 0)")
    p.add_argument("--max-cycle-len", type=int_option(0), default=None,
                   help="no 2-cell on longer fundamental cycles (>= 0; below 3 means no 2-cells)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def load_from_args(args: argparse.Namespace):
    """The graph of ``PATH``; a ``--record`` on a file without records, or out of range, is refused
    (by the rule :func:`~toporag_core.io.validate.check_record` the service shares)."""
    from ..io import load_graph

    record: Any = args.record
    if isinstance(record, str) and record.isdigit():
        record = int(record)
    if record is not None:
        check_record_arg(args.path, args.format, record)
    return load_graph(args.path, format=args.format, record=record)


def check_record_arg(path: str, fmt: str, record: int | str) -> None:
    """``--record``: the file must hold records, and an index must be one of them."""
    from pathlib import Path

    from ..io import list_records
    from ..io.validate import check_record

    p = Path(path)
    labels = list_records(p.read_bytes(), p.name, fmt)[1] if p.is_file() else []
    check_record(record, labels)


def check_question_args(args: argparse.Namespace, *names: str) -> None:
    """``--question`` / ``--query`` when given: non-empty text (not only spaces), the service's rule."""
    from ..io.validate import check_text

    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            check_text(value, f"--{name}")


def _param_type(param):
    """An argparse ``type`` that converts and validates one method parameter (errors name the option)."""
    def convert(text: str):
        try:
            value = param.type(text) if param.type is not bool else text.lower() in ("1", "true", "yes")
            return param.validate(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).replace(f"parameter {param.name!r}", "value")) from None
    convert.__name__ = param.type.__name__
    return convert


def add_method_args(p: argparse.ArgumentParser, dimension: str | None = None, default: str | None = "toporag") -> None:
    """``--method`` and every registered parameter as an option (default ``None``: the method's own
    default, or a checkpoint's setting, applies)."""
    from ..retrieval import METHODS, method_names

    names = method_names(dimension)
    p.add_argument("--method", default=default, choices=names,
                   help="retrieval method: " + "; ".join(f"{n} = {METHODS[n].label}" for n in names))
    p.add_argument("--k", type=_k_type, default=None,
                   help="one k for every k-like parameter (k0, k1, k2, k) not given itself (default 3)")
    seen: dict[str, list[str]] = {}
    first = {}
    for n in names:
        for prm in METHODS[n].params:
            seen.setdefault(prm.name, []).append(n)
            first.setdefault(prm.name, prm)
    for name, prm in first.items():
        if name == "k":
            continue
        rng = "" if prm.min is None else f"; >= {prm.min:g}" if prm.max is None else f"; range {prm.min:g}..{prm.max:g}"
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=_param_type(prm), default=None,
                       help=f"{prm.help} (default {prm.default}{rng}; methods: {', '.join(seen[name])})")


def _k_type(text: str) -> int:
    """``--k``: a whole number within the range every k-like registered parameter accepts."""
    from ..retrieval import METHODS

    lo = min((p.min for m in METHODS.values() for p in m.params if p.name in ("k0", "k1", "k2", "k")
              and p.min is not None), default=0)
    hi = min((p.max for m in METHODS.values() for p in m.params if p.name in ("k0", "k1", "k2", "k")
              and p.max is not None), default=None)
    return int_option(int(lo), None if hi is None else int(hi))(text)


def setting_from_args(args: argparse.Namespace, base: dict | None = None):
    """The :class:`~toporag_core.retrieval.RetrievalSetting` of the parsed options: explicit options
    win, then ``base`` (a checkpoint's saved setting), then the method's defaults. An option the
    chosen method does not take is an error naming it."""
    from ..retrieval import METHODS, RetrievalSetting, get_method

    method = getattr(args, "method", None) or (base or {}).get("method") or "toporag"
    spec = get_method(method)
    given = {}
    for name in {p.name for m in METHODS.values() for p in m.params} - {"k"}:
        value = getattr(args, name, None)
        if value is None:
            continue
        if name not in spec.param_names:
            raise ValueError(f"--{name.replace('_', '-')} is not a parameter of method {method!r} "
                             f"(its parameters: {', '.join(spec.param_names) or 'none'})")
        given[name] = value
    try:
        return RetrievalSetting.from_dict(base, method=method, k=getattr(args, "k", None), **given)
    except ValueError as e:  # a value valid for some method but not this one: name the option given
        msg = str(e)
        for name in ("k0", "k1", "k2", "k", *given):
            if f"parameter {name!r}" in msg:
                opt = f"--{name.replace('_', '-')}" if name in given or getattr(args, "k", None) is None else "--k"
                raise ValueError(f"argument {opt}: " + msg.replace(f"parameter {name!r}", f"{name} of method "
                                                                   f"{method!r}")) from None
        raise


def emit(obj: dict, as_json: bool, human: str) -> None:
    """Print the result: strict JSON (no NaN/Infinity, control characters escaped) or the human text with
    control characters (ANSI escape sequences) made visible, never interpreted by the terminal."""
    from ..graph import safe_text

    if as_json:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n")
    else:
        print(safe_text(human))


def warn(lines) -> None:
    """Warnings of a result or a graph (``meta["warnings"]``), one line each on stderr."""
    from ..graph import safe_text

    for w in lines or ():
        sys.stderr.write(f"toporag: warning: {safe_text(str(w), keep_newlines=False)}\n")
