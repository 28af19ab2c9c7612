"""The retrieval vocabulary: one registry of methods, one settings object.

A **retrieval method** is registered once, with everything every caller needs to know::

    register_method(RetrievalMethod(
        name="toporag", label="TopoRAG (cell complex)", dimension="cells",
        params=(Param("k0", int, 3, 0, 100, "top-k 0-cells"), ...),
        fn=retrieve_subcomplex))

* ``dimension="cells"``: ``fn(ecx, question, **params) -> Subcomplex`` (a connected,
  boundary-closed subcomplex; what the LLM reads).
* ``dimension="nodes"``: ``fn(ecx, question, **params) -> TopoRetrieval`` (the nodes most
  similar to a target node; topology-aware node retrieval).

The CLI (``toporag retrieve --method`` choices and per-method options), the lab's and Ask
page's selectors and sliders, the reports, preprocessing and the pipeline all read
:data:`METHODS`; adding a method is one :func:`register_method` call.

A :class:`RetrievalSetting` is *a method and its parameters*: the one form a retrieval
setting takes from a slider to :func:`~toporag_core.retrieval.retrieve`. It is validated
on construction (unknown parameter, wrong type, out of range: ``ValueError`` naming the
parameter), is hashable (a cache key), and holds the two rules that used to be written
in several places:

* **the k rule**: ``RetrievalSetting.make(method, k=3, k2=1)`` gives every k-like parameter
  of the method (``k0``, ``k1``, ``k2`` or ``k``) the single ``k`` unless given itself;
* **checkpoint defaults**: :meth:`RetrievalSetting.from_dict` reads the ``"retrieval"``
  entry a checkpoint or a prepared dataset was saved with (old flat dicts included) and
  applies overrides on top.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

DIMENSIONS = ("cells", "nodes")
K_PARAMS = ("k0", "k1", "k2", "k")  # parameters the single "k" fills in (the paper's one k)


@dataclass(frozen=True)
class Param:
    """One parameter of a retrieval method: name, type, default, inclusive range, help.

    ``ui = (low, high, step)`` is the range a slider offers (the validation range ``min..max``
    may be wider: the CLI accepts ``--k 50``, the slider stops at 10); without it pages show a
    number box. ``widget=False`` marks a parameter the pages set through their own control (a
    node picker) rather than a generic one. ``advanced=True``: a long ``--help`` (``toporag train``'s)
    lists it only under ``--help-all``.
    """

    name: str
    type: type
    default: Any
    min: float | None = None
    max: float | None = None
    help: str = ""
    widget: bool = True
    ui: tuple[float, float, float] | None = None
    advanced: bool = False

    def __post_init__(self) -> None:
        if self.type not in (int, float, str, bool):
            raise ValueError(f"parameter {self.name!r}: type must be int, float, str or bool, got {self.type}")
        if self.default is not None:
            self.validate(self.default)

    def validate(self, value: Any) -> Any:
        """``value`` converted to the parameter's type; ``ValueError`` naming the parameter otherwise."""
        if value is None:
            if self.default is None:
                return None
            raise ValueError(f"parameter {self.name!r} needs a value")
        if self.type is bool:
            if not isinstance(value, (bool, int)):
                raise ValueError(f"parameter {self.name!r} must be true or false, got {value!r}")
            return bool(value)
        if self.type is str:
            return str(value)
        if isinstance(value, (bool, str)) or not isinstance(value, numbers.Real):
            raise ValueError(f"parameter {self.name!r} must be a number, got {value!r}")
        if self.type is int:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"parameter {self.name!r} must be a whole number, got {value!r}")
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"parameter {self.name!r} must be a finite number, got {value!r}")
        if self.min is not None and value < self.min:
            raise ValueError(f"parameter {self.name!r} must be >= {self.min:g}, got {value!r}")
        if self.max is not None and value > self.max:
            raise ValueError(f"parameter {self.name!r} must be <= {self.max:g}, got {value!r}")
        return value


@dataclass(frozen=True)
class RetrievalMethod:
    """A registered retrieval method (see the module docstring for ``fn``'s signature)."""

    name: str
    label: str
    dimension: str
    params: tuple[Param, ...]
    fn: Callable[..., Any]
    help: str = ""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError("a retrieval method needs a non-empty name")
        if self.dimension not in DIMENSIONS:
            raise ValueError(f"method {self.name!r}: dimension must be one of {DIMENSIONS}, got {self.dimension!r}")
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"method {self.name!r}: duplicate parameter names {names}")

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}


METHODS: dict[str, RetrievalMethod] = {}


def register_method(method: RetrievalMethod | None = None, **fields: Any) -> RetrievalMethod:
    """Register a method (a :class:`RetrievalMethod`, or its fields as keywords); a second
    registration under the same name replaces the first. Returns the method."""
    m = method if method is not None else RetrievalMethod(**fields)
    METHODS[m.name] = m
    return m


def unregister_method(name: str) -> None:
    """Remove a method (tests and plug-ins that register temporary methods)."""
    METHODS.pop(name, None)


def get_method(name: str) -> RetrievalMethod:
    """The registered method ``name``; ``ValueError`` listing the choices otherwise."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown retrieval method {name!r}; choose one of {', '.join(METHODS)}") from None


def method_names(dimension: str | None = None) -> list[str]:
    """Registered method names in registration order, optionally of one ``dimension``."""
    return [n for n, m in METHODS.items() if dimension is None or m.dimension == dimension]


def method_label(name: str) -> str:
    """Human label of a method (the name itself for an unknown one: a page never fails on a label)."""
    m = METHODS.get(name)
    return m.label if m is not None else name


def all_params(names: Iterable[str]) -> list[Param]:
    """The parameters of several methods, each name once, in first-seen order (for shared controls)."""
    seen: dict[str, Param] = {}
    for n in names:
        for p in get_method(n).params:
            seen.setdefault(p.name, p)
    return list(seen.values())


class FrozenParams(dict):
    """A read-only dict (picklable and hashable by content): a setting's parameters never change
    under the caches that key on them."""

    def _readonly(self, *args, **kwargs):
        raise TypeError("retrieval parameters are read-only: use RetrievalSetting.replace(...)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenParams, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


@dataclass(frozen=True)
class RetrievalSetting:
    """A retrieval method and its complete, validated parameters (immutable, hashable)."""

    method: str = "toporag"
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        m = get_method(self.method)
        given = dict(self.params)
        unknown = sorted(set(given) - set(m.param_names))
        if unknown:
            raise ValueError(f"method {self.method!r} has no parameter {unknown[0]!r}; "
                             f"its parameters: {', '.join(m.param_names) or '(none)'}")
        full = {p.name: p.validate(given.get(p.name, p.default)) for p in m.params}
        object.__setattr__(self, "params", FrozenParams(full))

    @classmethod
    def make(cls, method: str = "toporag", k: int | None = None, **params: Any) -> "RetrievalSetting":
        """Build from loose values: ``None`` values are ignored (defaults apply), values for
        parameters the method does not have are dropped, and ``k`` fills every k-like
        parameter (``k0``, ``k1``, ``k2``, ``k``) not given itself."""
        m = get_method(method)
        values = {n: v for n, v in params.items() if v is not None and n in m.param_names}
        if k is not None:
            for n in K_PARAMS:
                if n in m.param_names and n not in values:
                    values[n] = k
        return cls(method, values)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, **overrides: Any) -> "RetrievalSetting":
        """From a saved setting ``{"method": ..., "params": {...}}`` or an old flat dict
        (``{"method", "k0", ..., "c2"}``), with ``overrides`` (``None`` = keep) on top."""
        d = dict(d or {})
        base = dict(d.get("params", {})) if isinstance(d.get("params"), Mapping) else \
            {k: v for k, v in d.items() if k != "method"}
        method = overrides.pop("method", None) or d.get("method") or "toporag"
        k = overrides.pop("k", None)
        base.update({n: v for n, v in overrides.items() if v is not None})
        if k is not None:
            for n in K_PARAMS:
                if n not in overrides or overrides[n] is None:
                    base[n] = k
        return cls.make(method, **base)

    def replace(self, method: str | None = None, **params: Any) -> "RetrievalSetting":
        """A copy with other values; switching ``method`` keeps the parameters both share."""
        return RetrievalSetting.make(method or self.method, **{**dict(self.params), **params})

    def without_cells2(self) -> "RetrievalSetting":
        """The "w/o CRL" form: no 2-cell candidates (``k2 = 0``) when the method has ``k2``."""
        return self.replace(k2=0) if "k2" in self.params else self

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "params": dict(self.params)}

    @property
    def spec(self) -> RetrievalMethod:
        return get_method(self.method)

    def key(self) -> str:
        """A readable, unique folder name (preprocessing cache): ``toporag-k0=3-k1=3-...``."""
        parts = [self.method] + [f"{n}={v:g}" if isinstance(v, float) else f"{n}={v}" for n, v in self.params.items()]
        return "-".join(parts).replace("/", "_")

    def __hash__(self) -> int:
        return hash((self.method, tuple(self.params.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RetrievalSetting) and self.method == other.method and \
            dict(self.params) == dict(other.params)
