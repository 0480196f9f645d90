"""runners/gguf_convert.py without transformers: where the folder goes, its record, the checks.

The conversion itself runs in ``make setup-vllm`` (transformers, torch, gguf in .venv-vllm) and
is exercised by tests/runners/test_vllm_real.py, whose engine loads the converted folder.
"""

import json
import types

import pytest

from runners import gguf_convert as gc
from runners.engine import ModelAssetError
from runners.model_assets import QWEN25_CODER_05B


def _fake_conversion(folder, asset=QWEN25_CODER_05B, files=None):
    folder.mkdir(parents=True)
    files = files or {"config.json": b"{}", "model.safetensors": b"weights"}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    record = {"format": gc.FORMAT, "model": asset.key, "source": {"sha256": asset.sha256},
              "files": {n: {"size": len(d), "sha256": gc.sha256_file(folder / n)} for n, d in files.items()}}
    (folder / gc.RECORD).write_text(json.dumps(record))
    return folder


def test_folder_lives_in_the_model_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPA_CACHE_DIR", str(tmp_path))
    assert gc.converted_folder() == tmp_path / "models" / "qwen2.5-coder-0.5b-hf"
    assert gc.converted_folder("default", tmp_path / "x") == tmp_path / "x" / "qwen2.5-coder-0.5b-hf"
    with pytest.raises(ModelAssetError, match="unknown bundled model 'nope'"):
        gc.converted_folder("nope")
    with pytest.raises(ModelAssetError, match="hash is not pinned"):
        gc.converted_folder("qwen2.5-coder-1.5b")


def test_check_folder_compares_sizes_and_on_request_hashes(tmp_path):
    folder = _fake_conversion(tmp_path / "m-hf")
    assert gc.check_folder(folder, QWEN25_CODER_05B, full=True) == []
    (folder / "model.safetensors").write_bytes(b"WEIGHTS")  # same size, other bytes
    assert gc.check_folder(folder, QWEN25_CODER_05B) == []
    assert gc.check_folder(folder, QWEN25_CODER_05B, full=True) == ["model.safetensors does not match its recorded sha256"]
    (folder / "model.safetensors").write_bytes(b"w")
    assert gc.check_folder(folder) == ["model.safetensors is 1 bytes, the record says 7"]
    (folder / "config.json").unlink()
    assert "config.json is missing" in gc.check_folder(folder)
    other = types.SimpleNamespace(key="other", sha256="0" * 64)
    assert any("but other is 000" in p for p in gc.check_folder(folder, other))
    assert "has no readable capa-conversion.json" in gc.check_folder(tmp_path / "absent")[0]


def test_a_recorded_conversion_is_reused_without_transformers(tmp_path, monkeypatch):
    folder = _fake_conversion(tmp_path / "qwen2.5-coder-0.5b-hf")
    monkeypatch.setattr(gc, "assemble", lambda *a, **k: pytest.fail("a converted folder needs no GGUF"))
    assert gc.convert_model(directory=tmp_path) == folder


def test_vllm_spec_with_a_bundled_key_names_the_converted_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPA_CACHE_DIR", str(tmp_path))
    assert gc.bundled_hf_folder("Qwen/Qwen2.5-Coder-7B-Instruct") is None     # a Hub id
    assert gc.bundled_hf_folder(str(tmp_path)) is None                       # an existing path
    with pytest.raises(ModelAssetError, match=r"make setup-vllm.*has no readable capa-conversion.json"):
        gc.bundled_hf_folder("qwen2.5-coder-0.5b")
    folder = _fake_conversion(tmp_path / "models" / "qwen2.5-coder-0.5b-hf")
    assert gc.bundled_hf_folder("qwen2.5-coder-0.5b") == str(folder)


def test_the_asset_carries_its_generation_config():
    gen = QWEN25_CODER_05B.generation_config
    assert gen["eos_token_id"] == [151645, 151643] and gen["repetition_penalty"] == 1.1
    assert {"temperature", "top_p", "top_k"} <= set(gen)


def test_platform_defaults_on_vllms_cpu_build(monkeypatch):
    import sys

    from runners.vllm_core import CPU_KV_CACHE_BYTES, platform_defaults

    cpu = types.SimpleNamespace(current_platform=types.SimpleNamespace(is_cpu=lambda: True))
    monkeypatch.setitem(sys.modules, "somevllm", types.ModuleType("somevllm"))
    monkeypatch.setitem(sys.modules, "somevllm.platforms", cpu)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
    amx = "flags\t\t: avx2 avx512f avx512_bf16 amx_bf16\n"
    assert platform_defaults("somevllm", {"dtype": "auto"}, avx2) == {
        "enforce_eager": True, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES, "dtype": "float32"}
    assert platform_defaults("somevllm", {"dtype": "auto"}, amx) == {
        "enforce_eager": True, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    assert platform_defaults("somevllm", {"enforce_eager": False, "kv_cache_memory_bytes": 5, "dtype": "bfloat16"},
                             avx2) == {}
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    assert platform_defaults("somevllm", {}, amx) == {"enforce_eager": True}
    assert platform_defaults("somevllm", {}, "no flags here") == {"enforce_eager": True}  # cannot tell: as asked
    cpu.current_platform.is_cpu = lambda: False
    assert platform_defaults("somevllm", {}, avx2) == {}
    assert platform_defaults("no_such_vllm_module", {}, avx2) == {}
