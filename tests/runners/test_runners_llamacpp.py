"""llama.cpp engine: fast checks with a stand-in Llama, and a slow run of the real embedded model."""

from __future__ import annotations

import pytest

from runners import ChatRequest, CompletionCache, RunStats, Sampling, make_engine, run_episodes
from runners.llamacpp import CHATML_TEMPLATE
from runners.thinking import cut_after_fence

from tests.runners.fake_llama_cpp import FakeLlama, install_stand_in, real_llama_cpp_installed

needs_llama_cpp = pytest.mark.skipif(not real_llama_cpp_installed(), reason="needs llama-cpp-python itself (its signatures, formatter, build or model)")


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    """The engine around a FakeLlama; on a machine without llama_cpp, its formatter and stopping
    list come from the stand-in module."""
    install_stand_in(monkeypatch)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    holder = {}

    def factory(**kw):
        holder["llm"] = FakeLlama(**kw)
        return holder["llm"]

    eng = make_engine(f"llamacpp:{model}", n_ctx=200, n_threads=2, llama_factory=factory)
    return eng, holder["llm"]


def _req(q, system="sys", **s):
    return ChatRequest.from_messages([{"role": "system", "content": system}, {"role": "user", "content": q}],
                                     Sampling(**s))


def test_chatml_fallback_options_and_sampling(fake_engine):
    eng, llm = fake_engine
    assert eng.template_source == "chatml" and eng.model == "m.gguf"
    assert llm.kwargs["n_ctx"] == 200 and llm.kwargs["n_threads"] == 2
    assert eng.render(_req("hi")) == "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n" \
                                     "<|im_start|>assistant\n"
    r = eng.generate([_req("hi", max_tokens=500, temperature=0.3, seed=7, stop=("##",))])[0]
    assert r.ok and r.text.startswith("len ")
    prompt, kw = llm.calls[0]
    assert kw["max_tokens"] == 200 - len(prompt)  # capped to the room left
    assert (kw["temperature"], kw["seed"], kw["stop"]) == (0.3, 7, ["<|im_end|>", "##"])
    assert kw["top_k"] == 0 and kw["min_p"] == 0.0


def test_set_sampling_fields_and_seed_reach_llama_cpp(fake_engine):
    eng, llm = fake_engine
    eng.generate([_req("a", temperature=0.6, top_p=0.95, top_k=20, min_p=0.05, seed=11),
                  _req("b", temperature=None, seed=12)])
    (_, kw_a), (_, kw_b) = llm.calls
    assert (kw_a["temperature"], kw_a["top_p"], kw_a["top_k"], kw_a["min_p"], kw_a["seed"]) == (0.6, 0.95, 20, 0.05, 11)
    assert (kw_b["temperature"], kw_b["top_p"], kw_b["top_k"], kw_b["seed"]) == (0.8, 1.0, 0, 12)


def test_overlong_and_failing_requests_do_not_sink_the_batch(fake_engine):
    eng, llm = fake_engine
    out = eng.generate([_req("ok"), _req("x" * 300), _req("CRASH"), _req("fine")])
    assert [r.finish_reason for r in out] == ["stop", "length", "error", "stop"]
    assert out[1].prompt_tokens > 200 and out[1].text == ""
    assert "llama_decode failed" in out[2].error


def test_requests_are_served_in_prefix_order(fake_engine):
    eng, llm = fake_engine
    out = eng.generate([_req("a", system="B"), _req("b", system="A"), _req("c", system="B")])
    served = [bytes(p).decode() for p, _ in llm.calls]
    assert [s.split("\n")[1][:1] for s in served] == ["A", "B", "B"]
    assert [r.prompt_tokens for r in out] == [len(eng.render(_req(q, system=s))) for q, s in
                                              (("a", "B"), ("b", "A"), ("c", "B"))]


@needs_llama_cpp
@pytest.mark.parametrize("method", ["__init__", "tokenize", "detokenize", "create_completion", "token_eos",
                                    "token_bos", "reset", "close"])
def test_the_fake_has_the_real_llama_signatures(method):
    import inspect

    from llama_cpp import Llama

    real = inspect.signature(getattr(Llama, method)).parameters
    fake = inspect.signature(getattr(FakeLlama, method)).parameters
    for name, p in fake.items():
        assert name in real, f"Llama.{method} has no parameter {name!r}"
        assert (p.kind, p.default) == (real[name].kind, real[name].default), f"Llama.{method}({name})"
    if method != "__init__":            # the real __init__ takes **kwargs; the fake names what the engine passes
        assert list(fake) == list(real)


@needs_llama_cpp
def test_the_stand_in_formatter_renders_like_llama_cpps():
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter as Real

    from tests.runners.fake_llama_cpp import Jinja2ChatFormatter as StandIn

    template = CHATML_TEMPLATE + "{% if messages|length > 2 %}{{ raise_exception('too long') }}{% endif %}"
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q  \n x"}]
    real, stand_in = Real(template, "<e>", "<b>"), StandIn(template, "<e>", "<b>")
    assert stand_in(messages=messages).prompt == real(messages=messages).prompt
    with pytest.raises(ValueError, match="too long"):
        stand_in(messages=messages * 2)


def test_an_option_llama_cpp_would_refuse_is_refused_by_the_fake(fake_engine):
    eng, llm = fake_engine
    with pytest.raises(TypeError, match="unexpected keyword argument 'top_n'"):
        llm.create_completion(prompt=[5], top_n=3)
    with pytest.raises(TypeError, match="takes bytes"):
        llm.tokenize("text", add_bos=False, special=True)


@needs_llama_cpp
def test_chatml_template_is_valid_jinja():
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    f = Jinja2ChatFormatter(template=CHATML_TEMPLATE, eos_token="", bos_token="")
    assert f(messages=[{"role": "user", "content": "x"}]).prompt.endswith("<|im_start|>assistant\n")


@needs_llama_cpp
@pytest.mark.slow
def test_real_embedded_model_two_conversations(cache_path):
    """Assembles the default GGUF from its part packages and runs a few real turns."""
    eng = make_engine("llamacpp")
    assert eng.model == "qwen2.5-coder-0.5b" and eng.template_source == "gguf"
    questions = {
        "py": ["Write a one-line Python expression that reverses a list named xs.", "Now do it in place.",
               "Which of the two is faster?"],
        "sql": ["Write an SQL query counting rows in table users.", "Only rows where age > 30."],
    }

    def episode(qs):
        def f():
            from runners import Call
            msgs = [{"role": "system", "content": "You are a terse coding assistant."}]
            got = []
            for q in qs:
                msgs.append({"role": "user", "content": q})
                r = yield Call("assistant", list(msgs), Sampling(max_tokens=32))
                got.append((r.text, r.prompt_tokens, r.completion_tokens, r.cached_tokens, r.finish_reason))
                msgs.append({"role": "assistant", "content": r.text})
            return got
        return f

    stats = RunStats()
    with CompletionCache(cache_path) as cache:
        first = run_episodes({k: episode(v) for k, v in questions.items()}, {"assistant": eng}, cache=cache,
                             progress=False, stats=stats)
    assert stats.batches == 3 and stats.sent == 5
    for k, qs in questions.items():
        o = first[k]
        assert o.ok, o.error
        assert len(o.result) == len(qs)
        for turn, (text, p, c, cached, finish) in enumerate(o.result):
            assert text.strip(), f"empty reply in {k} turn {turn}"
            assert p > 10 and 0 < c <= 32 and finish in ("stop", "length")
            if turn > 0:
                assert cached > 0  # the conversation's history was reused from the KV cache
    print(f"\nllama.cpp: {stats.usage.completion_tokens} completion tokens in {stats.engine_s:.1f}s "
          f"({stats.usage.completion_tokens / stats.engine_s:.1f} tok/s incl. prompts), "
          f"{stats.usage.cached_tokens}/{stats.usage.prompt_tokens} prompt tokens from KV cache")

    stats2 = RunStats()
    with CompletionCache(cache_path) as cache:
        second = run_episodes({k: episode(v) for k, v in questions.items()}, {"assistant": eng}, cache=cache,
                              progress=False, stats=stats2)
    assert stats2.sent == 0 and stats2.cache_hits == 5
    texts = {k: [t[0] for t in o.result] for k, o in first.items()}
    assert {k: [t[0] for t in o.result] for k, o in second.items()} == texts
    eng.close()

    # a fresh engine given the same sequence of requests reproduces them without the cache too
    fresh = make_engine("llamacpp")
    third = run_episodes({k: episode(v) for k, v in questions.items()}, {"assistant": fresh}, progress=False)
    assert {k: [t[0] for t in o.result] for k, o in third.items()} == texts
    fresh.close()


@needs_llama_cpp
def test_build_record_names_kernels_and_cpu(fake_engine, monkeypatch):
    """config.json's engine record says which kernels replied; the cache key changes with them."""
    from runners import llamacpp
    eng, _ = fake_engine
    build = eng.describe()["build"]
    assert build["llama_cpp_version"] == "0.3.36"
    assert "AVX2 = 1" in build["system_info"] or "NEON = 1" in build["system_info"]
    key = eng.cache_identity()
    assert key["kernels"] == build["system_info"]
    monkeypatch.setattr(llamacpp, "build_info", lambda: {**build, "system_info": "CPU : AVX512 = 1 |"})
    assert eng.cache_identity() != key


def test_cpu_features_from_cpuinfo_text():
    from runners.llamacpp import cpu_from_cpuinfo
    x86 = ("processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu sse avx avx2 fma f16c avx512f\n\n"
           "processor\t: 1\nmodel name\t: Some Xeon\nflags\t\t: fpu\n")
    assert cpu_from_cpuinfo(x86) == {"model": "Some Xeon", "features": ["avx", "avx2", "fma", "f16c", "avx512f"]}
    arm = "processor\t: 0\nFeatures\t: fp asimd sve\nModel\t: Board X\n"
    assert cpu_from_cpuinfo(arm) == {"model": "Board X", "features": ["sve", "asimd"]}
    assert cpu_from_cpuinfo("") == {"model": None, "features": []}


@needs_llama_cpp
@pytest.mark.slow
def test_real_model_stops_decoding_where_the_code_block_closes(cache_path):
    """stop_after_fence: llama.cpp stops once the block has closed, and the text is the uncut
    reply's head, so every engine's transcript is the same."""
    eng = make_engine("llamacpp", state_cache_mb=0)
    ask = [{"role": "user", "content": "Python: write def square(x) in a code block. After the block, say what "
                                       "square(3) returns."}]

    def cold(sampling):   # no reused prefix: a cached prefix changes llama.cpp's floats, and greedy picks
        eng.llm.reset()
        return eng.generate([ChatRequest.from_messages(ask, sampling)])[0]

    full = cold(Sampling(max_tokens=120))
    cut = cold(Sampling(max_tokens=120, stop_after_fence="def "))
    assert "def square" in cut.text and cut.text.endswith("```") and cut.finish_reason == "stop"
    assert cut.text == cut_after_fence(full.text, "def ") and len(full.text) > len(cut.text)
    assert cut.completion_tokens < full.completion_tokens     # decoding stopped, not just the text cut
