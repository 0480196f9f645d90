"""Model presets: the shipped file loads, every preset resolves and merges under explicit flags."""

import pytest
import yaml

from capa_hf.errors import CapaError, DataFileError
from capa_hf.presets import PRESETS_FILE, apply_preset, known_presets, load_presets, resolve_preset
from runners import Sampling, engine_options

EXPECTED = {"llama-3.3-70b", "llama-3.3-70b:8x80gb", "llama-3.3-70b:8x141gb", "qwen3-8b-think", "qwen3-8b-nothink",
            "qwen3-32b-think", "qwen3-32b-nothink", "qwen2.5-coder-7b-instruct", "qwen2.5-coder-32b-instruct"}


def test_known_presets():
    assert set(known_presets()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_preset_resolves_to_valid_engine_options_and_sampling(name):
    p = resolve_preset(name)
    assert p.model.startswith("vllm:")
    assert set(p.engine) <= set(engine_options(p.model))
    Sampling(**p.sampling, max_tokens=p.max_tokens or 512)  # valid ranges
    lines = p.describe_lines()
    assert lines[0] == f"preset {p.name}:" and p.model in lines[1]
    for k, v in p.engine.items():
        assert f"{k}=" in lines[2]
    if p.max_tokens and "max_model_len" in p.engine:
        assert p.max_tokens < p.engine["max_model_len"]
    merged = apply_preset(p)
    assert (merged.model, merged.engine, merged.sampling, merged.max_tokens) == (p.model, p.engine, p.sampling,
                                                                               p.max_tokens)
    assert merged.overridden == () and merged.warnings == ()


def test_llama_hardware_variants():
    assert resolve_preset("llama-3.3-70b").name == "llama-3.3-70b:8x80gb"
    a, b = resolve_preset("llama-3.3-70b:8x80gb"), resolve_preset("llama-3.3-70b:8x141gb")
    assert (a.engine["tensor_parallel_size"], a.engine["data_parallel_size"]) == (4, 2)
    assert (b.engine["tensor_parallel_size"], b.engine["data_parallel_size"]) == (2, 4)
    assert a.engine["max_model_len"] == b.engine["max_model_len"] == 16384
    assert a.sampling == {}  # the run's own sampling (greedy by default)


def test_qwen3_sampling_follows_the_model_cards():
    for size in ("8b", "32b"):
        think, nothink = resolve_preset(f"qwen3-{size}-think"), resolve_preset(f"qwen3-{size}-nothink")
        assert think.sampling == {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0}
        assert nothink.sampling == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0.0}
        assert think.engine["enable_thinking"] is True and nothink.engine["enable_thinking"] is False
        assert think.max_tokens >= 8192 and think.engine["max_model_len"] >= 2 * think.max_tokens


def test_explicit_flags_override_the_preset():
    p = resolve_preset("qwen3-8b-think")
    r = apply_preset(p, model="vllm:/models/qwen3-8b", engine_args={"max_model_len": 20000, "enforce_eager": True},
                     sampling={"temperature": 0.8, "top_p": None}, max_tokens=4096)
    assert r.model == "vllm:/models/qwen3-8b" and r.max_tokens == 4096
    assert r.engine == {"enable_thinking": True, "max_model_len": 20000, "tensor_parallel_size": 1, "enforce_eager": True}
    assert r.sampling == {"temperature": 0.8, "top_p": 0.95, "top_k": 20, "min_p": 0.0}  # None = not given
    assert r.overridden == ("model", "engine.max_model_len", "sampling.temperature", "max_tokens")
    assert "overridden by your flags: model, engine.max_model_len" in r.describe_lines()[0]
    assert r.to_dict()["preset"] == "qwen3-8b-think"


def test_merge_warnings_and_no_preset():
    greedy = apply_preset(resolve_preset("qwen3-8b-think"), sampling={"temperature": 0.0})
    assert any("never greedy" in w for w in greedy.warnings)
    small = apply_preset(resolve_preset("qwen3-8b-think"), engine_args={"max_model_len": 8192})
    assert any("max_tokens 16384 >= max_model_len 8192" in w for w in small.warnings)
    plain = apply_preset(None, model="llamacpp", engine_args={"n_ctx": 4096}, sampling={"top_k": 40, "min_p": None})
    assert (plain.model, plain.engine, plain.sampling, plain.preset) == ("llamacpp", {"n_ctx": 4096}, {"top_k": 40}, None)
    with pytest.raises(CapaError, match="unknown sampling field.*'tempreature'"):
        apply_preset(None, sampling={"tempreature": 0.5})


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(CapaError) as err:
        resolve_preset("qwen3-14b")
    assert "'qwen3-14b'" in str(err.value) and "qwen3-8b-think" in str(err.value)
    with pytest.raises(CapaError, match="llama-3.3-70b:8x141gb"):
        resolve_preset("llama-3.3-70b:4x80gb")


def _write(tmp_path, mutate):
    raw = yaml.safe_load(PRESETS_FILE.read_text())
    mutate(raw["presets"])
    path = tmp_path / "presets.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("mutate, field, words", [
    (lambda p: p["qwen3-8b-think"]["engine"].update(tensor_paralel_size=2), "presets.qwen3-8b-think.engine",
     "'tensor_paralel_size'"),
    (lambda p: p["qwen3-8b-think"]["sampling"].update(top_p=1.5), "presets.qwen3-8b-think.sampling", "top_p"),
    (lambda p: p["qwen3-8b-think"]["sampling"].update(presence=1), "presets.qwen3-8b-think.sampling", "presence"),
    (lambda p: p["qwen3-8b-think"].update(max_tokens=40000), "presets.qwen3-8b-think.max_tokens", "no room"),
    (lambda p: p["qwen3-8b-think"].pop("model"), "presets.qwen3-8b-think.model", "Field required"),
    (lambda p: p["llama-3.3-70b"].update(default_variant="4x80gb"), "presets.llama-3.3-70b.default_variant",
     "8x141gb"),
    (lambda p: p["llama-3.3-70b"]["variants"]["8x80gb"]["engine"].update(tp=4),
     "presets.llama-3.3-70b.variants.8x80gb.engine", "'tp'"),
    (lambda p: p["qwen3-8b-think"].update(gpus=8), "presets.qwen3-8b-think.gpus", "Extra inputs"),
])
def test_bad_file_names_the_file_and_field(tmp_path, mutate, field, words):
    path = _write(tmp_path, mutate)
    with pytest.raises(DataFileError) as err:
        load_presets(path)
    assert err.value.path == str(path) and err.value.field == field and words in str(err.value)


def test_empty_file_is_refused(tmp_path):
    path = tmp_path / "presets.yaml"
    path.write_text("presets: {}\n")
    with pytest.raises(DataFileError, match="top-level 'presets' mapping"):
        load_presets(path)


def test_eval_prints_everything_the_preset_sets(capsys):
    from capa_hf.cli import build_parser
    from capa_hf.evaluation.eval_cli import config_from_args

    args = build_parser().parse_args(["eval", "--preset", "qwen3-8b-think", "--engine-arg", "max_model_len=20000",
                                      "--out", "x"])
    config = config_from_args(args)
    err = capsys.readouterr().err
    p = resolve_preset("qwen3-8b-think")
    assert err.splitlines()[0] == "preset qwen3-8b-think:"
    assert p.model in err and f"max_tokens  {p.max_tokens}" in err
    for k, v in {**p.engine, **p.sampling}.items():      # also those no flag overrode
        assert f"{k}={str(v).lower() if isinstance(v, bool) else v}" in err
    assert "overridden by your flags: engine.max_model_len" in err
    assert config.engine_args["max_model_len"] == 20000 and config.top_k == p.sampling["top_k"]
