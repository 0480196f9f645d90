"""The vLLM adapter against an in-process fake of vllm with vLLM 0.32's signatures (tests/runners/fake_vllm.py).

The real engine's twins of these tests are in tests/runners/test_vllm_real.py."""

import inspect
import json

import pytest

from runners import ChatRequest, EngineError, Sampling, make_engine


def _req(q, history=(), affinity=None, **sampling):
    msgs = [{"role": "system", "content": "sys"}, *history, {"role": "user", "content": q}]
    return ChatRequest.from_messages(msgs, Sampling(**sampling), affinity=affinity)


def test_one_chat_call_per_batch_with_per_conversation_params(fake_vllm):
    eng = make_engine("vllm:Qwen/Qwen2.5-Coder-7B-Instruct", max_model_len=2048, tensor_parallel_size=2,
                      gpu_memory_utilization=0.8, enforce_eager=True)
    llm = fake_vllm.INSTANCES[-1]
    reqs = [_req("alpha", max_tokens=50), _req("beta", max_tokens=7, temperature=0.5, seed=3, stop=("X",)),
            _req("gamma", temperature=0.6, top_p=0.95, top_k=0, min_p=0.1)]
    out = eng.generate(reqs)
    assert len(llm.chat_calls) == 1
    call = llm.chat_calls[0]
    assert [c[-1]["content"] for c in call["messages"]] == ["alpha", "beta", "gamma"]
    assert call["use_tqdm"] is False
    p0, p1, p2 = call["params"]
    assert (p0.temperature, p0.max_tokens, p0.seed) == (0.0, 50, 0)          # greedy
    # generation_config defaults merged in where Sampling leaves a field unset (None)
    assert (p1.temperature, p1.top_p, p1.top_k, p1.repetition_penalty) == (0.5, 0.8, 20, 1.05)
    assert (p1.max_tokens, p1.seed, p1.stop) == (7, 3, ["X"])
    # explicit fields win; top_k=0 ("off") goes as -1, which every vLLM accepts
    assert (p2.temperature, p2.top_p, p2.top_k, p2.min_p, p2.max_tokens) == (0.6, 0.95, -1, 0.1, 512)
    assert out[0].text == "answer to: alpha" and out[1].text.startswith("answer to: beta ~")
    assert all(r.finish_reason == "stop" and r.prompt_tokens > 0 and not r.cut_in_thinking for r in out)
    assert llm.model == "Qwen/Qwen2.5-Coder-7B-Instruct"
    kw = llm.kwargs
    assert kw["tensor_parallel_size"] == 2 and kw["max_model_len"] == 2048 and kw["enforce_eager"] is True
    assert kw["gpu_memory_utilization"] == 0.8 and kw["disable_log_stats"] is False
    assert kw["enable_prefix_caching"] is True and kw["seed"] == 0 and "data_parallel_size" not in kw
    assert call["chat_template_kwargs"] == {"date_string": "26 Jul 2024"}  # Llama 3.x date pinned


def test_distinct_seeds_give_independent_samples(fake_vllm):
    eng = make_engine("vllm:m")
    out = eng.generate([_req("q", temperature=0.7, seed=s) for s in (1, 2, 1)])
    params = fake_vllm.INSTANCES[-1].chat_calls[0]["params"]
    assert [p.seed for p in params] == [1, 2, 1]
    assert out[0].text == out[2].text != out[1].text


def test_describe_records_merged_sampling_and_one_date_option(fake_vllm):
    eng = make_engine("vllm:m", enable_thinking=False, date_string="01 Jan 2025")
    d = eng.describe()
    assert d["generation_config_defaults"] == fake_vllm.GENERATION_CONFIG
    assert d["merged_sampling_default"] == {"temperature": 0.0, "top_p": 0.8, "top_k": 20,
                                            "repetition_penalty": 1.05, "max_tokens": 512, "seed": 0}
    assert d["chat_template_kwargs"] == {"date_string": "01 Jan 2025", "enable_thinking": False}
    assert d["max_model_len"] == 4096 and d["vllm_version"] == fake_vllm.__version__
    assert eng.cache_identity()["chat_template_kwargs"]["enable_thinking"] is False
    none = make_engine("vllm:m", date_string=None)
    assert none.describe()["chat_template_kwargs"] == {}
    with pytest.raises(ValueError, match="llama_date_string"):
        make_engine("vllm:m", llama_date_string="x")


def _history_stop_reply(conv, thinking):
    # the thinking quotes the history format; the answer then runs on into an invented turn
    return "the history shows <user> tags and </assistant> markers", "def f(): pass\n<user> next question"


def test_qwen3_thinks_by_default_and_stops_apply_after_think(fake_vllm, monkeypatch):
    monkeypatch.setattr(fake_vllm, "REPLY", _history_stop_reply)
    eng = make_engine("vllm:Qwen/Qwen3-8B", keep_thinking=True)
    llm = fake_vllm.INSTANCES[-1]
    stops = ("<user>", "</assistant>", "<session")
    r = eng.generate([_req("write f", stop=stops)])[0]
    # not sent to vLLM, where they would have fired inside the thinking
    assert llm.chat_calls[0]["params"][0].stop == []
    assert "enable_thinking" not in llm.chat_calls[0]["chat_template_kwargs"]
    assert (r.text, r.finish_reason, r.cut_in_thinking) == ("def f(): pass\n", "stop", False)
    assert "<user> tags" in r.thinking and "<think>" not in r.text
    d = eng.describe()
    assert d["thinking_on"] is True and d["stops_sent_to_vllm"] is False
    assert "stop" not in d["merged_sampling_default"]


def test_the_fake_cuts_inside_thinking_where_vllm_would(fake_vllm, monkeypatch):
    # what the adapter avoids: stop strings sent to vLLM fire inside the thinking
    monkeypatch.setattr(fake_vllm, "REPLY", _history_stop_reply)
    eng = make_engine("vllm:Qwen/Qwen3-8B", enable_thinking=True)
    llm = fake_vllm.INSTANCES[-1]
    raw = llm.chat([[{"role": "user", "content": "x"}]], fake_vllm.SamplingParams(stop=["<user>"], max_tokens=99),
                   chat_template_kwargs={"enable_thinking": True})[0]
    assert raw.outputs[0].text == "<think>the history shows "
    r = eng.generate([_req("x", stop=("<user>",))])[0]
    assert r.text == "def f(): pass\n" and r.thinking is None  # keep_thinking is off by default


def test_thinking_off_sends_stops_and_cut_thinking_leaves_no_answer(fake_vllm):
    off = make_engine("vllm:Qwen/Qwen3-8B", enable_thinking=False)
    r = off.generate([_req("why", stop=("zzz",))])[0]
    call = fake_vllm.INSTANCES[-1].chat_calls[0]
    assert call["chat_template_kwargs"]["enable_thinking"] is False and call["params"][0].stop == ["zzz"]
    assert r.text == "answer to: why" and off.describe()["thinking_on"] is False
    on = make_engine("vllm:Qwen/Qwen3-8B", enable_thinking=True)
    full, cut = on.generate([_req("why"), _req("how", max_tokens=1)])
    assert full.text == "answer to: why" and full.finish_reason == "stop"
    assert full.completion_tokens > 3  # thinking tokens are still counted
    assert (cut.text, cut.finish_reason, cut.cut_in_thinking) == ("", "length", True)


def test_a_template_that_mentions_think_does_not_blank_a_long_plain_answer(fake_vllm):
    class PlainModel(fake_vllm.LLM):  # e.g. an instruct model whose template strips <think> from history
        def __init__(self, model, **kw):
            super().__init__(model, **kw)
            self.tokenizer.chat_template = "{{ content.split('</think>')[-1] | replace('<think>', '') }}"

    eng = make_engine("vllm:m", llm_factory=PlainModel)
    r = eng.generate([_req("q", max_tokens=2, stop=("<user>",))])[0]
    assert eng.describe()["thinking_on"] is True            # stops withheld, to be safe
    assert fake_vllm.INSTANCES[-1].chat_calls[0]["params"][0].stop == []
    assert (r.text, r.finish_reason, r.cut_in_thinking) == ("answer to:", "length", False)


def test_overlong_prompt_is_vllms_own_error_and_the_batch_goes_on(fake_vllm):
    eng = make_engine("vllm:m", max_model_len=40)
    llm = fake_vllm.INSTANCES[-1]
    long_q = " ".join(["word"] * 60)
    out = eng.generate([_req("short"), _req(long_q), _req("fits", max_tokens=500)])
    assert [r.finish_reason for r in out] == ["stop", "error", "stop"]
    assert not out[1].ok and out[1].text == "" and out[1].prompt_tokens > 40
    assert "VLLMValidationError" in out[1].error and "maximum context length is 40 tokens" in out[1].error
    # the batch went without it, then it went alone (vLLM refuses it before generating anything)
    assert [len(c["messages"]) for c in llm.chat_calls] == [2, 1]
    assert llm.chat_calls[0]["params"][1].max_tokens == 40 - out[2].prompt_tokens  # capped to the room left


def test_a_request_that_breaks_chat_fails_alone(fake_vllm):
    eng = make_engine("vllm:m")
    llm = fake_vllm.INSTANCES[-1]
    out = eng.generate([_req("fine"), _req("EXPLODE now"), _req("also fine")])
    assert [r.finish_reason for r in out] == ["stop", "error", "stop"]
    assert "exploded" in out[1].error and not out[1].ok
    assert out[0].text == "answer to: fine" and out[2].text == "answer to: also fine"
    assert len(llm.chat_calls) == 1 + 3  # the batch, then one by one


def test_cached_tokens_and_metrics(fake_vllm):
    eng = make_engine("vllm:m")
    first = eng.generate([_req("q1")])[0]
    second = eng.generate([_req("q2", history=[{"role": "user", "content": "q1"},
                                               {"role": "assistant", "content": first.text}])])[0]
    assert first.cached_tokens == 0 and second.cached_tokens > 0
    m = eng.metrics()
    assert m["vllm:prefix_cache_hits"] == second.cached_tokens
    assert m["vllm:prefix_cache_queries"] == first.prompt_tokens + second.prompt_tokens


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
    with pytest.raises(ImportError, match=r"pip install -e ..\[vllm\]..*make setup-vllm"):
        make_engine("vllm:m")


# -- fidelity: what real vLLM refuses, the fake refuses, and the adapter says so -------------

def test_fake_refuses_what_vllm_refuses(fake_vllm):
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_model_length'"):
        fake_vllm.LLM("m", max_model_length=100)
    with pytest.raises(ValueError, match="not supported for single-process"):
        fake_vllm.LLM("m", data_parallel_size=2)
    with pytest.raises(TypeError):
        fake_vllm.SamplingParams(temprature=0.5)
    with pytest.raises(fake_vllm.VLLMValidationError, match="top_p"):
        fake_vllm.SamplingParams(top_p=0.0)
    with pytest.raises(fake_vllm.VLLMValidationError, match="temperature"):
        fake_vllm.SamplingParams(temperature=2.5)
    llm = fake_vllm.LLM("m")
    with pytest.raises(TypeError):
        llm.chat([[{"role": "user", "content": "x"}]], enable_thinking=True)  # no **kwargs in LLM.chat
    assert llm.kwargs["disable_log_stats"] is True  # vLLM's own default


def test_adapter_names_an_option_vllm_refuses(fake_vllm):
    with pytest.raises(EngineError, match="vllm.LLM refused an option.*max_model_length"):
        make_engine("vllm:m", llm_kwargs={"max_model_length": 100})
    with pytest.raises(ValueError, match=r"unknown vllm engine option\(s\) 'max_model_length'.*tensor_parallel_size"):
        make_engine("vllm:m", max_model_length=100)
    with pytest.raises(ValueError, match="data_parallel_size is an engine option"):
        make_engine("vllm:m", llm_kwargs={"data_parallel_size": 2})


def test_every_pass_through_option_is_an_engine_arg_of_the_fake(fake_vllm):
    from runners.vllm_config import LLM_OPTIONS

    named = set(inspect.signature(fake_vllm.LLM.__init__).parameters)
    missing = [n for n in LLM_OPTIONS if n not in named and n not in fake_vllm.ENGINE_ARGS]
    assert not missing, missing
    eng = make_engine("vllm:m", max_num_seqs=64, kv_cache_dtype="fp8", trust_remote_code=True)
    assert fake_vllm.INSTANCES[-1].kwargs["max_num_seqs"] == 64 and eng.describe()["llm_kwargs"]["kv_cache_dtype"]


def test_old_vllm_is_refused_with_upgrade_advice(fake_vllm, monkeypatch):
    class OldChatLLM(fake_vllm.LLM):
        def chat(self, messages, sampling_params=None, use_tqdm=True, lora_request=None, chat_template=None,
                 add_generation_prompt=True):
            raise AssertionError("not called")

    with pytest.raises(EngineError, match="takes no chat_template_kwargs.*upgrade vllm"):
        make_engine("vllm:m", llm_factory=OldChatLLM)
    make_engine("vllm:m", llm_factory=OldChatLLM, date_string=None)  # nothing for the template: fine

    @__import__("dataclasses").dataclass(kw_only=True)
    class OldSamplingParams:
        temperature: float = 1.0
        top_p: float = 1.0
        top_k: int = -1
        seed: int | None = None
        stop: list | None = None
        max_tokens: int = 16

    monkeypatch.setattr(fake_vllm, "SamplingParams", OldSamplingParams)
    with pytest.raises(EngineError, match="SamplingParams lacks a field.*min_p.*upgrade vllm"):
        make_engine("vllm:m")
    monkeypatch.undo()
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm)
    monkeypatch.setattr(fake_vllm, "__version__", "0.6.3")
    with pytest.raises(EngineError, match=r"vllm 0.6.3 is too old.*upgrade vllm"):
        make_engine("vllm:m")


# -- data parallel -----------------------------------------------------------------------

def test_data_parallel_replicas_with_affinity(fake_vllm, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    eng = make_engine("vllm:m", data_parallel_size=2, tensor_parallel_size=2, vllm_module="fake_vllm")
    try:
        reqs = [_req(f"q{i}") for i in range(8)]
        out = eng.generate(reqs)
        assert [r.text.split(" [gpu")[0] for r in out] == [f"answer to: q{i}" for i in range(8)]
        gpus = [r.text.split("[gpu ")[1].rstrip("]") for r in out]
        assert set(gpus) == {"0,1", "2,3"} and gpus.count("0,1") == 4  # keys spread evenly
        again = eng.generate(reqs)  # a conversation stays on its replica from turn to turn
        assert [r.text for r in again] == [r.text for r in out]
        cell = eng.generate([_req(f"other {i}", affinity="C07") for i in range(4)])
        assert len({r.text.split("[gpu ")[1] for r in cell}) == 1  # one cell, one replica
        assert eng.describe()["data_parallel_size"] == 2 and len(eng.metrics()) == 2
    finally:
        eng.close()


def test_data_parallel_needs_enough_gpus(fake_vllm, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(EngineError, match="needs 4 GPUs"):
        make_engine("vllm:m", data_parallel_size=2, tensor_parallel_size=2, vllm_module="fake_vllm")


def test_data_parallel_is_refused_for_moe_models(fake_vllm, tmp_path, monkeypatch):
    moe = tmp_path / "qwen3-moe"
    moe.mkdir()
    (moe / "config.json").write_text(json.dumps({"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 128}))
    with pytest.raises(ValueError, match=r"mixture-of-experts model \(128 experts\).*data_parallel_size=1"):
        make_engine(f"vllm:{moe}", data_parallel_size=2, vllm_module="fake_vllm")
    assert not fake_vllm.INSTANCES  # refused before any model was loaded
    make_engine(f"vllm:{moe}", tensor_parallel_size=2)  # no data parallelism: fine
    # config.json not readable beforehand (a Hub id not in the cache): refused once a replica reports it
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr("runners.vllm_engine.read_hf_config", lambda model, revision=None: None)
    with pytest.raises(ValueError, match="128 experts"):
        make_engine(f"vllm:{moe}", data_parallel_size=2, vllm_module="fake_vllm")


def test_experts_in_config():
    from runners.vllm_config import experts_in_config

    assert experts_in_config({"num_local_experts": 8}) == 8                      # Mixtral
    assert experts_in_config({"n_routed_experts": 256, "num_experts": None}) == 256  # DeepSeek-V3
    assert experts_in_config({"text_config": {"num_experts": 16}}) == 16          # multimodal wrappers
    assert experts_in_config({"hidden_size": 8192}) == 0 and experts_in_config(None) == 0
