"""Arguments and helpers shared by the commands.

* :func:`add_graph_args`: the graph file, ``--format`` (choices from the format registry),
  ``--record``, lifting options, ``--json``.
* :func:`add_method_args` / :func:`setting_from_args`: ``--method`` (choices from the retrieval
  method registry), the single ``--k`` and one option per registered method parameter
  (``--k0``, ``--c2``, ``--edge-cost``, ``--target``, ... and those of any plug-in method),
  each validated at parse time with the option's name.
* :func:`add_config_args` / :func:`config_values`: options made from a config dataclass's fields
  (type, default and help in one place, the field's ``metadata``: ``help``, and optionally ``flag``,
  ``metavar``, ``choices`` (a sequence or a function returning one) and ``advanced`` (left out of the main
  ``--help``, listed by ``--help-all``)).
* :class:`RecipeAction`: ``--recipe NAME``: a TOML file of option values (``recipes/NAME.toml`` or a
  path); options given after it override it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Callable, NoReturn

RECIPES = Path(__file__).resolve().parents[2] / "recipes"  # the shipped recipes: recipes/<name>.toml


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


def encoder_help(default: str = "the packaged MiniLM or $TOPORAG_ENCODER") -> str:
    """``--encoder``'s help: the registered text encoders (``embed.TEXT_ENCODERS``), or a model folder."""
    from ..embed.registry import text_encoder_names

    return f"text encoder: {', '.join(text_encoder_names())}, or a SentenceTransformer folder (default: {default})"


def tree_help() -> str:
    """``--tree``'s help: every registered lifting with its label."""
    from ..cells.lift import LIFTING_SPECS

    return "the 2-cells: " + "; ".join(f"{n} = {s.label}" for n, s in LIFTING_SPECS.items())


def add_graph_args(p: argparse.ArgumentParser) -> None:
    from ..io import FORMATS, format_names
    from ..cells.lift import lifting_names

    names = format_names()
    p.add_argument("path", help="graph file or folder (" + "; ".join(f"{n}: {FORMATS[n].label}" for n in names) + ")")
    p.add_argument("--format", default="auto", choices=["auto", *names], help="input format (default: auto-detect)")
    p.add_argument("--record", default=None, help="row / record / image to take from a multi-record file (index or id)")
    p.add_argument("--tree", default="bfs", choices=lifting_names(), help=tree_help())
    p.add_argument("--seed", type=int_option(0, 2**32 - 1), default=0, help="seed of the random spanning tree (>= 0)")
    p.add_argument("--max-cycle-len", type=int_option(0), default=None,
                   help="no 2-cell on longer fundamental cycles (>= 0; below 3 means no 2-cells)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def load_from_args(args: argparse.Namespace):
    """The graph of ``PATH``; a ``--record`` on a file without records, or out of range, is refused
    (by the rule :func:`~toporag_core.cells.checks.check_record` the service shares)."""
    from ..io import load_graph

    refuse_store(args.path, getattr(args, "question", None))
    record: Any = args.record
    if isinstance(record, str) and record.isdigit():
        record = int(record)
    if record is not None:
        check_record_arg(args.path, args.format, record)
    return load_graph(args.path, format=args.format, record=record)


def refuse_store(path: str, question: str | None = None) -> None:
    """A DuckDB knowledge-graph store is not a graph file: say which command reads it."""
    from pathlib import Path

    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return
    if head[8:12] == b"DUCK" or p.suffix.lower() == ".duckdb":
        q = f' -q "{question}"' if question else ' -q "..."'
        raise ValueError(f"{path}: a knowledge-graph store, not a graph file: answer from it with "
                         f"`toporag kg ask {path}{q}` (or cut a subgraph with `toporag kg subgraph`)")


def check_record_arg(path: str, fmt: str, record: int | str) -> None:
    """``--record``: the file must hold records, and an index must be one of them."""
    from pathlib import Path

    from ..io import list_records
    from ..cells.checks import check_record

    p = Path(path)
    labels = list_records(p.read_bytes(), p.name, fmt)[1] if p.is_file() else []
    check_record(record, labels)


def check_question_args(args: argparse.Namespace, *names: str) -> None:
    """``--question`` / ``--query`` when given: non-empty text (not only spaces), the service's rule."""
    from ..cells.checks import check_text

    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            check_text(value, f"--{name}")


TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _param_type(param):
    """An argparse ``type`` that converts and validates one method parameter (errors name the option; a
    true / false parameter takes one of :data:`TRUE_WORDS` or :data:`FALSE_WORDS`, nothing else)."""
    def convert(text: str):
        try:
            if param.type is bool:
                word = text.strip().lower()
                if word not in TRUE_WORDS + FALSE_WORDS:
                    raise ValueError(f"value must be true or false, got {text!r}")
                return param.validate(word in TRUE_WORDS)
            return param.validate(param.type(text))
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).replace(f"parameter {param.name!r}", "value")) from None
    convert.__name__ = param.type.__name__
    return convert


def add_method_args(p: argparse.ArgumentParser, dimension: str | None = None, default: str | None = "toporag",
                    show_all: bool = True) -> None:
    """``--method`` and every registered parameter as an option (default ``None``: the method's own
    default, or a checkpoint's setting, applies); ``show_all=False`` leaves the ``advanced`` parameters
    out of ``--help`` (they still parse)."""
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
        text = f"{prm.help} (default {prm.default}{rng}; methods: {', '.join(seen[name])})"
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=_param_type(prm), default=None,
                       help=argparse.SUPPRESS if prm.advanced and not show_all else text)


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


# ----------------------------------------------------------------------------- options from config dataclasses
def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None


def option_type(hint: Any) -> Any:
    """``int | None`` -> ``int``; ``tuple[str, ...]`` -> ``tuple``; a plain type as it is."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return option_type(args[0]) if len(args) == 1 else str
    return typing.get_origin(hint) or hint


def comma_list(text: str) -> tuple[str, ...]:
    """An argparse ``type``: comma-separated names (blanks dropped)."""
    return tuple(t.strip() for t in text.split(",") if t.strip())


comma_list.__name__ = "list"


@dataclasses.dataclass(frozen=True)
class ConfigOption:
    """One option made from a config field: its ``dest`` (the field's name), option string, Python
    type, default, help and choices; ``advanced`` options are left out of the main ``--help``."""

    dest: str
    flag: str
    type: Any
    default: Any
    help: str
    choices: tuple | None
    advanced: bool
    metavar: str | None = None  # default: the field's name in capitals


def config_options(cls: type, names: tuple[str, ...] | None = None, exclude: frozenset[str] = frozenset(),
                   extra: dict[str, dict[str, Any]] | None = None) -> list[ConfigOption]:
    """The options of ``cls``'s fields (``names``: only these, in this order; fields whose metadata
    says ``cli=False``, and ``exclude``, are skipped). ``extra[name]`` adds to or replaces a field's
    metadata: the help of a dataclass whose module holds none."""
    hints = typing.get_type_hints(cls)
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    out = []
    for name in names or tuple(by_name):
        f = by_name[name]
        meta = {**f.metadata, **(extra or {}).get(name, {})}
        if name in exclude or not meta.get("cli", True):
            continue
        choices = meta.get("choices")
        choices = tuple(choices() if callable(choices) else choices) if choices is not None else None
        default = _field_default(f)
        out.append(ConfigOption(name, meta.get("flag") or (f"--no-{name.replace('_', '-')}" if default is True
                                                            else f"--{name.replace('_', '-')}"),
                                option_type(hints[name]), default, meta.get("help", ""), choices,
                                bool(meta.get("advanced")), meta.get("metavar")))
    return out


def add_config_args(p: argparse.ArgumentParser, options: list[ConfigOption], show_all: bool = False,
                    defaults: dict[str, Any] | None = None) -> None:
    """One option per :class:`ConfigOption`: a flag for a boolean (``--x`` sets a ``False`` default to
    True, ``--no-x`` a ``True`` one to False), a comma-separated list for a tuple, else a value of the
    field's type. ``defaults`` replaces some defaults (``eval``: ``None`` = the checkpoint's)."""
    for o in options:
        default = (defaults or {}).get(o.dest, o.default)
        shown = "" if o.default is None or o.type is bool else \
            f" (default {','.join(o.default) if o.type is tuple else o.default})"
        text = argparse.SUPPRESS if o.advanced and not show_all else (o.help + shown).replace("%", "%%")
        if o.type is bool:
            p.add_argument(o.flag, dest=o.dest, action="store_false" if o.default else "store_true",
                           default=default, help=text)
            continue
        kind = comma_list if o.type is tuple else o.type
        p.add_argument(o.flag, dest=o.dest, type=kind, default=default, choices=o.choices, help=text,
                       metavar=(o.metavar or o.dest.upper()) if o.choices is None else None)


def config_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """``cls``'s fields that ``args`` holds (parsed options or recipe values), by name."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}


class HelpAllAction(argparse.Action):
    """``--help-all``: the help with every option, the advanced ones too (``build(parser)`` adds them
    all to a fresh parser of the same name)."""

    def __init__(self, option_strings, dest, build: Callable[[argparse.ArgumentParser], None], **kw) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show every option, the advanced ones too, and exit", **kw)
        self.build = build

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        full = OneLineParser(prog=parser.prog, description=parser.description)
        self.build(full)
        full.print_help()
        parser.exit()


# ----------------------------------------------------------------------------- recipes
def recipe_path(name: str) -> Path:
    """A recipe's file: a path to a ``.toml`` file, or the name of one in ``recipes/``."""
    if name.endswith(".toml") or "/" in name or "\\" in name:
        path = Path(name).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"recipe {path} not found")
        return path
    path = RECIPES / f"{name}.toml"
    if not path.is_file():
        have = ", ".join(sorted(p.stem for p in RECIPES.glob("*.toml"))) or "none"
        raise FileNotFoundError(f"no recipe {name!r}; shipped recipes: {have} (or give a path to a .toml file)")
    return path


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def _check_value(value: Any, kind: Any, where: str) -> Any:
    """A recipe value of the option's type (an int is a float; a list of strings or of integers is a tuple)."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is tuple and isinstance(value, list) and (all(isinstance(v, str) for v in value) or all(
            isinstance(v, int) and not isinstance(v, bool) for v in value)):
        return tuple(value)
    if kind in (int, float, str, bool) and isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    want = "a list of strings or of integers" if kind is tuple else getattr(kind, '__name__', str(kind))
    raise ValueError(f"{where}: expected {want}, got {value!r}")


def load_recipe(name: str, known: dict[str, Any]) -> dict[str, Any]:
    """The values of recipe ``name`` (:func:`recipe_path`), checked against ``known`` (option dest ->
    Python type): a key that is no option, or a value of the wrong type, is one message naming the
    file, the line and the key."""
    path = recipe_path(name)
    text = path.read_text(encoding="utf-8")
    try:
        data = _toml_loads(text)
    except ValueError as e:  # tomllib.TOMLDecodeError names the line
        raise ValueError(f"recipe {path}: {e}") from None
    out = {}
    for key, value in data.items():
        m = re.search(rf"^[ \t]*{re.escape(key)}[ \t]*=", text, re.M)
        where = f"recipe {path}, line {text[:m.start()].count(chr(10)) + 1 if m else '?'}, {key!r}"
        if key not in known:
            raise ValueError(f"{where}: not an option of this command (known: {', '.join(sorted(known))})")
        out[key] = _check_value(value, known[key], where)
    return out


class RecipeAction(argparse.Action):
    """``--recipe NAME``: sets the recipe's values as if given as options here, so options after it
    override it. ``known``: option dest -> type of every key a recipe may set."""

    def __init__(self, option_strings, dest, known: dict[str, Any], **kw) -> None:
        super().__init__(option_strings, dest, **kw)
        self.known = known

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        try:
            recipe = load_recipe(str(values), self.known)
        except (ValueError, FileNotFoundError) as e:
            parser.error(f"argument {option_string}: {e}")
        for key, value in recipe.items():
            setattr(namespace, key, value)
        setattr(namespace, self.dest, str(values))


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
