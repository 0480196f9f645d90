"""The vLLM adapter against an in-process fake of vllm (tests/runners/fake_vllm.py)."""

import pytest

from runners import ChatRequest, Sampling, make_engine


def _req(q, history=(), **sampling):
    msgs = [{"role": "system", "content": "sys"}, *history, {"role": "user", "content": q}]
    return ChatRequest.from_messages(msgs, Sampling(**sampling))


def test_one_chat_call_per_batch_with_per_conversation_params(fake_vllm):
    eng = make_engine("vllm:Qwen/Qwen2.5-Coder-7B-Instruct", max_model_len=2048, tensor_parallel_size=2,
                      gpu_memory_utilization=0.8)
    llm = fake_vllm.INSTANCES[-1]
    reqs = [_req("alpha", max_tokens=50), _req("beta", max_tokens=7, temperature=0.5, seed=3, stop=("X",)),
            _req("gamma")]
    out = eng.generate(reqs)
    assert len(llm.chat_calls) == 1
    call = llm.chat_calls[0]
    assert [c[-1]["content"] for c in call["messages"]] == ["alpha", "beta", "gamma"]
    assert call["use_tqdm"] is False
    p0, p1, p2 = call["params"]
    # generation_config defaults merged in, our explicit values win, max_tokens always set
    assert (p0.top_k, p0.repetition_penalty) == (20, 1.05)
    assert (p0.temperature, p0.top_p, p0.max_tokens, p0.seed) == (0.0, 1.0, 50, 0)
    assert (p1.temperature, p1.max_tokens, p1.seed, p1.stop) == (0.5, 7, 3, ["X"])
    assert p2.max_tokens == 512 and "max_tokens" in p2.explicit
    assert [r.text for r in out] == ["answer to: alpha", "answer to: beta", "answer to: gamma"]
    assert all(r.finish_reason == "stop" and r.prompt_tokens > 0 and r.completion_tokens == 3 for r in out)
    # constructor options reached LLM()
    assert llm.model == "Qwen/Qwen2.5-Coder-7B-Instruct"
    kw = llm.kwargs
    assert kw["tensor_parallel_size"] == 2 and kw["max_model_len"] == 2048
    assert kw["gpu_memory_utilization"] == 0.8 and kw["disable_log_stats"] is False
    assert kw["enable_prefix_caching"] is True and kw["seed"] == 0
    # the Llama 3.x date is pinned through the template kwargs
    assert call["chat_template_kwargs"] == {"date_string": "26 Jul 2024"}


def test_describe_records_merged_sampling(fake_vllm):
    eng = make_engine("vllm:m", enable_thinking=False, llama_date_string="01 Jan 2025")
    d = eng.describe()
    assert d["generation_config_defaults"] == fake_vllm.GENERATION_CONFIG
    assert d["merged_sampling_default"] == {"temperature": 0.0, "top_p": 1.0, "top_k": 20,
                                            "repetition_penalty": 1.05, "max_tokens": 512, "seed": 0}
    assert d["chat_template_kwargs"] == {"date_string": "01 Jan 2025", "enable_thinking": False}
    assert d["max_model_len"] == 4096 and d["vllm_version"] == "0.0-fake"
    assert eng.cache_identity()["chat_template_kwargs"]["enable_thinking"] is False


def test_thinking_is_stripped_and_cut_thinking_leaves_no_answer(fake_vllm):
    eng = make_engine("vllm:Qwen/Qwen3-8B", enable_thinking=True)
    llm = fake_vllm.INSTANCES[-1]
    full, cut = eng.generate([_req("why"), _req("how", max_tokens=1)])
    assert llm.chat_calls[0]["chat_template_kwargs"]["enable_thinking"] is True
    assert full.text == "answer to: why" and full.finish_reason == "stop"
    assert full.completion_tokens > 3  # thinking tokens are still counted
    assert cut.text == "" and cut.finish_reason == "length"


def test_overlong_prompt_is_a_length_result_and_the_batch_goes_on(fake_vllm):
    eng = make_engine("vllm:m", max_model_len=40)
    llm = fake_vllm.INSTANCES[-1]
    long_q = " ".join(["word"] * 60)
    out = eng.generate([_req("short"), _req(long_q), _req("fits", max_tokens=500)])
    assert [r.finish_reason for r in out] == ["stop", "length", "stop"]
    assert out[1].text == "" and out[1].prompt_tokens > 40 and out[1].error is None
    assert len(llm.chat_calls) == 1 and len(llm.chat_calls[0]["messages"]) == 2
    # max_tokens capped to the room left in the context
    n_prompt = out[2].prompt_tokens
    assert llm.chat_calls[0]["params"][1].max_tokens == 40 - n_prompt


def test_a_request_that_breaks_chat_fails_alone(fake_vllm):
    eng = make_engine("vllm:m")
    llm = fake_vllm.INSTANCES[-1]
    out = eng.generate([_req("fine"), _req("EXPLODE now"), _req("also fine")])
    assert [r.finish_reason for r in out] == ["stop", "error", "stop"]
    assert "exploded" in out[1].error
    assert out[0].text == "answer to: fine" and out[2].text == "answer to: also fine"
    assert len(llm.chat_calls) == 1 + 3  # the batch, then one by one


def test_cached_tokens_and_metrics(fake_vllm):
    eng = make_engine("vllm:m")
    first = eng.generate([_req("q1")])[0]
    second = eng.generate([_req("q2", history=[{"role": "user", "content": "q1"},
                                               {"role": "assistant", "content": first.text}])])[0]
    assert first.cached_tokens == 0 and second.cached_tokens > 0
    assert eng.metrics()["vllm:prefix_cache_hits"] == 4


def test_driver_with_vllm_engine_and_cache(fake_vllm, cache_path):
    from runners_testlib import chat_episode

    from runners import CompletionCache, run_episodes

    eng = make_engine("vllm:m")
    eps = {f"e{i}": chat_episode(f"e{i}", 1 + i % 3) for i in range(5)}
    with CompletionCache(cache_path) as cache:
        out = run_episodes(eps, {"assistant": eng}, cache=cache, progress=False)
    llm = fake_vllm.INSTANCES[-1]
    assert [len(c["messages"]) for c in llm.chat_calls] == [5, 3, 1]
    assert out["e2"].result["replies"] == [f"answer to: e2 turn {t}" for t in range(3)]


def test_missing_model_and_missing_vllm(monkeypatch):
    import sys
    with pytest.raises(ValueError, match="needs a model"):
        make_engine("vllm")
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match="pip install vllm"):
        make_engine("vllm:m")


def test_data_parallel_replicas(fake_vllm, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    eng = make_engine("vllm:m", data_parallel_size=2, tensor_parallel_size=2, vllm_module="fake_vllm")
    try:
        reqs = [_req(f"q{i}") for i in range(8)]
        out = eng.generate(reqs)
        assert [r.text.split(" [gpu")[0] for r in out] == [f"answer to: q{i}" for i in range(8)]
        gpus = {r.text.split("[gpu ")[1].rstrip("]") for r in out}
        assert gpus <= {"0,1", "2,3"} and len(gpus) == 2
        # a conversation stays on its replica from turn to turn
        again = eng.generate(reqs)
        assert [r.text for r in again] == [r.text for r in out]
        assert eng.describe()["data_parallel_size"] == 2
        assert len(eng.metrics()) == 2
    finally:
        eng.close()


def test_data_parallel_needs_enough_gpus(fake_vllm, monkeypatch):
    from runners import EngineError
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(EngineError, match="needs 4 GPUs"):
        make_engine("vllm:m", data_parallel_size=2, tensor_parallel_size=2, vllm_module="fake_vllm")
