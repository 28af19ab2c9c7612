"""LLM loading: local folders (a tiny random Llama saved in-process), errors, devices, and one
check on the real packaged SmolLM2 (skipped with the reason when it cannot be loaded)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from toporag_core.model.tiny import tiny_llm, tiny_tokenizer
from toporag_core.model.llm import cpu_native_bf16, default_llm_cache, load_llm, resolve_device


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_llm")
    tok = tiny_tokenizer(chat=True)
    tiny_llm(len(tok)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_load_local_folder_is_frozen_and_left_padded(tiny_folder):
    model, tok = load_llm(str(tiny_folder), device="cpu")
    assert not model.training
    assert all(not p.requires_grad for p in model.parameters())
    assert tok.padding_side == "left" and tok.pad_token_id is not None
    assert model.get_input_embeddings().weight.dtype == torch.float32
    ref = tiny_llm(len(tok))
    assert torch.equal(model.get_input_embeddings().weight, ref.get_input_embeddings().weight)


def test_missing_folder_and_unknown_hub_id_fail_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_llm(str(tmp_path / "nope"))
    with pytest.raises((ValueError, OSError)):
        load_llm("no-such-org/no-such-model-xyz")


def test_resolve_device_cpu(monkeypatch):
    monkeypatch.setenv("TOPORAG_CPU_BF16", "0")
    dev, dtype = resolve_device("cpu")
    assert dev.type == "cpu" and dtype == torch.float32
    monkeypatch.setenv("TOPORAG_CPU_BF16", "1")
    assert resolve_device("cpu") == (torch.device("cpu"), torch.bfloat16)
    assert resolve_device("cpu", "float32")[1] == torch.float32  # an explicit dtype wins over the probe
    monkeypatch.delenv("TOPORAG_CPU_BF16")
    dev, dtype = resolve_device("auto")
    assert dtype == (torch.bfloat16 if (torch.cuda.is_available() or cpu_native_bf16()) else torch.float32)


@pytest.mark.parametrize("flags, native", [("fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni", True),
                                           ("fpu amx_tile amx_bf16 amx_int8", True),
                                           ("fpu sse2 avx2 avx512f avx512_vnni", False)])
def test_cpu_native_bf16_reads_the_flags(tmp_path, monkeypatch, flags, native):
    monkeypatch.delenv("TOPORAG_CPU_BF16", raising=False)
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\nbugs\t\t: avx512_bf16\n")
    assert cpu_native_bf16(info) is native  # only the flags line counts (not "bugs")


def test_cpu_native_bf16_without_cpuinfo_is_false_and_env_overrides(tmp_path, monkeypatch):
    monkeypatch.delenv("TOPORAG_CPU_BF16", raising=False)
    assert cpu_native_bf16(tmp_path / "missing") is False
    monkeypatch.setenv("TOPORAG_CPU_BF16", "1")
    assert cpu_native_bf16(tmp_path / "missing") is True


def test_default_cache_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path))
    assert default_llm_cache() == tmp_path / "llm" / "smollm2-135m-instruct"
    assert default_llm_cache(tmp_path / "x") == tmp_path / "x"


@pytest.mark.slow
def test_real_packaged_smollm2_answers():
    """The packaged SmolLM2-135M-Instruct, converted once into the cache, answers through the model."""
    from toporag_core.model import QABatch, TopoRAGConfig, TopoRAGModel

    # Reuse a conversion already in the user's cache (read only); else convert into the test cache.
    home = Path.home() / ".cache" / "toporag" / "llm" / "smollm2-135m-instruct"
    try:
        model, tok = load_llm(device="cpu", cache_dir=home if (home / "config.json").is_file() else None)
    except Exception as e:  # package missing, or no gguf support in this environment
        pytest.skip(f"packaged SmolLM2 cannot be loaded: {type(e).__name__}: {e}")
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.hidden_size == 576
    assert all(not p.requires_grad for p in model.parameters()) and tok.chat_template
    m = TopoRAGModel(TopoRAGConfig(use_graph=False, max_new_tokens=6), model, tok)
    assert m.tokenizer.decode(m.prompt_layout_ids()["pre"]).startswith("<|im_start|>system")
    out = m.generate(QABatch(None, ["What is the capital of France? Answer in one word."], [""]))
    assert "paris" in out[0].lower()


def test_packaged_llms_registry_names_and_errors(tmp_path, monkeypatch):
    """Packaged models are looked up by name; an unknown name or a missing package says what to do."""
    import importlib.util

    from toporag_core.model import llm as llm_mod

    assert {"smollm2-135m-instruct", "gemma3-270m"} <= set(llm_mod.PACKAGED_LLMS)
    monkeypatch.setenv("TOPORAG_CACHE", str(tmp_path))
    assert default_llm_cache(name="gemma3-270m") == tmp_path / "llm" / "gemma3-270m"
    with pytest.raises(ValueError, match="unknown packaged LLM 'nope'"):
        llm_mod.ensure_default_llm(name="nope")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n.startswith("gemma3_270m") else real(n, *a))
    with pytest.raises(FileNotFoundError, match=r"pip install -e '\.\[gemma\]'"):
        load_llm("gemma3-270m")  # nothing converted in the empty cache, and no package to convert from


@pytest.mark.parametrize("recorded, native, expect", [(None, True, torch.float32),  # pre-session-10: fp32-trained
                                                      ("float32", True, torch.float32),
                                                      ("bfloat16", True, torch.bfloat16),
                                                      ("bfloat16", False, torch.float32)])  # software bf16: too slow
def test_checkpoint_loads_in_its_training_precision(tmp_path, monkeypatch, recorded, native, expect):
    """dtype auto on a CPU: a checkpoint's LLM runs in the precision it trained in (config ``llm_dtype``), bf16
    only where the CPU has it natively; an explicit dtype still wins."""
    import json

    from toporag_core.embed import HashingEncoder
    from toporag_core.model.llm import checkpoint_llm_dtype
    from toporag_core.answering.pipeline import TopoRAGPipeline
    from toporag_core.model.tiny import build_tiny_checkpoint

    folder = build_tiny_checkpoint(tmp_path / "ck")
    meta = json.loads((folder / "config.json").read_text())
    meta.pop("llm_dtype", None)
    if recorded is not None:
        meta["llm_dtype"] = recorded
    (folder / "config.json").write_text(json.dumps(meta))
    assert checkpoint_llm_dtype(meta) == (recorded or "float32")
    monkeypatch.setenv("TOPORAG_CPU_BF16", "1" if native else "0")
    pipe = TopoRAGPipeline.load(folder, device="cpu", encoder=HashingEncoder())
    assert pipe.model.dtype == expect
    assert TopoRAGPipeline.load(folder, device="cpu", encoder=HashingEncoder(), dtype="float32").model.dtype \
        == torch.float32
