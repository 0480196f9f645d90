"""Typed KEY=VALUE engine options, and each engine's known option names."""

import pytest

from runners import check_engine_options, engine_options, make_engine, parse_engine_args
from runners.options import parse_value


def test_parse_engine_args_types():
    got = parse_engine_args(["tensor_parallel_size=4", "enable_thinking=false", "gpu_memory_utilization=0.85",
                             'llm_kwargs={"max_num_seqs": 64, "enforce_eager": true}', "date_string=26 Jul 2024",
                             "seed=-3", "stop_on=", "revision=\"123\"", "max_model_len=1e4", "chat_template_kwargs=null",
                             "base_urls=[\"http://a/v1\", \"http://b/v1\"]", "dtype= bfloat16 "])
    assert got == {"tensor_parallel_size": 4, "enable_thinking": False, "gpu_memory_utilization": 0.85,
                   "llm_kwargs": {"max_num_seqs": 64, "enforce_eager": True}, "date_string": "26 Jul 2024",
                   "seed": -3, "stop_on": "", "revision": "123", "max_model_len": 10000.0,
                   "chat_template_kwargs": None, "base_urls": ["http://a/v1", "http://b/v1"], "dtype": "bfloat16"}
    assert type(got["tensor_parallel_size"]) is int and type(got["enable_thinking"]) is bool
    assert parse_value("TRUE") is True and parse_value("a=b") == "a=b"


@pytest.mark.parametrize("items, words", [
    (["tensor_parallel_size"], ["'tensor_parallel_size'", "KEY=VALUE"]),
    (["=4"], ["not an option name"]),
    (["tp size=4"], ["not an option name"]),
    (["a=1", "a=2"], ["'a' is given twice"]),
    (['llm_kwargs={"x": 1'], ["llm_kwargs", "not valid JSON"]),
])
def test_parse_engine_args_errors_name_the_item(items, words):
    with pytest.raises(ValueError) as err:
        parse_engine_args(items)
    for w in words:
        assert w in str(err.value)


def test_engine_options_per_engine():
    vllm = engine_options("vllm:Qwen/Qwen3-8B")
    for name in ("tensor_parallel_size", "data_parallel_size", "max_model_len", "gpu_memory_utilization",
                 "enable_thinking", "llm_kwargs", "enforce_eager", "max_num_seqs", "date_string"):
        assert name in vllm
    assert "llama_date_string" not in vllm and "model" not in vllm
    openai = engine_options("openai:m@http://127.0.0.1:1/v1")
    for name in ("concurrency", "max_tokens_field", "base_urls", "enable_thinking", "api_key_env"):
        assert name in openai
    assert "n_ctx" in engine_options("llamacpp") and "fn" in engine_options("scripted")
    assert "n_gpu_layers" in engine_options("llamacpp:/x.gguf")  # llama_cpp.Llama's own, passed through


def test_unknown_option_is_refused_with_the_known_ones(tmp_path):
    with pytest.raises(ValueError) as err:
        make_engine("openai:m@http://127.0.0.1:1/v1", concurency=4)
    msg = str(err.value)
    assert "'concurency'" in msg and "concurrency" in msg and "max_tokens_field" in msg
    with pytest.raises(ValueError, match="unknown vllm engine option.*'tensor_parallel'.*tensor_parallel_size"):
        check_engine_options("vllm:m", {"tensor_parallel": 4})
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        engine_options("tgi:m")
    # refused before anything is loaded: a missing GGUF file is not even looked for
    with pytest.raises(ValueError, match="unknown llamacpp engine option.*'n_context'"):
        make_engine(f"llamacpp:{tmp_path / 'missing.gguf'}", n_context=4096)


def test_options_reach_the_scripted_engine():
    eng = make_engine("scripted", **parse_engine_args(["default=hello", "per_token_s=0", "model=m1"]))
    assert (eng.default, eng.per_token_s, eng.model) == ("hello", 0.0, "m1")
